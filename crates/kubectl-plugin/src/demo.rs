//! `kubectl microservice demo`: the operator at work with nothing installed. It starts kubesim in-process, runs
//! the real operator against it over HTTP, and walks through what a service team sees: a rollout, a deleted
//! Service restored, an image update, a refused image and the handover of a hand-made Deployment.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, conditions, wait::await_condition, watcher};
use kube::{Client, Resource, ResourceExt};
use kubesim::Sim;
use kubesim::controllers::ControllerConfig;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::view::{
    Verdict, format_duration, live_line, next_step, parse_duration, transition_key, transition_line, verdict,
};
use crate::wait::Progress;
use microservice_core::admission_policy::{self, BINDING_NAME};
use microservice_core::crd::{ConditionStatus, ConditionType, Microservice};
use microservice_core::desired::{HANDOVER_ANNOTATION, LABEL_INSTANCE, LABEL_NAME};
use microservice_core::profile::PlatformProfile;
use microservice_core::reason::Reason;
use microservice_operator::controller::{self, Config};
use microservice_operator::metrics::Metrics;

const NAMESPACE: &str = "todo";
const SAMPLE: &str = include_str!("../../../deploy/samples/todo-api.yaml");
const NEXT_IMAGE: &str = "ghcr.io/example/todo-api:1.5.0";
const FOREIGN_IMAGE: &str = "docker.io/someone/todo-api:1.5.0";
const HANDMADE: &str = "billing";
const STEPS: usize = 5;

