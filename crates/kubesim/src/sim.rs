//! The [`Sim`] handle: an emulator running in-process on 127.0.0.1, with its kubeconfig, a ready kube client,
//! the cluster, the fault injector and the request counters. Dropping it stops the server and the controllers.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::controllers::{self, ControllerConfig, Controllers};
use crate::faults::{FaultConfig, FaultInjector};
use base64::Engine as _;

use crate::auth::Tokens;
use crate::http::tls::Tls;
use crate::http::{self, AppState, RequestCounts};
use crate::store::HistoryLimits;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("cannot build a kube client for the emulator: {0}")]
    Client(String),
    #[error(transparent)]
    Tls(#[from] crate::http::tls::TlsError),
    #[error("cannot write the kubeconfig to {path}: {source}")]
    Kubeconfig { path: String, source: std::io::Error },
}

/// Configures and starts a [`Sim`].
#[derive(Debug, Clone)]
pub struct SimBuilder {
    port: u16,
    controllers: ControllerConfig,
    faults: FaultConfig,
    token: String,
    ready_delay: Duration,
    run_controllers: bool,
    history: HistoryLimits,
    rbac: bool,
    watch_list: bool,
}

impl Default for SimBuilder {
    fn default() -> Self {
        SimBuilder {
            port: 0,
            controllers: ControllerConfig::default(),
            faults: FaultConfig::default(),
            token: "kubesim-token".into(),
            ready_delay: Duration::ZERO,
            run_controllers: true,
            history: HistoryLimits::default(),
            rbac: false,
            watch_list: true,
        }
    }
}

impl SimBuilder {
    /// 0 (the default) picks a free port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    pub fn controllers(mut self, config: ControllerConfig) -> Self {
        self.controllers = config;
        self
    }

    /// Runs no simulated controllers (an API server alone, like envtest).
    pub fn without_controllers(mut self) -> Self {
        self.run_controllers = false;
        self
    }

    pub fn faults(mut self, config: FaultConfig) -> Self {
        self.faults = config;
        self
    }

    /// The bearer token clients must present.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = token.into();
        self
    }

    /// How much change history watches can resume from (older resourceVersions get 410 Gone).
    pub fn history(mut self, limits: HistoryLimits) -> Self {
        self.history = limits;
        self
    }

    /// Enforce RBAC: requests are allowed only as Roles, ClusterRoles and their bindings say (the admin token
    /// is `system:admin` in `system:masters` and may do everything; no token is `system:anonymous`). Off by
    /// default: then every authenticated request is allowed.
    pub fn rbac(mut self, enforce: bool) -> Self {
        self.rbac = enforce;
        self
    }

    /// Serve streaming lists (`sendInitialEvents`), as kube-apiserver does unless its WatchList feature gate is off
    /// (Kubernetes 1.33's default): off, such a watch is refused with 422.
    pub fn watch_list(mut self, serve: bool) -> Self {
        self.watch_list = serve;
        self
    }

    /// /readyz fails for this long after start.
    pub fn ready_delay(mut self, delay: Duration) -> Self {
        self.ready_delay = delay;
        self
    }

    /// Starts the server on the current tokio runtime.
    pub async fn start(self) -> Result<Sim, SimError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| SimError::Bind { port: self.port, source })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind { port: self.port, source })?;
        let cluster = Cluster::with_history(self.history);
        let faults = FaultInjector::new(self.faults.clone());
        let mut state = AppState::new(cluster.clone(), faults.clone(), Some(self.token.clone()));
        state.address = addr.to_string().into();
        state.ready_at = Instant::now() + self.ready_delay;
        state.rbac = self.rbac;
        state.watch_list = self.watch_list;
        let tokens = state.tokens.clone();
        let counters = state.counters.clone();
        let tls = Tls::generate()?;
        let ca_pem = tls.ca_pem.clone();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop_rx.await;
            };
            if let Err(e) = http::serve_tls(listener, state, tls, shutdown).await {
                tracing::error!(error = %e, "kubesim server stopped");
            }
        });
        let controllers = if self.run_controllers {
            Some(controllers::spawn(cluster.clone(), self.controllers.clone()))
        } else {
            None
        };
        let kubeconfig = kubeconfig_yaml_tls(&format!("https://{addr}"), &ca_pem, &self.token);
        let client = client_for(&kubeconfig).await?;
        Ok(Sim {
            addr,
            token: self.token,
            cluster,
            faults,
            counters,
            client,
            kubeconfig,
            ca_pem,
            tokens,
            stop: Some(stop_tx),
            server,
            _controllers: controllers,
        })
    }
}

async fn client_for(kubeconfig: &str) -> Result<kube::Client, SimError> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).map_err(|e| SimError::Client(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| SimError::Client(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| SimError::Client(e.to_string()))
}

/// A kubeconfig with one cluster, user and context named `kubesim`, for an https server whose certificate
/// chains to the CA in `ca_pem`.
fn kubeconfig_yaml_tls(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: kubesim\n  user:\n    token: {token}\ncontexts:\n- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim\n    namespace: default\ncurrent-context: kubesim\npreferences: {{}}\n"
    )
}

/// A running emulator.
pub struct Sim {
    addr: SocketAddr,
    token: String,
    cluster: Cluster,
    faults: FaultInjector,
    counters: http::Counters,
    client: kube::Client,
    kubeconfig: String,
    ca_pem: String,
    tokens: Tokens,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    _controllers: Option<Controllers>,
}

impl Sim {
    pub fn builder() -> SimBuilder {
        SimBuilder::default()
    }

    /// `http://127.0.0.1:PORT`: the same port also answers plain HTTP, for raw clients that bring no CA.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `https://127.0.0.1:PORT`, the server of the kubeconfig (its certificate chains to [`Sim::ca_pem`]).
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The PEM of the CA that signed the serving certificate (generated at start).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig.clone()
    }

    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), SimError> {
        let path = path.as_ref();
        std::fs::write(path, &self.kubeconfig)
            .map_err(|source| SimError::Kubeconfig { path: path.display().to_string(), source })
    }

    /// A kube client over https, authenticated with the emulator's token.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A bearer token for the ServiceAccount NAMESPACE/NAME (`system:serviceaccount:NAMESPACE:NAME`, groups
    /// `system:serviceaccounts`, `system:serviceaccounts:NAMESPACE`, `system:authenticated`). It authenticates
    /// while that ServiceAccount exists; create it (and its bindings) before using the token.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.tokens.issue(&self.cluster, namespace, name)
    }

    /// A kubeconfig like [`Sim::kubeconfig_yaml`] whose user presents `token` (e.g. a ServiceAccount's).
    pub fn kubeconfig_yaml_for_token(&self, token: &str) -> String {
        kubeconfig_yaml_tls(&self.https_url(), &self.ca_pem, token)
    }

    /// A kube client (https) that presents `token`, e.g. [`Sim::service_account_token`]'s.
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client, SimError> {
        client_for(&self.kubeconfig_yaml_for_token(token)).await
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    pub fn faults(&self) -> &FaultInjector {
        &self.faults
    }

    /// A snapshot of the request counters; diff two with [`RequestCounts::since`].
    pub fn requests(&self) -> RequestCounts {
        self.counters.snapshot()
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Open watch streams would keep a graceful shutdown waiting; the server has nothing to flush.
        self.server.abort();
    }
}
