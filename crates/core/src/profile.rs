//! The platform profile: the operator's configuration of what the platform allows and injects. Defaults describe
//! the Todo API; a YAML file may override any part (unknown keys are refused so typos do not pass silently).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::image::{ImageRefError, normalize_repository};

/// Bounds of `spec.replicas`, shared by the CRD schema and the contract.
pub const MIN_REPLICAS: i32 = 1;
pub const MAX_REPLICAS: i32 = 20;
/// The HorizontalPodAutoscaler's CPU target when `spec.autoscaling` names none (percent of the CPU request).
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;
/// Bounds of `spec.port`: the container listens unprivileged.
pub const MIN_PORT: i32 = 1024;
pub const MAX_PORT: i32 = 65535;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PlatformProfile {
    /// Repositories (without tag or digest) the operator runs images from.
    pub allowed_repositories: Vec<String>,
    /// Tags that may point at different images over time and are therefore refused.
    pub mutable_tags: Vec<String>,
    /// Container ports the platform keeps for itself.
    pub reserved_ports: Vec<i32>,
    /// Replicas when the Microservice does not ask for a number.
    pub default_replicas: i32,
    /// Seconds a rollout may make no progress before it is reported as failed.
    pub progress_deadline_seconds: i32,
    /// Value of the `app.kubernetes.io/part-of` label.
    pub part_of: String,
    pub health: HealthEndpoints,
    pub telemetry: Telemetry,
    pub resources: ContainerResources,
}

impl Default for PlatformProfile {
    fn default() -> Self {
        PlatformProfile {
            allowed_repositories: vec!["ghcr.io/example/todo-api".to_string()],
            mutable_tags: vec!["latest".to_string()],
            // 9090: the port the platform scrapes metrics on; an application must not claim it.
            reserved_ports: vec![9090],
            default_replicas: 2,
            progress_deadline_seconds: 120,
            part_of: "todo-platform".to_string(),
            health: HealthEndpoints::default(),
            telemetry: Telemetry::default(),
            resources: ContainerResources::default(),
        }
    }
}

/// HTTP probes of the application, all on its `http` container port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HealthEndpoints {
    pub liveness: HttpProbe,
    pub readiness: HttpProbe,
    /// Guards liveness while the application starts, so a slow start is not killed.
    pub startup: HttpProbe,
}

impl Default for HealthEndpoints {
    fn default() -> Self {
        HealthEndpoints {
            liveness: HttpProbe { path: "/livez".into(), ..HttpProbe::default() },
            readiness: HttpProbe { path: "/readyz".into(), period_seconds: 5, ..HttpProbe::default() },
            startup: HttpProbe {
                path: "/livez".into(),
                period_seconds: 2,
                failure_threshold: 30,
                ..HttpProbe::default()
            },
        }
    }
}

/// Timings default to the API server's own probe defaults, so the stored Deployment equals the desired one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HttpProbe {
    pub path: String,
    pub period_seconds: i32,
    pub timeout_seconds: i32,
    pub failure_threshold: i32,
}

impl Default for HttpProbe {
    fn default() -> Self {
        HttpProbe { path: "/".into(), period_seconds: 10, timeout_seconds: 1, failure_threshold: 3 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Telemetry {
    /// OTLP collector endpoint (OTEL_EXPORTER_OTLP_ENDPOINT).
    pub endpoint: String,
    pub protocol: OtlpProtocol,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry { endpoint: "http://otel-collector.observability.svc:4317".into(), protocol: OtlpProtocol::Grpc }
    }
}

/// Values of OTEL_EXPORTER_OTLP_PROTOCOL as the OpenTelemetry SDKs spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "http/json")]
    HttpJson,
}

impl OtlpProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::HttpJson => "http/json",
        }
    }
}

/// Quantities in the API server's canonical form (`500m`, `128Mi`), so the stored values equal the desired ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ContainerResources {
    pub requests: CpuMemory,
    pub limits: CpuMemory,
}

