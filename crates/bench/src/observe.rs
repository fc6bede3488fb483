//! An observer of every committed change in the benchmark namespace, through the emulator's in-process change
//! feed. The feed carries all kinds in commit (resourceVersion) order, so when a Microservice is seen Ready, the
//! Deployment state recorded just before it is exactly what the store held at that moment: that is how a Ready
//! reported before its rollout completed is caught, with no polling race.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kubesim::Sim;
use kubesim::cluster::{Change, ChangeKind, ListOptions};
use microservice_core::crd::Microservice;
use microservice_core::profile::PlatformProfile;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::env::NAMESPACE;
use crate::rollout::{DeploymentView, Want, ready_for_current_generation};

#[derive(Debug, Clone)]
struct MsView {
    generation: i64,
    ready: bool,
}

#[derive(Default)]
pub struct Seen {
    ms: HashMap<String, MsView>,
    deployments: HashMap<String, DeploymentView>,
    /// Ready statuses seen while the rollout of that generation was incomplete.
    pub early_ready: Vec<String>,
    /// Ready statuses checked against the Deployment.
    pub ready_checked: u64,
    /// Times the feed overflowed; the early-Ready check is incomplete when this is not zero.
    pub lagged: u64,
    /// When a Microservice last became Ready for its current generation.
    pub last_ready: Option<Instant>,
    /// What each Microservice's current generation asks to run.
    want: HashMap<String, Want>,
    /// When each Deployment's rollout of what its Microservice wants was first seen complete in the store.
    complete_at: HashMap<String, Instant>,
    /// Ready latencies (ms): from the completed rollout committed to the Ready=True status committed.
    pub ready_latency_ms: Vec<f64>,
}

impl Seen {
    /// Microservices Ready for exactly this generation.
    pub fn ready_for(&self, generation: i64) -> usize {
        self.ms.values().filter(|v| v.ready && v.generation == generation).count()
    }

    pub fn ready_name(&self, name: &str) -> bool {
        self.ms.get(name).is_some_and(|v| v.ready)
    }

    fn on_microservice(&mut self, kind: ChangeKind, obj: &Value, profile: &PlatformProfile) {
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else { return };
        if kind == ChangeKind::Deleted {
            self.ms.remove(name);
            return;
        }
        let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        let ready = ready_for_current_generation(obj);
        let wanted = serde_json::from_value::<Microservice>(obj.clone()).ok().and_then(|ms| Want::of(&ms, profile));
        match wanted {
            Some(w) if self.want.get(name) != Some(&w) => {
                // A new generation's want: an earlier completion does not count for it.
                let complete = self.deployments.get(name).is_some_and(|d| d.complete_for(&w));
                if complete {
                    self.complete_at.entry(name.to_string()).or_insert_with(Instant::now);
                } else {
                    self.complete_at.remove(name);
                }
                self.want.insert(name.to_string(), w);
            }
            _ => {}
        }
        if ready {
            self.ready_checked += 1;
            let want = serde_json::from_value::<Microservice>(obj.clone()).ok().and_then(|ms| Want::of(&ms, profile));
            let deployment = self.deployments.get(name);
            let complete = match (&want, deployment) {
                (Some(want), Some(d)) => d.complete_for(want),
                _ => false,
            };
            if !complete {
                self.early_ready.push(format!(
                    "{name} reported Ready for generation {generation} while its rollout was incomplete (wanted \
                     {want:?}; Deployment: {})",
                    deployment.map_or_else(|| "absent".to_string(), DeploymentView::describe)
                ));
            }
        }
        let was_ready = self.ms.get(name).is_some_and(|v| v.ready && v.generation == generation);
        if ready && !was_ready {
            let now = Instant::now();
            self.last_ready = Some(now);
            if let Some(at) = self.complete_at.get(name) {
                self.ready_latency_ms.push(now.duration_since(*at).as_secs_f64() * 1000.0);
            }
        }
        self.ms.insert(name.to_string(), MsView { generation, ready });
    }

    fn on_deployment(&mut self, kind: ChangeKind, obj: &Value) {
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else { return };
        if kind == ChangeKind::Deleted {
            self.deployments.remove(name);
            self.complete_at.remove(name);
        } else {
            let view = DeploymentView::of(obj);
            match self.want.get(name) {
                Some(w) if view.complete_for(w) => {
                    self.complete_at.entry(name.to_string()).or_insert_with(Instant::now);
                }
                _ => {
                    self.complete_at.remove(name);
                }
            }
            self.deployments.insert(name.to_string(), view);
        }
    }
}

pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl Observer {
    /// Starts observing; call before the changes of interest happen.
    pub fn start(sim: &Sim) -> Observer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut feed = sim.cluster().subscribe();
        let cluster = sim.cluster().clone();
        let sink = seen.clone();
        let profile = PlatformProfile::default();
        let task = tokio::spawn(async move {
            loop {
                match feed.recv().await {
                    Ok(change) => apply(&sink, &change, &profile),
                    Err(RecvError::Lagged(_)) => {
                        // Rebuild from a list so the Ready counts stay right; the early-Ready check cannot be.
                        let mut seen = lock(&sink);
                        seen.lagged += 1;
                        relist(&cluster, &mut seen, &profile);
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
        Observer { seen, task }
    }

    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        lock(&self.seen)
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(seen: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

fn apply(seen: &Mutex<Seen>, change: &Change, profile: &PlatformProfile) {
    if change.object.pointer("/metadata/namespace").and_then(Value::as_str) != Some(NAMESPACE) {
        return;
    }
    match change.rt.plural.as_str() {
        "microservices" => lock(seen).on_microservice(change.kind, &change.object, profile),
        "deployments" => lock(seen).on_deployment(change.kind, &change.object),
        _ => {}
    }
}

fn relist(cluster: &kubesim::cluster::Cluster, seen: &mut Seen, profile: &PlatformProfile) {
    seen.deployments.clear();
    if let Ok(rt) = cluster.resolve("apps", "v1", "deployments")
        && let Ok(list) = cluster.list(&rt, Some(NAMESPACE), &ListOptions::default())
    {
        for d in &list.items {
            seen.on_deployment(ChangeKind::Added, d);
        }
    }
    seen.ms.clear();
    if let Ok(rt) = cluster.resolve("platform.example.com", "v1alpha1", "microservices")
        && let Ok(list) = cluster.list(&rt, Some(NAMESPACE), &ListOptions::default())
    {
        let checked = seen.ready_checked;
        let early = seen.early_ready.len();
        for ms in &list.items {
            seen.on_microservice(ChangeKind::Added, ms, profile);
        }
        // A relist is not a status seen on the feed: it does not count as a check.
        seen.ready_checked = checked;
        seen.early_ready.truncate(early);
    }
}
