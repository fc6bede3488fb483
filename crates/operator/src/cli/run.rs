//! `microservice-operator run`: connect to the cluster, serve metrics and probes, join the leader election and run
//! the controller until SIGTERM/SIGINT (exit 0) or until the Lease is lost (exit 1, as controller-runtime does).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::ListParams;
use kube::{Api, Client};

use crate::connection::{ConfigError, crd_missing, scoped_api};
use thiserror::Error;
use tracing::{info, warn};

use crate::controller::{self, Stopped};
use crate::health::Health;
use crate::leader::{LeaderError, Leadership};
use crate::metrics::Metrics;
pub use crate::settings::{MIN_RESYNC_INTERVAL, RunArgs};
use crate::settings::{PodEnvironment, Settings, SettingsError};
use crate::telemetry::{self, TelemetryError};
use crate::{connection, http};
use microservice_core::crd::Microservice;

/// How long the API server may take to answer the start-up `/version` request.
const REACHABILITY_TIMEOUT: Duration = Duration::from_secs(15);
/// What the shutdown budget keeps, after the controller stopped, for releasing the Lease, closing the HTTP server
/// and flushing spans: together [`AFTER_CONTROLLER`], so the whole shutdown stays within `--shutdown-timeout`.
const LEASE_RELEASE: Duration = Duration::from_secs(3);
const HTTP_CLOSE: Duration = Duration::from_secs(1);
const SPAN_FLUSH: Duration = Duration::from_secs(2);
const AFTER_CONTROLLER: Duration = LEASE_RELEASE.saturating_add(HTTP_CLOSE).saturating_add(SPAN_FLUSH);

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    #[error("cannot read the kubeconfig {path}: {reason}")]
    KubeconfigFile { path: String, reason: String },
    #[error("cannot configure access to the cluster: {0}; pass --kubeconfig or set KUBECONFIG")]
    Kubeconfig(String),
    #[error(
        "cannot reach the Kubernetes API server at {url}: {reason}; check --kubeconfig/--context and that the cluster is up"
    )]
    Unreachable { url: String, reason: String },
    #[error("the Kubernetes API server at {url} refused the operator: {reason}")]
    Refused { url: String, reason: String },
    #[error(
        "the Microservice CRD (microservices.platform.example.com) is not installed in the cluster; install it with \
         `microservice-operator crd | kubectl apply -f -`"
    )]
    NoCrd,
    #[error("--selector `{selector}` is not a valid label selector: {reason}")]
    Selector { selector: String, reason: String },
    #[error("cannot list Microservices {scope}: {reason}; check the operator's RBAC")]
    Forbidden { scope: String, reason: String },
    #[error("cannot list Microservices {scope}: {reason}")]
    List { scope: String, reason: String },
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
    #[error(transparent)]
    Http(#[from] http::HttpError),
    #[error(transparent)]
    Leader(#[from] LeaderError),
    #[error("lost the leader election Lease {0}; exiting so that a restart rejoins the election")]
    LostLeadership(String),
    #[error("in-flight work did not finish within --shutdown-timeout {0:?}; exiting anyway")]
    ShutdownTimeout(Duration),
    #[error("the controller task failed: {0}")]
    Controller(String),
}

impl RunError {
    fn exit_code(&self) -> ExitCode {
        match self {
            RunError::Settings(_)
            | RunError::Telemetry(_)
            | RunError::KubeconfigFile { .. }
            | RunError::Kubeconfig(_)
            | RunError::Selector { .. } => ExitCode::from(2),
            _ => ExitCode::FAILURE,
        }
    }
}

pub async fn run(args: RunArgs) -> ExitCode {
    match run_operator(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, plain, whatever the log format: this is the message a person reads. Some sources (YAML
            // parse errors) add a multi-line excerpt; their first line already names the problem.
            let message = err.to_string();
            eprintln!("error: {}", message.lines().next().unwrap_or_default().trim_end());
            err.exit_code()
        }
    }
}

// Over 80 lines on purpose: The start-up and shutdown sequence in order (settings, cluster, telemetry, HTTP, election,
// controller, then the shutdown budget); the order is the behaviour, and the pieces share the shutdown deadline.
async fn run_operator(args: RunArgs) -> Result<(), RunError> {
    use std::io::IsTerminal;
    let mut settings = Settings::from_args(&args, &PodEnvironment::from_process(), std::io::stderr().is_terminal())?;
    let log_filter = telemetry::log_filter()?;
    let mut signals = Signals::install().map_err(RunError::Signals)?;

    let kube_config = kube_config(&args).await?;
    settings.resolve(&kube_config.default_namespace);
    let url = kube_config.cluster_url.to_string();
    let client = Client::try_from(kube_config).map_err(|e| RunError::Kubeconfig(e.to_string()))?;
    // One cheap request: an unreachable server fails the start with its address instead of watches retrying forever.
    let version = match tokio::time::timeout(REACHABILITY_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => version,
        Ok(Err(e @ kube::Error::Api(_))) => return Err(RunError::Refused { url, reason: connection::describe(&e) }),
        Ok(Err(e)) => return Err(RunError::Unreachable { url, reason: connection::describe(&e) }),
        Err(_) => return Err(RunError::Unreachable { url, reason: format!("no answer in {REACHABILITY_TIMEOUT:?}") }),
    };
    // Logging starts once the cluster answered: a failed start is then only the error line, not the client's
    // own error logs around it.
    let telemetry = telemetry::init(settings.log_format, log_filter)?;
    info!(api_server = %url, version = %version.git_version, "connected to the Kubernetes API server");
    can_list(&client, &settings).await?;

    let metrics = Arc::new(Metrics::new());
    metrics.set_max_concurrent_reconciles(settings.config.concurrency);
    let health = Arc::new(Health::new());
    let listener = http::bind(settings.bind).await?;
    let address = listener.local_addr().map_err(|source| http::HttpError::Bind { addr: settings.bind, source })?;
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::serve(listener, http::router(metrics.clone(), health.clone()), async {
        let _ = http_stopped.await;
    }));
    info!(address = %address, "serving /metrics, /healthz and /readyz");

    let leadership = match &settings.election {
        Some(election) => {
            let joined = Leadership::join(client.clone(), election, metrics.clone(), health.clone());
            tokio::select! {
                joined = joined => joined?,
                () = signals.received() => return Ok(()),
            }
        }
        None => Leadership::always(&health),
    };
    let lease = settings
        .election
        .as_ref()
        .map(|e| format!("{}/{}", e.namespace.as_deref().unwrap_or_default(), e.lease_name))
        .unwrap_or_default();

    let (stop_controller, controller_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut controller = tokio::spawn(controller::run_elected(
        client,
        settings.config.clone(),
        metrics,
        health,
        leadership.subscribe(),
        async {
            let _ = controller_stopped.await;
        },
    ));

    // Lost leadership ends the run like a shutdown does: in-flight reconciles get the shutdown timeout, not forever
    // (with the API server gone, a request can wait for the client's read timeout).
    let mut leading = leadership.subscribe();
    let lost_then_deadline = async move {
        let _ = leading.wait_for(|leads| *leads).await;
        let _ = leading.wait_for(|leads| !*leads).await;
        tokio::time::sleep(settings.shutdown_timeout).await;
    };
    let outcome = tokio::select! {
        stopped = &mut controller => stopped.map_err(|e| RunError::Controller(e.to_string())),
        () = lost_then_deadline => {
            controller.abort();
            warn!(
                timeout_seconds = settings.shutdown_timeout.as_secs(),
                "in-flight reconciles did not finish within the shutdown timeout after the Lease was lost"
            );
            Ok(Stopped::LostLeadership)
        }
        () = signals.received() => {
            let deadline = Instant::now() + settings.shutdown_timeout.saturating_sub(AFTER_CONTROLLER);
            info!(
                timeout_seconds = settings.shutdown_timeout.as_secs(),
                "shutting down: no new reconciles; waiting for the running ones"
            );
            let _ = stop_controller.send(());
            tokio::select! {
                stopped = &mut controller => stopped.map_err(|e| RunError::Controller(e.to_string())),
                () = tokio::time::sleep_until(deadline.into()) => {
                    controller.abort();
                    Err(RunError::ShutdownTimeout(settings.shutdown_timeout))
                }
                // A second signal: the person wants out now.
                () = signals.received() => {
                    controller.abort();
                    warn!("second signal: exiting without waiting for in-flight reconciles");
                    Ok(Stopped::Shutdown)
                }
            }
        }
    };
    // Release the Lease in every case: a standby takes over at once instead of after the lease duration.
    leadership.release(LEASE_RELEASE).await;
    let _ = stop_http.send(());
    let _ = tokio::time::timeout(HTTP_CLOSE, server).await;
    telemetry.shutdown(SPAN_FLUSH).await;
    match outcome? {
        Stopped::Shutdown => {
            info!("stopped");
            Ok(())
        }
        Stopped::LostLeadership => Err(RunError::LostLeadership(lease)),
    }
}

/// The cluster configuration from `--kubeconfig` and `--context` (see [`connection::load_config`]).
async fn kube_config(args: &RunArgs) -> Result<kube::Config, RunError> {
    connection::load_config(args.kubeconfig.as_deref(), args.context.as_deref()).await.map_err(|e| match e {
        ConfigError::Read { path, reason } | ConfigError::Custom { path, reason } => {
            RunError::KubeconfigFile { path, reason }
        }
        ConfigError::Default(reason) => RunError::Kubeconfig(reason),
    })
}

/// One list of at most one Microservice, as the controller's watch will ask: a missing CRD, a malformed selector or
/// missing RBAC is then one error line at start instead of a watch retrying forever.
async fn can_list(client: &Client, settings: &Settings) -> Result<(), RunError> {
    let api: Api<Microservice> = scoped_api(client, settings.config.namespace.as_deref());
    let namespace = settings.config.namespace.as_deref();
    let scope = namespace.map_or_else(|| "in all namespaces".to_string(), |ns| format!("in namespace {ns}"));
    let mut params = ListParams::default().limit(1);
    if let Some(selector) = &settings.config.selector {
        params = params.labels(selector);
    }
    let listed = match tokio::time::timeout(REACHABILITY_TIMEOUT, api.list_metadata(&params)).await {
        Ok(listed) => listed,
        Err(_) => return Err(RunError::List { scope, reason: format!("no answer in {REACHABILITY_TIMEOUT:?}") }),
    };
    match listed {
        Ok(_) => Ok(()),
        Err(e) if crd_missing(&e) => Err(RunError::NoCrd),
        Err(kube::Error::Api(status)) if status.code == 400 && settings.config.selector.is_some() => {
            Err(RunError::Selector {
                selector: settings.config.selector.clone().unwrap_or_default(),
                reason: status.message,
            })
        }
        Err(kube::Error::Api(status)) if status.code == 401 || status.code == 403 => Err(RunError::Forbidden {
            scope,
            reason: connection::describe_status(status.code, &status.reason, &status.message),
        }),
        Err(e) => Err(RunError::List { scope, reason: connection::describe(&e) }),
    }
}

/// SIGTERM (the kubelet) and SIGINT (Ctrl-C).
struct Signals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals { terminate: signal(SignalKind::terminate())?, interrupt: signal(SignalKind::interrupt())? })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn received(&mut self) {
        #[cfg(unix)]
        {
            let name = tokio::select! {
                _ = self.terminate.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "SIGINT",
            };
            info!(signal = name, "received a stop signal");
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
