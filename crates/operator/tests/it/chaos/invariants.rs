//! The properties checked continuously, on every change the emulator commits (its in-process change feed, which
//! carries every kind in resourceVersion order, so the Deployment recorded just before a Microservice status is
//! what the store held when that status was written):
//! - status.observedGeneration never decreases;
//! - no Microservice is Ready for its current generation while that generation's rollout is incomplete;
//! - an invalid generation costs at most one status write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kubesim::Sim;
use kubesim::cluster::{Change, ChangeKind};
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
    Some(Want { image: c.image, replicas: i64::from(c.replicas) })
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
    fn on_change(&mut self, change: &Change, namespace: &str) {
        let obj = &change.object;
        if obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
            return;
        }
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string) else { return };
        match change.rt.plural.as_str() {
            "deployments" if change.kind == ChangeKind::Deleted => {
                self.deployments.remove(&name);
            }
            "deployments" => {
                self.deployments.insert(name, obj.as_ref().clone());
            }
            "microservices" if change.kind != ChangeKind::Deleted => self.on_microservice(&name, change),
            _ => {}
        }
    }

    fn on_microservice(&mut self, name: &str, change: &Change) {
        let obj = &change.object;
        let status = obj.get("status");
        let status_changed = change.old.as_ref().map(|old| old.get("status")) != Some(status);
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
        if ready_for_current_generation(obj.as_ref()) {
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
    task: JoinHandle<()>,
}

impl Recorder {
    pub fn start(sim: &Sim, namespace: &'static str) -> Recorder {
        let record = Arc::new(Mutex::new(Record::default()));
        let sink = record.clone();
        let mut feed = sim.cluster().subscribe();
        let task = tokio::spawn(async move {
            loop {
                match feed.recv().await {
                    Ok(change) => lock(&sink).on_change(&change, namespace),
                    // The checks would be incomplete from here on: the test fails on it.
                    Err(RecvError::Lagged(_)) => lock(&sink).lagged += 1,
                    Err(RecvError::Closed) => break,
                }
            }
        });
        Recorder { record, task }
    }

    pub fn record(&self) -> MutexGuard<'_, Record> {
        lock(&self.record)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(record: &Mutex<Record>) -> MutexGuard<'_, Record> {
    record.lock().unwrap_or_else(|p| p.into_inner())
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
