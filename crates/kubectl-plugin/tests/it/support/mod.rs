//! The plugin's test cluster: the backend `TEST_BACKEND` names (kubesim by default, or the real control plane) with
//! the CRD, namespace `todo` and the real operator reconciling in-process, reached through a kubeconfig file as a
//! user would.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, PostParams};
use kubectl_microservice::status::{ClusterArgs, OutputFormat, StatusArgs};
use kubectl_microservice::wait::{self, Outcome, Progress, WaitArgs};
use microservice_core::crd::Microservice;
use microservice_operator::controller::{self, Config};
use microservice_operator::metrics::Metrics;
use microservice_testkit::ClusterOptions;
use serde_json::json;
use tokio::sync::oneshot;

pub const NS: &str = "todo";
/// Bound on anything a test waits for (the machine may be busy).
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const NEVER_READY: &str = "ghcr.io/example/todo-api:9.9.9-never-ready";

pub struct Cluster {
    pub backend: microservice_testkit::Cluster,
    pub kubeconfig: PathBuf,
    _dir: TempDir,
    _stop: oneshot::Sender<()>,
}

/// A directory removed when the test ends.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("query-cli-{tag}-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Cluster {
    /// A cluster with the CRD, namespace todo and a running operator; pods of NEVER_READY never become ready.
    pub async fn start(tag: &str) -> Cluster {
        let options = ClusterOptions { never_ready_images: vec![NEVER_READY.into()], ..ClusterOptions::default() };
        let backend = microservice_testkit::Cluster::start(options).await;
        backend.install(&microservice_core::crd::crd(), NS, DEADLINE).await;
        let client = backend.client();
        let (stop, stopped) = oneshot::channel::<()>();
        let config = Config { namespace: Some(NS.into()), ..Config::default() };
        tokio::spawn(controller::run(client, config, Arc::new(Metrics::new()), async move {
            let _ = stopped.await;
        }));
        let dir = TempDir::new(tag);
        let kubeconfig = dir.0.join("kubeconfig");
        std::fs::write(&kubeconfig, backend.kubeconfig_yaml()).unwrap();
        Cluster { backend, kubeconfig, _dir: dir, _stop: stop }
    }

    pub fn cluster_args(&self) -> ClusterArgs {
        ClusterArgs { kubeconfig: Some(self.kubeconfig.clone()), context: None }
    }

    pub fn wait_args(&self, name: &str, timeout: Duration) -> WaitArgs {
        WaitArgs {
            name: name.into(),
            namespace: Some(NS.into()),
            condition: wait::Condition::Ready,
            timeout,
            cluster: self.cluster_args(),
        }
    }

    pub fn status_args(&self, name: Option<&str>, output: OutputFormat) -> StatusArgs {
        StatusArgs {
            name: name.map(Into::into),
            namespace: Some(NS.into()),
            all_namespaces: false,
            output,
            cluster: self.cluster_args(),
        }
    }

    pub async fn create(&self, name: &str, image: &str) {
        let ms: Microservice = serde_json::from_value(json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"image": image, "port": 8080, "replicas": 2}
        }))
        .unwrap();
        Api::<Microservice>::namespaced(self.backend.client(), NS).create(&PostParams::default(), &ms).await.unwrap();
    }

    pub async fn wait(&self, name: &str, timeout: Duration) -> Outcome {
        let client = self.cluster_args().client().await.unwrap();
        let mut progress = Progress::stderr();
        wait::wait_ready(&client, NS, name, timeout, &mut progress).await.unwrap()
    }
}
