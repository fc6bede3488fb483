//! A real Kubernetes control plane on 127.0.0.1, started per test or per suite and gone when dropped.
//!
//! etcd (no fsync: test data), kube-apiserver (RBAC, service-account tokens, the default admission plugins, an audit
//! log of the clients' requests), kube-controller-manager (the controllers a Deployment's life needs), kube-scheduler
//! and kwok playing the kubelet of a few fake nodes. Every process gets free ports and its own temporary directory,
//! so two control planes run side by side; dropping the value kills every process and removes the directory, also
//! when a test panics.

mod kwok;
mod pki;
mod process;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;

use crate::audit::{self, AuditLog};
use pki::Pki;
use process::{Process, free_port};

/// The user every admin client and kubeconfig of the harness authenticates as (group `system:masters`).
pub const ADMIN: &str = "admin";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the real control plane is not built ({0} has no complete build): run hack/control-plane/build.sh (about 30 \
         minutes cold on 2 cores), or point CONTROL_PLANE_BIN at a directory with the binaries"
    )]
    NotBuilt(String),
    #[error("{0}")]
    Setup(String),
    #[error("{component} did not become ready: {what}\n--- the end of its log ---\n{log_tail}")]
    NotReady { component: &'static str, what: String, log_tail: String },
    #[error("cannot {0}: {1}")]
    Api(&'static str, #[source] kube::Error),
    #[error("no user {0} was given to the control plane (Options::users)")]
    UnknownUser(String),
}

/// An identity the API server knows by a static bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    pub fn new(name: &str, groups: &[&str]) -> User {
        User { name: name.to_string(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    /// A cluster admin: RBAC lets `system:masters` do anything.
    pub fn admin(name: &str) -> User {
        User::new(name, &["system:masters"])
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Fake nodes kwok runs pods on.
    pub nodes: usize,
    /// How long a scheduled pod stays Pending before kwok makes it Running and Ready.
    pub pod_ready_delay: Duration,
    /// Pods whose first container runs exactly one of these images start but never become Ready.
    pub never_ready_images: Vec<String>,
    /// Identities beyond the admin, e.g. the operator's own so the audit log tells its requests apart.
    pub users: Vec<User>,
    /// How long the whole start may take before it fails with the lagging component's log.
    pub start_timeout: Duration,
    /// kube-apiserver refuses streaming lists (`--feature-gates=WatchList=false`, Kubernetes 1.33's default).
    pub without_streaming_lists: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            nodes: 3,
            pod_ready_delay: Duration::ZERO,
            never_ready_images: Vec::new(),
            users: Vec::new(),
            start_timeout: Duration::from_secs(180),
            without_streaming_lists: false,
        }
    }
}

pub struct ControlPlane {
    /// Started in dependency order (etcd first); stopped in reverse.
    processes: Vec<Process>,
    url: String,
    pki: Pki,
    bin: PathBuf,
    audit: AuditLog,
    startup: Duration,
    /// Last, so it is removed after every process is gone.
    dir: tempfile::TempDir,
}

/// Start-ups tried before a component's failure to come up is final.
const START_ATTEMPTS: u32 = 3;

impl ControlPlane {
    /// Starts a control plane, again with fresh ports when a component did not come up: a port [`free_port`]
    /// found free can be taken (by another test's cluster, or as the local port of any outgoing connection) before
    /// the component binds it, and then kube-apiserver or etcd exits at start.
    pub async fn start(options: Options) -> Result<ControlPlane, Error> {
        let mut attempt = 1;
        loop {
            match ControlPlane::start_once(options.clone()).await {
                Err(e @ Error::NotReady { .. }) if attempt < START_ATTEMPTS => {
                    eprintln!("control plane: attempt {attempt} of {START_ATTEMPTS} failed, starting again: {e}");
                    attempt += 1;
                }
                started => return started,
            }
        }
    }

    // Over 80 lines on purpose: The control plane's start-up in order (etcd, kube-apiserver, controller-manager, kwok,
    // readiness), each waiting on the one before, with one cleanup path on failure.
    async fn start_once(options: Options) -> Result<ControlPlane, Error> {
        let begun = Instant::now();
        let deadline = begun + options.start_timeout;
        let bin = bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("control-plane-")
            .tempdir()
            .map_err(|e| Error::Setup(format!("cannot create a temporary directory: {e}")))?;
        let root = dir.path().to_path_buf();
        let path = |name: &str| root.join(name).to_string_lossy().into_owned();

        let mut users = vec![
            User::admin(ADMIN),
            User::new("system:kube-controller-manager", &[]),
            User::new("system:kube-scheduler", &[]),
            User::admin("kwok"),
        ];
        users.extend(options.users.iter().cloned());
        let pki = Pki::generate(dir.path(), &users)?;
        pki::write(dir.path(), "audit-policy.yaml", audit::POLICY)?;
        pki::write(dir.path(), "kwok.yaml", &kwok::config(options.pod_ready_delay, &options.never_ready_images))?;

        let (etcd_client, etcd_peer, apiserver_port) = (free_port()?, free_port()?, free_port()?);
        let url = format!("https://127.0.0.1:{apiserver_port}");
        let mut plane = ControlPlane {
            processes: Vec::new(),
            url,
            pki,
            bin: bin.clone(),
            audit: AuditLog::new(dir.path().join("audit.log")),
            startup: Duration::ZERO,
            dir,
        };
        for (user, file) in [
            (ADMIN, "admin.kubeconfig"),
            ("system:kube-controller-manager", "controller-manager.kubeconfig"),
            ("system:kube-scheduler", "scheduler.kubeconfig"),
            ("kwok", "kwok.kubeconfig"),
        ] {
            plane.write_kubeconfig(user, file)?;
        }

        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        plane.spawn(
            "etcd",
            vec![
                "--name=default".into(),
                format!("--data-dir={}", path("etcd")),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                // Test data: durability buys nothing and fsync is most of etcd's latency.
                "--unsafe-no-fsync".into(),
                "--log-level=warn".into(),
            ],
        )?;
        plane.spawn(
            "kube-apiserver",
            vec![
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // The endpoint reconciler refuses a loopback address; nothing in a test dials the kubernetes Service.
                "--endpoint-reconciler-type=none".into(),
                format!("--secure-port={apiserver_port}"),
                format!("--cert-dir={}", path("apiserver-certs")),
                format!("--tls-cert-file={}", path("apiserver.crt")),
                format!("--tls-private-key-file={}", path("apiserver.key")),
                format!("--client-ca-file={}", path("ca.crt")),
                format!("--token-auth-file={}", path("tokens.csv")),
                "--authorization-mode=Node,RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", path("sa.pub")),
                format!("--service-account-signing-key-file={}", path("sa.key")),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                format!("--audit-policy-file={}", path("audit-policy.yaml")),
                format!("--audit-log-path={}", path("audit.log")),
                "--audit-log-mode=blocking".into(),
                "--profiling=false".into(),
                "--v=1".into(),
            ]
            .into_iter()
            .chain(options.without_streaming_lists.then(|| "--feature-gates=WatchList=false".to_string()))
            .collect(),
        )?;
        plane.wait_apiserver_ready(deadline).await?;
        let apiserver_ready = begun.elapsed();

        plane.spawn(
            "kube-controller-manager",
            vec![
                format!("--kubeconfig={}", path("controller-manager.kubeconfig")),
                "--secure-port=0".into(),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=true".into(),
                format!("--service-account-private-key-file={}", path("sa.key")),
                format!("--root-ca-file={}", path("ca.crt")),
                "--controllers=deployment-controller,replicaset-controller,garbage-collector-controller,\
                 namespace-controller,serviceaccount-controller,serviceaccount-token-controller,\
                 endpointslice-controller,root-ca-certificate-publisher-controller,pod-garbage-collector-controller,\
                 horizontal-pod-autoscaler-controller,validatingadmissionpolicy-status-controller"
                    .into(),
                // The defaults (20/30) are a production controller-manager's share of a busy server; a test cluster
                // with one client should not wait on them.
                "--kube-api-qps=500".into(),
                "--kube-api-burst=1000".into(),
                "--concurrent-deployment-syncs=10".into(),
                "--concurrent-replicaset-syncs=10".into(),
                "--v=1".into(),
            ],
        )?;
        plane.spawn(
            "kube-scheduler",
            vec![
                format!("--kubeconfig={}", path("scheduler.kubeconfig")),
                "--secure-port=0".into(),
                "--leader-elect=false".into(),
                "--v=1".into(),
            ],
        )?;
        plane.spawn("kwok", kwok::args(&path("kwok.kubeconfig"), &path("kwok.yaml")))?;

        let client = plane.client().await?;
        kwok::create_nodes(&client, options.nodes.max(1)).await?;
        plane.wait_rollout(&client, deadline).await?;
        plane.startup = begun.elapsed();
        eprintln!(
            "real control plane (Kubernetes {}) ready in {:.1}s: API ready after {:.1}s, a test Deployment rolled out \
             on {} kwok node(s) at {}",
            plane.version(),
            plane.startup.as_secs_f64(),
            apiserver_ready.as_secs_f64(),
            options.nodes.max(1),
            plane.url
        );
        Ok(plane)
    }

    /// The API server's address, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How long [`ControlPlane::start`] took.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// PEM of the CA that signed the API server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    pub fn token(&self, user: &str) -> Result<&str, Error> {
        self.pki.token(user).ok_or_else(|| Error::UnknownUser(user.to_string()))
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// A kubeconfig that authenticates as `user` (one of [`Options::users`]).
    pub fn kubeconfig_for(&self, user: &str) -> Result<PathBuf, Error> {
        let file = format!("{}.kubeconfig", user.replace(':', "_"));
        self.write_kubeconfig(user, &file)?;
        Ok(self.dir.path().join(file))
    }

    /// A client authenticated as the admin.
    pub async fn client(&self) -> Result<Client, Error> {
        self.client_as(ADMIN).await
    }

    /// kube-apiserver's own /metrics (Prometheus text), read as the admin: what the server measured of the
    /// requests it served, e.g. `apiserver_request_duration_seconds`.
    pub async fn apiserver_metrics(&self) -> Result<String, Error> {
        let client = self.client().await?;
        let request = http::Request::get("/metrics").body(Vec::new()).map_err(|e| Error::Setup(e.to_string()))?;
        client.request_text(request).await.map_err(|e| Error::Api("read kube-apiserver's /metrics", e))
    }

    /// A client authenticated as `user`.
    pub async fn client_as(&self, user: &str) -> Result<Client, Error> {
        client_from(&self.kubeconfig_for(user)?).await
    }

    /// Where the control plane's binaries are, kubectl of the same version among them.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    pub fn kubectl(&self) -> PathBuf {
        self.bin.join("kubectl")
    }

    /// The requests clients sent (everyone but the control plane's own components).
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Kills kube-apiserver (SIGKILL: watches break, nothing is flushed) and starts it again over the same etcd data;
    /// returns once it is ready again.
    pub async fn restart_apiserver(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(120);
        self.process("kube-apiserver")?.restart()?;
        self.wait_apiserver_ready(deadline).await
    }

    /// Kills kube-apiserver and leaves it down until [`ControlPlane::start_apiserver`].
    pub fn stop_apiserver(&mut self) -> Result<(), Error> {
        self.process("kube-apiserver")?.kill();
        Ok(())
    }

    pub async fn start_apiserver(&mut self) -> Result<(), Error> {
        self.restart_apiserver().await
    }

    fn process(&mut self, name: &str) -> Result<&mut Process, Error> {
        self.processes
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or_else(|| Error::Setup(format!("no process named {name}")))
    }

    fn spawn(&mut self, name: &'static str, args: Vec<String>) -> Result<(), Error> {
        let process = Process::start(name, self.bin.join(name), args, self.dir.path())?;
        self.processes.push(process);
        Ok(())
    }

    fn version(&self) -> String {
        Command::new(self.bin.join("kube-apiserver"))
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().trim_start_matches("Kubernetes ").to_string())
            .unwrap_or_else(|| "of unknown version".into())
    }

    fn write_kubeconfig(&self, user: &str, file: &str) -> Result<(), Error> {
        let text = self.kubeconfig_yaml_for_token(&user.replace(':', "_"), self.token(user)?);
        pki::write(self.dir.path(), file, &text)
    }

    /// A kubeconfig whose user presents `token` (a static one, or a ServiceAccount's from the TokenRequest API).
    pub fn kubeconfig_yaml_for_token(&self, user: &str, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.pki.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {url}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: \
             real\n  context:\n    cluster: real\n    user: {user}\n    namespace: default\ncurrent-context: real\n",
            url = self.url,
        )
    }

    async fn wait_apiserver_ready(&mut self, deadline: Instant) -> Result<(), Error> {
        let client = self.client().await?;
        loop {
            let request = http::Request::get("/readyz").body(Vec::new());
            if let Ok(request) = request
                && client.request_text(request).await.is_ok_and(|body| body.trim() == "ok")
            {
                return Ok(());
            }
            let apiserver = self.process("kube-apiserver")?;
            if apiserver.has_exited() || Instant::now() > deadline {
                return Err(apiserver.failure("/readyz never answered ok"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A one-replica Deployment becomes available: the controller-manager, the scheduler and kwok all work.
    async fn wait_rollout(&mut self, client: &Client, deadline: Instant) -> Result<(), Error> {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
        let probe: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "testkit-probe"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "testkit-probe"}},
                "template": {
                    "metadata": {"labels": {"app": "testkit-probe"}},
                    "spec": {"containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))
        .map_err(|e| Error::Setup(format!("probe Deployment: {e}")))?;
        deployments
            .create(&PostParams::default(), &probe)
            .await
            .map_err(|e| Error::Api("create a probe Deployment", e))?;
        loop {
            let available = deployments
                .get("testkit-probe")
                .await
                .ok()
                .and_then(|d| d.status)
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
            if available >= 1 {
                break;
            }
            if let Some(dead) = self.processes.iter_mut().find_map(|p| if p.has_exited() { Some(p) } else { None }) {
                return Err(dead.failure("it exited while a test Deployment rolled out"));
            }
            if Instant::now() > deadline {
                // Which link of the chain broke (ReplicaSet, scheduling, kwok's status) shows in the logs of all.
                let log_tail = self
                    .processes
                    .iter()
                    .map(|p| format!("--- {} ---\n{}", p.name, p.log_tail(8)))
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(Error::NotReady {
                    component: "the control plane",
                    what: "a one-replica Deployment was not available before the start deadline".into(),
                    log_tail,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        deployments
            .delete("testkit-probe", &DeleteParams::background())
            .await
            .map_err(|e| Error::Api("delete the probe Deployment", e))?;
        Ok(())
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            process.kill();
        }
    }
}

/// A kube client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> Result<Client, Error> {
    let config = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::Setup(format!("cannot read {}: {e}", kubeconfig.display())))?;
    let config = kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Setup(format!("cannot use {}: {e}", kubeconfig.display())))?;
    Client::try_from(config).map_err(|e| Error::Api("build a client", e))
}

/// The directory with the control plane's binaries: `$CONTROL_PLANE_BIN`, else what `hack/control-plane/build.sh`
/// builds into.
pub fn bin_dir() -> Result<PathBuf, Error> {
    const BINARIES: [&str; 6] =
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];
    let dir = match std::env::var_os("CONTROL_PLANE_BIN") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/control-plane/build.sh");
            let out = Command::new("bash")
                .arg(&script)
                .arg("--print-dir")
                .output()
                .map_err(|e| Error::Setup(format!("cannot run {}: {e}", script.display())))?;
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
    };
    if BINARIES.iter().all(|b| dir.join(b).is_file()) {
        Ok(dir)
    } else {
        Err(Error::NotBuilt(dir.display().to_string()))
    }
}
