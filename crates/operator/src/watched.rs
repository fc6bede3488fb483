//! What a Deployment's watch event is decoded into. Those events are most of what the operator reads (every step of
//! every rollout, each a whole Deployment of some kilobytes), and decoding each whole, its pod template and its
//! managedFields as JSON maps, was a large share of the operator's CPU. Only what the cached view keeps is decoded:
//! the metadata without managedFields, and the status; the spec stays the bytes the server sent, its few view fields
//! read from them, and is decoded whole only when drift is judged (a new basis, see `children`), which the status
//! steps of a rollout never cause.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use microservice_core::crd::{Microservice, MicroserviceSpec, MicroserviceStatus};
use microservice_core::desired::CONTAINER_NAME;

use crate::interner::Interner;

/// A Deployment as its watch delivers it to the cache.
#[derive(Clone, Debug, Deserialize, kube::Resource)]
#[resource(inherit = Deployment)]
pub struct WatchedDeployment {
    #[serde(deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<Box<RawValue>>,
    pub status: Option<DeploymentStatus>,
}

impl WatchedDeployment {
    /// The fields of the spec the view keeps, read from the spec's bytes (nothing else of it is built).
    pub fn spec_fields(&self) -> Option<SpecFields> {
        let raw = self.spec.as_deref()?;
        serde_json::from_str::<LeanSpec>(raw.get()).ok().map(SpecFields::from)
    }

    /// The whole object as JSON, as drift judges it: the spec decoded as the typed Deployment would have it (so a
    /// field this client does not know is dropped exactly as before). None if the spec cannot be decoded.
    pub fn judged_value(&self) -> Option<Value> {
        let spec = match self.spec.as_deref() {
            Some(raw) => Some(serde_json::from_str::<DeploymentSpec>(raw.get()).ok()?),
            None => None,
        };
        serde_json::to_value(Deployment { metadata: self.metadata.clone(), spec, status: self.status.clone() }).ok()
    }
}

/// A Microservice as its watch delivers it to the cache: the same object without managedFields, decoded skipped
/// rather than built and dropped (three events per Microservice as it reaches Ready).
#[derive(Clone, Debug, Deserialize, kube::Resource)]
#[resource(inherit = Microservice)]
pub struct WatchedMicroservice {
    #[serde(deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    pub spec: MicroserviceSpec,
    pub status: Option<MicroserviceStatus>,
}

impl WatchedMicroservice {
    /// The Microservice as the cache keeps it: without the last-applied annotation (a copy of the spec nothing here
    /// reads), and its texts shared with every other cached Microservice that tells the same: its conditions'
    /// reasons and messages, its images (spec, status and last accepted) and its ready/desired summary.
    pub fn trimmed(mut self, texts: &mut Interner) -> WatchedMicroservice {
        if let Some(annotations) = self.metadata.annotations.as_mut() {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            if annotations.is_empty() {
                self.metadata.annotations = None;
            }
        }
        self.spec.image = texts.intern(&self.spec.image);
        if let Some(status) = self.status.as_mut() {
            for condition in &mut status.conditions {
                condition.reason = texts.intern(&condition.reason);
                condition.message = texts.intern(&condition.message);
            }
            for text in [status.image.as_mut(), status.replicas_summary.as_mut()].into_iter().flatten() {
                *text = texts.intern(text);
            }
            if let Some(accepted) = status.last_accepted.as_mut() {
                accepted.image = texts.intern(&accepted.image);
            }
        }
        self
    }
}

/// The spec fields a cached Deployment view keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecFields {
    pub replicas: Option<i32>,
    pub paused: Option<bool>,
    pub progress_deadline_seconds: Option<i32>,
    pub selector: LabelSelector,
    /// The image of the app container.
    pub image: Option<String>,
}

