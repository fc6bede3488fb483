//! The Deployment and Service the operator owns for a Microservice, as pure functions of (CR, contract, profile).
//! Fields the API server would otherwise default are set to those defaults where the operator cares about them,
//! and zero values the server omits are never set, so a stored object still contains the desired one.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use thiserror::Error;

use crate::contract::{AutoscalingBounds, Contract, Scaling};
use crate::crd::Microservice;
use crate::profile::{CpuMemory, HttpProbe, PlatformProfile, is_label_value};

/// Field manager of every server-side apply, and the `app.kubernetes.io/managed-by` value.
pub const MANAGER: &str = "microservice-operator";
/// Deployment annotation: the Microservice generation the Deployment was built for.
pub const GENERATION_ANNOTATION: &str = "platform.example.com/generation";
/// Annotation on each child: a digest of the desired object it was last written as. The drift check compares
/// only what the desired state sets, so a field the desired state stops setting (after a profile change or an
/// operator upgrade) would go unnoticed; a changed digest makes the operator apply, and the apply removes it.
pub const DESIRED_DIGEST_ANNOTATION: &str = "platform.example.com/desired-digest";
/// Annotation by which a user hands an existing object over to the Microservice it names.
pub const HANDOVER_ANNOTATION: &str = "platform.example.com/handover";

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
pub const LABEL_VERSION: &str = "app.kubernetes.io/version";

pub const CONTAINER_NAME: &str = "app";
pub const PORT_NAME: &str = "http";
pub const SERVICE_PORT: i32 = 80;
const TMP_VOLUME: &str = "tmp";
const POD_NAME_ENV: &str = "K8S_POD_NAME";
const NODE_NAME_ENV: &str = "K8S_NODE_NAME";

/// The CR lacks metadata the children need (it was not read from a server).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DesiredError {
    #[error("the Microservice has no {0}; only objects read from the API server can own children")]
    MissingMetadata(&'static str),
}

/// Labels that identify the Microservice's pods for its whole life: the only ones selectors use. Nothing in them
/// comes from the image, so a new version never orphans the old pods or breaks the immutable Deployment selector.
pub fn selector_labels(ms: &Microservice) -> Result<BTreeMap<String, String>, DesiredError> {
    let name = ms.metadata.name.clone().ok_or(DesiredError::MissingMetadata("metadata.name"))?;
    Ok(BTreeMap::from([(LABEL_NAME.to_string(), name.clone()), (LABEL_INSTANCE.to_string(), name)]))
}

fn common_labels(ms: &Microservice, profile: &PlatformProfile) -> Result<BTreeMap<String, String>, DesiredError> {
    let mut labels = selector_labels(ms)?;
    labels.insert(LABEL_MANAGED_BY.to_string(), MANAGER.to_string());
    labels.insert(LABEL_PART_OF.to_string(), profile.part_of.clone());
    Ok(labels)
}

/// Common labels plus the version, when the version is a valid label value (digests are not).
fn versioned_labels(
    ms: &Microservice,
    contract: &Contract,
    profile: &PlatformProfile,
) -> Result<BTreeMap<String, String>, DesiredError> {
    let mut labels = common_labels(ms, profile)?;
    if !contract.version.is_empty() && is_label_value(&contract.version) {
        labels.insert(LABEL_VERSION.to_string(), contract.version.clone());
    }
    Ok(labels)
}

