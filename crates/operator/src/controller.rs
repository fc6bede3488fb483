//! Wiring: the workers over the Microservice cache, the caches of their Deployments and Services, the
//! periodic resync, and graceful shutdown. The decisions live in [`crate::reconcile`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::backoff::{Backoff, BackoffPolicy};
use crate::children::{self, ChildCache, DeploymentView, HpaView, ServiceView};
use crate::connection::scoped_api as api;
use crate::error::{Class, Error};
use crate::events::Publisher;
use crate::health::Health;
use crate::initial_list::{self, InitialList};
use crate::interner::Interner;
use crate::keylock::KeyLocks;
use crate::metrics::Metrics;
use crate::microservices::{Kept, Microservices};
use crate::queue::{self, WorkQueue};
use crate::reconcile;
use crate::watched::WatchedMicroservice;
use crate::written::WrittenStatuses;
use microservice_core::crd::Microservice;
use microservice_core::profile::PlatformProfile;

pub use crate::context::Context;
pub use crate::identity::CONTROLLER_NAME;

/// Reconciles running at once in the Ready lane (beside the workers' own `concurrency`).
pub const LANE_CONCURRENCY: usize = 32;

/// Keys released by the work queue at once, per worker (see `queue`).
const QUEUE_IN_FLIGHT_PER_WORKER: usize = 4;

/// What the operator watches and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// The namespace to watch; `None` watches all namespaces.
    pub namespace: Option<String>,
    /// A label selector on Microservices, to shard them across operator instances.
    pub selector: Option<String>,
    /// Safety-net resync of every Microservice; child events trigger reconciles at once regardless.
    pub resync_interval: Duration,
    /// Reconciles running at once (different objects; one object is never reconciled twice at once).
    pub concurrency: u16,
    pub profile: PlatformProfile,
    pub backoff: BackoffPolicy,
    /// Identifies this replica in Events (e.g. the pod name).
    pub instance: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: Some("todo".to_string()),
            selector: None,
            resync_interval: Duration::from_secs(300),
            concurrency: 16,
            profile: PlatformProfile::default(),
            backoff: BackoffPolicy::default(),
            instance: None,
        }
    }
}

/// The Ready lane's requests: `namespace/name` keys.
type Lane = mpsc::UnboundedSender<String>;

/// Where changes go: the running workers' queue, and the Ready lane; nowhere while this replica is a
/// standby (its caches stay warm; on taking over, every Microservice is reconciled anyway).
#[derive(Default)]
struct Triggers {
    queue: Mutex<Option<Arc<WorkQueue>>>,
    lane: Mutex<Option<Lane>>,
    /// Keys waiting in the lane, so a burst of events for one object queues it once, with when the first of them
    /// was seen.
    lane_pending: Mutex<HashMap<String, Instant>>,
}

impl Triggers {
    /// Changes go to the running workers' queue and to the Ready lane from now on.
    fn open(&self, queue: Arc<WorkQueue>, lane: Lane) {
        if let Ok(mut slot) = self.queue.lock() {
            *slot = Some(queue);
        }
        if let Ok(mut slot) = self.lane.lock() {
            *slot = Some(lane);
        }
    }

    /// The workers stopped: changes go nowhere until they run again.
    fn close(&self) {
        if let Ok(mut slot) = self.queue.lock() {
            *slot = None;
        }
        if let Ok(mut slot) = self.lane.lock() {
            *slot = None;
        }
    }

    /// Queues a reconcile of the Microservice with this `namespace/name` key.
    fn reconcile(&self, key: &str) {
        if let Some(queue) = self.queue.lock().ok().as_ref().and_then(|q| q.as_ref()) {
            queue.add(key);
        }
    }

    /// A Deployment's rollout completed: its Microservice's Ready is due, ahead of the work queue.
    fn urgent(&self, key: &str) {
        let lane = self.lane.lock().ok().and_then(|l| l.clone());
        let Some(lane) = lane else { return self.reconcile(key) };
        let fresh = self
            .lane_pending
            .lock()
            .map(|mut p| !p.contains_key(key) && p.insert(key.to_string(), Instant::now()).is_none())
            .unwrap_or(true);
        if fresh {
            let _ = lane.send(key.to_string());
        }
    }

    /// The lane takes `key`: a change seen from now on queues it again. When it was first seen while pending.
    fn taken(&self, key: &str) -> Option<Instant> {
        self.lane_pending.lock().ok().and_then(|mut pending| pending.remove(key))
    }
}

