//! The Microservice cache: every Microservice its watch shows, kept compact and expanded into the whole object when
//! a reconcile reads it. kube-runtime's reflector store held each one whole (an `ObjectMeta` is some 360 bytes of
//! mostly empty fields) under a key of four more strings; here a Microservice is its spec, its status and the few
//! metadata fields that are set, under its `namespace/name`. Reconciles read a Microservice a few times each; the
//! child caches ask only whether one exists and what its uid and generation are, which needs no expansion.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use tokio::sync::watch;

use microservice_core::crd::{Microservice, MicroserviceSpec, MicroserviceStatus, Phase};

use crate::queue;
use crate::uid::Uid;
use crate::watched::WatchedMicroservice;

/// One Microservice as the cache keeps it; its namespace and name are its key.
#[derive(Debug, PartialEq)]
pub struct Kept {
    pub uid: Option<Uid>,
    pub resource_version: Option<Box<str>>,
    pub generation: Option<i64>,
    creation_timestamp: Option<Time>,
    pub deletion_timestamp: Option<Time>,
    /// Every other metadata field, only when one is set (labels, annotations, finalizers, ownerReferences, ...).
    rest: Option<Box<ObjectMeta>>,
    pub spec: MicroserviceSpec,
    pub status: Option<MicroserviceStatus>,
}

impl Kept {
    /// The watched object's key and what the cache keeps of it.
    pub fn of(watched: WatchedMicroservice) -> (String, Kept) {
        let WatchedMicroservice { metadata, spec, status } = watched;
        let mut rest = metadata;
        let key = queue::key(rest.namespace.as_deref().unwrap_or_default(), rest.name.as_deref().unwrap_or_default());
        rest.name = None;
        rest.namespace = None;
        let kept = Kept {
            uid: rest.uid.take().map(|u| Uid::parse(&u)),
            resource_version: rest.resource_version.take().map(String::into_boxed_str),
            generation: rest.generation.take(),
            creation_timestamp: rest.creation_timestamp.take(),
            deletion_timestamp: rest.deletion_timestamp.take(),
            rest: (rest != ObjectMeta::default()).then(|| Box::new(rest)),
            spec,
            status,
        };
        (key, kept)
    }

    /// The whole Microservice, as the watch delivered it to the cache.
    pub fn expand(&self, namespace: &str, name: &str) -> Microservice {
        let mut metadata = self.rest.as_deref().cloned().unwrap_or_default();
        metadata.name = Some(name.to_string());
        metadata.namespace = Some(namespace.to_string());
        metadata.uid = self.uid.as_ref().map(Uid::to_string);
        metadata.resource_version = self.resource_version.as_deref().map(str::to_string);
        metadata.generation = self.generation;
        metadata.creation_timestamp = self.creation_timestamp.clone();
        metadata.deletion_timestamp = self.deletion_timestamp.clone();
        Microservice { metadata, spec: self.spec.clone(), status: self.status.clone() }
    }

    pub fn phase(&self) -> Option<Phase> {
        self.status.as_ref().and_then(|s| s.phase)
    }
}

/// The cache, shared by the task that fills it from the watch and everyone who reads it.
#[derive(Clone)]
pub struct Microservices {
    entries: Arc<RwLock<HashMap<Box<str>, Arc<Kept>>>>,
    ready: Arc<watch::Sender<bool>>,
}

impl Default for Microservices {
    fn default() -> Self {
        Microservices { entries: Arc::default(), ready: Arc::new(watch::Sender::new(false)) }
    }
}

impl Microservices {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Box<str>, Arc<Kept>>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Box<str>, Arc<Kept>>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The Microservice with this `namespace/name` key, whole.
    pub fn get(&self, key: &str) -> Option<Microservice> {
        let kept = self.kept(key)?;
        let (namespace, name) = queue::split(key);
        Some(kept.expand(namespace, name))
    }

    /// The Microservice with this `namespace/name` key, as kept.
    pub fn kept(&self, key: &str) -> Option<Arc<Kept>> {
        self.read().get(key).cloned()
    }