/// The controller ownerReference children carry. blockOwnerDeletion is set explicitly: kube's
/// `controller_owner_ref` leaves it out, and without it foreground deletion would not wait for the children.
pub fn controller_reference(ms: &Microservice) -> Result<OwnerReference, DesiredError> {
    Ok(OwnerReference {
        api_version: Microservice::api_version(&()).into_owned(),
        kind: Microservice::kind(&()).into_owned(),
        name: ms.metadata.name.clone().ok_or(DesiredError::MissingMetadata("metadata.name"))?,
        uid: ms.metadata.uid.clone().ok_or(DesiredError::MissingMetadata("metadata.uid"))?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

fn child_metadata(ms: &Microservice, labels: BTreeMap<String, String>) -> Result<ObjectMeta, DesiredError> {
    let owner = controller_reference(ms)?;
    Ok(ObjectMeta {
        name: Some(ms.metadata.name.clone().ok_or(DesiredError::MissingMetadata("metadata.name"))?),
        namespace: Some(ms.metadata.namespace.clone().ok_or(DesiredError::MissingMetadata("metadata.namespace"))?),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    })
}

// Over 80 lines on purpose: The desired Deployment written out field by field, as the golden files show it; splitting
// it would scatter one manifest.
pub fn desired_deployment(
    ms: &Microservice,
    contract: &Contract,
    profile: &PlatformProfile,
) -> Result<Deployment, DesiredError> {
    let generation = ms.metadata.generation.ok_or(DesiredError::MissingMetadata("metadata.generation"))?;
    let namespace = ms.metadata.namespace.as_deref().ok_or(DesiredError::MissingMetadata("metadata.namespace"))?;
    let name = ms.metadata.name.as_deref().ok_or(DesiredError::MissingMetadata("metadata.name"))?;
    let mut metadata = child_metadata(ms, versioned_labels(ms, contract, profile)?)?;
    metadata.annotations = Some(BTreeMap::from([(GENERATION_ANNOTATION.to_string(), generation.to_string())]));

    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(contract.image.clone()),
        // A pinned tag or digest never changes content, so the runtime's cached copy is the right one.
        image_pull_policy: Some("IfNotPresent".to_string()),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_string()),
            container_port: contract.port,
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        env: Some(telemetry_env(name, namespace, contract, profile)),
        readiness_probe: Some(http_probe(&profile.health.readiness)),
        liveness_probe: Some(http_probe(&profile.health.liveness)),
        startup_probe: Some(http_probe(&profile.health.startup)),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&profile.resources.requests)),
            limits: Some(quantities(&profile.resources.limits)),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_string()]), ..Capabilities::default() }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..SecurityContext::default()
        }),
        // The root filesystem is read-only; /tmp is where runtimes and libraries expect to write.
        volume_mounts: Some(vec![VolumeMount {
            name: TMP_VOLUME.to_string(),
            mount_path: "/tmp".to_string(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };

    let pod_spec = PodSpec {
        containers: vec![container],
        automount_service_account_token: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..PodSecurityContext::default()
        }),
        volumes: Some(vec![Volume {
            name: TMP_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };

    let mut deployment = Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            // Autoscaled: left out, so the apply releases the field to the HorizontalPodAutoscaler (which owns it
            // once it scales); a fixed count is applied, which also takes the field back when autoscaling ends.
            replicas: match contract.scaling {
                Scaling::Fixed(n) => Some(n),
                Scaling::Autoscaled(_) => None,
            },
            selector: LabelSelector { match_labels: Some(selector_labels(ms)?), ..LabelSelector::default() },
            // Old pods keep serving until a new one is ready: never below the desired count, one extra at a time.
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            progress_deadline_seconds: Some(profile.progress_deadline_seconds),
            revision_history_limit: Some(10),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(versioned_labels(ms, contract, profile)?),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    stamp_digest(&mut deployment);
    Ok(deployment)
}

/// Adds [`DESIRED_DIGEST_ANNOTATION`], computed over the object without it.
fn stamp_digest<K: Resource + serde::Serialize>(obj: &mut K) {
    // The JSON is hashed as it is written, never held: every reconcile builds the desired objects. Serialising
    // k8s-openapi types cannot fail (string keys, no custom serialisers that error).
    let mut hash = Fnv1a64::default();
    let _ = serde_json::to_writer(&mut hash, &*obj);
    let digest = hash.0;
    obj.meta_mut()
        .annotations
        .get_or_insert_default()
        .insert(DESIRED_DIGEST_ANNOTATION.to_string(), format!("{digest:016x}"));
}

/// FNV-1a 64 over the bytes written to it: stable across runs, builds and Rust versions, unlike std's hasher, so a
/// digest stamped by one version of the operator is the one the next computes.
struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl std::io::Write for Fnv1a64 {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = bytes.iter().fold(self.0, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub fn desired_service(ms: &Microservice, profile: &PlatformProfile) -> Result<Service, DesiredError> {
    let mut service = Service {
        metadata: child_metadata(ms, common_labels(ms, profile)?)?,
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(selector_labels(ms)?),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_string()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::String(PORT_NAME.to_string())),
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    stamp_digest(&mut service);
    Ok(service)
}

/// The HorizontalPodAutoscaler of an autoscaled Microservice: named like it, scaling its Deployment on CPU.
pub fn desired_hpa(
    ms: &Microservice,
    bounds: &AutoscalingBounds,
    profile: &PlatformProfile,
) -> Result<HorizontalPodAutoscaler, DesiredError> {
    let name = ms.metadata.name.clone().ok_or(DesiredError::MissingMetadata("metadata.name"))?;
    let mut hpa = HorizontalPodAutoscaler {
        metadata: child_metadata(ms, common_labels(ms, profile)?)?,
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".to_string()),
                kind: "Deployment".to_string(),
                name,
            },
            min_replicas: Some(bounds.min_replicas),
            max_replicas: bounds.max_replicas,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".to_string(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".to_string(),
                    target: MetricTarget {
                        type_: "Utilization".to_string(),
                        average_utilization: Some(bounds.target_cpu_utilization_percentage),
                        ..MetricTarget::default()
                    },
                }),
                ..MetricSpec::default()
            }]),
            behavior: None,
        }),
        status: None,
    };
    stamp_digest(&mut hpa);
    Ok(hpa)
}

