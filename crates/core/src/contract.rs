//! The platform contract: which Microservice specs the platform runs, decided before anything is deployed.
//! Every refusal names the field, a stable CamelCase reason (for conditions and Events) and what to write instead.

use thiserror::Error;

use crate::crd::{Autoscaling, Microservice, MicroserviceSpec};
use crate::image::ImageReference;
use crate::profile::{DEFAULT_CPU_UTILIZATION, MAX_PORT, MAX_REPLICAS, MIN_PORT, MIN_REPLICAS, PlatformProfile};
pub use crate::reason::Reason;
use crate::wording;

/// A spec the platform accepted, with the values the desired state is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contract {
    /// The image exactly as the spec wrote it (what the container runs).
    pub image: String,
    pub reference: ImageReference,
    /// What the workload reports as `service.version`: the tag, else the digest.
    pub version: String,
    pub port: i32,
    pub scaling: Scaling,
}

/// Who decides the number of pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    /// The operator: the Deployment's `spec.replicas` is applied as this.
    Fixed(i32),
    /// A HorizontalPodAutoscaler within these bounds: the operator leaves the Deployment's `spec.replicas` alone.
    Autoscaled(AutoscalingBounds),
}

/// `spec.autoscaling` with its defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoscalingBounds {
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub target_cpu_utilization_percentage: i32,
}

impl Scaling {
    /// The fixed count, or the autoscaler's minimum (what a last accepted contract records as `replicas`).
    pub fn floor(self) -> i32 {
        match self {
            Scaling::Fixed(n) => n,
            Scaling::Autoscaled(b) => b.min_replicas,
        }
    }

    pub fn autoscaling(self) -> Option<AutoscalingBounds> {
        match self {
            Scaling::Fixed(_) => None,
            Scaling::Autoscaled(b) => Some(b),
        }
    }
}

impl AutoscalingBounds {
    /// The spec's form, defaults written out (what a last accepted contract records).
    pub fn to_spec(self) -> Autoscaling {
        Autoscaling {
            min_replicas: Some(self.min_replicas),
            max_replicas: self.max_replicas,
            target_cpu_utilization_percentage: Some(self.target_cpu_utilization_percentage),
        }
    }
}

/// One broken rule. `message` says what is wrong and what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct Violation {
    pub reason: Reason,
    /// Path of the offending field, e.g. `spec.image`.
    pub field: &'static str,
    pub message: String,
}

