//! One benchmark cluster, on either backend: the Microservice CRD, the benchmark namespace and an observer.
//!
//! - kubesim: in-process, pod readiness delay 0. The benchmark's own writes go through the in-process Cluster API,
//!   so the emulator's HTTP request counters hold the measured client's requests alone.
//! - real: kube-apiserver, kube-controller-manager, kube-scheduler and kwok from `hack/control-plane/build.sh`.
//!   The operator and the floor client authenticate as users of their own, and kube-apiserver's audit log tells
//!   their requests apart from the benchmark's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kubesim::cluster::{Cluster, ListOptions, PatchBody, Subresource, WriteOptions};
use kubesim::controllers::ControllerConfig;
use kubesim::resources::ResourceRef;
use kubesim::{RequestCounts, RequestKey, Sim};
use microservice_core::crd;
use microservice_testkit::{ControlPlane, Options, User};
use serde_json::{Value, json};

use crate::child::OperatorProcess;
use crate::error::{BenchError, Result};
use crate::fixture::{Backend, IMAGE_V1, Kind, NAMESPACE, name};
use crate::observe::Observer;

/// The identities whose requests are measured on the real server (each scenario runs one of them).
const OPERATOR_USER: &str = "bench-operator";
const FLOOR_USER: &str = "bench-floor";

enum Server {
    Sim { sim: Sim, refs: [ResourceRef; 3] },
    Real { plane: Box<ControlPlane>, client: Client, audit: Mutex<AuditTally> },
}

/// The measured users' requests in the audit log, read on from where the last read stopped.
#[derive(Default)]
struct AuditTally {
    offset: u64,
    counts: BTreeMap<RequestKey, u64>,
}

pub struct Env {
    /// First, so its watches stop before the server does.
    pub observer: Observer,
    /// The operator's kubeconfig.
    pub kubeconfig: PathBuf,
    server: Server,
}

fn opts() -> WriteOptions {
    WriteOptions { field_manager: Some("bench".into()), ..WriteOptions::default() }
}

pub(crate) fn microservice(i: usize) -> Value {
    json!({
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "Microservice",
        "metadata": {"name": name(i), "namespace": NAMESPACE},
        "spec": {"image": IMAGE_V1, "port": 8080}
    })
}

fn unrelated_name(i: usize) -> String {
    format!("other-{i:05}")
}

fn unrelated_deployment(i: usize) -> Value {
    let name = unrelated_name(i);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example.com/other/app:1.0.0"}]}
            }
        }
    })
}

fn unrelated_service(i: usize) -> Value {
    let name = unrelated_name(i);
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    })
}

impl Env {
    pub async fn start(backend: Backend, dir: &Path) -> Result<Env> {
        std::fs::create_dir_all(dir).map_err(BenchError::io(format!("cannot create {}", dir.display())))?;
        match backend {
            Backend::Kubesim => Env::start_sim(dir).await,
            Backend::Real => Env::start_real().await,
        }
    }