/// Run kubesim and the operator in-process and walk through what the operator does, narrating each step.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Keep the cluster and the operator running after the walkthrough, to explore with kubectl; Ctrl-C stops.
    #[arg(long, visible_alias = "keep-running")]
    pub serve: bool,
    /// How long a simulated pod takes from being scheduled to Ready (0 for a fast run).
    #[arg(long, default_value = "1.5s", value_parser = parse_duration, value_name = "DURATION")]
    pub pod_ready_delay: Duration,
    /// How long each step may take before the demo gives up on it.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub step_timeout: Duration,
    /// Where the kubeconfig for the demo cluster is written.
    #[arg(long, default_value = "target/demo", value_name = "DIR")]
    pub dir: PathBuf,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            serve: false,
            pod_ready_delay: Duration::from_millis(1500),
            step_timeout: Duration::from_secs(60),
            dir: PathBuf::from("target/demo"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start the emulator: {0}")]
    Start(#[from] kubesim::SimError),
    #[error("cannot write the kubeconfig to {path}: {source}; pass --dir to a writable directory")]
    Kubeconfig { path: String, source: std::io::Error },
    #[error("setup failed: {what}: {why}")]
    Setup { what: &'static str, why: String },
    #[error("step {step}/{STEPS} ({title}) failed: {why}")]
    Step { step: usize, title: &'static str, why: String },
    #[error("interrupted")]
    Interrupted,
}

/// What the walkthrough measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Each step's title and how long it took.
    pub steps: Vec<(&'static str, Duration)>,
    /// From deleting the Service to seeing the operator's new one.
    pub service_restored_in: Option<Duration>,
    /// Whether generation 2 was seen Progressing while generation 1's pods served.
    pub saw_old_generation_serving: bool,
    /// The API server's answer to `kubectl apply` of the image outside the allowed repository (the admission
    /// policy's message).
    pub admission_refusal: Option<String>,
    /// The reason the operator gave for that image once the policy only warned.
    pub refusal_reason: Option<String>,
    pub kubeconfig: PathBuf,
}

/// The demo's view of namespace `todo`: caches fed by watches, and a counter that moves on every change.
struct World {
    microservices: Store<Microservice>,
    deployments: Store<Deployment>,
    services: Store<Service>,
    changes: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for World {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The CR called `name` and its same-name children, as last seen.
struct Snapshot {
    ms: Option<Arc<Microservice>>,
    deployment: Option<Arc<Deployment>>,
    service: Option<Arc<Service>>,
}

impl Snapshot {
    fn line(&self) -> String {
        live_line(self.ms.as_deref(), self.deployment.as_deref(), self.service.as_deref())
    }

    /// What changes only with a step of the story: phase, generation, the Deployment's image and available pods,
    /// the Service's identity.
    fn coarse(&self) -> String {
        let ms = self.ms.as_ref().map(|m| transition_key(m)).unwrap_or_default();
        let deployment = self.deployment.as_ref().map(|d| {
            let image = d.spec.as_ref().and_then(|s| s.template.spec.as_ref()?.containers.first()?.image.clone());
            (image, d.status.as_ref().and_then(|s| s.available_replicas))
        });
        let service = self.service.as_ref().and_then(|s| s.uid());
        format!("{ms}|{deployment:?}|{service:?}")
    }

    fn verdict(&self) -> Option<Verdict> {
        self.ms.as_deref().map(verdict)
    }

    fn generation(&self) -> Option<i64> {
        self.ms.as_ref().and_then(|m| m.metadata.generation)
    }
}

fn follow<K>(api: Api<K>, changed: Arc<watch::Sender<u64>>) -> (Store<K>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let task = tokio::spawn(async move {
        watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(|_| {
                changed.send_modify(|n| *n = n.wrapping_add(1));
                futures::future::ready(())
            })
            .await;
    });
    (reader, task)
}

impl World {
    fn start(client: &Client) -> World {
        let (tx, changes) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let (microservices, a) = follow(Api::namespaced(client.clone(), NAMESPACE), tx.clone());
        let (deployments, b) = follow(Api::namespaced(client.clone(), NAMESPACE), tx.clone());
        let (services, c) = follow(Api::namespaced(client.clone(), NAMESPACE), tx);
        World { microservices, deployments, services, changes, tasks: vec![a, b, c] }
    }

    fn snapshot(&self, name: &str) -> Snapshot {
        Snapshot {
            ms: self.microservices.get(&ObjectRef::new(name).within(NAMESPACE)),
            deployment: self.deployments.get(&ObjectRef::new(name).within(NAMESPACE)),
            service: self.services.get(&ObjectRef::new(name).within(NAMESPACE)),
        }
    }
}

/// The operator running in this process; `stop` lets in-flight reconciles finish.
struct Operator {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Operator {
    fn start(client: Client) -> Operator {
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let config = Config { namespace: Some(NAMESPACE.to_string()), ..Config::default() };
        let task = tokio::spawn(controller::run(client, config, Arc::new(Metrics::new()), shutdown));
        Operator { stop: Some(stop), task }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Demo {
    args: DemoArgs,
    // Field order is drop order: the watches and the operator go before the server they talk to.
    world: World,
    operator: Option<Operator>,
    client: Client,
    sim: Sim,
    progress: Progress,
    kubeconfig: PathBuf,
    started: Instant,
    step: (usize, &'static str),
    /// Last state narrated per Microservice.
    seen: HashMap<String, String>,
    /// The coarse state last printed as a plain line.
    coarse: String,
}

/// The emulator's kubeconfig with the context's namespace set to `todo`, so kubectl and `kubectl microservice
/// status` need no -n (the hints still pass it).
fn demo_kubeconfig(sim: &Sim) -> String {
    sim.kubeconfig_yaml().replacen("namespace: default", &format!("namespace: {NAMESPACE}"), 1)
}

fn write_kubeconfig(dir: &Path, contents: &str) -> Result<PathBuf, DemoError> {
    let path = std::path::absolute(dir.join("kubeconfig")).unwrap_or_else(|_| dir.join("kubeconfig"));
    let fail = |source| DemoError::Kubeconfig { path: path.display().to_string(), source };
    std::fs::create_dir_all(dir).map_err(fail)?;
    std::fs::write(&path, contents).map_err(fail)?;
    Ok(path)
}

/// The bundle's ValidatingAdmissionPolicy and binding, generated from the profile the demo's operator runs with.
async fn install_admission_policy(client: &Client) -> Result<(), DemoError> {
    let profile = PlatformProfile::default();
    let build = |e: serde_json::Error| DemoError::Setup { what: "build the admission policy", why: e.to_string() };
    let policy: ValidatingAdmissionPolicy =
        serde_json::from_value(admission_policy::policy(&profile)).map_err(build)?;
    let binding: ValidatingAdmissionPolicyBinding =
        serde_json::from_value(admission_policy::binding()).map_err(build)?;
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .create(&PostParams::default(), &policy)
        .await
        .map_err(setup("install the admission policy"))?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(setup("bind the admission policy"))?;
    Ok(())
}

fn setup(what: &'static str) -> impl FnOnce(kube::Error) -> DemoError {
    move |e| DemoError::Setup { what, why: e.to_string() }
}

impl Demo {
    async fn start(args: DemoArgs, progress: Progress) -> Result<Demo, DemoError> {
        let started = Instant::now();
        // Scheduling takes a little, becoming Ready (the app starting) most of the delay.
        let pods = ControllerConfig {
            schedule_delay: args.pod_ready_delay / 5,
            ready_delay: args.pod_ready_delay,
            ..ControllerConfig::default()
        };
        let sim = Sim::builder().controllers(pods).start().await?;
        let kubeconfig = write_kubeconfig(&args.dir, &demo_kubeconfig(&sim))?;
        let client = sim.client();
        progress.note(&format!(
            "kubesim (an in-memory Kubernetes API server) listens on {}; pods become Ready {} after they are \
             scheduled",
            sim.https_url(),
            format_duration(args.pod_ready_delay)
        ));
        progress.note(&format!(
            "explore from another terminal:  kubectl --kubeconfig {} get ms -n todo",
            kubeconfig.display()
        ));

        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = microservice_core::crd::crd();
        crds.create(&PostParams::default(), &crd).await.map_err(setup("install the Microservice CRD"))?;
        let crd_name = crd.name_any();
        let established = await_condition(crds, &crd_name, conditions::is_crd_established());
        match tokio::time::timeout(args.step_timeout, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(DemoError::Setup { what: "wait for the CRD", why: e.to_string() }),
            Err(_) => return Err(DemoError::Setup { what: "wait for the CRD", why: "not Established in time".into() }),
        }
        let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))
            .map_err(|e| DemoError::Setup { what: "build namespace todo", why: e.to_string() })?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(setup("create namespace todo"))?;
        install_admission_policy(&client).await?;
        progress.note(
            "installed the Microservice CRD and its admission policy (deploy/admission-policy.yaml), created \
             namespace todo; the operator is running",
        );
        let operator = Some(Operator::start(client.clone()));
        let world = World::start(&client);
        Ok(Demo {
            args,
            world,
            operator,
            client,
            sim,
            progress,
            kubeconfig,
            started,
            step: (0, "setup"),
            seen: HashMap::new(),
            coarse: String::new(),
        })
    }

    fn fail(&self, why: impl Into<String>) -> DemoError {
        DemoError::Step { step: self.step.0, title: self.step.1, why: why.into() }
    }

    fn begin(&mut self, step: usize, title: &'static str) {
        self.step = (step, title);
        self.progress.clear();
        self.progress.note(&format!("── step {step}/{STEPS}: {title}"));
    }

    fn say(&self, line: &str) {
        self.progress.note(&format!("   {line}"));
    }

    fn coarse_changed(&mut self, snapshot: &Snapshot) -> bool {
        let coarse = snapshot.coarse();
        let changed = coarse != self.coarse;
        self.coarse = coarse;
        changed
    }

    /// Narrates every Microservice state not yet told, and shows `name`'s live line.
    fn show(&mut self, snapshot: &Snapshot) {
        for ms in self.world.microservices.state() {
            let key = transition_key(&ms);
            if self.seen.get(&ms.name_any()) != Some(&key) {
                self.seen.insert(ms.name_any(), key);
                self.progress.note(&format!("   {}", transition_line(&ms)));
            }
        }
        // On a terminal the spinner line is redrawn in place; as plain lines, only coarse changes are worth one.
        if self.progress.is_terminal() || self.coarse_changed(snapshot) {
            self.progress.spin(&snapshot.line());
        }
    }

    /// Waits on the watches until `check` returns a value, narrating as things change; gives up after the step
    /// timeout naming `what` and the last state seen.
    async fn until<T>(
        &mut self,
        name: &str,
        what: &str,
        mut check: impl FnMut(&Snapshot, &Progress) -> Option<T>,
    ) -> Result<T, DemoError> {
        let deadline = tokio::time::Instant::now() + self.args.step_timeout;
        let mut changes = self.world.changes.clone();
        loop {
            changes.borrow_and_update();
            let snapshot = self.world.snapshot(name);
            self.show(&snapshot);
            if let Some(value) = check(&snapshot, &self.progress) {
                return Ok(value);
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(self.fail(format!("the watches stopped while waiting for {what}")));
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    let why = format!(
                        "timed out after {} waiting for {what}; last seen: {}",
                        format_duration(self.args.step_timeout),
                        snapshot.line()
                    );
                    return Err(self.fail(why));
                }
            }
        }
    }

    async fn until_ready(&mut self, name: &str, generation: i64) -> Result<Arc<Microservice>, DemoError> {
        let what = format!("{name} to be Ready for generation {generation}");
        self.until(name, &what, |s, _| match (s.verdict(), s.generation()) {
            (Some(Verdict::Ready), Some(g)) if g == generation => s.ms.clone(),
            _ => None,
        })
        .await
    }

    fn microservices(&self) -> Api<Microservice> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    async fn set_image(&self, name: &str, image: &str) -> Result<i64, DemoError> {
        let ms = self
            .try_set_image(name, image)
            .await
            .map_err(|e| self.fail(format!("cannot set spec.image of {name}: {e}")))?;
        ms.metadata.generation.ok_or_else(|| self.fail("the API server returned no generation"))
    }

    async fn try_set_image(&self, name: &str, image: &str) -> Result<Microservice, kube::Error> {
        let patch = json!({ "spec": { "image": image } });
        self.microservices().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await
    }

    /// Sets the admission policy binding's validation actions (`Deny`, or `Warn` as a platform starts).
    async fn bind_policy(&self, action: &str) -> Result<(), DemoError> {
        let patch = json!({ "spec": { "validationActions": [action] } });
        Api::<ValidatingAdmissionPolicyBinding>::all(self.client.clone())
            .patch(BINDING_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.fail(format!("cannot set the admission policy binding to {action}: {e}")))?;
        Ok(())
    }

    // Over 80 lines on purpose: The demo's five narrated steps in the order a reader follows them (the README shows the
    // output); each step is a few calls to the helpers above, and splitting them apart would only hide the story.
    async fn walkthrough(&mut self) -> Result<Report, DemoError> {
        let mut report = Report { kubeconfig: self.kubeconfig.clone(), ..Report::default() };
        let mut timed = Instant::now();
        let mut lap = |report: &mut Report, title| {
            report.steps.push((title, timed.elapsed()));
            timed = Instant::now();
        };

        // 1. A team asks for the Todo API.
        let title = "create the sample Microservice (deploy/samples/todo-api.yaml)";
        self.begin(1, title);
        let sample: Microservice =
            serde_saphyr::from_str(SAMPLE).map_err(|e| self.fail(format!("the sample does not parse: {e}")))?;
        let name = sample.name_any();
        let created = self
            .microservices()
            .create(&PostParams::default(), &sample)
            .await
            .map_err(|e| self.fail(format!("cannot create {name}: {e}")))?;
        self.say(&format!("kubectl apply -f deploy/samples/todo-api.yaml  (image {})", sample.spec.image));
        let generation = created.metadata.generation.unwrap_or(1);
        let ready = self.until_ready(&name, generation).await?;
        lap(&mut report, title);

        // 2. Someone deletes the Service.
        let title = "delete Service todo-api; the operator restores it";
        self.begin(2, title);
        let services: Api<Service> = Api::namespaced(self.client.clone(), NAMESPACE);
        let old_uid = self.world.snapshot(&name).service.and_then(|s| s.uid());
        services
            .delete(&name, &DeleteParams::default())
            .await
            .map_err(|e| self.fail(format!("cannot delete Service {name}: {e}")))?;
        let deleted_at = Instant::now();
        self.say(&format!("kubectl delete service {name} -n todo"));
        let restored = self
            .until(&name, "the Service to be recreated", |s, _| {
                s.service.as_ref().filter(|svc| svc.uid() != old_uid).map(|svc| (deleted_at.elapsed(), svc.clone()))
            })
            .await?;
        report.service_restored_in = Some(restored.0);
        let ip = restored.1.spec.as_ref().and_then(|s| s.cluster_ip.clone()).unwrap_or_default();
        self.say(&format!("restored in {} (new Service, clusterIP {ip})", format_duration(restored.0)));
        lap(&mut report, title);

        // 3. A new version: the old pods serve until the new ones are ready.
        let title = "update the image to 1.5.0";
        self.begin(3, title);
        let old_image = ready.status.as_ref().and_then(|s| s.image.clone()).unwrap_or_default();
        let generation = self.set_image(&name, NEXT_IMAGE).await?;
        self.say(&format!(
            "kubectl patch ms {name} -n todo --type merge -p '{{\"spec\":{{\"image\":\"{NEXT_IMAGE}\"}}}}'"
        ));
        let mut serving_told = false;
        let ready = self
            .until(&name, &format!("{name} to be Ready for generation {generation}"), |s, progress| {
                let ms = s.ms.as_ref()?;
                let status = ms.status.as_ref()?;
                let progressing = ms.metadata.generation == Some(generation)
                    && status.conditions.iter().any(|c| {
                        c.type_ == ConditionType::Progressing
                            && c.status == ConditionStatus::True
                            && c.observed_generation == Some(generation)
                    });
                let available = s.deployment.as_ref().and_then(|d| d.status.as_ref()?.available_replicas).unwrap_or(0);
                if progressing && !serving_told && status.image.as_deref() == Some(old_image.as_str()) && available > 0
                {
                    serving_told = true;
                    progress.note(&format!(
                        "   generation {generation} is Progressing while generation {} serves: status.image is still \
                         {old_image}, {available} pod(s) available",
                        generation - 1
                    ));
                }
                // The cache may still hold generation 1 (Ready) until the watch delivers the change.
                let current = ms.metadata.generation == Some(generation);
                (current && matches!(verdict(ms), Verdict::Ready)).then(|| s.ms.clone()).flatten()
            })
            .await?;
        report.saw_old_generation_serving = serving_told;
        let rolled = ready.status.as_ref().and_then(|s| s.image.clone()).unwrap_or_default();
        if rolled != NEXT_IMAGE {
            return Err(self.fail(format!("Ready, but status.image is {rolled}, not {NEXT_IMAGE}")));
        }
        self.say(&format!("generation {generation} is Ready: every replica runs {rolled}"));
        lap(&mut report, title);

        // 4. An image the platform does not run: refused at apply by the admission policy; with the policy only
        // warning (as a platform starts), accepted and refused by the operator, which stays the source of truth.
        let title = "ask for an image outside the allowed repository";
        self.begin(4, title);
        match self.try_set_image(&name, FOREIGN_IMAGE).await {
            Err(kube::Error::Api(refused)) if refused.code == 422 => {
                self.say(&format!("spec.image = {FOREIGN_IMAGE} is refused by the API server at once (422), as kubectl apply would be:"));
                self.say(&format!("  {}", refused.message));
                report.admission_refusal = Some(refused.message.clone());
            }
            Err(e) => return Err(self.fail(format!("expected the admission policy's 422, got: {e}"))),
            Ok(_) => return Err(self.fail(format!("the API server accepted {FOREIGN_IMAGE}: no admission policy"))),
        }
        self.bind_policy("Warn").await?;
        self.say("with the policy binding set to validationActions [Warn], the API server accepts it with a warning:");
        let generation = self.set_image(&name, FOREIGN_IMAGE).await?;
        self.say(&format!("spec.image = {FOREIGN_IMAGE}  (generation {generation})"));
        let reason = self
            .until(&name, &format!("generation {generation} to be refused"), |s, _| {
                match (s.verdict()?, s.generation()? == generation) {
                    (Verdict::Failed { reason, .. }, true) => Some(reason),
                    _ => None,
                }
            })
            .await?;
        let running = self
            .world
            .snapshot(&name)
            .deployment
            .and_then(|d| d.spec.as_ref()?.template.spec.as_ref()?.containers.first()?.image.clone())
            .unwrap_or_default();
        self.say(&format!("refused: Accepted=False with reason {reason}"));
        if let Some(next) = next_step(&reason, NAMESPACE, &name) {
            self.say(&format!("what to do: {next}"));
        }
        if running != NEXT_IMAGE {
            return Err(self.fail(format!("the Deployment changed to {running} although the spec was refused")));
        }
        self.say(&format!("the Deployment is untouched and keeps serving {running}"));
        report.refusal_reason = Some(reason);
        self.bind_policy("Deny").await?;
        let generation = self.set_image(&name, NEXT_IMAGE).await?;
        self.say(&format!("spec.image = {NEXT_IMAGE} again  (generation {generation})"));
        self.until_ready(&name, generation).await?;
        lap(&mut report, title);

        // 5. A Deployment someone made by hand before the platform existed.
        let title = "hand a pre-existing Deployment over to a Microservice";
        self.begin(5, title);
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), NAMESPACE);
        deployments
            .create(&PostParams::default(), &handmade_deployment(HANDMADE)?)
            .await
            .map_err(|e| self.fail(format!("cannot create Deployment {HANDMADE}: {e}")))?;
        self.say(&format!("kubectl create deployment {HANDMADE} -n todo ...  (by hand, 1 replica)"));
        let ms: Microservice = serde_json::from_value(json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": { "name": HANDMADE, "namespace": NAMESPACE },
            "spec": { "image": "ghcr.io/example/todo-api:1.4.2", "port": 8080, "replicas": 2 }
        }))
        .map_err(|e| self.fail(format!("cannot build Microservice {HANDMADE}: {e}")))?;
        self.microservices()
            .create(&PostParams::default(), &ms)
            .await
            .map_err(|e| self.fail(format!("cannot create Microservice {HANDMADE}: {e}")))?;
        self.say(&format!("created Microservice {HANDMADE}"));
        self.until(HANDMADE, "a ResourceConflict", |s, _| match s.verdict()? {
            Verdict::Failed { reason, .. } if reason == Reason::ResourceConflict.as_str() => Some(()),
            _ => None,
        })
        .await?;
        if let Some(next) = Reason::ResourceConflict.next_step(NAMESPACE, HANDMADE) {
            self.say(&format!("what to do: {next}"));
        }
        let patch = json!({ "metadata": { "annotations": { HANDOVER_ANNOTATION: HANDMADE } } });
        deployments
            .patch(HANDMADE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.fail(format!("cannot annotate Deployment {HANDMADE}: {e}")))?;
        self.say(&format!("kubectl annotate deployment {HANDMADE} -n todo {HANDOVER_ANNOTATION}={HANDMADE}"));
        let adopted = self
            .until(HANDMADE, "the adoption and rollout", |s, _| {
                let ms = s.ms.as_ref()?;
                let uid = ms.uid()?;
                let owned = s
                    .deployment
                    .as_ref()?
                    .owner_references()
                    .iter()
                    .any(|r| r.controller == Some(true) && r.uid == uid);
                (owned && matches!(verdict(ms), Verdict::Ready)).then(|| s.deployment.clone()).flatten()
            })
            .await?;
        let replicas = adopted.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        self.say(&format!(
            "Adopted: Deployment {HANDMADE} is now controlled by Microservice {HANDMADE} and runs {replicas} replicas"
        ));
        lap(&mut report, title);
        self.progress.clear();
        Ok(report)
    }

    /// Keeps narrating changes until Ctrl-C.
    async fn serve(&mut self) {
        self.progress.clear();
        self.progress.note(&format!(
            "serving until Ctrl-C. Try:\n    kubectl --kubeconfig {0} get ms,deploy,svc -n todo\n    \
             cargo run -p kubectl-microservice -- status -n todo --kubeconfig {0}\n    kubectl --kubeconfig {0} -n todo \
             patch ms todo-api --type merge -p '{{\"spec\":{{\"replicas\":3}}}}'",
            self.kubeconfig.display()
        ));
        let mut changes = self.world.changes.clone();
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            changes.borrow_and_update();
            let snapshot = self.world.snapshot("todo-api");
            self.show(&snapshot);
            tokio::select! {
                _ = &mut ctrl_c => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
        }
    }

    async fn shutdown(mut self) {
        self.progress.clear();
        if let Some(operator) = self.operator.take() {
            operator.stop().await;
        }
        drop(self.world);
        drop(self.sim);
    }
}

/// A Deployment as a team might have made it before the platform: same name and pod labels, no owner.
fn handmade_deployment(name: &str) -> Result<Deployment, DemoError> {
    let labels = json!({ LABEL_NAME: name, LABEL_INSTANCE: name });
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "namespace": NAMESPACE, "labels": labels },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": { "containers": [{ "name": "app", "image": "ghcr.io/example/todo-api:1.4.2" }] }
            }
        }
    }))
    .map_err(|e| DemoError::Setup { what: "build the hand-made Deployment", why: e.to_string() })
}

