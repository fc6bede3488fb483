//! `microservice-operator run`'s flags ([`RunArgs`]), and resolving them, the platform profile file and the pod's
//! environment into the operator's configuration. Pure apart from [`PodEnvironment::from_process`], so every rule is unit-tested.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use crate::backoff::BackoffPolicy;
use crate::controller::Config;
use crate::telemetry::LogFormat;
use microservice_core::image::normalize_repository;
use microservice_core::profile::{PlatformProfile, ProfileError};

#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Run the operator: reconcile Microservices into Deployments and Services",
    long_about = "Run the operator: reconcile Microservices into Deployments and Services.\n\n\
        Connects in-cluster (service account) or through a kubeconfig (--kubeconfig, else KUBECONFIG, else \
        ~/.kube/config). Every flag can also be set through the environment variable shown with it; a flag on the \
        command line wins over the variable, and both win over the profile file (--config).",
    after_help = "Logging: RUST_LOG sets the filter (default `info`, e.g. RUST_LOG=info,microservice_operator=debug).\n\
        Tracing: with OTEL_EXPORTER_OTLP_ENDPOINT set (e.g. http://otel-collector:4317), reconcile spans are \
        exported over OTLP/gRPC.\n\
        Endpoints on --metrics-bind-address: /metrics (Prometheus), /healthz (liveness), /readyz (readiness).\n\
        Exit codes: 0 after SIGTERM/SIGINT; 1 when the API server is unreachable, the Lease was lost or shutdown \
        overran --shutdown-timeout; 2 for a bad flag, profile or kubeconfig."
)]
pub struct RunArgs {
    /// Watch Microservices (and their Deployments and Services) in this namespace.
    #[arg(long, short = 'n', env = "WATCH_NAMESPACE", default_value = "todo", value_name = "NAMESPACE")]
    pub namespace: String,

    /// Watch every namespace instead of --namespace (needs cluster-wide RBAC).
    #[arg(long, env = "OPERATOR_ALL_NAMESPACES", conflicts_with = "namespace")]
    pub all_namespaces: bool,

    /// Only reconcile Microservices matching this label selector (to shard them across operator deployments).
    #[arg(long, short = 'l', env = "OPERATOR_SELECTOR", value_name = "SELECTOR")]
    pub selector: Option<String>,

    /// Re-check every Microservice this often even without changes (e.g. 30s, 5m, 1h; at least 10s).
    #[arg(long, env = "OPERATOR_RESYNC_INTERVAL", default_value = "5m", value_parser = parse_resync_interval, value_name = "DURATION")]
    pub resync_interval: Duration,

    /// Microservices reconciled at once (one object is never reconciled twice at once).
    #[arg(long, env = "OPERATOR_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    pub concurrency: u16,

    /// The platform profile (YAML; see `microservice-operator profile`): allowed repositories, probes, resources.
    #[arg(long, env = "OPERATOR_CONFIG", value_name = "PROFILE.yaml")]
    pub config: Option<PathBuf>,

    /// Image repositories Microservices may run, comma-separated; replaces the profile's allowedRepositories.
    #[arg(long, env = "OPERATOR_ALLOWED_REPOSITORIES", value_delimiter = ',', value_name = "REPO,...")]
    pub allowed_repositories: Vec<String>,

    /// Where /metrics, /healthz and /readyz are served (port 0 picks a free port, logged at start).
    #[arg(long, env = "OPERATOR_METRICS_BIND_ADDRESS", default_value = "0.0.0.0:8080", value_name = "ADDR:PORT")]
    pub metrics_bind_address: SocketAddr,

    /// Log line format [default: text on a terminal, json otherwise].
    #[arg(long, env = "OPERATOR_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Kubeconfig file (default: in-cluster config when in a pod, else KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of its current-context.
    #[arg(long, env = "OPERATOR_CONTEXT", value_name = "CONTEXT")]
    pub context: Option<String>,

    /// Elect one leader among the replicas through a Lease; only the leader writes. `--leader-elect=false` for a
    /// single replica.
    #[arg(long, env = "OPERATOR_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub leader_elect: bool,

    /// Namespace of the Lease [default: the pod's namespace (POD_NAMESPACE or the service account's), else
    /// --namespace, else the kubeconfig's namespace].
    #[arg(long, env = "OPERATOR_LEADER_ELECTION_NAMESPACE", value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the Lease; replicas with the same name and namespace elect one leader.
    #[arg(long, env = "OPERATOR_LEADER_ELECTION_ID", default_value = "microservice-operator", value_name = "NAME")]
    pub leader_election_id: String,