    async fn start_sim(dir: &Path) -> Result<Env> {
        let sim = Sim::builder().controllers(ControllerConfig::default()).start().await?;
        let cluster = sim.cluster().clone();
        let crds = cluster
            .resolve("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .map_err(|e| BenchError::emulator("resolving CRDs", e))?;
        let body = serde_json::to_value(crd::crd()).map_err(BenchError::json("the CRD"))?;
        cluster.create(&crds, None, body, &opts()).map_err(|e| BenchError::emulator("the Microservice CRD", e))?;
        let microservices = wait_resolvable(&cluster, "platform.example.com", "v1alpha1", "microservices").await?;
        let namespaces = cluster.resolve("", "v1", "namespaces").map_err(|e| BenchError::emulator("namespaces", e))?;
        cluster
            .create(&namespaces, None, json!({"metadata": {"name": NAMESPACE}}), &opts())
            .map_err(|e| BenchError::emulator("the benchmark namespace", e))?;
        let deployments =
            cluster.resolve("apps", "v1", "deployments").map_err(|e| BenchError::emulator("deployments", e))?;
        let services = cluster.resolve("", "v1", "services").map_err(|e| BenchError::emulator("services", e))?;
        let tag = format!("kubesim-{}", sim.addr().port());
        let kubeconfig = dir.join(format!("kubeconfig-{tag}.yaml"));
        sim.write_kubeconfig(&kubeconfig)?;
        let observer = Observer::start(&sim);
        let refs = [microservices, deployments, services];
        Ok(Env { server: Server::Sim { sim, refs }, kubeconfig, observer })
    }

    async fn start_real() -> Result<Env> {
        eprintln!(
            "starting the real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)"
        );
        let plane = ControlPlane::start(Options {
            users: vec![User::admin(OPERATOR_USER), User::admin(FLOOR_USER)],
            ..Options::default()
        })
        .await?;
        eprintln!("control plane ready at {} in {:.1} s", plane.url(), plane.startup().as_secs_f64());
        let client = plane.client().await?;
        install(&client).await?;
        let kubeconfig = plane.kubeconfig_for(OPERATOR_USER)?;
        let observer = Observer::watch(client.clone());
        let audit = Mutex::new(AuditTally::default());
        Ok(Env { server: Server::Real { plane: Box::new(plane), client, audit }, kubeconfig, observer })
    }

    pub fn backend(&self) -> Backend {
        match self.server {
            Server::Sim { .. } => Backend::Kubesim,
            Server::Real { .. } => Backend::Real,
        }
    }

    /// Generous bounds for waits that scale with N (the machine is shared; on the real backend kube-apiserver,
    /// the controllers, the scheduler and kwok share it with the operator).
    pub fn timeout_for(&self, n: usize) -> Duration {
        let base = Duration::from_secs(60) + Duration::from_millis(60 * n as u64);
        match self.backend() {
            Backend::Kubesim => base,
            Backend::Real => base * 5,
        }
    }

    /// The server's own /metrics text (kube-apiserver's); None on kubesim, which keeps none, or when it cannot be
    /// read.
    pub async fn server_metrics(&self) -> Option<String> {
        match &self.server {
            Server::Sim { .. } => None,
            Server::Real { plane, .. } => plane.apiserver_metrics().await.ok(),
        }
    }

    /// The requests of the measured client (the operator, or the floor client) so far.
    pub fn requests(&self) -> RequestCounts {
        match &self.server {
            Server::Sim { sim, .. } => sim.requests(),
            Server::Real { plane, audit, .. } => {
                let mut tally = audit.lock().unwrap_or_else(|p| p.into_inner());
                let (requests, offset) = plane.audit().requests_from(tally.offset);
                tally.offset = offset;
                for r in requests.into_iter().filter(|r| r.user == OPERATOR_USER || r.user == FLOOR_USER) {
                    *tally
                        .counts
                        .entry(RequestKey { verb: r.verb, resource: r.resource, code: r.code })
                        .or_insert(0) += 1;
                }
                RequestCounts { counts: tally.counts.clone() }
            }
        }
    }

    /// A client for the floor scenario, whose requests [`Env::requests`] counts.
    pub async fn floor_client(&self) -> Result<Client> {
        match &self.server {
            Server::Sim { sim, .. } => Ok(sim.client()),
            Server::Real { plane, .. } => Ok(plane.client_as(FLOOR_USER).await?),
        }
    }

    /// Creates Microservices `ms-00000`.. with image v1.
    pub async fn create_microservices(&self, n: usize) -> Result<()> {
        self.create_all(Kind::Microservice, n, microservice).await
    }

    /// Creates `count` Deployments and as many Services, `other-00000`.., that no Microservice asked for.
    pub async fn create_unrelated(&self, count: usize) -> Result<()> {
        self.create_all(Kind::Deployment, count, unrelated_deployment).await?;
        self.create_all(Kind::Service, count, unrelated_service).await
    }

    /// Creates `body(0..count)`: in process on kubesim, 16 requests in flight on the real server.
    async fn create_all(&self, kind: Kind, count: usize, body: fn(usize) -> Value) -> Result<()> {
        let what = |i: usize| format!("creating {kind:?} {}", body(i)["metadata"]["name"]);
        match &self.server {
            Server::Sim { sim, refs } => {
                for i in 0..count {
                    sim.cluster()
                        .create(self.sim_ref(refs, kind), Some(NAMESPACE), body(i), &opts())
                        .map_err(|e| BenchError::emulator(what(i), e))?;
                }
                Ok(())
            }
            Server::Real { client, .. } => {
                let api = self.api(client, kind);
                let params = PostParams { field_manager: Some("bench".into()), ..PostParams::default() };
                futures::stream::iter(0..count)
                    .map(|i| {
                        let (api, params) = (&api, &params);
                        async move {
                            let object: DynamicObject =
                                serde_json::from_value(body(i)).map_err(BenchError::json("an object"))?;
                            api.create(params, &object).await.map_err(BenchError::kube(what(i)))?;
                            Ok::<(), BenchError>(())
                        }
                    })
                    .buffer_unordered(16)
                    .try_collect::<Vec<()>>()
                    .await?;
                Ok(())
            }
        }
    }

    /// The image of the first `n` Microservices, one after the other (an update wave).
    pub async fn set_images(&self, n: usize, image: &str) -> Result<()> {
        for i in 0..n {
            self.patch(Kind::Microservice, &name(i), json!({"spec": {"image": image}})).await?;
        }
        Ok(())
    }

    pub async fn patch(&self, kind: Kind, name: &str, body: Value) -> Result<()> {
        match &self.server {
            Server::Sim { sim, refs } => sim
                .cluster()
                .patch(
                    self.sim_ref(refs, kind),
                    Some(NAMESPACE),
                    name,
                    PatchBody::Merge(body),
                    Subresource::Main,
                    &opts(),
                )
                .map(|_| ())
                .map_err(|e| BenchError::emulator(format!("patching {kind:?} {name}"), e)),
            Server::Real { client, .. } => self
                .api(client, kind)
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map(|_| ())
                .map_err(BenchError::kube(format!("patching {kind:?} {name}"))),
        }
    }

    pub async fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        match &self.server {
            Server::Sim { sim, refs } => sim
                .cluster()
                .delete(self.sim_ref(refs, kind), Some(NAMESPACE), name, &Default::default())
                .map(|_| ())
                .map_err(|e| BenchError::emulator(format!("deleting {kind:?} {name}"), e)),
            Server::Real { client, .. } => self
                .api(client, kind)
                .delete(name, &DeleteParams::background())
                .await
                .map(|_| ())
                .map_err(BenchError::kube(format!("deleting {kind:?} {name}"))),
        }
    }