    /// Whether the cache holds the Microservice with this `namespace/name` key.
    pub fn contains(&self, key: &str) -> bool {
        self.read().contains_key(key)
    }

    /// Every cached Microservice's `namespace/name`.
    pub fn keys(&self) -> Vec<Box<str>> {
        self.read().keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Files a changed Microservice; returns what it replaced.
    pub fn apply(&self, key: String, kept: Kept) -> Option<Arc<Kept>> {
        self.write().insert(key.into_boxed_str(), Arc::new(kept))
    }

    /// Forgets a deleted Microservice; returns what was kept of it.
    pub fn delete(&self, key: &str) -> Option<Arc<Kept>> {
        self.write().remove(key)
    }

    /// A re-list's objects replace the whole cache, which is then ready.
    pub fn relisted(&self, fresh: HashMap<Box<str>, Arc<Kept>>) {
        *self.write() = fresh;
        self.ready.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn watched(value: serde_json::Value) -> WatchedMicroservice {
        serde_json::from_value(value).expect("a Microservice")
    }

    fn full() -> serde_json::Value {
        json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": {
                "name": "todo-api", "namespace": "todo", "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
                "resourceVersion": "4711", "generation": 3, "creationTimestamp": "2026-12-06T08:00:00Z",
                "labels": {"team": "todo"}, "annotations": {"note": "kept"}, "finalizers": ["example.com/hold"]
            },
            "spec": {"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080, "replicas": 2},
            "status": {
                "observedGeneration": 3, "phase": "Ready",
                "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3,
                    "lastTransitionTime": "2026-12-06T08:00:05Z", "reason": "RolloutComplete", "message": "2/2"}]
            }
        })
    }

    #[test]
    fn a_kept_microservice_expands_to_the_object_the_watch_delivered() {
        for value in [
            full(),
            json!({"metadata": {"name": "a", "namespace": "todo"}, "spec": {"image": "x", "port": 80}}),
            json!({"metadata": {"name": "b", "namespace": "todo", "uid": "NOT-A-UUID", "deletionTimestamp":
                "2026-12-06T09:00:00Z"}, "spec": {"image": "x", "port": 80}}),
        ] {
            let original = watched(value.clone());
            let expected = Microservice {
                metadata: original.metadata.clone(),
                spec: original.spec.clone(),
                status: original.status.clone(),
            };
            let (key, kept) = Kept::of(original);
            let (namespace, name) = key.split_once('/').expect("namespace/name");
            assert_eq!(kept.expand(namespace, name), expected, "{value}");
        }
    }

    #[test]
    fn only_metadata_beyond_the_kept_fields_is_boxed() {
        let (_, plain) =
            Kept::of(watched(json!({"metadata": {"name": "a", "namespace": "todo", "uid": "u", "generation": 1},
                "spec": {"image": "x", "port": 80}})));
        assert!(plain.rest.is_none());
        let (_, labelled) = Kept::of(watched(full()));
        assert!(labelled.rest.is_some());
    }

    #[test]
    fn the_cache_answers_by_namespace_and_name() {
        let cache = Microservices::default();
        let (key, kept) = Kept::of(watched(full()));
        assert!(cache.apply(key.clone(), kept).is_none());
        assert!(cache.contains("todo/todo-api"));
        assert!(!cache.contains("other/todo-api"));
        let ms = cache.get("todo/todo-api").expect("cached");
        assert_eq!((ms.metadata.namespace.as_deref(), ms.metadata.name.as_deref()), (Some("todo"), Some("todo-api")));
        assert_eq!(ms.metadata.generation, Some(3));
        assert_eq!(cache.kept("todo/todo-api").and_then(|k| k.phase()), Some(Phase::Ready));
        assert_eq!(cache.keys(), vec![Box::from("todo/todo-api")]);
        assert!(cache.delete(&key).is_some());
        assert!(cache.is_empty());
    }
}
