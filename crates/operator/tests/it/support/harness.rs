//! A cluster for end-to-end tests: the backend `TEST_BACKEND` chooses (kubesim with its simulated controllers, or
//! a real kube-apiserver with kube-controller-manager, kube-scheduler and kwok), the Microservice CRD installed,
//! namespace `todo`, and the real operator running against it over HTTPS.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use kubesim::Sim;
use kubesim::controllers::ControllerConfig;
use kubesim::faults::FaultConfig;
use microservice_core::crd::{Condition, ConditionStatus, ConditionType, Microservice, MicroserviceStatus};
use microservice_operator::controller::{self, Config};
use microservice_operator::metrics::Metrics;
use microservice_testkit::{Cluster, ClusterOptions};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::ready_for_current_generation;

pub const NS: &str = "todo";
pub const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
pub const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";
/// How long any awaited state may take before a test fails (generous: the machine may be busy).
pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Harness {
    pub cluster: Cluster,
    pub client: Client,
}

/// One running operator; `stop` shuts it down gracefully.
pub struct Operator {
    pub metrics: Arc<Metrics>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Operator {
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(DEADLINE, &mut self.task).await;
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Harness {
    /// A cluster on the backend `TEST_BACKEND` names.
    pub async fn start(options: ClusterOptions) -> Harness {
        init_logs();
        Self::install(Cluster::start(options).await).await
    }

    /// Always kubesim: faults only the emulator can inject.
    pub async fn start_emulator_with(controllers: ControllerConfig, faults: FaultConfig) -> Harness {
        init_logs();
        let sim = Sim::builder().controllers(controllers).faults(faults).start().await.expect("start kubesim");
        Self::install(Cluster::from_sim(sim)).await
    }

    async fn install(cluster: Cluster) -> Harness {
        // The CRD as shipped (its CEL rules included), not kube-derive's bare one.
        cluster.install(&microservice_core::crd::crd(), NS, DEADLINE).await;
        let client = cluster.client();
        Harness { cluster, client }
    }

    /// An admin kubeconfig for child processes (the operator binary, kubectl).
    #[allow(dead_code)] // used by the suites that include this harness, not by e2e itself
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        std::fs::write(path, self.cluster.kubeconfig_yaml()).expect("write the kubeconfig");
    }

    /// The requests the API server answered so far (see `Cluster::requests`).
    pub fn requests(&self) -> kubesim::RequestCounts {
        self.cluster.requests()
    }

    pub fn config(&self) -> Config {
        Config { namespace: Some(NS.to_string()), concurrency: 8, ..Config::default() }
    }

    pub fn operator(&self) -> Operator {
        self.operator_with(self.config())
    }

    pub fn operator_with(&self, config: Config) -> Operator {
        let metrics = Arc::new(Metrics::new());
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(controller::run(self.client.clone(), config, metrics.clone(), shutdown));
        Operator { metrics, stop: Some(stop), task }
    }

    pub fn microservices(&self) -> Api<Microservice> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn create(&self, name: &str, image: &str) -> Microservice {
        let ms = microservice(name, image);
        self.microservices().create(&PostParams::default(), &ms).await.expect("create Microservice")
    }

    /// Polls the Microservice until `done` holds; fails the test after [`DEADLINE`] with the last state seen.
    pub async fn wait_for(&self, name: &str, what: &str, done: impl Fn(&Microservice) -> bool) -> Microservice {
        let api = self.microservices();
        let start = Instant::now();
        loop {
            let current = api.get_opt(name).await.ok().flatten();
            if let Some(ms) = &current
                && done(ms)
            {
                return ms.clone();
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for {name} to be {what}; last seen: {:#?}",
                current.and_then(|m| m.status)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_ready(&self, name: &str) -> Microservice {
        self.wait_for(name, "Ready for its current generation", ready_for_current_generation).await
    }

    /// Waits until `probe` returns Some.
    pub async fn eventually<T, F, Fut>(&self, what: &str, probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        super::poll(what, DEADLINE, Duration::from_millis(20), probe).await
    }

    /// Deployments in `todo` whose app.kubernetes.io/instance label is `name`.
    pub async fn deployments_of(&self, name: &str) -> Vec<Deployment> {
        let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
        self.deployments().list(&lp).await.expect("list deployments").items
    }

    /// Records every status the Microservices in `todo` take, as seen on a watch.
    pub fn record_statuses(&self) -> StatusLog {
        let log = StatusLog::default();
        let sink = log.clone();
        let api = self.microservices();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).applied_objects().boxed();
            while let Some(Ok(ms)) = stream.next().await {
                let generation = ms.metadata.generation.unwrap_or_default();
                let mut entries = sink.entries.lock().unwrap_or_else(|p| p.into_inner());
                entries.push(Seen {
                    name: ms.name_any(),
                    generation,
                    resource_version: ms.resource_version().unwrap_or_default(),
                    status: ms.status.clone().unwrap_or_default(),
                });
            }
        });
        *log.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        log
    }
}

fn init_logs() {
    // RUST_LOG=info shows the operator's logs for a failing test.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

#[derive(Clone, Debug)]
pub struct Seen {
    #[allow(dead_code)]
    pub name: String,
    /// The CR's metadata.generation when this status was seen.
    pub generation: i64,
    pub resource_version: String,
    pub status: MicroserviceStatus,
}

#[derive(Clone, Default)]
pub struct StatusLog {
    pub entries: Arc<Mutex<Vec<Seen>>>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl StatusLog {
    pub fn snapshot(&self) -> Vec<Seen> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What the log holds once its watch has delivered `ms` as read elsewhere: the log's watch and the read that
    /// returned `ms` are separate streams, so the log may lag behind it.
    pub async fn through(&self, ms: &Microservice) -> Vec<Seen> {
        let version = ms.resource_version().unwrap_or_default();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let seen = self.snapshot();
            if seen.iter().any(|s| s.name == ms.name_any() && s.resource_version == version) {
                return seen;
            }
            assert!(tokio::time::Instant::now() < deadline, "the status log never saw {} at {version}", ms.name_any());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for StatusLog {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1
            && let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take()
        {
            task.abort();
        }
    }
}

pub fn microservice(name: &str, image: &str) -> Microservice {
    serde_json::from_value(json!({
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "Microservice",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": image, "port": 8080}
    }))
    .expect("a Microservice")
}

pub fn condition(status: &MicroserviceStatus, type_: ConditionType) -> Option<&Condition> {
    status.condition(type_)
}

/// True when the condition holds for the generation it is compared with.
pub fn holds(status: &MicroserviceStatus, type_: ConditionType, generation: i64) -> bool {
    condition(status, type_)
        .is_some_and(|c| c.status == ConditionStatus::True && c.observed_generation == Some(generation))
}

/// Ready pods per image, from the cluster's pods in `todo`.
pub async fn ready_pods_by_image(client: &Client) -> BTreeMap<String, usize> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), NS);
    let mut by_image = BTreeMap::new();
    for pod in pods.list(&ListParams::default()).await.expect("list pods").items {
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let image = pod.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone());
        if ready && let Some(image) = image {
            *by_image.entry(image).or_insert(0) += 1;
        }
    }
    by_image
}

/// Requests with this verb on this resource that the server accepted (a 409 from a stale-version precondition
/// changed nothing).
pub fn succeeded(counts: &kubesim::RequestCounts, verb: &str, resource: &str) -> u64 {
    counts.counts.iter().filter(|(k, _)| k.verb == verb && k.resource == resource && k.code < 300).map(|(_, n)| n).sum()
}