    /// The Events in the benchmark namespace by reason, each counted with its series (a repeated fact is one Event
    /// whose `series.count` grows). What tells a user why a wave cost more writes than its transitions: a rollout
    /// past its progress deadline is a `RolloutFailed` Warning and two status writes. Empty when they cannot be
    /// listed.
    pub async fn event_reasons(&self) -> BTreeMap<String, u64> {
        let items = match &self.server {
            Server::Sim { sim, .. } => {
                let cluster = sim.cluster();
                cluster
                    .resolve("events.k8s.io", "v1", "events")
                    .ok()
                    .and_then(|events| cluster.list(&events, Some(NAMESPACE), &ListOptions::default()).ok())
                    .map(|list| list.items)
                    .unwrap_or_default()
            }
            Server::Real { client, .. } => {
                let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NAMESPACE);
                let listed = api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
                listed.iter().filter_map(|e| serde_json::to_value(e).ok()).collect()
            }
        };
        reason_counts(&items)
    }

    /// The object as the server holds it now; None when it is absent (or cannot be read).
    pub async fn get(&self, kind: Kind, name: &str) -> Option<Value> {
        match &self.server {
            Server::Sim { sim, refs } => sim.cluster().get(self.sim_ref(refs, kind), Some(NAMESPACE), name).ok(),
            Server::Real { client, .. } => {
                let obj = self.api(client, kind).get_opt(name).await.ok()??;
                serde_json::to_value(obj).ok()
            }
        }
    }

    fn sim_ref<'a>(&self, refs: &'a [ResourceRef; 3], kind: Kind) -> &'a ResourceRef {
        match kind {
            Kind::Microservice => &refs[0],
            Kind::Deployment => &refs[1],
            Kind::Service => &refs[2],
        }
    }

    fn api(&self, client: &Client, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), NAMESPACE, &kind.api_resource())
    }

    /// Waits until `n` Microservices are Ready for `generation`; returns when the last one became Ready.
    pub async fn wait_all_ready(
        &self,
        n: usize,
        generation: i64,
        timeout: Duration,
        op: &mut OperatorProcess,
    ) -> Result<Instant> {
        let deadline = Instant::now() + timeout;
        let mut progress = Progress::new();
        loop {
            op.check_alive()?;
            let ready = self.observer.seen().ready_for(generation);
            if ready >= n {
                return Ok(self.observer.seen().last_ready.unwrap_or_else(Instant::now));
            }
            if Instant::now() > deadline {
                return Err(BenchError::Timeout {
                    what: format!("{n} Microservices Ready for generation {generation} ({ready} were)"),
                    seconds: timeout.as_secs(),
                });
            }
            progress.say(|| format!("{ready}/{n} Microservices Ready for generation {generation}"));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the measured client's request count has not moved for `quiet`, so late requests (Events after
    /// the last status write) are counted. Bounded by `timeout`.
    pub async fn wait_quiet(&self, quiet: Duration, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut last = self.requests().total();
        let mut since = Instant::now();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.requests().total();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return;
            }
        }
    }
}

