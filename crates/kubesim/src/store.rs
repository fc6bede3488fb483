//! The object store: every object as JSON, one global strictly increasing resourceVersion, and a bounded history
//! of committed changes so watches (and `resourceVersionMatch=Exact` lists) can start from an older version.
//!
//! One mutex guards the whole state, like etcd's single revision counter: commits are short, and serialising them
//! is what makes "an object's RV is its last write's, a list's RV is the counter" trivially true. Watch fan-out goes
//! through a broadcast of `Arc`'d changes; each watcher filters on its own task.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceRef;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// A committed change, published to in-process subscribers (the simulated controllers).
#[derive(Debug, Clone)]
pub struct Change {
    pub rt: ResourceRef,
    pub kind: ChangeKind,
    pub object: Arc<Value>,
    /// The previous state for Modified and Deleted.
    pub old: Option<Arc<Value>>,
    pub resource_version: u64,
}

/// Storage identity of a resource: versions of one group/resource share their objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub group: String,
    pub plural: String,
}

impl ResourceKey {
    pub fn of(rt: &crate::resources::ResourceType) -> Self {
        // events.k8s.io Events are stored as core Events (one resource, two views).
        if crate::builtin::events::is_events_view(rt) {
            return ResourceKey { group: String::new(), plural: rt.plural.clone() };
        }
        ResourceKey { group: rt.group.clone(), plural: rt.plural.clone() }
    }
}

/// (namespace, name); the namespace is "" for cluster-scoped objects. Ordered like etcd keys, so lists come out
/// sorted by namespace then name, as upstream's do.
pub type ObjectKey = (String, String);

/// How long and how much history is kept for watches from an old resourceVersion.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    pub max_events: usize,
    pub max_age: Duration,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits { max_events: 20_000, max_age: Duration::from_secs(300) }
    }
}

struct Entry {
    change: Change,
    key: ResourceKey,
    at: Instant,
}

#[derive(Default)]
struct Objects {
    by_resource: HashMap<ResourceKey, BTreeMap<ObjectKey, Arc<Value>>>,
}

/// The locked state. Held only for the duration of one commit or snapshot.
pub struct State {
    objects: Objects,
    rv: u64,
    history: VecDeque<Entry>,
    /// The resourceVersion of the newest change that fell out of the history ("compacted" in etcd terms).
    compacted: u64,
    limits: HistoryLimits,
    tx: broadcast::Sender<Change>,
}

/// What a write decided, given the current object.
pub enum Mutation {
    /// Store this object (its resourceVersion is assigned by the store).
    Put(Value),
    /// Remove the object.
    Delete,
    /// Remove the object an update has just finalized (its last finalizer removed while it was being deleted).
    /// Upstream answers that update with this object, as the update left it, at the resourceVersion it had.
    Finalize(Value),
    /// Nothing changes: no resourceVersion is consumed and no event is sent.
    Keep,
}

/// What a committed write produced.
#[derive(Debug, Clone)]
pub enum Committed {
    Put {
        object: Arc<Value>,
        created: bool,
    },
    Deleted(Arc<Value>),
    /// A no-op: the unchanged current object (None when there was none).
    Unchanged(Option<Arc<Value>>),
}

pub struct Store {
    state: Mutex<State>,
    tx: broadcast::Sender<Change>,
}

