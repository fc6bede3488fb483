//! The properties checked on every change in resourceVersion order, so the Deployment recorded just before a
//! Microservice status is what the store held when that status was written. On kubesim the changes come from its
//! in-process change feed, as they are committed; on the real server from watches of both kinds, merged by
//! resourceVersion (etcd's revision is global) and replayed when the record is read.
//! - status.observedGeneration never decreases;
//! - no Microservice is Ready for its current generation while that generation's rollout is incomplete;
//! - an invalid generation costs at most one status write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use kubesim::cluster::ChangeKind;
use microservice_core::contract::validate_object;
use microservice_core::crd::Microservice;
use microservice_core::profile::PlatformProfile;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::support::ready_for_current_generation;

/// What a valid generation asks to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub image: String,
    pub replicas: i64,
}

/// None when the platform contract refuses the spec.
pub fn want(ms: &Value) -> Option<Want> {
    let ms: Microservice = serde_json::from_value(ms.clone()).ok()?;
    let c = validate_object(&ms, &PlatformProfile::default()).ok()?;
    Some(Want { image: c.image, replicas: i64::from(c.scaling.floor()) })
}

/// `kubectl rollout status`'s notion of done: the controller saw the latest spec, and every replica is updated,
/// available, and no old one is left.
pub fn rollout_complete(d: &Value, want: &Want) -> bool {
    let int = |path: &str, default: i64| d.pointer(path).and_then(Value::as_i64).unwrap_or(default);
    let image = d
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["name"] == "app"))
        .and_then(|c| c["image"].as_str());
    image == Some(want.image.as_str())
        && int("/spec/replicas", 1) == want.replicas
        && int("/status/observedGeneration", 0) >= int("/metadata/generation", 0)
        && int("/status/updatedReplicas", 0) == want.replicas
        && int("/status/availableReplicas", 0) == want.replicas
        && int("/status/replicas", 0) == want.replicas
}

#[derive(Default)]
pub struct Record {
    deployments: HashMap<String, Value>,
    observed: HashMap<String, i64>,
    invalid_writes: HashMap<(String, i64), u32>,
    pub violations: Vec<String>,
    pub status_writes: u64,
    pub ready_checked: u64,
    pub lagged: u64,
}

impl Record {
    /// One committed change of `plural` (`deployments` or `microservices`): the object now and before.
    fn on_change(&mut self, plural: &str, deleted: bool, obj: &Value, old: Option<&Value>, namespace: &str) {
        if obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
            return;
        }
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string) else { return };
        match plural {
            "deployments" if deleted => {
                self.deployments.remove(&name);
            }
            "deployments" => {
                self.deployments.insert(name, obj.clone());
            }
            "microservices" if !deleted => self.on_microservice(&name, obj, old),
            _ => {}
        }
    }

    fn on_microservice(&mut self, name: &str, obj: &Value, old: Option<&Value>) {
        let status = obj.get("status");
        let status_changed = old.map(|old| old.get("status")) != Some(status);
        if !status_changed {
            return;
        }
        self.status_writes += 1;
        let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        let observed = obj.pointer("/status/observedGeneration").and_then(Value::as_i64);
        if let Some(observed) = observed {
            let before = self.observed.insert(name.to_string(), observed).unwrap_or(0);
            if observed < before {
                self.violations.push(format!("{name}: status.observedGeneration went from {before} to {observed}"));
            }
        }
        let want = want(obj);
        if ready_for_current_generation(obj) {
            self.ready_checked += 1;
            let deployment = self.deployments.get(name);
            let complete = match (&want, deployment) {
                (Some(w), Some(d)) => rollout_complete(d, w),
                _ => false,
            };
            if !complete {
                self.violations.push(format!(
                    "{name}: Ready for generation {generation} while its rollout was incomplete (wanted {want:?}; \
                     Deployment status {})",
                    deployment.and_then(|d| d.get("status")).map_or("absent".to_string(), Value::to_string)
                ));
            }
        }
        if want.is_none() && observed == Some(generation) {
            let writes = self.invalid_writes.entry((name.to_string(), generation)).or_insert(0);
            *writes += 1;
            if *writes == 2 {
                self.violations.push(format!(
                    "{name}: more than one status write for invalid generation {generation} (latest status: {})",
                    status.map_or_else(String::new, Value::to_string)
                ));
            }
        }
    }
}