/// Occurrences by reason of events.k8s.io/v1 Events: one, or the series' count.
fn reason_counts(events: &[Value]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for event in events {
        let reason = event["reason"].as_str().unwrap_or("(none)").to_string();
        *counts.entry(reason).or_default() += event["series"]["count"].as_u64().unwrap_or(1).max(1);
    }
    counts
}

/// What `after` holds beyond `before`, as a report note: "Updated 5000, RolloutFailed 12".
pub fn reasons_note(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> String {
    let mut grown: Vec<(&String, u64)> = after
        .iter()
        .map(|(reason, n)| (reason, n.saturating_sub(before.get(reason).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect();
    grown.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let listed: Vec<String> = grown.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
    format!("Events by reason (occurrences): {}", if listed.is_empty() { "none".into() } else { listed.join(", ") })
}

/// Says how far a long wait is, at most every 10 s: a real control plane takes minutes for N=1000, and the floor
/// client on kubesim minutes for N=5000.
pub struct Progress(Instant);

impl Progress {
    pub fn new() -> Progress {
        Progress(Instant::now())
    }

    pub fn say(&mut self, line: impl FnOnce() -> String) {
        if self.0.elapsed() >= Duration::from_secs(10) {
            eprintln!("  {}", line());
            self.0 = Instant::now();
        }
    }
}

/// The Microservice CRD, Established, and the benchmark namespace, on the real server.
async fn install(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crd::crd();
    crds.create(&PostParams::default(), &crd).await.map_err(BenchError::kube("installing the CRD"))?;
    let crd_name = crd.metadata.name.clone().unwrap_or_default();
    let established = await_condition(crds, &crd_name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(30), established)
        .await
        .map_err(|_| BenchError::Timeout { what: "the Microservice CRD to be Established".into(), seconds: 30 })?
        .map_err(|e| BenchError::Failed { what: "watching the CRD".into(), message: e.to_string() })?;
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).map_err(BenchError::json("a namespace"))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(BenchError::kube("creating the benchmark namespace"))?;
    Ok(())
}

async fn wait_resolvable(cluster: &Cluster, group: &str, version: &str, plural: &str) -> Result<ResourceRef> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cluster.resolve(group, version, plural) {
            Ok(rt) => return Ok(rt),
            Err(e) if Instant::now() > deadline => return Err(BenchError::emulator(format!("serving {plural}"), e)),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_counts_its_occurrences_and_the_note_lists_what_grew_most_first() {
        let before = reason_counts(&[json!({"reason": "Created"})]);
        let after = reason_counts(&[
            json!({"reason": "Created"}),
            json!({"reason": "Updated"}),
            json!({"reason": "Updated"}),
            json!({"reason": "RolloutFailed", "series": {"count": 3}}),
            json!({}),
        ]);
        assert_eq!(after["RolloutFailed"], 3);
        assert_eq!(after["(none)"], 1);
        assert_eq!(
            reasons_note(&before, &after),
            "Events by reason (occurrences): RolloutFailed 3, Updated 2, (none) 1"
        );
        assert_eq!(reasons_note(&after, &after), "Events by reason (occurrences): none");
    }
}
