//! One test cluster, two backends: the suites are written once and `TEST_BACKEND` chooses what they run against.
//!
//! - `kubesim` (the default): the in-memory emulator, in-process, with its simulated controllers.
//! - `real`: [`ControlPlane`], a real kube-apiserver with kube-controller-manager, kube-scheduler and kwok.
//!
//! What a test observes is the same on both: a client, a kubeconfig, and the requests the server answered (kubesim
//! counts them itself; the real server's audit log tells them).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kubesim::controllers::{ControllerConfig, ImageRule, PodBehaviour};
use kubesim::{RequestCounts, RequestKey, Sim};

use crate::control_plane::{self, ControlPlane, Options, User};

/// The environment variable that chooses the backend.
pub const BACKEND_VAR: &str = "TEST_BACKEND";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Kubesim,
    Real,
}

impl Backend {
    /// `TEST_BACKEND`: `kubesim` (or unset) or `real`. Anything else is a mistake worth stopping for.
    pub fn from_env() -> Backend {
        match std::env::var(BACKEND_VAR).as_deref() {
            Err(_) | Ok("") | Ok("kubesim") => Backend::Kubesim,
            Ok("real") => Backend::Real,
            Ok(other) => panic!("{BACKEND_VAR}={other} is not a backend: use kubesim or real"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Kubesim => "kubesim",
            Backend::Real => "real",
        }
    }
}

/// What a test needs of its cluster, in terms both backends can give.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// How long a scheduled pod takes to become Ready.
    pub pod_ready_delay: Duration,
    /// Pods running exactly these images start but never become Ready.
    pub never_ready_images: Vec<String>,
    /// Identities beyond the admin (the real server knows them by token; kubesim accepts any token unless RBAC is
    /// enforced).
    pub users: Vec<User>,
    /// Enforce RBAC on kubesim too (the real server always does).
    pub rbac: bool,
    /// A server that refuses streaming lists (`sendInitialEvents`), as Kubernetes 1.33 does by default: the real
    /// server runs with `--feature-gates=WatchList=false`.
    pub without_streaming_lists: bool,
}

pub struct Cluster {
    inner: Inner,
    client: Client,
}

enum Inner {
    Sim(Box<Sim>),
    Real(Box<ControlPlane>),
}

impl Cluster {
    /// Starts the backend `TEST_BACKEND` names; panics with what to do when it cannot.
    pub async fn start(options: ClusterOptions) -> Cluster {
        let backend = Backend::from_env();
        match Cluster::start_on(backend, options).await {
            Ok(cluster) => cluster,
            Err(e) => panic!("cannot start the {} test cluster: {e}", backend.name()),
        }
    }

    pub async fn start_on(backend: Backend, options: ClusterOptions) -> Result<Cluster, control_plane::Error> {
        match backend {
            Backend::Kubesim => {
                let controllers = ControllerConfig {
                    ready_delay: options.pod_ready_delay,
                    image_rules: options
                        .never_ready_images
                        .iter()
                        .map(|image| ImageRule { image_contains: image.clone(), behaviour: PodBehaviour::NeverReady })
                        .collect(),
                    ..ControllerConfig::default()
                };
                let sim = Sim::builder()
                    .rbac(options.rbac)
                    .watch_list(!options.without_streaming_lists)
                    .controllers(controllers)
                    .start()
                    .await
                    .map_err(|e| control_plane::Error::Setup(format!("kubesim: {e}")))?;
                Ok(Cluster::from_sim(sim))
            }
            Backend::Real => {
                let plane = ControlPlane::start(Options {
                    pod_ready_delay: options.pod_ready_delay,
                    never_ready_images: options.never_ready_images,
                    users: options.users,
                    without_streaming_lists: options.without_streaming_lists,
                    ..Options::default()
                })
                .await?;
                let client = plane.client().await?;
                Ok(Cluster { inner: Inner::Real(Box::new(plane)), client })
            }
        }
    }

    /// A kubesim cluster built by the caller (faults, RBAC, history limits: what only the emulator can do).
    pub fn from_sim(sim: Sim) -> Cluster {
        let client = sim.client();
        Cluster { inner: Inner::Sim(Box::new(sim)), client }
    }

    pub fn backend(&self) -> Backend {
        match self.inner {
            Inner::Sim(_) => Backend::Kubesim,
            Inner::Real(_) => Backend::Real,
        }
    }