    /// How long a Lease stays valid without renewal: a standby takes over at most this long after the leader died.
    #[arg(long, env = "OPERATOR_LEADER_ELECTION_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub leader_election_lease_duration: Duration,

    /// The leader renews the Lease when this long has passed since the last renewal.
    #[arg(long, env = "OPERATOR_LEADER_ELECTION_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub leader_election_renew_deadline: Duration,

    /// After SIGTERM/SIGINT, how long in-flight reconciles may take before the process exits anyway.
    #[arg(long, env = "OPERATOR_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub shutdown_timeout: Duration,
}

/// Below this, a resync re-reconciles every Microservice in a loop (0s hot-loops) and floods the API server.
pub const MIN_RESYNC_INTERVAL: Duration = Duration::from_secs(10);

/// `--resync-interval`: a duration as people write it, no shorter than [`MIN_RESYNC_INTERVAL`].
fn parse_resync_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if interval < MIN_RESYNC_INTERVAL {
        return Err(format!(
            "must be at least {} (a shorter interval re-reconciles every Microservice in a loop)",
            humantime::format_duration(MIN_RESYNC_INTERVAL)
        ));
    }
    Ok(interval)
}

/// Where the service-account token mount keeps the pod's namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

#[derive(Debug, Error)]
pub enum SettingsError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("--allowed-repositories entry `{entry}` is not a repository name without tag or digest: {reason}")]
    Repository { entry: String, reason: String },
    #[error(
        "--leader-election-renew-deadline ({renew}s) must be shorter than --leader-election-lease-duration \
         ({lease}s), both whole seconds of at least 1"
    )]
    LeaseTimings { lease: u64, renew: u64 },
    #[error("--leader-election-id `{0}` is not a valid Lease name (lowercase alphanumerics, `-` and `.`)")]
    LeaseName(String),
}

/// What the process learns about itself from its pod (all absent outside a cluster).
#[derive(Debug, Clone, Default)]
pub struct PodEnvironment {
    /// POD_NAME (downward API).
    pub pod_name: Option<String>,
    /// POD_NAMESPACE (downward API), else the service-account namespace file.
    pub pod_namespace: Option<String>,
    pub hostname: Option<String>,
}

impl PodEnvironment {
    pub fn from_process() -> Self {
        let non_empty = |v: String| {
            let v = v.trim().to_string();
            (!v.is_empty()).then_some(v)
        };
        let var = |name: &str| std::env::var(name).ok().and_then(non_empty);
        let file = |path: &str| std::fs::read_to_string(path).ok().and_then(non_empty);
        PodEnvironment {
            pod_name: var("POD_NAME"),
            pod_namespace: var("POD_NAMESPACE").or_else(|| file(SERVICE_ACCOUNT_NAMESPACE_FILE)),
            hostname: var("HOSTNAME").or_else(|| file("/proc/sys/kernel/hostname")).or_else(|| file("/etc/hostname")),
        }
    }
}

/// Leader election as configured; `None` in [`Settings`] when `--leader-elect=false`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// The Lease's namespace; `None` until the kubeconfig's default namespace is known (see [`Settings::resolve`]).
    pub namespace: Option<String>,
    pub lease_name: String,
    /// This replica's holderIdentity: unique even for two processes on one host.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    pub bind: SocketAddr,
    pub election: Option<Election>,
    pub log_format: LogFormat,
    pub shutdown_timeout: Duration,
}