impl SpecFields {
    pub fn of(spec: &DeploymentSpec) -> SpecFields {
        let pod = spec.template.spec.as_ref();
        SpecFields {
            replicas: spec.replicas,
            paused: spec.paused,
            progress_deadline_seconds: spec.progress_deadline_seconds,
            selector: spec.selector.clone(),
            image: pod
                .and_then(|p| p.containers.iter().find(|c| c.name == CONTAINER_NAME))
                .and_then(|c| c.image.clone()),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanSpec {
    replicas: Option<i32>,
    paused: Option<bool>,
    progress_deadline_seconds: Option<i32>,
    #[serde(default)]
    selector: LabelSelector,
    template: Option<LeanTemplate>,
}

#[derive(Deserialize)]
struct LeanTemplate {
    spec: Option<LeanPod>,
}

#[derive(Deserialize)]
struct LeanPod {
    #[serde(default)]
    containers: Vec<LeanContainer>,
}

#[derive(Deserialize)]
struct LeanContainer {
    name: String,
    image: Option<String>,
}

impl From<LeanSpec> for SpecFields {
    fn from(s: LeanSpec) -> SpecFields {
        let containers = s.template.and_then(|t| t.spec).map(|p| p.containers).unwrap_or_default();
        SpecFields {
            replicas: s.replicas,
            paused: s.paused,
            progress_deadline_seconds: s.progress_deadline_seconds,
            selector: s.selector,
            image: containers.into_iter().find(|c| c.name == CONTAINER_NAME).and_then(|c| c.image),
        }
    }
}

/// ObjectMeta without managedFields (skipped unbuilt), and without what neither the cache nor drift reads.
fn lean_meta<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Lean {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        generation: Option<i64>,
        creation_timestamp: Option<Time>,
        deletion_timestamp: Option<Time>,
        labels: Option<BTreeMap<String, String>>,
        annotations: Option<BTreeMap<String, String>>,
        owner_references: Option<Vec<OwnerReference>>,
        finalizers: Option<Vec<String>>,
    }
    let m = Lean::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references,
        finalizers: m.finalizers,
        ..ObjectMeta::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A Deployment as a server sends it: defaults, managedFields, a sidecar, status.
    fn sent() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "todo-api", "namespace": "todo", "uid": "d-1", "resourceVersion": "42", "generation": 3,
                "creationTimestamp": "2026-12-05T09:00:00Z",
                "labels": {"app.kubernetes.io/name": "todo-api"},
                "annotations": {"deployment.kubernetes.io/revision": "2"},
                "ownerReferences": [{"apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
                    "name": "todo-api", "uid": "m-1", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "microservice-operator", "operation": "Apply", "apiVersion": "apps/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
            },
            "spec": {
                "replicas": 2, "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "todo-api"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": "todo-api"}},
                    "spec": {"containers": [
                        {"name": "sidecar", "image": "example/sidecar:1"},
                        {"name": CONTAINER_NAME, "image": "ghcr.io/example/todo-api:1.0.0",
                         "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                         "resources": {"limits": {"memory": "128Mi"}}}
                    ]}
                }
            },
            "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1,
                "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}
        })
    }

    #[test]
    fn the_view_fields_are_those_of_the_whole_decode() {
        let whole: Deployment = serde_json::from_value(sent()).unwrap();
        let watched: WatchedDeployment = serde_json::from_value(sent()).unwrap();
        assert_eq!(watched.spec_fields(), Some(SpecFields::of(whole.spec.as_ref().unwrap())));
        assert_eq!(watched.status, whole.status);
        assert_eq!(watched.spec_fields().unwrap().image.as_deref(), Some("ghcr.io/example/todo-api:1.0.0"));
    }

    #[test]
    fn drift_reads_the_same_object_as_from_the_whole_decode_without_managed_fields() {
        let whole: Deployment = serde_json::from_value(sent()).unwrap();
        let watched: WatchedDeployment = serde_json::from_str(&sent().to_string()).unwrap();
        let mut expected = serde_json::to_value(&whole).unwrap();
        expected["metadata"].as_object_mut().unwrap().remove("managedFields");
        assert_eq!(watched.judged_value(), Some(expected));
        assert!(watched.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_deployment_without_a_spec_has_no_view_fields_and_is_still_judged() {
        let mut v = sent();
        v.as_object_mut().unwrap().remove("spec");
        let watched: WatchedDeployment = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(watched.spec_fields(), None);
        assert!(watched.judged_value().is_some_and(|j| j.get("spec").is_none()));
    }

    #[test]
    fn a_watched_microservice_is_the_whole_decode_without_managed_fields_or_last_applied_and_shares_its_words() {
        let sent = json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": {
                "name": "todo-api", "namespace": "todo", "uid": "u1", "resourceVersion": "7", "generation": 2,
                "labels": {"team": "a"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "kept"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080},
            "status": {"observedGeneration": 2, "phase": "Ready", "image": "ghcr.io/example/todo-api:1.4.2",
              "replicasSummary": "2/2",
              "lastAccepted": {"generation": 2, "image": "ghcr.io/example/todo-api:1.4.2", "port": 8080, "replicas": 2},
              "conditions": [
                {"type": "Progressing", "status": "False", "reason": "RolloutComplete", "message": "rolled out",
                 "observedGeneration": 2, "lastTransitionTime": "2026-12-06T05:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "RolloutComplete", "message": "rolled out",
                 "observedGeneration": 2, "lastTransitionTime": "2026-12-06T05:00:00Z"}
            ]}
        });
        let mut whole: Microservice = serde_json::from_value(sent.clone()).unwrap();
        whole.metadata.managed_fields = None;
        whole.metadata.annotations.as_mut().unwrap().remove("kubectl.kubernetes.io/last-applied-configuration");
        let mut texts = Interner::default();
        let decode = |texts: &mut Interner| {
            let w = serde_json::from_str::<WatchedMicroservice>(&sent.to_string()).unwrap().trimmed(texts);
            Microservice { metadata: w.metadata, spec: w.spec, status: w.status }
        };
        let cached = decode(&mut texts);
        assert_eq!(cached, whole);
        // One copy of each text, within the object and across objects.
        let other = decode(&mut texts);
        let conditions = &cached.status.as_ref().unwrap().conditions;
        assert!(conditions[0].message.ptr_eq(&conditions[1].message));
        assert!(conditions[0].reason.ptr_eq(&other.status.as_ref().unwrap().conditions[1].reason));
        let status = cached.status.as_ref().unwrap();
        let accepted = status.last_accepted.as_ref().unwrap();
        assert!(cached.spec.image.ptr_eq(status.image.as_ref().unwrap()) && cached.spec.image.ptr_eq(&accepted.image));
        assert!(
            status.replicas_summary.as_ref().unwrap().ptr_eq(other.status.unwrap().replicas_summary.as_ref().unwrap())
        );
        assert_eq!(texts.len(), 4, "a reason, a message, an image, a summary");
    }

    #[test]
    fn annotations_that_held_only_last_applied_are_dropped_whole() {
        let sent = json!({
            "metadata": {"name": "a", "namespace": "todo",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {"image": "x", "port": 80}
        });
        let w = serde_json::from_value::<WatchedMicroservice>(sent).unwrap().trimmed(&mut Interner::default());
        assert_eq!(w.metadata.annotations, None);
    }
}
