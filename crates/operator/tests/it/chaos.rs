//! The chaos suite: 50 Microservices under random spec edits (image, replicas, some invalid) while the emulator
//! fails 20% of writes with 5xx and 5% of all requests with 429, adds latency, drops watch streams every few
//! seconds and forces a 410 Gone. The operator is killed (its runtime dropped: no graceful shutdown) and restarted
//! at random moments, three times as a single replica, then once more while two replicas elect a leader through a
//! Lease. Invariants are checked on every committed change (see `invariants`) and the end state once the faults
//! stop.
//!
//! On the real control plane (`TEST_BACKEND=real`) the faults are the ones a real server gives: kube-apiserver is
//! killed and started again over the same etcd data twice during the run (every watch breaks, requests fail until it
//! is back), besides the same operator kills, edits and leader election.
//!
//! Seeded: the seed is printed (and named in every failure); `CHAOS_SEED=N cargo test -p microservice-operator
//! --test it chaos:: -- --nocapture` replays the same edits, kills and fault draws (thread timing still varies).

mod invariants;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use invariants::{Recorder, rollout_complete, want};

use crate::support::ready_for_current_generation;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::{Api, Client};
use kubesim::cluster::{ListOptions, PatchBody, Subresource, WriteOptions};
use kubesim::faults::{ErrorRule, FaultConfig, LatencyRule, WatchRule};
use kubesim::resources::ResourceRef;
use microservice_core::crd;
use microservice_operator::controller::{self, Config};
use microservice_operator::health::Health;
use microservice_operator::leader::Leadership;
use microservice_operator::metrics::Metrics;
use microservice_operator::settings::Election;
use microservice_testkit::ClusterOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const NS: &str = "chaos";
const CRS: usize = 50;
/// How long edits, kills and faults go on.
const CHAOS: Duration = Duration::from_secs(60);
/// Bounds for the calm phases (the machine is shared; convergence is usually a few seconds).
const CONVERGE_DEADLINE: Duration = Duration::from_secs(90);
/// Kills of the single replica before the election part.
const SINGLE_KILLS: usize = 3;
/// When two elected replicas replace the single one.
const ELECTION_AT: Duration = Duration::from_secs(36);

fn name(i: usize) -> String {
    format!("svc-{i:02}")
}

/// A spec the suite writes, and the Accepted reason it expects (None: valid).
#[derive(Debug, Clone)]
struct Spec {
    image: String,
    port: i64,
    replicas: i64,
    invalid: Option<&'static str>,
}

impl Spec {
    fn random(rng: &mut StdRng) -> Spec {
        let valid = Spec {
            image: format!("ghcr.io/example/todo-api:1.{}.0", rng.random_range(0..6)),
            port: 8080,
            replicas: rng.random_range(1..=3),
            invalid: None,
        };
        if rng.random::<f64>() >= 0.2 {
            return valid;
        }
        match rng.random_range(0..3) {
            0 => Spec { image: "ghcr.io/example/todo-api:latest".into(), invalid: Some("MutableTag"), ..valid },
            1 => Spec { image: "ghcr.io/other/todo-api:1.0.0".into(), invalid: Some("ImageNotAllowed"), ..valid },
            _ => Spec { port: 9090, invalid: Some("PortReserved"), ..valid },
        }
    }

    fn body(&self) -> Value {
        json!({"image": self.image, "port": self.port, "replicas": self.replicas})
    }
}

