//! Wiring: the kube-runtime Controller over Microservices, the caches of their Deployments and Services, the
//! periodic resync, and graceful shutdown. The decisions live in [`crate::reconcile`].

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::backoff::{Backoff, BackoffPolicy};
use crate::connection::scoped_api as api;
use crate::error::{Class, Error};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::reconcile;
use crate::written::WrittenStatuses;
use microservice_core::crd::Microservice;
use microservice_core::profile::PlatformProfile;

pub use crate::identity::CONTROLLER_NAME;

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

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub profile: PlatformProfile,
    pub deployments: Store<Deployment>,
    pub services: Store<Service>,
    pub recorder: Recorder,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub written: WrittenStatuses,
}

/// Where child events go: the running Controller's trigger queue, or nowhere while this replica is a standby
/// (its caches stay warm; on taking over, the Controller's initial list reconciles every Microservice anyway).
type Triggers = Arc<Mutex<Option<mpsc::UnboundedSender<ObjectRef<Microservice>>>>>;

/// A cached, trimmed watch of one child kind, driven by its own task so it runs regardless of leadership and never
/// waits on the Controller (a reconcile may wait on the cache, so the cache must not wait on reconciles).
/// managedFields and the last-applied annotation are dropped: drift is judged on spec and status, and they would
/// double the cache's memory.
fn spawn_child_cache<K>(api: Api<K>, triggers: Triggers, health: Arc<Health>) -> (Store<K>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|obj: &mut K| {
            let meta = obj.meta_mut();
            meta.managed_fields = None;
            if let Some(annotations) = meta.annotations.as_mut() {
                annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
            }
        })
        .reflect(writer)
        // Deletions too: a deleted child must trigger its repair at once.
        .touched_objects();
    health.watch_started();
    let task = tokio::spawn(async move {
        let kind = K::kind(&());
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(child) => {
                    let Some(target) = same_name(&child) else { continue };
                    // The queue is unbounded so the cache never stalls; the Controller merges duplicate requests.
                    if let Some(queue) = triggers.lock().ok().as_ref().and_then(|t| t.as_ref()) {
                        debug!(child = %kind, object = %target, "child changed; reconciling its Microservice");
                        let _ = queue.send(target);
                    }
                }
                Err(err) => warn!(child = %kind, error = %err, "watch failed; retrying with backoff"),
            }
        }
        health.watch_ended();
    });
    (reader, task)
}

/// Every child maps to the same-name Microservice: children are named like their CR, and a same-name object
/// someone else made (a conflict, or a handover) must wake the CR too, so ownerReferences alone would not do.
fn same_name<K: Resource>(obj: &K) -> Option<ObjectRef<Microservice>> {
    let ns = obj.meta().namespace.clone()?;
    Some(ObjectRef::new(&obj.name_any()).within(&ns))
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
/// Controller runs only while `leader` is true.
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
    let triggers = Triggers::default();
    let (deployments, deployment_task) =
        spawn_child_cache(api::<Deployment>(&client, ns), triggers.clone(), health.clone());
    let (services, service_task) = spawn_child_cache(api::<Service>(&client, ns), triggers.clone(), health.clone());
    let _caches = AbortOnDrop(vec![deployment_task, service_task]);

    let synced = async {
        let _ = deployments.wait_until_ready().await;
        let _ = services.wait_until_ready().await;
    };
    tokio::select! {
        () = synced => {}
        () = shutdown.clone() => return Stopped::Shutdown,
    }
    health.set_caches_synced();
    info!(deployments = deployments.len(), services = services.len(), "child caches synced");

    tokio::select! {
        elected = leader.wait_for(|leading| *leading) => {
            if elected.is_err() {
                return Stopped::LostLeadership;
            }
        }
        () = shutdown.clone() => return Stopped::Shutdown,
    }

    let (queue, requests) = mpsc::unbounded_channel();
    if let Ok(mut slot) = triggers.lock() {
        *slot = Some(queue);
    }
    let lost = Arc::new(AtomicBool::new(false));
    let stop = {
        let lost = lost.clone();
        let shutdown = shutdown.clone();
        let mut leader = leader.clone();
        async move {
            tokio::select! {
                () = shutdown => {}
                _ = leader.wait_for(|leading| !*leading) => lost.store(true, Ordering::Release),
            }
        }
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter { controller: CONTROLLER_NAME.to_string(), instance: config.instance.clone() },
        ),
        client: client.clone(),
        profile: config.profile.clone(),
        deployments,
        services,
        backoff: Backoff::new(config.backoff),
        metrics,
        written: WrittenStatuses::default(),
    });
    run_controller(client, &config, context, requests, stop).await;
    if let Ok(mut slot) = triggers.lock() {
        *slot = None;
    }
    if lost.load(Ordering::Acquire) { Stopped::LostLeadership } else { Stopped::Shutdown }
}

async fn run_controller(
    client: Client,
    config: &Config,
    context: Arc<Context>,
    mut requests: mpsc::UnboundedReceiver<ObjectRef<Microservice>>,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let ns = config.namespace.as_deref();
    let microservices: Api<Microservice> = api(&client, ns);
    let mut watch = watcher::Config::default();
    if let Some(selector) = &config.selector {
        watch = watch.labels(selector);
    }
    let child_requests = futures::stream::poll_fn(move |cx| requests.poll_recv(cx));
    info!(
        namespace = ns.unwrap_or("<all>"),
        selector = config.selector.as_deref().unwrap_or(""),
        resync_seconds = config.resync_interval.as_secs(),
        concurrency = config.concurrency,
        "starting the Microservice controller"
    );
    let controller = Controller::new(microservices, watch);
    let known = controller.store();
    let memo = context.clone();
    let resync = tokio_stream_interval(config.resync_interval).map(move |()| {
        memo.written.retain(|key| {
            key.split_once('/').is_some_and(|(ns, name)| known.get(&ObjectRef::new(name).within(ns)).is_some())
        });
    });
    controller
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .reconcile_on(child_requests)
        .reconcile_all_on(resync)
        // Shared makes it Sync, as graceful_shutdown_on requires.
        .graceful_shutdown_on(stop.boxed().shared())
        .run(reconcile::reconcile, error_policy, context)
        .for_each(|outcome| async move {
            if let Err(err) = outcome {
                match err {
                    // Expected while a CR is deleted between being queued and reconciled, and for children
                    // without a Microservice of their name.
                    controller::Error::ObjectNotFound(_) => {}
                    // error_policy already logged it, with the object and the retry.
                    controller::Error::ReconcilerFailed(..) => {}
                    other => warn!(error = %other, "controller error"),
                }
            }
        })
        .await;
    info!("Microservice controller stopped");
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

/// A tick every `period`, starting one period from now (the initial list already reconciles everything).
fn tokio_stream_interval(period: Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}

/// Temporary errors retry with this object's backoff; permanent ones were already recorded in status by the
/// reconcile and wait for a change.
fn error_policy(ms: Arc<Microservice>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = reconcile::key(&ms);
    match err.class() {
        Class::Temporary { retry_after } => {
            let delay = ctx.backoff.failed(&key, retry_after);
            warn!(
                object = %key,
                error_kind = err.kind(),
                error = %err,
                retry_in_ms = delay.as_millis() as u64,
                attempt = ctx.backoff.failures(&key),
                "reconcile failed; retrying with backoff"
            );
            Action::requeue(delay)
        }
        Class::Permanent => {
            warn!(object = %key, error_kind = err.kind(), error = %err, "reconcile failed permanently; {}", err.next_step());
            Action::await_change()
        }
    }
}