impl Default for ContainerResources {
    fn default() -> Self {
        ContainerResources {
            requests: CpuMemory { cpu: "100m".into(), memory: "128Mi".into() },
            limits: CpuMemory { cpu: "500m".into(), memory: "256Mi".into() },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuMemory {
    pub cpu: String,
    pub memory: String,
}

#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("cannot read the platform profile {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("the platform profile is not valid YAML for this operator: {0}")]
    Parse(#[from] serde_saphyr::Error),
    #[error("allowedRepositories entry `{entry}` is not a repository name without tag or digest: {source}")]
    Repository { entry: String, source: ImageRefError },
    #[error("allowedRepositories is empty: no Microservice could ever be accepted")]
    NoRepositories,
    #[error("defaultReplicas {0} is outside {MIN_REPLICAS}..={MAX_REPLICAS}")]
    DefaultReplicas(i32),
    #[error("{field} must be a positive number of seconds or attempts, got {value}")]
    NotPositive { field: &'static str, value: i32 },
    #[error("probe path `{0}` must start with `/`")]
    ProbePath(String),
    #[error("partOf `{0}` is not a valid label value (at most 63 alphanumerics, `-`, `_`, `.`; alphanumeric ends)")]
    PartOf(String),
}

impl PlatformProfile {
    /// Reads a profile from YAML; absent keys keep their defaults.
    pub fn from_yaml(text: &str) -> Result<Self, ProfileError> {
        let profile: PlatformProfile = serde_saphyr::from_str(text)?;
        profile.validate()?;
        Ok(profile)
    }

    pub fn from_file(path: &std::path::Path) -> Result<Self, ProfileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ProfileError::Read { path: path.display().to_string(), source })?;
        Self::from_yaml(&text)
    }

    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.allowed_repositories.is_empty() {
            return Err(ProfileError::NoRepositories);
        }
        for entry in &self.allowed_repositories {
            normalize_repository(entry).map_err(|source| ProfileError::Repository { entry: entry.clone(), source })?;
        }
        if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&self.default_replicas) {
            return Err(ProfileError::DefaultReplicas(self.default_replicas));
        }
        let positive = [
            ("progressDeadlineSeconds", self.progress_deadline_seconds),
            ("health.liveness.periodSeconds", self.health.liveness.period_seconds),
            ("health.liveness.timeoutSeconds", self.health.liveness.timeout_seconds),
            ("health.liveness.failureThreshold", self.health.liveness.failure_threshold),
            ("health.readiness.periodSeconds", self.health.readiness.period_seconds),
            ("health.readiness.timeoutSeconds", self.health.readiness.timeout_seconds),
            ("health.readiness.failureThreshold", self.health.readiness.failure_threshold),
            ("health.startup.periodSeconds", self.health.startup.period_seconds),
            ("health.startup.timeoutSeconds", self.health.startup.timeout_seconds),
            ("health.startup.failureThreshold", self.health.startup.failure_threshold),
        ];
        if let Some((field, value)) = positive.into_iter().find(|(_, value)| *value <= 0) {
            return Err(ProfileError::NotPositive { field, value });
        }
        for probe in [&self.health.liveness, &self.health.readiness, &self.health.startup] {
            if !probe.path.starts_with('/') {
                return Err(ProfileError::ProbePath(probe.path.clone()));
            }
        }
        if !is_label_value(&self.part_of) {
            return Err(ProfileError::PartOf(self.part_of.clone()));
        }
        Ok(())
    }

    /// Allowed repositories in normalized form; entries `validate` would refuse are skipped.
    pub fn normalized_repositories(&self) -> Vec<String> {
        self.allowed_repositories.iter().filter_map(|r| normalize_repository(r).ok()).collect()
    }
}

/// A Kubernetes label value: empty, or at most 63 characters of `[A-Za-z0-9_.-]` with alphanumeric ends.
pub fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_describe_the_todo_api_platform() {
        let profile = PlatformProfile::default();
        assert_eq!(profile.allowed_repositories, ["ghcr.io/example/todo-api"]);
        assert_eq!(profile.health.liveness.path, "/livez");
        assert_eq!(profile.health.readiness.path, "/readyz");
        assert_eq!(profile.telemetry.endpoint, "http://otel-collector.observability.svc:4317");
        assert_eq!(profile.telemetry.protocol.as_str(), "grpc");
        assert_eq!(profile.default_replicas, 2);
        profile.validate().unwrap();
    }

    #[test]
    fn yaml_overrides_only_what_it_names() {
        let profile = PlatformProfile::from_yaml(
            "allowedRepositories: [registry.internal:5000/todo-api]\ntelemetry:\n  protocol: http/protobuf\n",
        )
        .unwrap();
        assert_eq!(profile.allowed_repositories, ["registry.internal:5000/todo-api"]);
        assert_eq!(profile.telemetry.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(profile.telemetry.endpoint, Telemetry::default().endpoint);
        assert_eq!(profile.health, HealthEndpoints::default());
    }

    #[test]
    fn yaml_with_unknown_or_wrong_values_is_refused() {
        assert!(matches!(PlatformProfile::from_yaml("allowedRepos: [x]\n"), Err(ProfileError::Parse(_))));
        assert!(matches!(
            PlatformProfile::from_yaml("allowedRepositories: [\"ghcr.io/x:1\"]\n"),
            Err(ProfileError::Repository { .. })
        ));
        assert!(matches!(PlatformProfile::from_yaml("allowedRepositories: []\n"), Err(ProfileError::NoRepositories)));
        assert!(matches!(PlatformProfile::from_yaml("defaultReplicas: 0\n"), Err(ProfileError::DefaultReplicas(0))));
        assert!(matches!(
            PlatformProfile::from_yaml("progressDeadlineSeconds: 0\n"),
            Err(ProfileError::NotPositive { field: "progressDeadlineSeconds", .. })
        ));
        assert!(matches!(
            PlatformProfile::from_yaml("health:\n  readiness:\n    path: readyz\n"),
            Err(ProfileError::ProbePath(_))
        ));
        assert!(matches!(PlatformProfile::from_yaml("partOf: \"-bad\"\n"), Err(ProfileError::PartOf(_))));
    }

    #[test]
    fn the_printed_default_profile_reads_back_as_the_default() {
        let yaml = serde_saphyr::to_string(&PlatformProfile::default()).unwrap();
        assert_eq!(PlatformProfile::from_yaml(&yaml).unwrap(), PlatformProfile::default());
    }

    #[test]
    fn a_missing_file_names_the_path() {
        let error = PlatformProfile::from_file(std::path::Path::new("/nonexistent/profile.yaml")).unwrap_err();
        assert!(error.to_string().contains("/nonexistent/profile.yaml"), "{error}");
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "todo-platform", "1.4.2", "v1_2", &"a".repeat(63)] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["-a", "a-", "a b", "a/b", "sha256:abc", &"a".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