impl Settings {
    /// Flags over the profile file over the defaults. The Lease namespace falls back to the kubeconfig's default
    /// namespace only once that is known: call [`Settings::resolve`] after loading it.
    pub fn from_args(args: &RunArgs, env: &PodEnvironment, is_terminal: bool) -> Result<Settings, SettingsError> {
        let mut profile = match &args.config {
            Some(path) => PlatformProfile::from_file(Path::new(path))?,
            None => PlatformProfile::default(),
        };
        if !args.allowed_repositories.is_empty() {
            for entry in &args.allowed_repositories {
                normalize_repository(entry)
                    .map_err(|e| SettingsError::Repository { entry: entry.clone(), reason: e.to_string() })?;
            }
            profile.allowed_repositories = args.allowed_repositories.clone();
            profile.validate()?;
        }
        // An empty namespace means all of them, as WATCH_NAMESPACE="" does for operator-sdk operators.
        let namespace = (!args.all_namespaces && !args.namespace.trim().is_empty()).then(|| args.namespace.clone());
        let identity = identity(env);
        let election = if args.leader_elect {
            let (lease, renew) = (args.leader_election_lease_duration, args.leader_election_renew_deadline);
            let (lease_s, renew_s) = (lease.as_secs(), renew.as_secs());
            if renew_s == 0 || renew_s >= lease_s || lease.subsec_nanos() != 0 || renew.subsec_nanos() != 0 {
                return Err(SettingsError::LeaseTimings { lease: lease_s, renew: renew_s });
            }
            if !is_dns_subdomain(&args.leader_election_id) {
                return Err(SettingsError::LeaseName(args.leader_election_id.clone()));
            }
            Some(Election {
                namespace: args
                    .leader_election_namespace
                    .clone()
                    .or_else(|| env.pod_namespace.clone())
                    .or_else(|| namespace.clone()),
                lease_name: args.leader_election_id.clone(),
                identity: identity.clone(),
                lease_duration: lease,
                renew_deadline: renew,
            })
        } else {
            None
        };
        let config = Config {
            namespace,
            selector: args.selector.clone(),
            resync_interval: args.resync_interval,
            concurrency: args.concurrency,
            profile,
            backoff: BackoffPolicy::default(),
            instance: Some(identity),
        };
        Ok(Settings {
            config,
            bind: args.metrics_bind_address,
            election,
            log_format: args.log_format.unwrap_or(if is_terminal { LogFormat::Text } else { LogFormat::Json }),
            shutdown_timeout: args.shutdown_timeout,
        })
    }

    /// Fills what only the kubeconfig knows: the Lease namespace when neither a flag, the pod nor a watched
    /// namespace named one (`--all-namespaces` outside a cluster).
    pub fn resolve(&mut self, kubeconfig_namespace: &str) {
        if let Some(election) = &mut self.election
            && election.namespace.is_none()
        {
            election.namespace = Some(kubeconfig_namespace.to_string());
        }
    }
}

/// controller-runtime's convention: the host (the pod name in a cluster) plus a random suffix, so a restarted pod
/// with the same name is a new holder and two processes on one machine never share an identity.
fn identity(env: &PodEnvironment) -> String {
    let base = env.pod_name.clone().or_else(|| env.hostname.clone()).unwrap_or_else(|| "microservice-operator".into());
    let suffix: u32 = rand::random();
    format!("{base}_{suffix:08x}")
}

