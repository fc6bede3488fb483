//! The controller-manager loop: one task that keeps caches from `Cluster::subscribe()`, marks what changed as
//! dirty, runs the pure decisions of the other modules on it, and performs their writes through `Cluster`.
//!
//! Consistency: every write this loop makes is applied to its own caches at once (write-through), and events
//! older than what a cache holds are ignored (resourceVersion), so a decision never runs on a state that misses
//! the loop's own earlier writes — the job upstream's "expectations" do. Deleted uids are tombstoned until their
//! DELETED event arrives, so a late MODIFIED event cannot resurrect them. A lagging subscription re-lists.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;

use super::gc::{self, Graph, Lookup, Node};
use super::util::{now_seconds, time};
use super::{ControllerConfig, deployment, kubelet, replicaset};
use crate::cluster::{
    Change, ChangeKind, Cluster, DeleteOptions, DeleteOutcome, ListOptions, PatchBody, PropagationPolicy, Subresource,
    WriteOptions,
};
use crate::error::ApiError;
use crate::resources::{ResourceRef, ResourceType, builtin_types};

const CONTROLLER_MANAGER: &str = "kube-controller-manager";
const KUBELET: &str = "kubelet";
const SCHEDULER: &str = "default-scheduler";
const NAMESPACE_FINALIZER: &str = "kubernetes";

type Key = (String, String);

#[derive(Clone)]
struct Cached {
    uid: String,
    rv: u64,
    value: Arc<Value>,
}

fn meta_str<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}

fn rv_of(v: &Value) -> u64 {
    meta_str(v, "resourceVersion").and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn key_of(v: &Value) -> Key {
    (meta_str(v, "namespace").unwrap_or("").to_string(), meta_str(v, "name").unwrap_or("").to_string())
}

fn controller_uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

fn typed<T: DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

fn ns_opt(ns: &str) -> Option<&str> {
    (!ns.is_empty()).then_some(ns)
}

/// Objects of one kind by namespace/name, with a controller-uid index.
#[derive(Default)]
struct Cache {
    objects: HashMap<Key, Cached>,
    by_controller: HashMap<String, BTreeSet<Key>>,
}

impl Cache {
    /// Applies an observed object unless the cache already holds this or a newer version.
    fn apply(&mut self, value: Arc<Value>) -> bool {
        let key = key_of(&value);
        let uid = meta_str(&value, "uid").unwrap_or("").to_string();
        let rv = rv_of(&value);
        if let Some(cur) = self.objects.get(&key)
            && cur.uid == uid
            && cur.rv >= rv
        {
            return false;
        }
        self.remove_key(&key);
        if let Some(c) = controller_uid(&value) {
            self.by_controller.entry(c.to_string()).or_default().insert(key.clone());
        }
        self.objects.insert(key, Cached { uid, rv, value });
        true
    }

    fn remove(&mut self, value: &Value) {
        let key = key_of(value);
        let uid = meta_str(value, "uid").unwrap_or("");
        if self.objects.get(&key).is_some_and(|c| c.uid == uid) {
            self.remove_key(&key);
        }
    }

    fn remove_key(&mut self, key: &Key) {
        if let Some(old) = self.objects.remove(key)
            && let Some(c) = controller_uid(&old.value)
            && let Some(set) = self.by_controller.get_mut(c)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_controller.remove(c);
            }
        }
    }

    fn controlled_by(&self, uid: &str) -> Vec<Arc<Value>> {
        self.by_controller
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.objects.get(k))
            .filter(|c| controller_uid(&c.value) == Some(uid))
            .map(|c| c.value.clone())
            .collect()
    }

    fn clear(&mut self) {
        self.objects.clear();
        self.by_controller.clear();
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    Deployment(Key),
    ReplicaSet(Key),
    Pod(Key),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting to be scheduled.
    Unscheduled,
    /// Scheduled; containers start at `due`.
    Starting,
    Running,
    CrashLooping,
}

struct PodRun {
    stage: Stage,
    due: Instant,
    restarts: i32,
    ip: String,
}

/// Which built-in types the loop works on.
struct Types {
    deployments: ResourceRef,
    replicasets: ResourceRef,
    pods: ResourceRef,
    namespaces: ResourceRef,
    events: ResourceRef,
}