/// Joins violations into one condition message (they are reported together so a user fixes them in one edit).
pub fn summarize(violations: &[Violation]) -> String {
    violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Checks a spec against the platform profile. All violations are reported, not just the first.
pub fn validate(spec: &MicroserviceSpec, profile: &PlatformProfile) -> Result<Contract, Vec<Violation>> {
    let mut violations = Vec::new();
    let image = check_image(&spec.image, profile).map_err(|v| violations.extend(v)).ok();
    if !(MIN_PORT..=MAX_PORT).contains(&spec.port) {
        violations.push(Violation {
            reason: Reason::PortOutOfRange,
            field: "spec.port",
            message: wording::render(
                wording::PORT_OUT_OF_RANGE,
                &[("port", &spec.port.to_string()), ("min", &MIN_PORT.to_string()), ("max", &MAX_PORT.to_string())],
            ),
        });
    } else if profile.reserved_ports.contains(&spec.port) {
        violations.push(Violation {
            reason: Reason::PortReserved,
            field: "spec.port",
            message: wording::render(
                wording::PORT_RESERVED,
                &[
                    ("port", &spec.port.to_string()),
                    ("reserved", &join_ports(&profile.reserved_ports)),
                    ("suggestion", &free_port_suggestion(profile).to_string()),
                ],
            ),
        });
    }
    let scaling = match &spec.autoscaling {
        Some(autoscaling) => check_autoscaling(spec, autoscaling, &mut violations),
        None => Scaling::Fixed(spec.replicas.unwrap_or(profile.default_replicas)),
    };
    if let Scaling::Fixed(replicas) = scaling
        && !(MIN_REPLICAS..=MAX_REPLICAS).contains(&replicas)
    {
        violations.push(Violation {
            reason: Reason::ReplicasOutOfRange,
            field: "spec.replicas",
            message: wording::render(
                wording::REPLICAS_OUT_OF_RANGE,
                &[
                    ("replicas", &replicas.to_string()),
                    ("min", &MIN_REPLICAS.to_string()),
                    ("max", &MAX_REPLICAS.to_string()),
                    ("default", &profile.default_replicas.to_string()),
                ],
            ),
        });
    }
    match image {
        Some((image, reference, version)) if violations.is_empty() => {
            Ok(Contract { image, reference, version, port: spec.port, scaling })
        }
        _ => Err(violations),
    }
}

/// The autoscaler's bounds with defaults; refusals go to `violations` (the CRD refuses the same, so these speak
/// only when the CRD's schema was bypassed or is older).
fn check_autoscaling(spec: &MicroserviceSpec, autoscaling: &Autoscaling, violations: &mut Vec<Violation>) -> Scaling {
    let bounds = AutoscalingBounds {
        min_replicas: autoscaling.min_replicas.unwrap_or(MIN_REPLICAS),
        max_replicas: autoscaling.max_replicas,
        target_cpu_utilization_percentage: autoscaling
            .target_cpu_utilization_percentage
            .unwrap_or(DEFAULT_CPU_UTILIZATION),
    };
    if spec.replicas.is_some() {
        violations.push(Violation {
            reason: Reason::InvalidAutoscaling,
            field: "spec.autoscaling",
            message: wording::SCALING_EXCLUSIVE.to_string(),
        });
    }
    let in_range = |n: i32| (MIN_REPLICAS..=MAX_REPLICAS).contains(&n);
    if !in_range(bounds.min_replicas) || !in_range(bounds.max_replicas) || bounds.min_replicas > bounds.max_replicas {
        violations.push(Violation {
            reason: Reason::InvalidAutoscaling,
            field: "spec.autoscaling",
            message: wording::render(
                wording::AUTOSCALING_OUT_OF_RANGE,
                &[
                    ("min", &bounds.min_replicas.to_string()),
                    ("max", &bounds.max_replicas.to_string()),
                    ("low", &MIN_REPLICAS.to_string()),
                    ("high", &MAX_REPLICAS.to_string()),
                ],
            ),
        });
    }
    if !(1..=100).contains(&bounds.target_cpu_utilization_percentage) {
        violations.push(Violation {
            reason: Reason::InvalidAutoscaling,
            field: "spec.autoscaling.targetCPUUtilizationPercentage",
            message: wording::render(
                wording::CPU_TARGET_OUT_OF_RANGE,
                &[
                    ("target", &bounds.target_cpu_utilization_percentage.to_string()),
                    ("default", &DEFAULT_CPU_UTILIZATION.to_string()),
                ],
            ),
        });
    }
    Scaling::Autoscaled(bounds)
}

/// [`validate`] plus the rules on the object's name: the Service is named like the Microservice, and Service
/// names and label values are DNS-1035 labels (at most 63 characters, starting with a letter).
pub fn validate_object(ms: &Microservice, profile: &PlatformProfile) -> Result<Contract, Vec<Violation>> {
    let name = ms.metadata.name.as_deref().unwrap_or_default();
    let name_violation = (!is_dns1035_label(name)).then(|| Violation {
        reason: Reason::InvalidName,
        field: "metadata.name",
        message: wording::render(wording::INVALID_NAME, &[("name", name)]),
    });
    match (validate(&ms.spec, profile), name_violation) {
        (Ok(contract), None) => Ok(contract),
        (Ok(_), Some(v)) => Err(vec![v]),
        (Err(mut violations), v) => {
            violations.extend(v);
            Err(violations)
        }
    }
}

fn check_image(image: &str, profile: &PlatformProfile) -> Result<(String, ImageReference, String), Vec<Violation>> {
    let example = example_image(profile, None);
    let reference = ImageReference::parse(image).map_err(|e| {
        vec![Violation {
            reason: Reason::InvalidImageReference,
            field: "spec.image",
            message: wording::render(
                wording::INVALID_IMAGE_REFERENCE,
                &[("image", image), ("error", &e.to_string()), ("example", &example)],
            ),
        }]
    })?;
    let mut violations = Vec::new();
    let repository = reference.repository();
    let allowed = profile.normalized_repositories();
    if !allowed.contains(&repository) {
        violations.push(Violation {
            reason: Reason::ImageNotAllowed,
            field: "spec.image",
            message: wording::render(
                wording::IMAGE_NOT_ALLOWED,
                &[
                    ("repository", &repository),
                    ("allowed", &profile.allowed_repositories.join(", ")),
                    (
                        "example",
                        &example_image(
                            profile,
                            reference.tag.as_deref().filter(|t| !profile.mutable_tags.iter().any(|m| m == t)),
                        ),
                    ),
                ],
            ),
        });
    }
    let written = reference_name(&reference);
    match (&reference.tag, &reference.digest) {
        (None, None) => violations.push(Violation {
            reason: Reason::MissingTag,
            field: "spec.image",
            message: wording::render(wording::MISSING_TAG, &[("image", image), ("written", &written)]),
        }),
        (Some(tag), None) if profile.mutable_tags.iter().any(|m| m == tag) => violations.push(Violation {
            reason: Reason::MutableTag,
            field: "spec.image",
            message: wording::render(wording::MUTABLE_TAG, &[("tag", tag), ("written", &written)]),
        }),
        // A digest pins the content even next to a mutable tag: the runtime pulls by digest.
        _ => {}
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    let version = reference.version().unwrap_or_default().to_string();
    Ok((image.to_string(), reference, version))
}

/// The reference without tag and digest, as the user wrote it.
fn reference_name(reference: &ImageReference) -> String {
    match &reference.registry {
        Some(registry) => format!("{registry}/{}", reference.path),
        None => reference.path.clone(),
    }
}

/// The repository the examples name (the first allowed one).
pub(crate) fn example_repository(profile: &PlatformProfile) -> &str {
    profile.allowed_repositories.first().map_or("ghcr.io/example/todo-api", String::as_str)
}

fn example_image(profile: &PlatformProfile, tag: Option<&str>) -> String {
    format!("{}:{}", example_repository(profile), tag.unwrap_or(wording::EXAMPLE_TAG))
}

pub(crate) fn join_ports(ports: &[i32]) -> String {
    ports.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

pub(crate) fn free_port_suggestion(profile: &PlatformProfile) -> i32 {
    (8080..=MAX_PORT).find(|p| !profile.reserved_ports.contains(p)).unwrap_or(MIN_PORT)
}

fn is_dns1035_label(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn spec(image: &str, port: i32, replicas: Option<i32>) -> MicroserviceSpec {
        MicroserviceSpec { image: image.into(), port, replicas, autoscaling: None }
    }

    fn autoscaled(min: Option<i32>, max: i32, cpu: Option<i32>) -> MicroserviceSpec {
        let autoscaling = Autoscaling { min_replicas: min, max_replicas: max, target_cpu_utilization_percentage: cpu };
        MicroserviceSpec { autoscaling: Some(autoscaling), ..spec("ghcr.io/example/todo-api:1.4.2", 8080, None) }
    }

    #[test]
    fn autoscaling_replaces_the_fixed_count_with_defaulted_bounds() {
        let profile = PlatformProfile::default();
        let contract = validate(&autoscaled(None, 5, None), &profile).unwrap();
        let bounds = AutoscalingBounds { min_replicas: 1, max_replicas: 5, target_cpu_utilization_percentage: 80 };
        assert_eq!(contract.scaling, Scaling::Autoscaled(bounds));
        assert_eq!(contract.scaling.floor(), 1);
        let contract = validate(&autoscaled(Some(3), 3, Some(50)), &profile).unwrap();
        assert_eq!(
            contract.scaling.autoscaling().map(|b| (b.min_replicas, b.target_cpu_utilization_percentage)),
            Some((3, 50))
        );
    }

    #[test]
    fn autoscaling_with_replicas_or_bad_bounds_is_refused() {
        let profile = PlatformProfile::default();
        let both = MicroserviceSpec { replicas: Some(2), ..autoscaled(None, 5, None) };
        let violations = validate(&both, &profile).unwrap_err();
        assert_eq!(violations.iter().map(|v| v.reason).collect::<Vec<_>>(), [Reason::InvalidAutoscaling]);
        assert!(violations[0].message.contains("remove spec.replicas"), "{}", violations[0].message);
        for bad in [
            autoscaled(Some(4), 3, None),
            autoscaled(Some(0), 3, None),
            autoscaled(None, 21, None),
            autoscaled(None, 3, Some(0)),
        ] {
            assert_eq!(reasons(validate(&bad, &profile)), [Reason::InvalidAutoscaling], "{bad:?}");
        }
    }

    fn reasons(result: Result<Contract, Vec<Violation>>) -> Vec<Reason> {
        match result {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(v) => v.into_iter().map(|v| v.reason).collect(),
        }
    }

    #[test]
    fn accepts_pinned_images_of_allowed_repositories() {
        let profile = PlatformProfile {
            allowed_repositories: vec![
                "ghcr.io/example/todo-api".into(),
                "registry.internal:5000/team/apps/todo-api".into(),
                "localhost:5000/todo-api".into(),
                "todo-api".into(),
            ],
            ..PlatformProfile::default()
        };
        let cases = [
            ("ghcr.io/example/todo-api:1.4.2", "1.4.2"),
            ("ghcr.io/example/todo-api:v2.0.0-rc.1", "v2.0.0-rc.1"),
            (&format!("ghcr.io/example/todo-api@{SHA}"), SHA),
            (&format!("ghcr.io/example/todo-api:1.4.2@{SHA}"), "1.4.2"),
            (&format!("ghcr.io/example/todo-api:latest@{SHA}"), "latest"),
            ("registry.internal:5000/team/apps/todo-api:2024.12.01", "2024.12.01"),
            ("localhost:5000/todo-api:dev-abc123", "dev-abc123"),
            ("todo-api:1", "1"),
            ("docker.io/library/todo-api:1", "1"),
            ("index.docker.io/library/todo-api:1", "1"),
        ];
        for (image, version) in cases {
            let contract = validate(&spec(image, 8080, None), &profile).unwrap_or_else(|v| panic!("{image}: {v:?}"));
            assert_eq!(contract.image, image);
            assert_eq!(contract.version, version, "{image}");
            assert_eq!(contract.port, 8080);
            assert_eq!(contract.scaling, Scaling::Fixed(2), "the profile default applies when replicas is absent");
        }
    }

    #[test]
    fn every_violation_has_its_reason() {
        let profile = PlatformProfile::default();
        let ok = "ghcr.io/example/todo-api:1.4.2";
        let cases: Vec<(MicroserviceSpec, Vec<Reason>)> = vec![
            (spec("ghcr.io/example/todo-api", 8080, None), vec![Reason::MissingTag]),
            (spec("ghcr.io/example/todo-api:latest", 8080, None), vec![Reason::MutableTag]),
            (spec("ghcr.io/other/todo-api:1.4.2", 8080, None), vec![Reason::ImageNotAllowed]),
            (spec("docker.io/example/todo-api:1.4.2", 8080, None), vec![Reason::ImageNotAllowed]),
            (spec("example/todo-api:1.4.2", 8080, None), vec![Reason::ImageNotAllowed]),
            (spec("ghcr.io/example/todo-api-fork:1.4.2", 8080, None), vec![Reason::ImageNotAllowed]),
            (spec("ghcr.io/example/todo-api/sub:1.4.2", 8080, None), vec![Reason::ImageNotAllowed]),
            (spec("nginx:latest", 8080, None), vec![Reason::ImageNotAllowed, Reason::MutableTag]),
            (spec("nginx", 8080, None), vec![Reason::ImageNotAllowed, Reason::MissingTag]),
            (spec("ghcr.io/Example/todo-api:1", 8080, None), vec![Reason::InvalidImageReference]),
            (spec("", 8080, None), vec![Reason::InvalidImageReference]),
            (spec("ghcr.io/example/todo-api@sha256:short", 8080, None), vec![Reason::InvalidImageReference]),
            (spec(ok, 9090, None), vec![Reason::PortReserved]),
            (spec(ok, 80, None), vec![Reason::PortOutOfRange]),
            (spec(ok, 1023, None), vec![Reason::PortOutOfRange]),
            (spec(ok, 65536, None), vec![Reason::PortOutOfRange]),
            (spec(ok, 8080, Some(0)), vec![Reason::ReplicasOutOfRange]),
            (spec(ok, 8080, Some(21)), vec![Reason::ReplicasOutOfRange]),
            (spec(ok, 8080, Some(-1)), vec![Reason::ReplicasOutOfRange]),
            (
                spec("ghcr.io/example/todo-api:latest", 9090, Some(50)),
                vec![Reason::MutableTag, Reason::PortReserved, Reason::ReplicasOutOfRange],
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(reasons(validate(&spec, &profile)), expected, "{spec:?}");
        }
    }

    #[test]
    fn boundaries_are_inclusive() {
        let profile = PlatformProfile::default();
        let ok = "ghcr.io/example/todo-api:1.4.2";
        for (port, replicas) in [(1024, Some(1)), (65535, Some(20)), (8080, Some(2))] {
            assert!(validate(&spec(ok, port, replicas), &profile).is_ok(), "{port} {replicas:?}");
        }
    }

    #[test]
    fn messages_say_what_to_write_instead() {
        let profile = PlatformProfile::default();
        let message = |s: MicroserviceSpec| validate(&s, &profile).unwrap_err().remove(0).message;
        let not_allowed = message(spec("ghcr.io/other/todo-api:1.4.2", 8080, None));
        assert!(not_allowed.contains("`ghcr.io/example/todo-api:1.4.2`"), "{not_allowed}");
        assert!(not_allowed.contains("ghcr.io/other/todo-api"), "{not_allowed}");
        let mutable = message(spec("ghcr.io/example/todo-api:latest", 8080, None));
        assert!(mutable.contains("`latest`") && mutable.contains("ghcr.io/example/todo-api:1.4.2"), "{mutable}");
        let missing = message(spec("ghcr.io/example/todo-api", 8080, None));
        assert!(missing.contains("ghcr.io/example/todo-api@sha256:"), "{missing}");
        let reserved = message(spec("ghcr.io/example/todo-api:1", 9090, None));
        assert!(reserved.contains("9090") && reserved.contains("e.g. 8080"), "{reserved}");
        let invalid = message(spec("ghcr.io/example/Todo:1", 8080, None));
        assert!(invalid.contains("lowercase") && invalid.contains("ghcr.io/example/todo-api:1.4.2"), "{invalid}");
    }

    #[test]
    fn every_violation_reason_is_a_refusal() {
        let profile = PlatformProfile::default();
        let violations = validate(&spec("nginx:latest", 80, Some(0)), &profile).unwrap_err();
        assert!(violations.iter().all(|v| v.reason.is_refusal()), "{violations:?}");
    }

    #[test]
    fn object_names_must_fit_a_service() {
        let profile = PlatformProfile::default();
        let object = |name: &str| {
            let mut ms = Microservice::new(name, spec("ghcr.io/example/todo-api:1", 8080, None));
            ms.metadata.namespace = Some("todo".into());
            ms
        };
        assert!(validate_object(&object("todo-api"), &profile).is_ok());
        for bad in ["1api", "todo.api", "todo-", &"a".repeat(64)] {
            assert_eq!(reasons(validate_object(&object(bad), &profile)), [Reason::InvalidName], "{bad}");
        }
        let mut both = object("todo.api");
        both.spec.port = 80;
        assert_eq!(reasons(validate_object(&both, &profile)), [Reason::PortOutOfRange, Reason::InvalidName]);
    }

    #[test]
    fn summary_lists_every_violation() {
        let violations = validate(&spec("nginx", 9090, None), &PlatformProfile::default()).unwrap_err();
        let summary = summarize(&violations);
        assert_eq!(summary.matches("spec.").count(), 3, "{summary}");
    }
}
