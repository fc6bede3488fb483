//! Wiring: the kube-runtime Controller over Microservices, the caches of their Deployments and Services, the
//! periodic resync, and graceful shutdown. The decisions live in [`crate::reconcile`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use crate::backoff::{Backoff, BackoffPolicy};
use crate::crd::Microservice;
use crate::error::{Class, Error};
use crate::metrics::Metrics;
use crate::profile::PlatformProfile;
use crate::reconcile;

/// The controller name in Events and metrics.
pub const CONTROLLER_NAME: &str = "microservice-operator";

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
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A cached, trimmed watch of one child kind: managedFields and the last-applied annotation are dropped, since
/// drift is judged on spec and status and they would double the cache's memory.
fn child_cache<K>(api: Api<K>) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static)
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
    (reader, stream)
}

/// Every child maps to the same-name Microservice: children are named like their CR, and a same-name object
/// someone else made (a conflict, or a handover) must wake the CR too, so ownerReferences alone would not do.
fn same_name<K: Resource>(obj: K) -> Option<ObjectRef<Microservice>> {
    let ns = obj.meta().namespace.clone()?;
    Some(ObjectRef::new(&obj.name_any()).within(&ns))
}

/// Runs the operator until `shutdown` resolves; in-flight reconciles finish first.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let ns = config.namespace.as_deref();
    let microservices: Api<Microservice> = api(&client, ns);
    let (deployments, deployment_events) = child_cache(api::<Deployment>(&client, ns));
    let (services, service_events) = child_cache(api::<Service>(&client, ns));

    let mut watch = watcher::Config::default();
    if let Some(selector) = &config.selector {
        watch = watch.labels(selector);
    }
    let reporter = Reporter { controller: CONTROLLER_NAME.to_string(), instance: config.instance.clone() };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        profile: config.profile.clone(),
        deployments,
        services,
        backoff: Backoff::new(config.backoff),
        metrics,
    });

    let resync = tokio_stream_interval(config.resync_interval);
    info!(
        namespace = ns.unwrap_or("<all>"),
        selector = config.selector.as_deref().unwrap_or(""),
        resync_seconds = config.resync_interval.as_secs(),
        concurrency = config.concurrency,
        "starting the Microservice controller"
    );
    Controller::new(microservices, watch)
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .watches_stream(deployment_events, same_name)
        .watches_stream(service_events, same_name)
        .reconcile_all_on(resync)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, error_policy, context)
        .for_each(|outcome| async move {
            if let Err(err) = outcome {
                match err {
                    // Expected while a CR is deleted between being queued and reconciled.
                    controller::Error::ObjectNotFound(_) => {}
                    other => warn!(error = %other, "controller error"),
                }
            }
        })
        .await;
    info!("Microservice controller stopped");
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