fn builtin(cluster: &Cluster, group: &str, plural: &str) -> ResourceRef {
    let version = "v1";
    cluster.resolve(group, version, plural).unwrap_or_else(|_| {
        let t = builtin_types().into_iter().find(|t| t.group == group && t.plural == plural);
        Arc::new(t.unwrap_or_else(|| ResourceType {
            group: group.into(),
            version: version.into(),
            kind: String::new(),
            list_kind: String::new(),
            plural: plural.into(),
            singular: String::new(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            verbs: vec![],
            subresources: Default::default(),
            origin: crate::resources::Origin::BuiltIn,
        }))
    })
}

fn is(rt: &ResourceType, group: &str, plural: &str) -> bool {
    rt.group == group && rt.plural == plural
}

pub(super) struct Manager {
    cluster: Cluster,
    config: ControllerConfig,
    types: Types,
    deployments: Cache,
    deployment_keys: HashMap<String, Key>,
    replicasets: Cache,
    replicaset_keys: HashMap<String, Key>,
    pods: Cache,
    namespaces: Cache,
    graph: Graph,
    graph_rv: HashMap<String, u64>,
    /// uids this loop deleted whose DELETED event has not arrived yet.
    tombstones: HashSet<String>,
    dirty: BTreeSet<Work>,
    dirty_gc: BTreeSet<String>,
    dirty_namespaces: BTreeSet<String>,
    timers: BinaryHeap<Reverse<(Instant, u64, Work)>>,
    timer_seq: u64,
    deployment_timers: HashMap<Key, Instant>,
    runs: HashMap<String, PodRun>,
    /// Pods being deleted that were already told to go (grace 0).
    killed: HashSet<String>,
    next_ip: u32,
}

impl Manager {
    pub(super) fn new(cluster: Cluster, config: ControllerConfig) -> Manager {
        let types = Types {
            deployments: builtin(&cluster, "apps", "deployments"),
            replicasets: builtin(&cluster, "apps", "replicasets"),
            pods: builtin(&cluster, "", "pods"),
            namespaces: builtin(&cluster, "", "namespaces"),
            events: builtin(&cluster, "", "events"),
        };
        Manager {
            cluster,
            config,
            types,
            deployments: Cache::default(),
            deployment_keys: HashMap::new(),
            replicasets: Cache::default(),
            replicaset_keys: HashMap::new(),
            pods: Cache::default(),
            namespaces: Cache::default(),
            graph: Graph::default(),
            graph_rv: HashMap::new(),
            tombstones: HashSet::new(),
            dirty: BTreeSet::new(),
            dirty_gc: BTreeSet::new(),
            dirty_namespaces: BTreeSet::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            deployment_timers: HashMap::new(),
            runs: HashMap::new(),
            killed: HashSet::new(),
            next_ip: 0,
        }
    }

    pub(super) async fn run(mut self) {
        // Subscribe before listing so nothing between the two is missed; older events are ignored by version.
        let mut rx = self.cluster.subscribe();
        self.relist();
        loop {
            self.process();
            let next_timer = self.timers.peek().map(|Reverse((at, _, _))| *at);
            let event = match next_timer {
                Some(at) => tokio::select! {
                    ev = rx.recv() => Some(ev),
                    _ = tokio::time::sleep_until(at) => None,
                },
                None => Some(rx.recv().await),
            };
            match event {
                Some(Ok(change)) => self.observe(change),
                Some(Err(RecvError::Lagged(_))) => {
                    self.relist();
                    continue;
                }
                Some(Err(RecvError::Closed)) => return,
                None => {}
            }
            // Take everything already queued before deciding anything.
            loop {
                match rx.try_recv() {
                    Ok(change) => self.observe(change),
                    Err(TryRecvError::Lagged(_)) => {
                        self.relist();
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
            self.fire_timers();
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, _, work))) = self.timers.pop() {
                if let Work::Deployment(k) = &work {
                    self.deployment_timers.remove(k);
                }
                self.dirty.insert(work);
            }
        }
    }

    fn schedule(&mut self, after: Duration, work: Work) {
        let at = Instant::now() + after;
        if let Work::Deployment(k) = &work {
            if self.deployment_timers.get(k).is_some_and(|t| *t <= at) {
                return;
            }
            self.deployment_timers.insert(k.clone(), at);
        }
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, work)));
    }

    /// Rebuilds every cache from lists (start, and after the subscription lagged).
    fn relist(&mut self) {
        self.deployments.clear();
        self.deployment_keys.clear();
        self.replicasets.clear();
        self.replicaset_keys.clear();
        self.pods.clear();
        self.namespaces.clear();
        self.graph.clear();
        self.graph_rv.clear();
        self.tombstones.clear();
        for rt in self.cluster.resource_types() {
            let Ok(list) = self.cluster.list(&rt, None, &ListOptions::default()) else { continue };
            for item in list.items {
                self.apply(&rt, Arc::new(item), true);
            }
        }
    }

    fn observe(&mut self, change: Change) {
        match change.kind {
            ChangeKind::Added | ChangeKind::Modified => self.apply(&change.rt, change.object, true),
            ChangeKind::Deleted => self.forget(&change.rt, &change.object),
        }
    }

    /// Takes an object into the caches and marks what it affects. `mark` false for write-through of own writes
    /// (their events will mark).
    fn apply(&mut self, rt: &ResourceRef, value: Arc<Value>, mark: bool) {
        let uid = meta_str(&value, "uid").unwrap_or("").to_string();
        if uid.is_empty() || self.tombstones.contains(&uid) {
            return;
        }
        let key = key_of(&value);
        if is(rt, "apps", "deployments") {
            self.deployments.apply(value.clone());
            self.deployment_keys.insert(uid.clone(), key.clone());
            if mark {
                self.dirty.insert(Work::Deployment(key.clone()));
            }
        } else if is(rt, "apps", "replicasets") {
            self.replicasets.apply(value.clone());
            self.replicaset_keys.insert(uid.clone(), key.clone());
            if mark {
                self.dirty.insert(Work::ReplicaSet(key.clone()));
                self.mark_deployment_of(&value);
            }
        } else if is(rt, "", "pods") {
            self.pods.apply(value.clone());
            if mark {
                self.dirty.insert(Work::Pod(key.clone()));
                self.mark_replicaset_of(&value);
            }
        } else if is(rt, "", "namespaces") {
            self.namespaces.apply(value.clone());
            if mark && meta_str(&value, "deletionTimestamp").is_some() {
                self.dirty_namespaces.insert(key.1.clone());
            }
        }
        let rv = rv_of(&value);
        if self.graph_rv.get(&uid).is_some_and(|seen| *seen >= rv) {
            return;
        }
        if let Some(node) = Node::from_object(rt, &value) {
            self.graph_rv.insert(uid, rv);
            // Also for write-through: the event that follows carries the same version and is skipped here.
            let check = self.graph.upsert(node);
            self.dirty_gc.extend(check);
        }
    }

    fn mark_deployment_of(&mut self, rs: &Value) {
        if let Some(k) = controller_uid(rs).and_then(|u| self.deployment_keys.get(u)) {
            self.dirty.insert(Work::Deployment(k.clone()));
        }
    }

    fn mark_replicaset_of(&mut self, pod: &Value) {
        let Some(owner) = controller_uid(pod) else { return };
        let Some(k) = self.replicaset_keys.get(owner).cloned() else { return };
        if let Some(rs) = self.replicasets.objects.get(&k).map(|c| c.value.clone()) {
            self.dirty.insert(Work::ReplicaSet(k));
            self.mark_deployment_of(&rs);
        }
    }

    fn forget(&mut self, rt: &ResourceRef, value: &Value) {
        let uid = meta_str(value, "uid").unwrap_or("").to_string();
        self.tombstones.remove(&uid);
        let key = key_of(value);
        if is(rt, "apps", "deployments") {
            self.deployments.remove(value);
            self.deployment_keys.remove(&uid);
            self.deployment_timers.remove(&key);
        } else if is(rt, "apps", "replicasets") {
            self.replicasets.remove(value);
            self.replicaset_keys.remove(&uid);
            self.mark_deployment_of(value);
        } else if is(rt, "", "pods") {
            self.pods.remove(value);
            self.runs.remove(&uid);
            self.killed.remove(&uid);
            self.mark_replicaset_of(value);
        } else if is(rt, "", "namespaces") {
            self.namespaces.remove(value);
        }
        self.graph_rv.remove(&uid);
        let check = self.graph.remove(&uid);
        self.dirty_gc.extend(check);
        if !key.0.is_empty()
            && self
                .namespaces
                .objects
                .get(&(String::new(), key.0.clone()))
                .is_some_and(|n| meta_str(&n.value, "deletionTimestamp").is_some())
        {
            self.dirty_namespaces.insert(key.0);
        }
    }

    /// Write-through of an object this loop just wrote.
    fn wrote(&mut self, rt: &ResourceRef, value: Value) -> Arc<Value> {
        let value = Arc::new(value);
        self.apply(rt, value.clone(), false);
        value
    }

    fn deleted(&mut self, rt: &ResourceRef, outcome: DeleteOutcome) {
        match outcome {
            DeleteOutcome::Deleted(v) => {
                self.forget(rt, &v);
                if let Some(uid) = meta_str(&v, "uid") {
                    self.tombstones.insert(uid.to_string());
                }
            }
            DeleteOutcome::Pending(v) => {
                self.wrote(rt, v);
            }
        }
    }

    /// Runs everything dirty until nothing is left (bounded, so a flapping object cannot hold the loop).
    fn process(&mut self) {
        for _ in 0..16 {
            if self.dirty.is_empty() && self.dirty_gc.is_empty() && self.dirty_namespaces.is_empty() {
                return;
            }
            let gc_work = std::mem::take(&mut self.dirty_gc);
            for uid in gc_work {
                self.collect(&uid);
            }
            let ns_work = std::mem::take(&mut self.dirty_namespaces);
            for ns in ns_work {
                self.finalize_namespace(&ns);
            }
            let work = std::mem::take(&mut self.dirty);
            for w in work {
                match w {
                    Work::Pod(k) => self.sync_pod(&k),
                    Work::ReplicaSet(k) => self.sync_replicaset(&k),
                    Work::Deployment(k) => self.sync_deployment(&k),
                }
            }
        }
    }

    fn opts(manager: &str) -> WriteOptions {
        WriteOptions { field_manager: Some(manager.to_string()), ..Default::default() }
    }

    // ---- Deployments ----

    fn sync_deployment(&mut self, key: &Key) {
        let Some(cached) = self.deployments.objects.get(key).cloned() else { return };
        let Some(d) = typed::<Deployment>(&cached.value) else { return };
        let rss: Vec<ReplicaSet> =
            self.replicasets.controlled_by(&cached.uid).iter().filter_map(|v| typed(v)).collect();
        let mut active = HashMap::new();
        let recreate =
            d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()) == Some("Recreate");
        for rs in rss.iter().filter(|_| recreate) {
            let uid = rs.metadata.uid.clone().unwrap_or_default();
            let n = self
                .pods
                .controlled_by(&uid)
                .iter()
                .filter_map(|p| typed::<Pod>(p))
                .filter(replicaset::is_active)
                .count();
            active.insert(uid, n);
        }
        let plan = deployment::sync(&d, &rss, &active, now_seconds());
        let (ns, name) = key;
        let rs_rt = self.types.replicasets.clone();
        let opts = Self::opts(CONTROLLER_MANAGER);
        let mut conflict = false;
        for action in plan.actions {
            match action {
                deployment::Action::CreateReplicaSet(rs) => {
                    let mut body = serde_json::to_value(&rs).unwrap_or_default();
                    if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("creationTimestamp");
                    }
                    body["apiVersion"] = json!("apps/v1");
                    body["kind"] = json!("ReplicaSet");
                    match self.cluster.create(&rs_rt, ns_opt(ns), body, &opts) {
                        Ok(out) => {
                            self.wrote(&rs_rt, out.object);
                        }
                        Err(e) if e.reason == "AlreadyExists" => {
                            if !self.adopt_existing(&d, &rs) {
                                self.bump_collision_count(key, &cached.value);
                                return;
                            }
                        }
                        Err(_) => return,
                    }
                }
                deployment::Action::UpdateReplicaSet(rs) => {
                    let rs_name = rs.metadata.name.clone().unwrap_or_default();
                    let body = serde_json::to_value(&rs).unwrap_or_default();
                    match self.cluster.update(&rs_rt, ns_opt(ns), &rs_name, body, Subresource::Main, &opts) {
                        Ok(out) => {
                            self.wrote(&rs_rt, out.object);
                        }
                        Err(_) => {
                            // Stale: the newer ReplicaSet's event brings this Deployment back.
                            conflict = true;
                            break;
                        }
                    }
                }
                deployment::Action::DeleteReplicaSet { name: rs_name, uid } => {
                    let del = DeleteOptions { precondition_uid: Some(uid), ..Default::default() };
                    if let Ok(out) = self.cluster.delete(&rs_rt, ns_opt(ns), &rs_name, &del) {
                        self.deleted(&rs_rt, out);
                    }
                }
                deployment::Action::AnnotateDeployment(annotations) => {
                    let patch = PatchBody::Merge(json!({"metadata": {"annotations": annotations}}));
                    let d_rt = self.types.deployments.clone();
                    if let Ok(out) = self.cluster.patch(&d_rt, ns_opt(ns), name, patch, Subresource::Main, &opts) {
                        self.wrote(&d_rt, out.object);
                    }
                }
                deployment::Action::Event { reason, message } => self.record_event(&cached.value, &reason, &message),
            }
        }
        if conflict {
            return;
        }
        if let Some(status) = plan.status {
            let d_rt = self.types.deployments.clone();
            let Some(current) = self.deployments.objects.get(key).map(|c| c.value.clone()) else { return };
            let mut body = (*current).clone();
            body["status"] = serde_json::to_value(&status).unwrap_or_default();
            if let Ok(out) = self.cluster.update(&d_rt, ns_opt(ns), name, body, Subresource::Status, &opts) {
                self.wrote(&d_rt, out.object);
            }
        }
        if let Some(after) = plan.requeue_after {
            self.schedule(after, Work::Deployment(key.clone()));
        }
    }

    /// A ReplicaSet with the new one's name exists: it is the new one if this Deployment controls it and the
    /// templates agree; otherwise the hash collided.
    fn adopt_existing(&mut self, d: &Deployment, want: &ReplicaSet) -> bool {
        let ns = d.metadata.namespace.as_deref();
        let name = want.metadata.name.as_deref().unwrap_or("");
        let rt = self.types.replicasets.clone();
        let Ok(existing) = self.cluster.get(&rt, ns, name) else { return true };
        let ours = controller_uid(&existing) == d.metadata.uid.as_deref();
        let same = existing.pointer("/spec/template")
            == serde_json::to_value(want).ok().as_ref().and_then(|w| w.pointer("/spec/template"));
        self.wrote(&rt, existing);
        ours && same
    }

    fn bump_collision_count(&mut self, key: &Key, d: &Value) {
        let mut body = d.clone();
        let count = body.pointer("/status/collisionCount").and_then(Value::as_i64).unwrap_or(0);
        if !body.get("status").is_some_and(Value::is_object) {
            body["status"] = json!({});
        }
        body["status"]["collisionCount"] = json!(count + 1);
        let rt = self.types.deployments.clone();
        let opts = Self::opts(CONTROLLER_MANAGER);
        if let Ok(out) = self.cluster.update(&rt, ns_opt(&key.0), &key.1, body, Subresource::Status, &opts) {
            self.wrote(&rt, out.object);
        }
        self.dirty.insert(Work::Deployment(key.clone()));
    }

    /// A core/v1 Event about an object, as the deployment controller's recorder writes it.
    fn record_event(&mut self, about: &Value, reason: &str, message: &str) {
        let ns = meta_str(about, "namespace").unwrap_or("default").to_string();
        let name = meta_str(about, "name").unwrap_or("");
        let now = jiff::Timestamp::now();
        let at = serde_json::to_value(time(now)).unwrap_or(Value::Null);
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": format!("{name}.{:x}", now.as_nanosecond()), "namespace": ns},
            "involvedObject": {
                "apiVersion": about.get("apiVersion").cloned().unwrap_or(json!("apps/v1")),
                "kind": about.get("kind").cloned().unwrap_or(json!("Deployment")),
                "name": name,
                "namespace": ns,
                "uid": meta_str(about, "uid"),
                "resourceVersion": meta_str(about, "resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": "Normal",
            "source": {"component": "deployment-controller"},
            "reportingComponent": "deployment-controller",
            "reportingInstance": "",
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
        });
        let rt = self.types.events.clone();
        // Events are best effort, as with a real recorder.
        let _ = self.cluster.create(&rt, Some(&ns), event, &Self::opts(CONTROLLER_MANAGER));
    }

    // ---- ReplicaSets ----

    fn sync_replicaset(&mut self, key: &Key) {
        let Some(cached) = self.replicasets.objects.get(key).cloned() else { return };
        let Some(rs) = typed::<ReplicaSet>(&cached.value) else { return };
        let pods: Vec<Pod> = self.pods.controlled_by(&cached.uid).iter().filter_map(|v| typed(v)).collect();
        let plan = replicaset::sync(&rs, &pods, now_seconds());
        let (ns, name) = key;
        let pod_rt = self.types.pods.clone();
        let opts = Self::opts(CONTROLLER_MANAGER);
        for pod in plan.create {
            let mut body = serde_json::to_value(&pod).unwrap_or_default();
            body["apiVersion"] = json!("v1");
            body["kind"] = json!("Pod");
            match self.cluster.create(&pod_rt, ns_opt(ns), body, &opts) {
                Ok(out) => {
                    let v = self.wrote(&pod_rt, out.object);
                    self.dirty.insert(Work::Pod(key_of(&v)));
                }
                // A terminating namespace or a quota-like refusal: stop, the next change retries.
                Err(_) => break,
            }
        }
        for (pod_name, uid) in plan.delete {
            let del = DeleteOptions { precondition_uid: Some(uid), ..Default::default() };
            if let Ok(out) = self.cluster.delete(&pod_rt, ns_opt(ns), &pod_name, &del) {
                self.deleted(&pod_rt, out);
            }
        }
        if let Some(status) = plan.status {
            let rs_rt = self.types.replicasets.clone();
            let Some(current) = self.replicasets.objects.get(key).map(|c| c.value.clone()) else { return };
            let mut body = (*current).clone();
            body["status"] = serde_json::to_value(&status).unwrap_or_default();
            if let Ok(out) = self.cluster.update(&rs_rt, ns_opt(ns), name, body, Subresource::Status, &opts) {
                self.wrote(&rs_rt, out.object);
            }
        }
        if let Some(after) = plan.requeue_after {
            self.schedule(after, Work::ReplicaSet(key.clone()));
        }
    }

    // ---- Pods (scheduler and kubelet) ----

    fn sync_pod(&mut self, key: &Key) {
        let Some(cached) = self.pods.objects.get(key).cloned() else { return };
        let pod = cached.value;
        let uid = cached.uid;
        let rt = self.types.pods.clone();
        let (ns, name) = key;
        if meta_str(&pod, "deletionTimestamp").is_some() {
            // No containers to stop: the kubelet confirms the deletion at once.
            if self.killed.insert(uid.clone()) {
                let del = DeleteOptions {
                    grace_period_seconds: Some(0),
                    precondition_uid: Some(uid.clone()),
                    ..Default::default()
                };
                if let Ok(out) = self.cluster.delete(&rt, ns_opt(ns), name, &del) {
                    self.deleted(&rt, out);
                }
            }
            return;
        }
        let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if matches!(phase, "Succeeded" | "Failed") {
            return;
        }
        let now = Instant::now();
        let scheduled = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let started = phase == "Running";
        if !self.runs.contains_key(&uid) {
            let stage = match (scheduled, started) {
                (false, _) => Stage::Unscheduled,
                (true, false) => Stage::Starting,
                (true, true) if kubelet::crash_loops(&pod, &self.config.image_rules) => Stage::CrashLooping,
                (true, true) => Stage::Running,
            };
            let delay = match stage {
                Stage::Unscheduled => self.config.schedule_delay,
                Stage::Starting => self.config.ready_delay,
                _ => self.crash_interval(0),
            };
            let restarts = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map(|cs| cs.iter().filter_map(|c| c["restartCount"].as_i64()).max().unwrap_or(0))
                .unwrap_or(0) as i32;
            let ip = pod.pointer("/status/podIP").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
                self.next_ip += 1;
                kubelet::pod_ip(self.next_ip - 1)
            });
            self.runs.insert(uid.clone(), PodRun { stage, due: now + delay, restarts, ip });
        }
        let Some(run) = self.runs.get(&uid) else { return };
        if run.due > now {
            let after = run.due - now;
            self.schedule(after, Work::Pod(key.clone()));
            return;
        }
        match run.stage {
            Stage::Unscheduled => {
                let patch = PatchBody::Merge(json!({"spec": {"nodeName": kubelet::NODE_NAME}}));
                let Ok(out) =
                    self.cluster.patch(&rt, ns_opt(ns), name, patch, Subresource::Main, &Self::opts(SCHEDULER))
                else {
                    return;
                };
                let pod = self.wrote(&rt, out.object);
                if self.config.ready_delay.is_zero() {
                    self.start_pod(key, &uid, &pod);
                } else {
                    let status = kubelet::scheduled_status(&pod, now_seconds());
                    self.write_pod_status(key, &pod, status);
                    let due = now + self.config.ready_delay;
                    if let Some(run) = self.runs.get_mut(&uid) {
                        run.stage = Stage::Starting;
                        run.due = due;
                    }
                    self.schedule(self.config.ready_delay, Work::Pod(key.clone()));
                }
            }
            Stage::Starting => self.start_pod(key, &uid, &pod),
            Stage::CrashLooping => {
                if let Some(run) = self.runs.get_mut(&uid) {
                    run.restarts += 1;
                }
                self.start_pod(key, &uid, &pod);
            }
            Stage::Running => {}
        }
    }

    /// Time between restarts of a crash-looping container: the configured ready delay (at least 1 s), doubling.
    fn crash_interval(&self, restarts: i32) -> Duration {
        let base = self.config.ready_delay.max(Duration::from_secs(1));
        (base * 2u32.saturating_pow(restarts.clamp(0, 8) as u32)).min(Duration::from_secs(300))
    }

    fn start_pod(&mut self, key: &Key, uid: &str, pod: &Value) {
        let Some(run) = self.runs.get(uid) else { return };
        let (ip, restarts) = (run.ip.clone(), run.restarts);
        let status = kubelet::started_status(pod, &self.config.image_rules, &ip, restarts, now_seconds());
        self.write_pod_status(key, pod, status);
        let crash = kubelet::crash_loops(pod, &self.config.image_rules);
        let interval = self.crash_interval(restarts);
        if let Some(run) = self.runs.get_mut(uid) {
            run.stage = if crash { Stage::CrashLooping } else { Stage::Running };
            run.due = Instant::now() + interval;
        }
        if crash {
            self.schedule(interval, Work::Pod(key.clone()));
        }
    }

    fn write_pod_status(&mut self, key: &Key, pod: &Value, status: Value) {
        let rt = self.types.pods.clone();
        let mut body = pod.clone();
        body["status"] = status;
        let opts = Self::opts(KUBELET);
        if let Ok(out) = self.cluster.update(&rt, ns_opt(&key.0), &key.1, body, Subresource::Status, &opts) {
            self.wrote(&rt, out.object);
        }
    }

    // ---- Garbage collection ----

    fn collect(&mut self, uid: &str) {
        let cluster = self.cluster.clone();
        let mut lookup = |node: &Node, link: &gc::OwnerLink| lookup_owner(&cluster, node, link);
        let actions = self.graph.decide(uid, &mut lookup);
        for action in actions {
            match action {
                gc::Action::Delete { uid, policy } => {
                    let Some(node) = self.graph.get(&uid).cloned() else { continue };
                    let del = DeleteOptions {
                        propagation_policy: Some(policy),
                        precondition_uid: Some(uid.clone()),
                        ..Default::default()
                    };
                    match self.cluster.delete(&node.rt, node.namespace.as_deref(), &node.name, &del) {
                        Ok(out) => self.deleted(&node.rt, out),
                        Err(e) if e.code == 404 || e.code == 409 => {}
                        Err(_) => {}
                    }
                }
                gc::Action::RemoveOwnerRefs { uid, owners } => {
                    self.edit_metadata(&uid, |meta| {
                        let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else {
                            return false;
                        };
                        let before = refs.len();
                        refs.retain(|r| !owners.iter().any(|o| r.get("uid").and_then(Value::as_str) == Some(o)));
                        let changed = refs.len() != before;
                        if refs.is_empty() {
                            meta.remove("ownerReferences");
                        }
                        changed
                    });
                }
                gc::Action::RemoveFinalizer { uid, finalizer } => {
                    self.edit_metadata(&uid, |meta| {
                        let Some(list) = meta.get_mut("finalizers").and_then(Value::as_array_mut) else {
                            return false;
                        };
                        let before = list.len();
                        list.retain(|f| f.as_str() != Some(finalizer));
                        let changed = list.len() != before;
                        if list.is_empty() {
                            meta.remove("finalizers");
                        }
                        changed
                    });
                }
                gc::Action::Recheck(uids) => self.dirty_gc.extend(uids),
            }
        }
    }

    /// Read-modify-write of an object's metadata with optimistic concurrency, retried on conflicts.
    fn edit_metadata(&mut self, uid: &str, edit: impl Fn(&mut serde_json::Map<String, Value>) -> bool) {
        let Some(node) = self.graph.get(uid).cloned() else { return };
        let opts = Self::opts("garbage-collector");
        for _ in 0..5 {
            let Ok(mut obj) = self.cluster.get(&node.rt, node.namespace.as_deref(), &node.name) else { return };
            if meta_str(&obj, "uid") != Some(uid) {
                return;
            }
            let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
            if !edit(meta) {
                return;
            }
            match self.cluster.update(&node.rt, node.namespace.as_deref(), &node.name, obj, Subresource::Main, &opts) {
                Ok(out) => {
                    self.wrote(&node.rt, out.object);
                    return;
                }
                Err(e) if e.code == 409 => continue,
                Err(ApiError { code: 404, .. }) => {
                    // The update removed the last finalizer and with it the object, or it was gone already.
                    return;
                }
                Err(_) => return,
            }
        }
    }

    // ---- Namespaces ----

    fn finalize_namespace(&mut self, name: &str) {
        let key = (String::new(), name.to_string());
        let Some(ns) = self.namespaces.objects.get(&key).map(|c| c.value.clone()) else { return };
        if meta_str(&ns, "deletionTimestamp").is_none() {
            return;
        }
        let rt = self.types.namespaces.clone();
        let opts = Self::opts("namespace-controller");
        if ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating") {
            let mut body = (*ns).clone();
            body["status"] = json!({"phase": "Terminating"});
            if let Ok(out) = self.cluster.update(&rt, None, name, body, Subresource::Status, &opts) {
                self.wrote(&rt, out.object);
            }
        }
        // Delete what is left, type by type; objects held by finalizers are waited for.
        let mut remaining: HashMap<(String, String), (ResourceRef, bool)> = HashMap::new();
        for n in self.graph.nodes().filter(|n| n.namespace.as_deref() == Some(name)) {
            let e = remaining.entry((n.rt.group.clone(), n.rt.plural.clone())).or_insert((n.rt.clone(), false));
            e.1 |= !n.deleting;
        }
        if !remaining.is_empty() {
            for (rt, live) in remaining.into_values() {
                if live {
                    let del =
                        DeleteOptions { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
                    if let Ok(gone) = self.cluster.delete_collection(&rt, Some(name), &ListOptions::default(), &del) {
                        for v in gone {
                            let outcome = if meta_str(&v, "deletionTimestamp").is_some() {
                                DeleteOutcome::Pending(v)
                            } else {
                                DeleteOutcome::Deleted(v)
                            };
                            self.deleted(&rt, outcome);
                        }
                    }
                }
            }
            return;
        }
        // Empty: release the `kubernetes` finalizer, then the namespace goes.
        let has_finalizer = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == NAMESPACE_FINALIZER));
        if has_finalizer {
            let mut body = (*ns).clone();
            if let Some(list) = body.pointer_mut("/spec/finalizers").and_then(Value::as_array_mut) {
                list.retain(|x| x != NAMESPACE_FINALIZER);
            }
            match self.cluster.update(&rt, None, name, body, Subresource::Main, &opts) {
                Ok(out) => {
                    self.wrote(&rt, out.object);
                }
                Err(_) => return,
            }
        }
        if let Ok(true) = self.cluster.finalize_namespace(name) {
            self.namespaces.remove_key(&key);
        }
    }
}

/// Asks the API server about an owner the graph does not hold.
fn lookup_owner(cluster: &Cluster, node: &Node, link: &gc::OwnerLink) -> Lookup {
    let Ok(rt) = cluster.resolve_kind(&link.api_version, &link.kind) else { return Lookup::Unknown };
    let ns = if rt.namespaced { node.namespace.as_deref() } else { None };
    match cluster.get(&rt, ns, &link.name) {
        Ok(owner) if meta_str(&owner, "uid") == Some(link.uid.as_str()) => {
            let deleting = Node::from_object(&rt, &owner).is_some_and(|n| n.deleting_dependents());
            Lookup::Exists { deleting_dependents: deleting }
        }
        Ok(_) => Lookup::Absent,
        Err(e) if e.code == 404 => Lookup::Absent,
        Err(_) => Lookup::Unknown,
    }
}