#[derive(Debug)]
enum Action {
    Edit(usize, Spec),
    /// Kill the single replica.
    Kill,
    Start,
    /// Replace the single replica by two that elect a leader.
    Elect,
    KillElected(usize),
    StartElected(usize),
    ForceGone(&'static str),
}

/// The whole run, drawn from the seed up front so it replays: a single replica killed and restarted three times,
/// then two replicas with leader election, one of which is killed and restarted.
fn timeline(rng: &mut StdRng) -> Vec<(Duration, Action)> {
    let mut actions = Vec::new();
    let mut t = Duration::ZERO;
    loop {
        t += Duration::from_millis(rng.random_range(100..500));
        if t >= CHAOS {
            break;
        }
        let i = rng.random_range(0..CRS);
        actions.push((t, Action::Edit(i, Spec::random(rng))));
    }
    let slot = ELECTION_AT.as_millis() as u64 / SINGLE_KILLS as u64;
    for k in 0..SINGLE_KILLS as u64 {
        let at = Duration::from_millis(k * slot + rng.random_range(slot / 5..slot * 3 / 5));
        actions.push((at, Action::Kill));
        actions.push((at + Duration::from_millis(rng.random_range(0..1500)), Action::Start));
    }
    actions.push((ELECTION_AT, Action::Elect));
    let at = ELECTION_AT + Duration::from_millis(rng.random_range(4_000..12_000));
    let victim = rng.random_range(0..2);
    actions.push((at, Action::KillElected(victim)));
    actions.push((at + Duration::from_millis(rng.random_range(500..2_000)), Action::StartElected(victim)));
    for resource in ["microservices", "deployments"] {
        let at = Duration::from_millis(rng.random_range(5_000..CHAOS.as_millis() as u64));
        actions.push((at, Action::ForceGone(resource)));
    }
    // Stable: an Elect and a Kill drawn for the same instant keep their order.
    actions.sort_by_key(|(t, _)| *t);
    actions
}

fn faults(seed: u64) -> FaultConfig {
    let mut errors =
        vec![ErrorRule { verb: "*".into(), resource: "*".into(), rate: 0.05, code: 429, retry_after_seconds: Some(1) }];
    for (verb, code) in [("create", 500), ("update", 503), ("patch", 500), ("delete", 503)] {
        errors.push(ErrorRule { verb: verb.into(), resource: "*".into(), rate: 0.2, code, retry_after_seconds: None });
    }
    FaultConfig {
        seed,
        errors,
        latency: vec![LatencyRule { verb: "*".into(), resource: "*".into(), fixed_ms: 2, jitter_ms: 30 }],
        watch: vec![WatchRule { resource: "*".into(), drop_after_events: None, drop_after_ms: Some(3_000) }],
        force_gone: Vec::new(),
        paused: false,
    }
}

struct Cluster {
    backend: microservice_testkit::Cluster,
    /// kubesim only: the suite writes through the in-process API, so the injected faults are the operator's alone.
    microservices: Option<ResourceRef>,
}

fn opts() -> WriteOptions {
    WriteOptions { field_manager: Some("chaos".into()), ..WriteOptions::default() }
}

fn dynamic(client: &Client, group: &str, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), NS, &resource)
}