/// A Kubernetes object name (RFC 1123 subdomain).
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn args(flags: &[&str]) -> RunArgs {
        let argv = std::iter::once("run").chain(flags.iter().copied());
        Cli::try_parse_from(argv).unwrap().run
    }

    fn settings(flags: &[&str], env: &PodEnvironment) -> Settings {
        Settings::from_args(&args(flags), env, false).unwrap()
    }

    #[test]
    fn defaults_watch_todo_with_leader_election() {
        let s = settings(&[], &PodEnvironment::default());
        assert_eq!(s.config.namespace.as_deref(), Some("todo"));
        assert_eq!(s.config.resync_interval, Duration::from_secs(300));
        assert_eq!(s.bind.to_string(), "0.0.0.0:8080");
        assert_eq!(s.log_format, LogFormat::Json, "not a terminal");
        let election = s.election.unwrap();
        assert_eq!(election.lease_name, "microservice-operator");
        assert_eq!(election.namespace.as_deref(), Some("todo"), "no pod: the watched namespace");
        assert_eq!((election.lease_duration.as_secs(), election.renew_deadline.as_secs()), (15, 10));
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let s = settings(&["--resync-interval", "1h 30m", "--shutdown-timeout", "90s"], &PodEnvironment::default());
        assert_eq!(s.config.resync_interval, Duration::from_secs(5400));
        assert_eq!(s.shutdown_timeout, Duration::from_secs(90));
    }

    #[test]
    fn the_lease_lives_in_the_pods_namespace_when_in_a_cluster() {
        let pod = PodEnvironment {
            pod_name: Some("operator-7d9f-x2".into()),
            pod_namespace: Some("platform-system".into()),
            hostname: Some("node".into()),
        };
        let s = settings(&["--all-namespaces"], &pod);
        assert_eq!(s.config.namespace, None);
        let election = s.election.unwrap();
        assert_eq!(election.namespace.as_deref(), Some("platform-system"));
        assert!(election.identity.starts_with("operator-7d9f-x2_"), "{}", election.identity);
        let explicit = settings(&["--leader-election-namespace", "elsewhere"], &pod);
        assert_eq!(explicit.election.unwrap().namespace.as_deref(), Some("elsewhere"));
    }

    #[test]
    fn an_empty_namespace_watches_all_namespaces() {
        assert_eq!(settings(&["--namespace", ""], &PodEnvironment::default()).config.namespace, None);
    }

    #[test]
    fn all_namespaces_outside_a_cluster_takes_the_kubeconfig_namespace() {
        let mut s = settings(&["--all-namespaces"], &PodEnvironment::default());
        assert_eq!(s.election.as_ref().unwrap().namespace, None);
        s.resolve("default");
        assert_eq!(s.election.unwrap().namespace.as_deref(), Some("default"));
    }

    #[test]
    fn two_processes_on_one_host_get_different_identities() {
        let host = PodEnvironment { hostname: Some("laptop".into()), ..PodEnvironment::default() };
        let a = settings(&[], &host).election.unwrap().identity;
        let b = settings(&[], &host).election.unwrap().identity;
        assert!(a.starts_with("laptop_") && b.starts_with("laptop_"));
        assert_ne!(a, b);
    }

    #[test]
    fn leader_election_can_be_switched_off() {
        assert!(settings(&["--leader-elect=false"], &PodEnvironment::default()).election.is_none());
        assert!(settings(&["--leader-elect"], &PodEnvironment::default()).election.is_some());
    }

    #[test]
    fn flags_override_the_profile_file() {
        let dir = std::env::temp_dir().join(format!("mso-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("profile.yaml");
        std::fs::write(&file, "allowedRepositories: [registry.internal/todo-api]\ndefaultReplicas: 3\n").unwrap();
        let path = file.to_str().unwrap();
        let from_file = settings(&["--config", path], &PodEnvironment::default());
        assert_eq!(from_file.config.profile.allowed_repositories, ["registry.internal/todo-api"]);
        assert_eq!(from_file.config.profile.default_replicas, 3);
        let overridden = settings(
            &["--config", path, "--allowed-repositories", "ghcr.io/a/x,ghcr.io/b/y"],
            &PodEnvironment::default(),
        );
        assert_eq!(overridden.config.profile.allowed_repositories, ["ghcr.io/a/x", "ghcr.io/b/y"]);
        assert_eq!(overridden.config.profile.default_replicas, 3, "what the flags do not name stays from the file");
    }

    #[test]
    fn wrong_values_are_refused_with_the_reason() {
        let env = PodEnvironment::default();
        let err = |flags: &[&str]| Settings::from_args(&args(flags), &env, false).unwrap_err().to_string();
        assert!(err(&["--allowed-repositories", "ghcr.io/x:1.0"]).contains("ghcr.io/x:1.0"));
        assert!(err(&["--leader-election-renew-deadline", "15s"]).contains("shorter than"));
        assert!(err(&["--leader-election-lease-duration", "1500ms"]).contains("whole seconds"));
        assert!(err(&["--leader-election-id", "My_Lease"]).contains("My_Lease"));
        assert!(err(&["--config", "/nonexistent/profile.yaml"]).contains("/nonexistent/profile.yaml"));
    }

    #[test]
    fn flags_are_refused_before_anything_runs() {
        let parse = |flags: &[&str]| Cli::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).is_err();
        assert!(parse(&["--resync-interval", "5 fortnights"]));
        assert!(parse(&["--resync-interval", "0s"]), "0s would reconcile in a hot loop");
        assert!(parse(&["--resync-interval", "9s"]));
        assert!(!parse(&["--resync-interval", "10s"]));
        assert!(parse(&["--concurrency", "0"]));
        assert!(parse(&["--metrics-bind-address", "localhost"]));
        assert!(parse(&["--log-format", "xml"]));
    }

    #[test]
    fn lease_names() {
        assert!(is_dns_subdomain("microservice-operator"));
        assert!(is_dns_subdomain("ops.example.com"));
        assert!(!is_dns_subdomain("Op"));
        assert!(!is_dns_subdomain("-a"));
        assert!(!is_dns_subdomain(""));
    }
}
