//! An observer of every committed change in the benchmark namespace.
//!
//! On kubesim it reads the emulator's in-process change feed, which carries all kinds in commit (resourceVersion)
//! order, so when a Microservice is seen Ready, the Deployment state recorded just before it is exactly what the
//! store held at that moment: that is how a Ready reported before its rollout completed is caught, with no polling
//! race. On the real server it watches Microservices and Deployments and merges the two streams back into commit
//! order (see [`crate::commit_order`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};

use kubesim::Sim;
use kubesim::cluster::{Change, ChangeKind, ListOptions};
use microservice_core::crd::Microservice;
use microservice_core::profile::PlatformProfile;
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::commit_order::{CATCH_UP, CommitOrder, Stamped};
use crate::fixture::{Kind, NAMESPACE};
use crate::rollout::{DeploymentView, Want, ready_for_current_generation};

#[derive(Debug, Clone)]
struct MsView {
    generation: i64,
    ready: bool,
    degraded: bool,
}

#[derive(Default)]
pub struct Seen {
    ms: HashMap<String, MsView>,
    deployments: HashMap<String, DeploymentView>,
    /// Ready statuses seen while the rollout of that generation was incomplete.
    pub early_ready: Vec<String>,
    /// Ready statuses checked against the Deployment.
    pub ready_checked: u64,
    /// Times the feed overflowed or a watch started over with a list; the early-Ready check is incomplete when this
    /// is not zero.
    pub lagged: u64,
    /// When a Microservice last became Ready for its current generation.
    pub last_ready: Option<Instant>,
    /// What each Microservice's current generation asks to run.
    want: HashMap<String, Want>,
    /// When each Deployment's rollout of what its Microservice wants was first seen complete in the store.
    complete_at: HashMap<String, Instant>,
    /// Ready latencies (ms): from the completed rollout committed to the Ready=True status committed.
    pub ready_latency_ms: Vec<f64>,
    /// The Degraded reason of every Microservice that turned Degraded, once per turn: the operator tells each in a
    /// status write and a Warning Event, and its recovery in another status write, beyond a plain rollout's.
    pub degraded: Vec<String>,
    /// Deployments added or changed: the operator's creates and every status the cluster's controllers wrote, each
    /// of which wakes the operator.
    pub deployment_changes: u64,
}

impl Seen {
    /// Microservices Ready for exactly this generation.
    pub fn ready_for(&self, generation: i64) -> usize {
        self.ms.values().filter(|v| v.ready && v.generation == generation).count()
    }

    pub fn ready_name(&self, name: &str) -> bool {
        self.ms.get(name).is_some_and(|v| v.ready)
    }

    /// `at`: when the change was committed, as near as the observer can tell (when it arrived).
    fn on_microservice(&mut self, kind: ChangeKind, obj: &Value, profile: &PlatformProfile, at: Instant) {
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else { return };
        if kind == ChangeKind::Deleted {
            self.ms.remove(name);
            return;
        }
        let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        let ready = ready_for_current_generation(obj);
        let wanted = serde_json::from_value::<Microservice>(obj.clone()).ok().and_then(|ms| Want::of(&ms, profile));
        match &wanted {
            Some(w) if self.want.get(name) != Some(w) => {
                // A new generation's want: an earlier completion does not count for it.
                let complete = self.deployments.get(name).is_some_and(|d| d.complete_for(w));
                if complete {
                    self.complete_at.entry(name.to_string()).or_insert(at);
                } else {
                    self.complete_at.remove(name);
                }
                self.want.insert(name.to_string(), w.clone());
            }
            _ => {}
        }
        if ready {
            self.ready_checked += 1;
            let deployment = self.deployments.get(name);
            let complete = match (&wanted, deployment) {
                (Some(want), Some(d)) => d.complete_for(want),
                _ => false,
            };
            if !complete {
                self.early_ready.push(format!(
                    "{name} reported Ready for generation {generation} while its rollout was incomplete (wanted \
                     {wanted:?}; Deployment: {})",
                    deployment.map_or_else(|| "absent".to_string(), DeploymentView::describe)
                ));
            }
        }
        let was_ready = self.ms.get(name).is_some_and(|v| v.ready && v.generation == generation);
        if ready && !was_ready {
            self.last_ready = Some(at);
            if let Some(complete) = self.complete_at.get(name) {
                self.ready_latency_ms.push(at.saturating_duration_since(*complete).as_secs_f64() * 1000.0);
            }
        }
        let degraded = obj.pointer("/status/phase").and_then(Value::as_str) == Some("Degraded");
        if degraded && !self.ms.get(name).is_some_and(|v| v.degraded) {
            self.degraded.push(degraded_reason(obj).unwrap_or("(no reason)").to_string());
        }
        self.ms.insert(name.to_string(), MsView { generation, ready, degraded });
    }

    fn on_deployment(&mut self, kind: ChangeKind, obj: &Value, at: Instant) {
        let Some(name) = obj.pointer("/metadata/name").and_then(Value::as_str) else { return };
        if kind == ChangeKind::Deleted {
            self.deployments.remove(name);
            self.complete_at.remove(name);
        } else {
            self.deployment_changes += 1;
            let view = DeploymentView::of(obj);
            match self.want.get(name) {
                Some(w) if view.complete_for(w) => {
                    self.complete_at.entry(name.to_string()).or_insert(at);
                }
                _ => {
                    self.complete_at.remove(name);
                }
            }
            self.deployments.insert(name.to_string(), view);
        }
    }
}

/// The reason of a Microservice's Degraded condition.
fn degraded_reason(obj: &Value) -> Option<&str> {
    let conditions = obj.pointer("/status/conditions")?.as_array()?;
    let degraded = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Degraded"))?;
    degraded.get("reason")?.as_str()
}