/// The Microservice cache (`microservices`), driven by its own task so it runs regardless of leadership. Every
/// change queues a reconcile; a status write of this replica is forgotten by the memo once the watch shows it.
fn spawn_microservice_cache(
    api: Api<WatchedMicroservice>,
    config: watcher::Config,
    triggers: Arc<Triggers>,
    written: Arc<WrittenStatuses>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
) -> (Microservices, JoinHandle<()>) {
    let cache = Microservices::default();
    let stream = watcher(api, config).default_backoff();
    health.watch_started();
    // The phase metric (`microservice_objects{phase}`) follows this same cache: it runs on standbys too, so every
    // replica reports the same counts.
    let task = tokio::spawn({
        let cache = cache.clone();
        async move {
            let mut stream = std::pin::pin!(stream);
            let mut texts = Interner::default();
            let mut listing: Option<HashMap<Box<str>, Arc<Kept>>> = None;
            // What the cache keeps of an event's object, and whether it is the echo of this replica's status write.
            let mut file = |ms: WatchedMicroservice| {
                let (key, kept) = Kept::of(ms.trimmed(&mut texts));
                let own_write = written.seen(&key, kept.resource_version.as_deref().unwrap_or(""));
                (key, kept, own_write)
            };
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(ms)) => {
                        let (key, kept, own_write) = file(ms);
                        let phase = kept.phase();
                        let before = cache.apply(key.clone(), kept);
                        metrics.phase_moved(before.map(|b| b.phase()), Some(phase));
                        // The echo of this replica's own status write tells the reconciler nothing it did not know.
                        if !own_write {
                            triggers.reconcile(&key);
                        }
                    }
                    Ok(watcher::Event::Delete(ms)) => {
                        let key = queue::key(&ms.namespace().unwrap_or_default(), &ms.name_any());
                        written.forget(&key);
                        let before = cache.delete(&key);
                        metrics.phase_moved(before.map(|b| b.phase()), None);
                    }
                    Ok(watcher::Event::Init) => listing = Some(HashMap::new()),
                    Ok(watcher::Event::InitApply(ms)) => {
                        let (key, kept, _) = file(ms);
                        if let Some(listed) = listing.as_mut() {
                            listed.insert(key.into_boxed_str(), Arc::new(kept));
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        let listed = listing.take().unwrap_or_default();
                        metrics.set_phases(listed.values().map(|k| k.phase()));
                        let keys: Vec<Box<str>> = listed.keys().cloned().collect();
                        cache.relisted(listed);
                        // A listed object is reconciled regardless: the list may follow a gap in the watch.
                        for key in keys {
                            triggers.reconcile(&key);
                        }
                    }
                    Err(err) => warn!(error = %err, "Microservice watch failed; retrying with backoff"),
                }
            }
            health.watch_ended();
        }
    });
    (cache, task)
}

/// A cached projection of one child kind (see `children`), driven by its own task so it runs regardless of
/// leadership and never waits on the workers (a reconcile may wait on the cache, so the cache must not wait on
/// reconciles). Every change *and every deletion* wakes the same-name Microservice: children are named like their CR,
/// and a same-name object someone else made (a conflict, or a handover) must wake the CR too, so ownerReferences
/// alone would not do.
fn spawn_child_cache<K>(
    api: Api<K::Watched>,
    watch_config: watcher::Config,
    microservices: Microservices,
    profile: PlatformProfile,
    triggers: Arc<Triggers>,
    health: Arc<Health>,
) -> (Arc<ChildCache<K::View>>, JoinHandle<()>)
where
    K: children::Child,
{
    let cache = Arc::new(ChildCache::default());
    let kind = K::kind(&());
    let route = move |key: &str, view: Option<&K::View>| {
        debug!(child = %kind, object = %key, "child changed; reconciling its Microservice");
        if children::urgent::<K>(view) { triggers.urgent(key) } else { triggers.reconcile(key) }
    };
    health.watch_started();
    let task = tokio::spawn({
        let cache = cache.clone();
        async move {
            children::run::<K>(api, watch_config, cache, microservices, profile, route).await;
            health.watch_ended();
        }
    });
    (cache, task)
}

/// Why [`run_elected`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The shutdown signal fired; in-flight reconciles finished.
    Shutdown,
    /// This replica lost the Lease (or the election ended); in-flight reconciles finished. Exit, as controller-runtime
    /// does, so a restart rejoins the election cleanly.
    LostLeadership,
}

/// Runs the operator as the only replica until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (_always, leader) = watch::channel(true);
    run_elected(client, config, metrics, Arc::new(Health::new()), leader, shutdown).await;
}