/// OpenTelemetry SDK configuration. The pod and node names come from the downward API and are referenced with
/// `$(VAR)`, which Kubernetes expands only for variables defined earlier in the list.
fn telemetry_env(name: &str, namespace: &str, contract: &Contract, profile: &PlatformProfile) -> Vec<EnvVar> {
    let plain = |key: &str, value: String| EnvVar { name: key.to_string(), value: Some(value), value_from: None };
    let field = |key: &str, path: &str| EnvVar {
        name: key.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { api_version: Some("v1".to_string()), field_path: path.to_string() }),
            ..EnvVarSource::default()
        }),
    };
    let attributes = [
        ("service.namespace", namespace.to_string()),
        ("service.version", contract.version.clone()),
        ("k8s.namespace.name", namespace.to_string()),
        ("k8s.pod.name", format!("$({POD_NAME_ENV})")),
        ("k8s.node.name", format!("$({NODE_NAME_ENV})")),
    ]
    .iter()
    .map(|(key, value)| format!("{key}={value}"))
    .collect::<Vec<_>>()
    .join(",");
    let mut env = vec![
        field(POD_NAME_ENV, "metadata.name"),
        field(NODE_NAME_ENV, "spec.nodeName"),
        plain("OTEL_SERVICE_NAME", name.to_string()),
        plain("OTEL_EXPORTER_OTLP_ENDPOINT", profile.telemetry.endpoint.clone()),
        plain("OTEL_EXPORTER_OTLP_PROTOCOL", profile.telemetry.protocol.as_str().to_string()),
        plain("OTEL_RESOURCE_ATTRIBUTES", attributes),
    ];
    // No endpoint in the profile: the SDK's own default (a collector on the node) applies.
    env.retain(|e| e.name != "OTEL_EXPORTER_OTLP_ENDPOINT" || !profile.telemetry.endpoint.is_empty());
    env
}

fn http_probe(probe: &HttpProbe) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(probe.path.clone()),
            port: IntOrString::String(PORT_NAME.to_string()),
            scheme: Some("HTTP".to_string()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(probe.period_seconds),
        timeout_seconds: Some(probe.timeout_seconds),
        failure_threshold: Some(probe.failure_threshold),
        success_threshold: Some(1),
        ..Probe::default()
    }
}