/// Retries a request of the suite's own until the server answers (kube-apiserver may be restarting).
async fn retried<T, F, Fut>(what: &str, mut request: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    loop {
        match request().await {
            Ok(answer) => return answer,
            Err(e) => assert!(started.elapsed() < CONVERGE_DEADLINE, "{what}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Cluster {
    async fn start() -> Cluster {
        let options = ClusterOptions { pod_ready_delay: Duration::from_millis(150), ..ClusterOptions::default() };
        let backend = microservice_testkit::Cluster::start(options).await;
        let Some(sim) = backend.sim() else {
            let client = backend.client();
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            crds.create(&PostParams::default(), &crd::crd()).await.expect("install the CRD");
            let established =
                await_condition(crds, "microservices.platform.example.com", conditions::is_crd_established());
            tokio::time::timeout(CONVERGE_DEADLINE, established).await.expect("CRD established").expect("CRD watch");
            let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace");
            Api::<Namespace>::all(client).create(&PostParams::default(), &ns).await.expect("create the namespace");
            return Cluster { backend, microservices: None };
        };
        let c = sim.cluster();
        let crds = c.resolve("apiextensions.k8s.io", "v1", "customresourcedefinitions").unwrap();
        c.create(&crds, None, serde_json::to_value(crd::crd()).unwrap(), &opts()).expect("install the CRD");
        let started = Instant::now();
        let microservices = loop {
            match c.resolve("platform.example.com", "v1alpha1", "microservices") {
                Ok(rt) => break rt,
                Err(e) => assert!(started.elapsed() < Duration::from_secs(10), "the CRD is not served: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let namespaces = c.resolve("", "v1", "namespaces").unwrap();
        c.create(&namespaces, None, json!({"metadata": {"name": NS}}), &opts()).expect("create the namespace");
        Cluster { backend, microservices: Some(microservices) }
    }

    fn microservices_api(&self) -> Api<DynamicObject> {
        dynamic(&self.backend.client(), "platform.example.com", "v1alpha1", "Microservice", "microservices")
    }

    async fn create(&self, i: usize, spec: &Spec) {
        let body = json!({"apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
                          "metadata": {"name": name(i), "namespace": NS}, "spec": spec.body()});
        match (self.backend.sim(), &self.microservices) {
            (Some(sim), Some(rt)) => {
                sim.cluster().create(rt, Some(NS), body, &opts()).expect("create a Microservice");
            }
            _ => {
                let object: DynamicObject = serde_json::from_value(body).expect("a Microservice");
                let (api, post) = (self.microservices_api(), PostParams::default());
                retried("create a Microservice", || api.create(&post, &object)).await;
            }
        }
    }

    async fn edit(&self, i: usize, spec: &Spec) {
        let patch = json!({"spec": spec.body()});
        match (self.backend.sim(), &self.microservices) {
            (Some(sim), Some(rt)) => {
                sim.cluster()
                    .patch(rt, Some(NS), &name(i), PatchBody::Merge(patch), Subresource::Main, &opts())
                    .expect("edit a Microservice");
            }
            _ => {
                let api = self.microservices_api();
                let params = PatchParams { field_manager: Some("chaos".into()), ..PatchParams::default() };
                let (name, patch) = (name(i), Patch::Merge(&patch));
                retried("edit a Microservice", || api.patch(&name, &params, &patch)).await;
            }
        }
    }

    async fn list(&self, group: &str, version: &str, kind: &str, plural: &str) -> Vec<Value> {
        if let Some(sim) = self.backend.sim() {
            let rt = sim.cluster().resolve(group, version, plural).unwrap();
            return sim.cluster().list(&rt, Some(NS), &ListOptions::default()).unwrap().items;
        }
        let api = dynamic(&self.backend.client(), group, version, kind, plural);
        let params = ListParams::default();
        let list = retried("list", || api.list(&params)).await;
        list.items.iter().filter_map(|o| serde_json::to_value(o).ok()).collect()
    }

    fn set_faults(&self, config: FaultConfig) {
        if let Some(sim) = self.backend.sim() {
            sim.faults().set_config(config);
        }
    }

    /// kubesim: the next watch of `resource` gets 410 Gone. The real server: kube-apiserver killed and started
    /// again over the same etcd data.
    async fn force_gone(&mut self, resource: &'static str) {
        if let Some(sim) = self.backend.sim() {
            sim.faults().force_gone(resource);
            return;
        }
        if let Some(plane) = self.backend.real() {
            plane.restart_apiserver().await.expect("restart kube-apiserver");
        }
    }

    fn replica(&self, elected: Option<&str>) -> Replica {
        Replica::start(self.backend.kubeconfig_yaml(), elected.map(str::to_string))
    }

    /// What is wrong with the end state, given each CR's last spec (empty when all is as it should be).
    async fn end_state_problems(&self, specs: &BTreeMap<usize, Spec>) -> Vec<String> {
        let mut problems = Vec::new();
        let microservices = self.list("platform.example.com", "v1alpha1", "Microservice", "microservices").await;
        let deployments = self.list("apps", "v1", "Deployment", "deployments").await;
        let services = self.list("", "v1", "Service", "services").await;
        let by_name = |items: &[Value], n: &str| -> Vec<Value> {
            items.iter().filter(|o| o["metadata"]["name"] == n).cloned().collect()
        };
        for (kind, items) in [("Deployments", &deployments), ("Services", &services)] {
            if items.len() != CRS {
                problems.push(format!("{} {kind} in the namespace, expected {CRS}", items.len()));
            }
        }
        for (i, spec) in specs {
            let n = name(*i);
            let Some(ms) = by_name(&microservices, &n).pop() else {
                problems.push(format!("{n}: missing"));
                continue;
            };
            let uid = ms["metadata"]["uid"].clone();
            for (kind, items) in [("Deployment", &deployments), ("Service", &services)] {
                let children = by_name(items, &n);
                let controlled = children.iter().filter(|c| {
                    c.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|refs| {
                        refs.iter().any(|r| r["uid"] == uid && r["controller"] == true && r["kind"] == "Microservice")
                    })
                });
                if children.len() != 1 || controlled.count() != 1 {
                    problems.push(format!("{n}: {} {kind}(s), expected exactly one controlled by it", children.len()));
                }
            }
            let generation = ms["metadata"]["generation"].as_i64();
            match spec.invalid {
                None => {
                    let complete =
                        by_name(&deployments, &n).first().zip(want(&ms)).is_some_and(|(d, w)| rollout_complete(d, &w));
                    if !ready_for_current_generation(&ms) || !complete {
                        problems.push(format!(
                            "{n}: not Ready for generation {generation:?} with a complete rollout: {}",
                            ms["status"]
                        ));
                    }
                }
                Some(reason) => {
                    let accepted = ms
                        .pointer("/status/conditions")
                        .and_then(Value::as_array)
                        .and_then(|cs| cs.iter().find(|c| c["type"] == "Accepted"))
                        .cloned()
                        .unwrap_or_default();
                    let ok = ms["status"]["phase"] == "Invalid"
                        && accepted["status"] == "False"
                        && accepted["reason"] == reason
                        && accepted["observedGeneration"].as_i64() == generation;
                    if !ok {
                        problems.push(format!(
                            "{n}: expected Invalid ({reason}) for generation {generation:?}: {}",
                            ms["status"]
                        ));
                    }
                }
            }
        }
        problems
    }

    async fn wait_end_state(&self, specs: &BTreeMap<usize, Spec>, seed: u64, phase: &str) {
        let started = Instant::now();
        loop {
            let problems = self.end_state_problems(specs).await;
            if problems.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < CONVERGE_DEADLINE,
                "chaos seed {seed}: {phase}: not converged after {CONVERGE_DEADLINE:?}:\n{}",
                problems.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// One operator replica on a runtime of its own, as a process would be: killing it drops every task it spawned
/// (caches, the Lease manager) at once, with no graceful shutdown.
struct Replica {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    /// `elected`: join the leader election with this identity (and rejoin after losing the Lease, as a
    /// restarted process would); None runs as the only replica.
    fn start(kubeconfig: String, elected: Option<String>) -> Replica {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for an operator replica");
        runtime.spawn(async move {
            let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
            let client = Client::try_from(config).unwrap();
            let config = Config { namespace: Some(NS.into()), concurrency: 8, ..Config::default() };
            let Some(identity) = elected else {
                controller::run(client, config, Arc::new(Metrics::new()), futures::future::pending()).await;
                return;
            };
            let election = Election {
                namespace: Some(NS.into()),
                lease_name: "microservice-operator".into(),
                identity,
                lease_duration: Duration::from_secs(4),
                renew_deadline: Duration::from_secs(3),
            };
            loop {
                let metrics = Arc::new(Metrics::new());
                let health = Arc::new(Health::new());
                match Leadership::join(client.clone(), &election, metrics.clone(), health.clone()).await {
                    Ok(leadership) => {
                        let leader = leadership.subscribe();
                        let config = config.clone();
                        controller::run_elected(
                            client.clone(),
                            config,
                            metrics,
                            health,
                            leader,
                            futures::future::pending(),
                        )
                        .await;
                        leadership.release(Duration::from_secs(2)).await;
                    }
                    // The faults can fail the Lease's first read or create.
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        });
        Replica { runtime: Some(runtime) }
    }

    fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn seed() -> u64 {
    match std::env::var("CHAOS_SEED") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("CHAOS_SEED must be a number, got {s:?}")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.as_nanos() as u64),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_converges_and_keeps_its_invariants_under_chaos() {
    let seed = seed();
    println!("chaos seed: {seed} (replay with CHAOS_SEED={seed})");
    eprintln!("chaos seed: {seed} (replay with CHAOS_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cluster = Cluster::start().await;
    let recorder = Recorder::start(&cluster.backend, NS);

    let mut specs = create_valid(&cluster, &mut rng).await;
    let mut replicas = Replicas { single: Some(cluster.replica(None)), elected: [None, None] };
    cluster.wait_end_state(&specs, seed, "initial convergence").await;

    cluster.set_faults(faults(seed));
    let plan = timeline(&mut rng);
    let Tally { kills, edits, invalid_edits } = play(&mut cluster, plan, &mut specs, &mut replicas).await;
    assert!(kills >= 3, "chaos seed {seed}: only {kills} kills happened");
    println!(
        "chaos seed {seed}: {edits} edits ({invalid_edits} invalid), {kills} kills; faults off, waiting for convergence"
    );
    cluster.set_faults(FaultConfig { seed, ..FaultConfig::default() });
    cluster.wait_end_state(&specs, seed, "after the chaos").await;

    assert_no_violations(&recorder.record(), seed);
    drop(replicas);
}

/// Calm start: creates every CR with a valid spec, so each has its children before the chaos begins.
async fn create_valid(cluster: &Cluster, rng: &mut StdRng) -> BTreeMap<usize, Spec> {
    let mut specs = BTreeMap::new();
    for i in 0..CRS {
        let spec = Spec { invalid: None, ..Spec::random(rng) };
        let spec = if spec.port == 9090 || spec.image.ends_with("latest") || spec.image.contains("/other/") {
            Spec { image: "ghcr.io/example/todo-api:1.0.0".into(), port: 8080, ..spec }
        } else {
            spec
        };
        cluster.create(i, &spec).await;
        specs.insert(i, spec);
    }
    specs
}

/// The operator replicas running: one alone, then two that elect a leader.
struct Replicas {
    single: Option<Replica>,
    elected: [Option<Replica>; 2],
}

/// What the chaos did, for the summary and the check that the kills happened.
#[derive(Default)]
struct Tally {
    kills: usize,
    edits: usize,
    invalid_edits: usize,
}

/// Carries out the plan at its times; `specs` ends with the spec each CR was last given.
async fn play(
    cluster: &mut Cluster,
    plan: Vec<(Duration, Action)>,
    specs: &mut BTreeMap<usize, Spec>,
    replicas: &mut Replicas,
) -> Tally {
    let mut tally = Tally::default();
    let start = Instant::now();
    for (at, action) in plan {
        tokio::time::sleep_until((start + at).into()).await;
        match action {
            Action::Edit(i, spec) => {
                cluster.edit(i, &spec).await;
                tally.edits += 1;
                tally.invalid_edits += usize::from(spec.invalid.is_some());
                specs.insert(i, spec);
            }
            Action::Kill => {
                if let Some(replica) = replicas.single.take() {
                    replica.kill();
                    tally.kills += 1;
                }
            }
            Action::Start => {
                if replicas.single.is_none() && replicas.elected.iter().all(Option::is_none) {
                    replicas.single = Some(cluster.replica(None));
                }
            }
            Action::Elect => {
                if let Some(replica) = replicas.single.take() {
                    replica.kill();
                }
                for (k, slot) in replicas.elected.iter_mut().enumerate() {
                    *slot = Some(cluster.replica(Some(&format!("replica-{k}"))));
                }
            }
            Action::KillElected(k) => {
                if let Some(replica) = replicas.elected[k].take() {
                    replica.kill();
                    tally.kills += 1;
                }
            }
            Action::StartElected(k) => replicas.elected[k] = Some(cluster.replica(Some(&format!("replica-{k}")))),
            Action::ForceGone(resource) => cluster.force_gone(resource).await,
        }
    }
    tally
}

/// The continuous checks ran over every change (nothing overflowed, some Ready was checked) and found nothing.
fn assert_no_violations(record: &invariants::Record, seed: u64) {
    println!(
        "chaos seed {seed}: {} status writes seen, {} Ready statuses checked against their Deployment",
        record.status_writes, record.ready_checked
    );
    assert_eq!(record.lagged, 0, "chaos seed {seed}: the change feed overflowed; the continuous checks are incomplete");
    assert!(record.ready_checked > 0, "chaos seed {seed}: no Ready status was checked");
    assert!(
        record.violations.is_empty(),
        "chaos seed {seed}: {} invariant violations:\n{}",
        record.violations.len(),
        record.violations.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
