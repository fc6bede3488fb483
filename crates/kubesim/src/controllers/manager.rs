//! The controller-manager loop: one task that keeps caches from `Cluster::subscribe()`, marks what changed as
//! dirty, runs the pure decisions of the other modules on it, and performs their writes through `Cluster`.
//!
//! Consistency: every write this loop makes is applied to its own caches at once (write-through), and events
//! older than what a cache holds are ignored (resourceVersion), so a decision never runs on a state that misses
//! the loop's own earlier writes — the job upstream's "expectations" do. Deleted uids are tombstoned until their
//! DELETED event arrives, so a late MODIFIED event cannot resurrect them. A lagging subscription re-lists.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::time::Instant;

use super::gc::{self, Graph, Lookup, Node};
use super::util::{now_seconds, time};
use super::{ControllerConfig, deployment, kubelet, policy_status, replicaset};
use crate::cluster::meta::{meta_mut, meta_str};
use crate::cluster::{
    Change, ChangeKind, Cluster, DeleteOptions, DeleteOutcome, ListOptions, PatchBody, PropagationPolicy, Subresource,
    WriteOptions,
};
use crate::error::ApiError;
use crate::resources::{ResourceRef, ResourceType, builtin_types};

mod collect;

mod pods;

mod queue;

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

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    dirty: queue::Queue<Work>,
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
            dirty: queue::Queue::default(),
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
            if self.has_work() {
                // A turn's worth done: let the server's requests run, then take the changes they made.
                tokio::task::yield_now().await;
            } else {
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
                    Some(Err(RecvError::Lagged(missed))) => {
                        self.lagged(missed);
                        continue;
                    }
                    Some(Err(RecvError::Closed)) => return,
                    None => {}
                }
            }
            // Take everything already queued before deciding anything.
            loop {
                match rx.try_recv() {
                    Ok(change) => self.observe(change),
                    Err(TryRecvError::Lagged(missed)) => {
                        self.lagged(missed);
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Closed) => return,
                }
            }
            self.fire_timers();
        }
    }

    /// The change feed dropped changes this loop had not read: only a fresh list is sure to hold them. Said aloud
    /// because at thousands of objects a re-list is what makes the loop fall further behind.
    fn lagged(&mut self, missed: u64) {
        tracing::warn!(missed, queued = self.dirty.len(), "controller manager fell behind its change feed; re-listing");
        self.relist();
    }

    fn has_work(&self) -> bool {
        !(self.dirty.is_empty() && self.dirty_gc.is_empty() && self.dirty_namespaces.is_empty())
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
                self.dirty.push(work);
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
                self.dirty.push(Work::Deployment(key.clone()));
            }
        } else if is(rt, "apps", "replicasets") {
            self.replicasets.apply(value.clone());
            self.replicaset_keys.insert(uid.clone(), key.clone());
            if mark {
                self.dirty.push(Work::ReplicaSet(key.clone()));
                self.mark_deployment_of(&value);
            }
        } else if is(rt, "", "pods") {
            self.pods.apply(value.clone());
            if mark {
                self.dirty.push(Work::Pod(key.clone()));
                self.mark_replicaset_of(&value);
            }
        } else if is(rt, "", "namespaces") {
            self.namespaces.apply(value.clone());
            if mark && meta_str(&value, "deletionTimestamp").is_some() {
                self.dirty_namespaces.insert(key.1.clone());
            }
        } else if mark && is(rt, crate::admission::GROUP, crate::admission::POLICIES) {
            self.check_policy(rt, &value);
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
            self.dirty.push(Work::Deployment(k.clone()));
        }
    }

    fn mark_replicaset_of(&mut self, pod: &Value) {
        let Some(owner) = controller_uid(pod) else { return };
        let Some(k) = self.replicaset_keys.get(owner).cloned() else { return };
        if let Some(rs) = self.replicasets.objects.get(&k).map(|c| c.value.clone()) {
            self.dirty.push(Work::ReplicaSet(k));
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

    /// Runs one turn: the garbage collector's and namespaces' work, then at most `TURN` syncs, oldest first. What
    /// is left waits until the change feed was read again: at thousands of objects one pass over everything dirty
    /// outlasts the feed's 8,192 changes, and the re-list that follows marks everything dirty again.
    fn process(&mut self) {
        const TURN: usize = 256;
        let gc_work = std::mem::take(&mut self.dirty_gc);
        for uid in gc_work {
            self.collect(&uid);
        }
        let ns_work = std::mem::take(&mut self.dirty_namespaces);
        for ns in ns_work {
            self.finalize_namespace(&ns);
        }
        for _ in 0..TURN {
            let Some(w) = self.dirty.pop() else { return };
            match w {
                Work::Pod(k) => self.sync_pod(&k),
                Work::ReplicaSet(k) => self.sync_replicaset(&k),
                Work::Deployment(k) => self.sync_deployment(&k),
            }
        }
    }

    /// Nothing else waits on a policy's status, so its one write is made as the change is seen.
    fn check_policy(&mut self, rt: &ResourceRef, policy: &Value) {
        let (Some(apply), Some(name)) = (policy_status::sync(policy), meta_str(policy, "name")) else { return };
        let opts = WriteOptions { force: true, ..Self::opts(policy_status::FIELD_MANAGER) };
        // A forced apply has no conflict to lose: it fails only for a policy deleted meanwhile.
        let _ = self.cluster.patch(rt, None, name, PatchBody::Apply(apply), Subresource::Status, &opts);
    }

    fn opts(manager: &str) -> WriteOptions {
        WriteOptions { field_manager: Some(manager.to_string()), ..Default::default() }
    }

    // ---- Deployments ----

    // Over 80 lines on purpose: Performs one Deployment sync's plan (ReplicaSet writes, annotations, Events, status,
    // requeue) in the order upstream performs them; the decisions themselves are `deployment::sync`'s.
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
                deployment::Action::UpdateDeploymentStatus { annotations, status } => {
                    if !self.write_deployment(key, annotations, &status) {
                        return;
                    }
                }
                deployment::Action::Event { reason, message } => self.record_event(&cached.value, &reason, &message),
            }
        }
        if conflict {
            return;
        }
        if let Some(status) = plan.status {
            self.write_deployment(key, BTreeMap::new(), &status);
        }
        if let Some(after) = plan.requeue_after {
            self.schedule(after, Work::Deployment(key.clone()));
        }
    }

    /// Writes a Deployment's status and its changed annotations in one `UpdateStatus`, as upstream does (a
    /// Deployment's /status keeps the request's annotations); whether it was written.
    fn write_deployment(
        &mut self,
        key: &Key,
        annotations: BTreeMap<String, String>,
        status: &DeploymentStatus,
    ) -> bool {
        let (ns, name) = key;
        let d_rt = self.types.deployments.clone();
        let opts = Self::opts(CONTROLLER_MANAGER);
        let Some(current) = self.deployments.objects.get(key).map(|c| c.value.clone()) else { return false };
        let mut body = (*current).clone();
        body["status"] = serde_json::to_value(status).unwrap_or_default();
        if !annotations.is_empty() {
            let meta = meta_mut(&mut body);
            let stored = meta.entry("annotations").or_insert_with(|| json!({}));
            if let Some(stored) = stored.as_object_mut() {
                stored.extend(annotations.into_iter().map(|(k, v)| (k, Value::String(v))));
            }
        }
        match self.cluster.update(&d_rt, ns_opt(ns), name, body, Subresource::Status, &opts) {
            Ok(out) => {
                self.wrote(&d_rt, out.object);
                true
            }
            Err(_) => false,
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
        self.dirty.push(Work::Deployment(key.clone()));
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
                    self.dirty.push(Work::Pod(key_of(&v)));
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

    // ---- Garbage collection ----

    // ---- Namespaces ----
}