/// Runs the operator until `shutdown` resolves or leadership is lost. Caches start at once and stay warm; the
/// workers run only while `leader` is true.
pub async fn run_elected(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    mut leader: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Stopped {
    let shutdown = shutdown.boxed().shared();
    let ns = config.namespace.as_deref();
    let triggers = Arc::new(Triggers::default());
    let written = Arc::new(WrittenStatuses::default());
    let ms_api = api::<Microservice>(&client, ns);
    let initial_list = tokio::select! {
        strategy = initial_list::detect(&ms_api) => strategy,
        () = shutdown.clone() => return Stopped::Shutdown,
    };
    let mut watch_config = initial_list.watcher_config();
    if let Some(selector) = &config.selector {
        watch_config = watch_config.labels(selector);
    }
    let (microservices, ms_task) = spawn_microservice_cache(
        api::<WatchedMicroservice>(&client, ns),
        watch_config,
        triggers.clone(),
        written.clone(),
        health.clone(),
        metrics.clone(),
    );
    let mut tasks = AbortOnDrop(vec![ms_task]);
    // The Microservices first, so the children's drift verdicts are judged as their events arrive.
    tokio::select! {
        _ = microservices.wait_until_ready() => {}
        () = shutdown.clone() => return Stopped::Shutdown,
    }
    let (children, child_tasks) =
        ChildCaches::spawn(&client, &config, initial_list, &microservices, &triggers, &health);
    tasks.0.extend(child_tasks);
    tokio::select! {
        () = children.wait_until_ready() => {}
        () = shutdown.clone() => return Stopped::Shutdown,
    }
    health.set_caches_synced();
    info!(
        microservices = microservices.len(),
        deployments = children.deployments.len(),
        services = children.services.len(),
        hpas = children.hpas.len(),
        "caches synced"
    );

    tokio::select! {
        elected = leader.wait_for(|leading| *leading) => {
            if elected.is_err() {
                return Stopped::LostLeadership;
            }
        }
        () = shutdown.clone() => return Stopped::Shutdown,
    }
    let context = Arc::new(Context {
        events: Publisher::new(client.clone(), CONTROLLER_NAME, config.instance.clone()),
        client: client.clone(),
        profile: config.profile.clone(),
        microservices,
        deployments: children.deployments,
        services: children.services,
        hpas: children.hpas,
        backoff: Backoff::new(config.backoff),
        metrics,
        // The memo the CR cache task clears is the one reconciles fill.
        written,
        locks: KeyLocks::default(),
        queue: Arc::new(WorkQueue::new(usize::from(config.concurrency) * QUEUE_IN_FLIGHT_PER_WORKER)),
    });
    lead(&config, context, triggers, leader, shutdown).await
}

/// The caches of the children, each driven by its own task (see [`spawn_child_cache`]).
struct ChildCaches {
    deployments: Arc<ChildCache<DeploymentView>>,
    services: Arc<ChildCache<ServiceView>>,
    hpas: Arc<ChildCache<HpaView>>,
}

impl ChildCaches {
    fn spawn(
        client: &Client,
        config: &Config,
        initial_list: InitialList,
        microservices: &Microservices,
        triggers: &Arc<Triggers>,
        health: &Arc<Health>,
    ) -> (ChildCaches, [JoinHandle<()>; 3]) {
        let ns = config.namespace.as_deref();
        let (deployments, deployment_task) = spawn_child_cache::<Deployment>(
            api(client, ns),
            initial_list.watcher_config(),
            microservices.clone(),
            config.profile.clone(),
            triggers.clone(),
            health.clone(),
        );
        let (services, service_task) = spawn_child_cache::<Service>(
            api(client, ns),
            initial_list.watcher_config(),
            microservices.clone(),
            config.profile.clone(),
            triggers.clone(),
            health.clone(),
        );
        // Watched like the other children, so a deleted or edited HPA is repaired at once.
        let (hpas, hpa_task) = spawn_child_cache::<HorizontalPodAutoscaler>(
            api(client, ns),
            initial_list.watcher_config(),
            microservices.clone(),
            config.profile.clone(),
            triggers.clone(),
            health.clone(),
        );
        (ChildCaches { deployments, services, hpas }, [deployment_task, service_task, hpa_task])
    }

    async fn wait_until_ready(&self) {
        self.deployments.wait_until_ready().await;
        self.services.wait_until_ready().await;
        self.hpas.wait_until_ready().await;
    }
}

/// Runs the workers and the Ready lane, every Microservice queued once, until `shutdown` resolves or leadership
/// is lost; in-flight reconciles finish first.
async fn lead(
    config: &Config,
    context: Arc<Context>,
    triggers: Arc<Triggers>,
    mut leader: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Stopped {
    let queue = context.queue.clone();
    let (lane, lane_requests) = mpsc::unbounded_channel();
    triggers.open(queue.clone(), lane);
    let lost = Arc::new(AtomicBool::new(false));
    let stop = {
        let lost = lost.clone();
        async move {
            tokio::select! {
                () = shutdown => {}
                _ = leader.wait_for(|leading| !*leading) => lost.store(true, Ordering::Release),
            }
        }
    };
    let lane_task = tokio::spawn(run_lane(lane_requests, context.clone(), triggers.clone()));
    let resync_task = tokio::spawn(resync(config.resync_interval, context.clone()));
    let _tasks = AbortOnDrop(vec![lane_task, resync_task]);
    // Every Microservice once, as a Controller's initial list would.
    queue_all(&context);
    run_workers(config, context, stop).await;
    triggers.close();
    if lost.load(Ordering::Acquire) { Stopped::LostLeadership } else { Stopped::Shutdown }
}

/// The Ready lane: reconciles of Microservices whose Deployment just completed its rollout, or whose child was
/// deleted or edited by someone (`children::urgent`), run at once beside the workers instead of behind
/// everything the work queue holds (at start-up, N first reconciles; at a resync, all N).
/// The same reconcile, under the same per-object lock; a reconcile that fails goes to the work queue.
async fn run_lane(requests: mpsc::UnboundedReceiver<String>, ctx: Arc<Context>, triggers: Arc<Triggers>) {
    let mut requests = requests;
    let requests = futures::stream::poll_fn(move |cx| requests.poll_recv(cx));
    requests
        .for_each_concurrent(LANE_CONCURRENCY, |key| {
            let (ctx, triggers) = (ctx.clone(), triggers.clone());
            spawned(async move {
                let seen = triggers.taken(&key);
                // A later step it asks for is in the work queue already (`reconcile`); a failure is retried there.
                if let Some(Err(_)) = reconcile::reconcile(&ctx, &key, seen).await {
                    ctx.queue.add(&key);
                }
            })
        })
        .await;
}

/// The workers: `concurrency` reconciles at once of the keys the work queue releases (one object is never
/// reconciled twice at once: `reconcile` holds its lock), until `stop`; in-flight reconciles finish first.
async fn run_workers(config: &Config, context: Arc<Context>, stop: impl Future<Output = ()> + Send + 'static) {
    info!(
        namespace = config.namespace.as_deref().unwrap_or("<all>"),
        selector = config.selector.as_deref().unwrap_or(""),
        resync_seconds = config.resync_interval.as_secs(),
        concurrency = config.concurrency,
        "starting the Microservice controller"
    );
    let concurrency = usize::from(config.concurrency).max(1);
    context
        .queue
        .clone()
        .stream()
        .take_until(stop)
        .for_each_concurrent(concurrency, |key| {
            let ctx = context.clone();
            spawned(async move {
                if let Some(Err(err)) = reconcile::reconcile(&ctx, &key, None).await {
                    retry_or_wait(&ctx, &key, &err);
                }
            })
        })
        .await;
    info!("Microservice controller stopped");
}

/// Runs one reconcile as a task of its own, so reconciles run on every runtime thread, not only on the one that
/// polls the stream of keys; completes when it does.
async fn spawned(reconcile: impl Future<Output = ()> + Send + 'static) {
    if let Err(err) = tokio::spawn(reconcile).await
        && err.is_panic()
    {
        warn!(error = %err, "a reconcile panicked");
    }
}

/// Aborts the cache tasks when the operator stops, however it stops.
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Every cached Microservice into the work queue (each once, however many changes are queued already).
fn queue_all(ctx: &Context) {
    for key in ctx.microservices.keys() {
        ctx.queue.add(&key);
    }
}

/// The safety-net resync: every `period` (the first one period from now, as the initial list already queued
/// everything), every Microservice through the work queue, and the status memo trimmed to the objects that exist.
async fn resync(period: Duration, ctx: Arc<Context>) {
    loop {
        tokio::time::sleep(period).await;
        ctx.written.retain(|key| ctx.microservices.contains(key));
        queue_all(&ctx);
    }
}

/// Temporary errors retry with this object's backoff; permanent ones were already recorded in status by the
/// reconcile and wait for a change.
fn retry_or_wait(ctx: &Context, key: &str, err: &Error) {
    match err.class() {
        Class::Temporary { retry_after } => {
            let delay = ctx.backoff.failed(key, retry_after);
            warn!(
                object = %key,
                error_kind = err.kind(),
                error = %err,
                retry_in_ms = delay.as_millis() as u64,
                attempt = ctx.backoff.failures(key),
                "reconcile failed; retrying with backoff"
            );
            ctx.queue.add_after(key, delay);
        }
        Class::Permanent => {
            warn!(object = %key, error_kind = err.kind(), error = %err, "reconcile failed permanently; {}", err.next_step());
        }
    }
}