fn quantities(values: &CpuMemory) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(values.cpu.clone())),
        ("memory".to_string(), Quantity(values.memory.clone())),
    ])
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile { type_: "RuntimeDefault".to_string(), ..SeccompProfile::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::validate;
    use crate::crd::{Autoscaling, MicroserviceSpec};

    fn spec() -> MicroserviceSpec {
        MicroserviceSpec { image: "".into(), port: 8080, replicas: None, autoscaling: None }
    }

    #[test]
    fn autoscaled_deployments_leave_replicas_to_the_hpa() {
        let profile = PlatformProfile::default();
        let mut ms = microservice("ghcr.io/example/todo-api:1.4.2");
        let fixed = validate(&ms.spec, &profile).unwrap();
        let replicas =
            |ms: &Microservice, c: &Contract| desired_deployment(ms, c, &profile).unwrap().spec.unwrap().replicas;
        assert_eq!(replicas(&ms, &fixed), Some(2));
        ms.spec.autoscaling =
            Some(Autoscaling { min_replicas: Some(2), max_replicas: 6, target_cpu_utilization_percentage: None });
        let contract = validate(&ms.spec, &profile).unwrap();
        assert_eq!(replicas(&ms, &contract), None, "an autoscaled Deployment's replicas are not applied");
        let Some(bounds) = contract.scaling.autoscaling() else { panic!("not autoscaled: {contract:?}") };
        let hpa = desired_hpa(&ms, &bounds, &profile).unwrap();
        let owners = hpa.metadata.owner_references.clone().unwrap();
        assert_eq!((owners[0].kind.as_str(), owners[0].controller), ("Microservice", Some(true)));
        assert_eq!(hpa.metadata.name.as_deref(), Some("todo-api"));
        let spec = hpa.spec.unwrap();
        assert_eq!(
            (spec.scale_target_ref.kind.as_str(), spec.scale_target_ref.name.as_str()),
            ("Deployment", "todo-api")
        );
        assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 6));
        let metric = spec.metrics.unwrap().remove(0);
        let target = metric.resource.unwrap();
        assert_eq!((target.name.as_str(), target.target.average_utilization), ("cpu", Some(80)));
    }

    fn microservice(image: &str) -> Microservice {
        let mut ms = Microservice::new("todo-api", MicroserviceSpec { image: image.into(), port: 8080, ..spec() });
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.uid = Some("0b7e1f3c-2d4a-4c55-9a8e-3f1d2c4b5a69".into());
        ms.metadata.generation = Some(3);
        ms
    }

    fn build(image: &str) -> (Deployment, Service) {
        let ms = microservice(image);
        let profile = PlatformProfile::default();
        let contract = validate(&ms.spec, &profile).unwrap();
        (desired_deployment(&ms, &contract, &profile).unwrap(), desired_service(&ms, &profile).unwrap())
    }

    #[test]
    fn children_are_controlled_by_the_microservice() {
        let (deployment, service) = build("ghcr.io/example/todo-api:1.4.2");
        for meta in [&deployment.metadata, &service.metadata] {
            let owners = meta.owner_references.as_ref().unwrap();
            assert_eq!(owners.len(), 1);
            assert_eq!(owners[0].kind, "Microservice");
            assert_eq!(owners[0].api_version, "platform.example.com/v1alpha1");
            assert_eq!(owners[0].uid, "0b7e1f3c-2d4a-4c55-9a8e-3f1d2c4b5a69");
            assert_eq!(owners[0].controller, Some(true));
            assert_eq!(owners[0].block_owner_deletion, Some(true));
            assert_eq!(meta.name.as_deref(), Some("todo-api"));
            assert_eq!(meta.namespace.as_deref(), Some("todo"));
        }
        let annotations = deployment.metadata.annotations.unwrap();
        assert_eq!(annotations.get(GENERATION_ANNOTATION).map(String::as_str), Some("3"));
    }

    #[test]
    fn missing_server_metadata_is_an_error_not_a_panic() {
        let profile = PlatformProfile::default();
        let mut ms = microservice("ghcr.io/example/todo-api:1.4.2");
        let contract = validate(&ms.spec, &profile).unwrap();
        ms.metadata.uid = None;
        assert_eq!(desired_service(&ms, &profile), Err(DesiredError::MissingMetadata("metadata.uid")));
        ms.metadata.uid = Some("u".into());
        ms.metadata.generation = None;
        assert_eq!(
            desired_deployment(&ms, &contract, &profile),
            Err(DesiredError::MissingMetadata("metadata.generation"))
        );
    }

    #[test]
    fn the_service_selects_exactly_the_deployment_pods() {
        let (deployment, service) = build("ghcr.io/example/todo-api:1.4.2");
        let spec = deployment.spec.unwrap();
        let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
        let service_selector = service.spec.unwrap().selector.unwrap();
        assert_eq!(spec.selector.match_labels.as_ref(), Some(&service_selector));
        for (key, value) in &service_selector {
            assert_eq!(pod_labels.get(key), Some(value), "pods carry selector label {key}");
        }
        assert_eq!(pod_labels.get(LABEL_VERSION).map(String::as_str), Some("1.4.2"));
    }

    #[test]
    fn a_digest_only_image_reports_the_digest_but_labels_no_version() {
        let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let (deployment, _) = build(&format!("ghcr.io/example/todo-api@{sha}"));
        let spec = deployment.spec.unwrap();
        assert!(!spec.template.metadata.unwrap().labels.unwrap().contains_key(LABEL_VERSION));
        let env = spec.template.spec.unwrap().containers.remove(0).env.unwrap();
        let attributes = env.iter().find(|e| e.name == "OTEL_RESOURCE_ATTRIBUTES").unwrap();
        assert!(attributes.value.as_deref().unwrap().contains(&format!("service.version={sha}")));
    }

    #[test]
    fn downward_api_variables_come_before_their_use() {
        let (deployment, _) = build("ghcr.io/example/todo-api:1.4.2");
        let env = deployment.spec.unwrap().template.spec.unwrap().containers.remove(0).env.unwrap();
        let position = |name: &str| env.iter().position(|e| e.name == name).unwrap();
        assert!(position(POD_NAME_ENV) < position("OTEL_RESOURCE_ATTRIBUTES"));
        assert!(position(NODE_NAME_ENV) < position("OTEL_RESOURCE_ATTRIBUTES"));
    }

    #[test]
    fn the_digest_changes_with_what_the_desired_state_sets_and_only_then() {
        let ms = microservice("ghcr.io/example/todo-api:1.4.2");
        let profile = PlatformProfile::default();
        let contract = validate(&ms.spec, &profile).unwrap();
        let digest = |d: &Deployment| d.metadata.annotations.as_ref().unwrap()[DESIRED_DIGEST_ANNOTATION].clone();
        let first = desired_deployment(&ms, &contract, &profile).unwrap();
        assert_eq!(digest(&first), digest(&desired_deployment(&ms, &contract, &profile).unwrap()), "stable");
        assert_eq!(digest(&first).len(), 16);
        // A profile without an exporter endpoint drops that env var: the desired state shrinks, the digest moves.
        let mut without = profile.clone();
        without.telemetry.endpoint = String::new();
        let smaller = desired_deployment(&ms, &contract, &without).unwrap();
        let env = smaller.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].env.clone().unwrap();
        assert!(env.iter().all(|e| e.name != "OTEL_EXPORTER_OTLP_ENDPOINT"), "{env:?}");
        assert_ne!(digest(&first), digest(&smaller));
        let service = desired_service(&ms, &profile).unwrap();
        assert!(service.metadata.annotations.unwrap().contains_key(DESIRED_DIGEST_ANNOTATION));
    }

    #[test]
    fn the_digest_is_fnv1a_64_of_the_json_without_it_so_it_stays_what_live_children_carry() {
        use std::io::Write;
        let fnv = |chunks: &[&[u8]]| {
            let mut h = Fnv1a64::default();
            chunks.iter().for_each(|c| h.write_all(c).unwrap());
            h.0
        };
        // The published test vectors of FNV-1a 64.
        assert_eq!(fnv(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(&[b"foo", b"bar"]), fnv(&[b"foobar"]), "however the writer chunks the bytes");

        let ms = microservice("ghcr.io/example/todo-api:1.4.2");
        let profile = PlatformProfile::default();
        let mut deployment = desired_deployment(&ms, &validate(&ms.spec, &profile).unwrap(), &profile).unwrap();
        let stamped = deployment.metadata.annotations.as_mut().unwrap().remove(DESIRED_DIGEST_ANNOTATION).unwrap();
        if deployment.metadata.annotations.as_ref().is_some_and(|a| a.is_empty()) {
            deployment.metadata.annotations = None;
        }
        let whole = serde_json::to_vec(&deployment).unwrap();
        assert_eq!(stamped, format!("{:016x}", fnv(&[&whole])));
    }
}