pub struct Recorder {
    record: Arc<Mutex<Record>>,
    /// Real server: every watch event seen, replayed in resourceVersion order when the record is read.
    events: Option<Arc<Mutex<Vec<Seen>>>>,
    namespace: &'static str,
    tasks: Vec<JoinHandle<()>>,
}

/// A watch event: (resourceVersion, plural, deleted, object).
type Seen = (u64, &'static str, bool, Value);

impl Recorder {
    pub fn start(cluster: &microservice_testkit::Cluster, namespace: &'static str) -> Recorder {
        let record = Arc::new(Mutex::new(Record::default()));
        let Some(sim) = cluster.sim() else {
            let events = Arc::new(Mutex::new(Vec::new()));
            let tasks = [
                ("apps", "v1", "Deployment", "deployments"),
                ("platform.example.com", "v1alpha1", "Microservice", "microservices"),
            ]
            .into_iter()
            .map(|(group, version, kind, plural)| {
                let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
                let api: Api<DynamicObject> = Api::namespaced_with(cluster.client(), namespace, &resource);
                let sink = events.clone();
                tokio::spawn(async move {
                    // The watcher resumes from the last resourceVersion after a broken stream (kube-apiserver
                    // restarted): the events in between are delivered, not lost.
                    let mut stream = watcher(api, watcher::Config::default()).boxed();
                    while let Some(event) = stream.next().await {
                        let (deleted, object) = match event {
                            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => (false, o),
                            Ok(watcher::Event::Delete(o)) => (true, o),
                            _ => continue,
                        };
                        let rv = object.metadata.resource_version.as_deref().and_then(|v| v.parse().ok());
                        if let (Some(rv), Ok(value)) = (rv, serde_json::to_value(&object)) {
                            lock(&sink).push((rv, plural, deleted, value));
                        }
                    }
                })
            })
            .collect();
            return Recorder { record, events: Some(events), namespace, tasks };
        };
        let sink = record.clone();
        let mut feed = sim.cluster().subscribe();
        let task = tokio::spawn(async move {
            loop {
                match feed.recv().await {
                    Ok(change) => lock(&sink).on_change(
                        &change.rt.plural,
                        change.kind == ChangeKind::Deleted,
                        &change.object,
                        change.old.as_deref(),
                        namespace,
                    ),
                    // The checks would be incomplete from here on: the test fails on it.
                    Err(RecvError::Lagged(_)) => lock(&sink).lagged += 1,
                    Err(RecvError::Closed) => break,
                }
            }
        });
        Recorder { record, events: None, namespace, tasks: vec![task] }
    }

    pub fn record(&self) -> MutexGuard<'_, Record> {
        if let Some(events) = &self.events {
            let mut seen = lock(events).clone();
            // A relist repeats what a watch already delivered: each (kind, object, version) counts once.
            seen.sort_by_key(|(rv, plural, _, _)| (*rv, *plural));
            seen.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.3["metadata"]["name"] == b.3["metadata"]["name"]);
            let mut replay = Record::default();
            let mut last: HashMap<(&str, String), Value> = HashMap::new();
            for (_, plural, deleted, object) in &seen {
                let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let old = last.insert((*plural, name), object.clone());
                replay.on_change(plural, *deleted, object, old.as_ref(), self.namespace);
            }
            *lock(&self.record) = replay;
        }
        lock(&self.record)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock<T>(value: &Mutex<T>) -> MutexGuard<'_, T> {
    value.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_surge_pod_means_the_rollout_is_not_complete() {
        let want = Want { image: "ghcr.io/example/todo-api:1.0.0".into(), replicas: 2 };
        let d = |replicas: i64| {
            json!({"metadata": {"generation": 3},
                   "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": want.image}]}}},
                   "status": {"observedGeneration": 3, "replicas": replicas, "updatedReplicas": 2,
                              "availableReplicas": 2}})
        };
        assert!(rollout_complete(&d(2), &want));
        assert!(!rollout_complete(&d(3), &want));
    }
}