/// A watcher's starting point: the matching objects (for synthetic ADDED events) or the history to replay,
/// and a receiver subscribed at the same instant, so no change falls between them.
pub struct WatchStart {
    pub replay: Vec<Change>,
    pub initial: Vec<Arc<Value>>,
    pub rx: broadcast::Receiver<Change>,
    pub current_rv: u64,
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

pub fn too_old(requested: u64, oldest: u64) -> ApiError {
    ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
}

impl Default for Store {
    fn default() -> Self {
        Self::new(HistoryLimits::default())
    }
}

impl Store {
    pub fn new(limits: HistoryLimits) -> Self {
        // Lagging receivers recover from the history (see `changes_after`), so the channel can stay modest.
        let (tx, _) = broadcast::channel(8192);
        Store {
            state: Mutex::new(State {
                objects: Objects::default(),
                rv: 1,
                history: VecDeque::new(),
                compacted: 1,
                limits,
                tx: tx.clone(),
            }),
            tx,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied commit (commits mutate after all checks),
        // so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }
}

impl State {
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn get(&self, key: &ResourceKey, obj: &ObjectKey) -> Option<Arc<Value>> {
        self.objects.by_resource.get(key).and_then(|m| m.get(obj)).cloned()
    }

    /// Objects of one resource, optionally in one namespace, in key order, starting after `after`.
    pub fn range(
        &self,
        key: &ResourceKey,
        ns: Option<&str>,
        after: Option<&ObjectKey>,
    ) -> Vec<(ObjectKey, Arc<Value>)> {
        let Some(map) = self.objects.by_resource.get(key) else {
            return Vec::new();
        };
        let lower = match after {
            Some(k) => Bound::Excluded(k.clone()),
            None => match ns {
                Some(ns) => Bound::Included((ns.to_string(), String::new())),
                None => Bound::Unbounded,
            },
        };
        map.range((lower, Bound::Unbounded))
            .take_while(|(k, _)| ns.is_none_or(|ns| k.0 == ns))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The objects of one resource as they were at resourceVersion `rv`, rebuilt from the current state by undoing
    /// the history after `rv`. 410 when that history is gone.
    pub fn range_at(
        &self,
        key: &ResourceKey,
        ns: Option<&str>,
        after: Option<&ObjectKey>,
        rv: u64,
    ) -> ApiResult<Vec<(ObjectKey, Arc<Value>)>> {
        if rv >= self.rv {
            return Ok(self.range(key, ns, after));
        }
        if rv < self.compacted {
            return Err(too_old(rv, self.compacted));
        }
        let mut view: BTreeMap<ObjectKey, Arc<Value>> = self.range(key, ns, None).into_iter().collect();
        for entry in self.history.iter().rev() {
            if entry.change.resource_version <= rv {
                break;
            }
            if &entry.key != key {
                continue;
            }
            let Some(k) = object_key(&entry.change.object) else { continue };
            if ns.is_some_and(|ns| k.0 != ns) {
                continue;
            }
            match (&entry.change.kind, &entry.change.old) {
                (ChangeKind::Added, _) | (_, None) => {
                    view.remove(&k);
                }
                (_, Some(old)) => {
                    view.insert(k, old.clone());
                }
            }
        }
        let lower = match after {
            Some(k) => Bound::Excluded(k.clone()),
            None => Bound::Unbounded,
        };
        Ok(view.range((lower, Bound::Unbounded)).map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    pub fn count(&self, key: &ResourceKey, ns: Option<&str>) -> usize {
        match (self.objects.by_resource.get(key), ns) {
            (None, _) => 0,
            (Some(m), None) => m.len(),
            (Some(m), Some(ns)) => m.range((ns.to_string(), String::new())..).take_while(|(k, _)| k.0 == ns).count(),
        }
    }

    /// Whether any object lives in namespace `ns` (in any resource).
    pub fn namespace_has_objects(&self, ns: &str) -> bool {
        self.objects
            .by_resource
            .values()
            .any(|m| m.range((ns.to_string(), String::new())..).next().is_some_and(|(k, _)| k.0 == ns))
    }

    /// Applies a mutation decided by the caller. `rt` is the type the write came through (events carry it).
    pub fn commit(&mut self, rt: &ResourceRef, obj_key: ObjectKey, mutation: Mutation) -> Committed {
        let key = ResourceKey::of(rt);
        let mutation = match mutation {
            Mutation::Put(v) if crate::builtin::events::is_events_view(rt) => {
                Mutation::Put(crate::builtin::events::to_core(&v))
            }
            other => other,
        };
        let old = self.get(&key, &obj_key);
        match mutation {
            Mutation::Keep => Committed::Unchanged(old),
            Mutation::Delete | Mutation::Finalize(_) => {
                let Some(old) = old else { return Committed::Unchanged(None) };
                if let Some(m) = self.objects.by_resource.get_mut(&key) {
                    m.remove(&obj_key);
                }
                self.rv += 1;
                // The DELETED event carries the object at the deletion's resourceVersion, as upstream's watch does.
                let mut last = (*old).clone();
                set_rv(&mut last, self.rv);
                let last = Arc::new(last);
                self.publish(rt, key, ChangeKind::Deleted, last.clone(), Some(old));
                Committed::Deleted(last)
            }
            Mutation::Put(mut obj) => {
                self.rv += 1;
                set_rv(&mut obj, self.rv);
                let obj = Arc::new(obj);
                self.objects.by_resource.entry(key.clone()).or_default().insert(obj_key, obj.clone());
                let created = old.is_none();
                let kind = if created { ChangeKind::Added } else { ChangeKind::Modified };
                self.publish(rt, key, kind, obj.clone(), old);
                Committed::Put { object: obj, created }
            }
        }
    }

    /// Drops every object of a resource (a deleted CRD), with DELETED events.
    pub fn remove_resource(&mut self, rt: &ResourceRef) -> Vec<Arc<Value>> {
        let key = ResourceKey::of(rt);
        let keys: Vec<ObjectKey> = self.range(&key, None, None).into_iter().map(|(k, _)| k).collect();
        let mut out = Vec::new();
        for k in keys {
            if let Committed::Deleted(v) = self.commit(rt, k, Mutation::Delete) {
                out.push(v);
            }
        }
        self.objects.by_resource.remove(&key);
        out
    }

    fn publish(
        &mut self,
        rt: &ResourceRef,
        key: ResourceKey,
        kind: ChangeKind,
        object: Arc<Value>,
        old: Option<Arc<Value>>,
    ) {
        let change = Change { rt: rt.clone(), kind, object, old, resource_version: self.rv };
        let now = Instant::now();
        self.history.push_back(Entry { change: change.clone(), key, at: now });
        while let Some(front) = self.history.front() {
            let too_many = self.history.len() > self.limits.max_events;
            let too_old = now.duration_since(front.at) > self.limits.max_age;
            if !(too_many || too_old) {
                break;
            }
            self.compacted = front.change.resource_version;
            self.history.pop_front();
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(change);
    }

    /// The changes after `rv` (all resources), or 410 when the history no longer reaches back that far.
    pub fn changes_after(&self, rv: u64) -> ApiResult<Vec<Change>> {
        if rv < self.compacted {
            return Err(too_old(rv, self.compacted));
        }
        // History is sorted by RV; find the first entry after rv.
        let start = self.history.partition_point(|e| e.change.resource_version <= rv);
        Ok(self.history.range(start..).map(|e| e.change.clone()).collect())
    }

    /// Whether a continue token or list at `rv` can still be served.
    pub fn oldest_available(&self) -> u64 {
        self.compacted
    }

    /// Starts a watch of one resource: from `from_rv` (replay history) or, when None, with the current objects.
    pub fn watch_start(&self, key: &ResourceKey, ns: Option<&str>, from_rv: Option<u64>) -> ApiResult<WatchStart> {
        let rx = self.tx.subscribe();
        match from_rv {
            Some(rv) => {
                let replay = self.changes_after(rv)?.into_iter().filter(|c| &ResourceKey::of(&c.rt) == key).collect();
                Ok(WatchStart { replay, initial: Vec::new(), rx, current_rv: self.rv })
            }
            None => {
                let initial = self.range(key, ns, None).into_iter().map(|(_, v)| v).collect();
                Ok(WatchStart { replay: Vec::new(), initial, rx, current_rv: self.rv })
            }
        }
    }

    #[cfg(test)]
    fn set_limits(&mut self, limits: HistoryLimits) {
        self.limits = limits;
    }
}

/// (namespace, name) of a stored object.
pub fn object_key(obj: &Value) -> Option<ObjectKey> {
    let meta = obj.get("metadata")?;
    let name = meta.get("name")?.as_str()?.to_string();
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    Some((ns, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;
    use serde_json::json;

    fn cm_type() -> ResourceRef {
        Arc::new(builtin_types().into_iter().find(|t| t.plural == "configmaps").unwrap())
    }

    fn cm(name: &str, v: &str) -> Value {
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":name,"namespace":"default"},"data":{"k":v}})
    }

    fn put(store: &Store, rt: &ResourceRef, obj: Value) -> Committed {
        let key = object_key(&obj).unwrap();
        store.lock().commit(rt, key, Mutation::Put(obj))
    }

    #[test]
    fn resource_versions_are_global_and_increasing() {
        let store = Store::default();
        let rt = cm_type();
        let start = store.current_rv();
        put(&store, &rt, cm("a", "1"));
        put(&store, &rt, cm("b", "1"));
        let st = store.lock();
        let a = st.get(&ResourceKey::of(&rt), &("default".into(), "a".into())).unwrap();
        let b = st.get(&ResourceKey::of(&rt), &("default".into(), "b".into())).unwrap();
        assert_eq!(a["metadata"]["resourceVersion"], (start + 1).to_string());
        assert_eq!(b["metadata"]["resourceVersion"], (start + 2).to_string());
        assert_eq!(st.current_rv(), start + 2);
    }

    #[test]
    fn keep_consumes_no_resource_version() {
        let store = Store::default();
        let rt = cm_type();
        put(&store, &rt, cm("a", "1"));
        let before = store.current_rv();
        let mut rx = store.subscribe();
        store.lock().commit(&rt, ("default".into(), "a".into()), Mutation::Keep);
        assert_eq!(store.current_rv(), before);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn lists_at_an_old_version_are_rebuilt_from_history() {
        let store = Store::default();
        let rt = cm_type();
        put(&store, &rt, cm("a", "1"));
        let at = store.current_rv();
        put(&store, &rt, cm("a", "2"));
        put(&store, &rt, cm("b", "1"));
        store.lock().commit(&rt, ("default".into(), "a".into()), Mutation::Delete);
        let st = store.lock();
        let then = st.range_at(&ResourceKey::of(&rt), Some("default"), None, at).unwrap();
        assert_eq!(then.len(), 1);
        assert_eq!(then[0].1["data"]["k"], "1");
        let now = st.range_at(&ResourceKey::of(&rt), Some("default"), None, st.current_rv()).unwrap();
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].0.1, "b");
    }

    #[test]
    fn history_beyond_its_limit_is_gone() {
        let store = Store::default();
        let rt = cm_type();
        store.lock().set_limits(HistoryLimits { max_events: 3, max_age: Duration::from_secs(300) });
        let first = store.current_rv();
        for i in 0..10 {
            put(&store, &rt, cm("a", &i.to_string()));
        }
        let st = store.lock();
        let err = st.changes_after(first).unwrap_err();
        assert_eq!(err.code, 410);
        assert!(err.message.starts_with(&format!("too old resource version: {first} (")));
        assert_eq!(st.changes_after(st.current_rv() - 2).unwrap().len(), 2);
    }
}