    /// A client with every permission.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Installs `crd`, waits (at most `deadline`) until it is Established, and creates namespace `namespace`: the
    /// state the suites of the core, the operator and the plugin start from. Fails the test otherwise.
    pub async fn install(&self, crd: &CustomResourceDefinition, namespace: &str, deadline: Duration) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client());
        crds.create(&PostParams::default(), crd).await.expect("install the CRD");
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = await_condition(crds, &name, conditions::is_crd_established());
        tokio::time::timeout(deadline, established).await.expect("CRD established in time").expect("CRD watch");
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).expect("a namespace object");
        Api::<Namespace>::all(self.client()).create(&PostParams::default(), &ns).await.expect("create the namespace");
    }

    /// The emulator, for what only it can do (fault injection); None on the real control plane.
    pub fn sim(&self) -> Option<&Sim> {
        match &self.inner {
            Inner::Sim(sim) => Some(sim),
            Inner::Real(_) => None,
        }
    }

    /// The real control plane (restart kube-apiserver, the audit log); None on kubesim.
    pub fn real(&mut self) -> Option<&mut ControlPlane> {
        match &mut self.inner {
            Inner::Sim(_) => None,
            Inner::Real(plane) => Some(plane),
        }
    }

    /// The kubectl to drive this cluster with: the real control plane's own (kubectl supports one minor version of
    /// skew), else the one on PATH.
    pub fn kubectl(&self) -> std::path::PathBuf {
        match &self.inner {
            Inner::Sim(_) => "kubectl".into(),
            Inner::Real(plane) => plane.kubectl(),
        }
    }

    /// An admin kubeconfig, for kubectl and child processes.
    pub fn kubeconfig_yaml(&self) -> String {
        match &self.inner {
            Inner::Sim(sim) => sim.kubeconfig_yaml(),
            Inner::Real(plane) => std::fs::read_to_string(plane.kubeconfig()).unwrap_or_default(),
        }
    }

    /// A bearer token of the ServiceAccount `namespace/name` (kubesim issues one; the real server's TokenRequest
    /// API signs one, as the kubelet would ask for a pod).
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> Result<String, control_plane::Error> {
        match &self.inner {
            Inner::Sim(sim) => Ok(sim.service_account_token(namespace, name)),
            Inner::Real(_) => {
                let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
                let body = serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 3600}
                });
                let request = http::Request::post(path)
                    .header("Content-Type", "application/json")
                    .body(body.to_string().into_bytes())
                    .map_err(|e| control_plane::Error::Setup(format!("token request: {e}")))?;
                let answer: serde_json::Value = self
                    .client
                    .request(request)
                    .await
                    .map_err(|e| control_plane::Error::Api("request a ServiceAccount token", e))?;
                answer["status"]["token"].as_str().map(str::to_string).ok_or_else(|| {
                    control_plane::Error::Setup(format!("the TokenRequest answer has no token: {answer}"))
                })
            }
        }
    }

    /// A kubeconfig (this cluster's server and CA) whose user presents `token`.
    pub fn kubeconfig_yaml_for_token(&self, token: &str) -> String {
        match &self.inner {
            Inner::Sim(sim) => sim.kubeconfig_yaml_for_token(token),
            Inner::Real(plane) => plane.kubeconfig_yaml_for_token("token", token),
        }
    }

    /// A client that presents `token`.
    pub async fn client_with_token(&self, token: &str) -> Result<Client, control_plane::Error> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml_for_token(token))
            .map_err(|e| control_plane::Error::Setup(format!("kubeconfig: {e}")))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| control_plane::Error::Setup(format!("kubeconfig: {e}")))?;
        Client::try_from(config).map_err(|e| control_plane::Error::Api("build a client", e))
    }

    /// The requests the server answered so far, by verb, resource and code (the control plane's own components
    /// and kubesim's simulated controllers are not clients and are not counted).
    pub fn requests(&self) -> RequestCounts {
        match &self.inner {
            Inner::Sim(sim) => sim.requests(),
            Inner::Real(plane) => {
                let mut counts = BTreeMap::new();
                for r in plane.audit().requests() {
                    *counts.entry(RequestKey { verb: r.verb, resource: r.resource, code: r.code }).or_insert(0) += 1;
                }
                RequestCounts { counts }
            }
        }
    }
}