/// Runs the walkthrough (and, with `--serve`, keeps serving); Ctrl-C stops at any point.
pub async fn execute(args: DemoArgs) -> Result<Report, DemoError> {
    let serve = args.serve;
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    tokio::pin!(interrupted);
    let mut demo = tokio::select! {
        demo = Demo::start(args, Progress::stdout()) => demo?,
        () = &mut interrupted => return Err(DemoError::Interrupted),
    };
    let outcome = tokio::select! {
        outcome = demo.walkthrough() => outcome,
        () = &mut interrupted => Err(DemoError::Interrupted),
    };
    if let Ok(report) = &outcome {
        let total = demo.started.elapsed();
        demo.progress.note(&format!("all {} steps passed in {}", report.steps.len(), format_duration(total)));
        if serve {
            demo.serve().await;
        }
    }
    demo.shutdown().await;
    outcome
}

pub async fn run(args: DemoArgs) -> ExitCode {
    run_with(execute(args)).await
}

async fn run_with(demo: impl Future<Output = Result<Report, DemoError>>) -> ExitCode {
    match demo.await {
        Ok(_) => {
            println!("stopped: the emulator and the operator are gone");
            ExitCode::SUCCESS
        }
        Err(DemoError::Interrupted) => {
            println!("interrupted: stopped the operator and the emulator");
            ExitCode::from(130)
        }
        Err(err) => {
            eprintln!("demo failed: {err}");
            ExitCode::FAILURE
        }
    }
}