/// "2 (ProgressDeadlineExceeded 2)": how many turned Degraded, by reason.
pub fn degraded_summary(reasons: &[String]) -> String {
    let mut by_reason = std::collections::BTreeMap::<&str, usize>::new();
    for reason in reasons {
        *by_reason.entry(reason).or_default() += 1;
    }
    let parts: Vec<String> = by_reason.iter().map(|(reason, count)| format!("{reason} {count}")).collect();
    format!("{} ({})", reasons.len(), parts.join(", "))
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

    /// Watches the benchmark namespace of a real server (see the module's comment for the order of changes).
    pub fn watch(client: Client) -> Observer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let task = tokio::spawn(merge_watches(client, seen.clone()));
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
        "microservices" => lock(seen).on_microservice(change.kind, &change.object, profile, Instant::now()),
        "deployments" => lock(seen).on_deployment(change.kind, &change.object, Instant::now()),
        _ => {}
    }
}

fn relist(cluster: &kubesim::cluster::Cluster, seen: &mut Seen, profile: &PlatformProfile) {
    seen.deployments.clear();
    if let Ok(rt) = cluster.resolve("apps", "v1", "deployments")
        && let Ok(list) = cluster.list(&rt, Some(NAMESPACE), &ListOptions::default())
    {
        for d in &list.items {
            seen.on_deployment(ChangeKind::Added, d, Instant::now());
        }
    }
    seen.ms.clear();
    if let Ok(rt) = cluster.resolve("platform.example.com", "v1alpha1", "microservices")
        && let Ok(list) = cluster.list(&rt, Some(NAMESPACE), &ListOptions::default())
    {
        let checked = seen.ready_checked;
        let early = seen.early_ready.len();
        for ms in &list.items {
            seen.on_microservice(ChangeKind::Added, ms, profile, Instant::now());
        }
        // A relist is not a status seen on the feed: it does not count as a check.
        seen.ready_checked = checked;
        seen.early_ready.truncate(early);
    }
}

/// One change from either watch.
struct Observed {
    kind: Kind,
    change: ChangeKind,
    object: Value,
    at: Instant,
}

/// The two watches of the real server, fed to [`Seen`] in commit order.
async fn merge_watches(client: Client, seen: Arc<Mutex<Seen>>) {
    let stream = |kind: Kind| {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &kind.api_resource());
        watcher(api, watcher::Config::default()).default_backoff().map(move |event| (kind, event)).boxed()
    };
    let mut events = futures::stream::select(stream(Kind::Microservice), stream(Kind::Deployment));
    let profile = PlatformProfile::default();
    let mut order = CommitOrder::default();
    let mut starts = 0u64;
    let mut tick = tokio::time::interval(CATCH_UP / 3);
    loop {
        let ready = tokio::select! {
            next = events.next() => {
                let Some((kind, event)) = next else { break };
                let Ok(event) = event else { continue };
                let arrived = Instant::now();
                let (change, object) = match event {
                    watcher::Event::Apply(o) => (ChangeKind::Modified, o),
                    watcher::Event::InitApply(o) => (ChangeKind::Added, o),
                    watcher::Event::Delete(o) => (ChangeKind::Deleted, o),
                    watcher::Event::Init => {
                        // The first list of each watch is the start; any later one is a gap in the changes seen.
                        starts += 1;
                        if starts > 2 {
                            lock(&seen).lagged += 1;
                        }
                        feed(&seen, &profile, order.all());
                        continue;
                    }
                    watcher::Event::InitDone => continue,
                };
                let revision = object.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
                let Ok(object) = serde_json::to_value(&object) else { continue };
                let stamped = Stamped { revision, arrived, item: Observed { kind, change, object, at: arrived } };
                match kind {
                    Kind::Deployment => order.deployment(stamped),
                    _ => order.microservice(stamped),
                }
            }
            _ = tick.tick() => order.waited(Instant::now()),
        };
        feed(&seen, &profile, ready);
    }
}

fn feed(seen: &Mutex<Seen>, profile: &PlatformProfile, changes: Vec<Observed>) {
    let mut seen = lock(seen);
    for o in changes {
        match o.kind {
            Kind::Microservice => seen.on_microservice(o.change, &o.object, profile, o.at),
            _ => seen.on_deployment(o.change, &o.object, o.at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(phase: &str, degraded_reason: &str) -> Value {
        serde_json::json!({
            "metadata": {"name": "ms-1", "generation": 1},
            "spec": {"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080},
            "status": {"phase": phase, "conditions": [
                {"type": "Degraded", "status": if phase == "Degraded" { "True" } else { "False" },
                 "reason": degraded_reason, "message": "", "lastTransitionTime": "2026-12-06T06:00:00Z"}
            ]}
        })
    }

    #[test]
    fn each_turn_into_degraded_is_counted_once_with_its_reason() {
        let (mut seen, profile, at) = (Seen::default(), PlatformProfile::default(), Instant::now());
        for (phase, reason) in [
            ("Progressing", "AsExpected"),
            ("Degraded", "ProgressDeadlineExceeded"),
            ("Degraded", "ProgressDeadlineExceeded"),
            ("Progressing", "AsExpected"),
            ("Degraded", "ResourceConflict"),
        ] {
            seen.on_microservice(ChangeKind::Modified, &ms(phase, reason), &profile, at);
        }
        assert_eq!(seen.degraded, ["ProgressDeadlineExceeded", "ResourceConflict"]);
        assert_eq!(degraded_summary(&seen.degraded), "2 (ProgressDeadlineExceeded 1, ResourceConflict 1)");
    }
}
