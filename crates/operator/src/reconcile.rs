//! One reconcile of one Microservice: the executor of the pure plan (`microservice_core::plan`). Reads come from
//! the controller's caches (the live object only when a plan asks to judge it); each child's plan is sent as it
//! says; the status is computed from what the server answered and written when `plan::status_write` says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, instrument};

use crate::answer::{self, Versioned};
use crate::children::{
    Cached, Child, ChildCache, DeploymentView, Digest, JudgedFor, Verdict, digest_of, exact, judge, judge_values,
    judge_watched,
};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::{Event, EventType};
use crate::metrics::ChildLabels;
use crate::written::REMEMBER_WRITES;
use microservice_core::contract::{self, Contract};
use microservice_core::crd::{AcceptedContract, Microservice, MicroserviceStatus, Phase};
use microservice_core::desired::{MANAGER, desired_deployment, desired_hpa, desired_service};
use microservice_core::drift;
use microservice_core::ownership::{ChildKind, Conflict, handover_cleanup_patch, ownership_upgrade_patch};
use microservice_core::plan::{
    ChildPlan, Deed, Live, Spacing, StatusWrite, Write, as_accepted, at_rest, deployment_at_rest,
    plan_autoscaler_removal, plan_child, plan_deployment, status_write, tell,
};
use microservice_core::reason::Reason;
use microservice_core::status::{compute_status, status_events, whole_seconds, with_failure};

/// Progress-only status changes (the same phase and condition reasons) are held back per Microservice: a new
/// ready/desired count (what `kubectl get ms` shows) at most every 5 s, wording and the pods' total (what only
/// `kubectl describe` shows) until another write carries them or 30 s have passed. A change of phase or condition
/// (Ready above all) is written at once. See docs/design.md, "What a rollout costs".
pub const SPACING: Spacing = Spacing { counts: Duration::from_secs(5), details: Duration::from_secs(30) };

/// The progress-only status writes a second that all rollouts in progress share (`Spacing::shared`): a wave of
/// thousands costs the API server this, not a write per Microservice and replica step; while more than 3,000 are in
/// progress, each steps every five minutes (`written::REMEMBER_WRITES`, the longest a write's time is kept).
pub const PROGRESS_WRITES_PER_SECOND: u32 = 10;

/// `namespace/name`, the key of logs and backoff.
pub fn key(ms: &Microservice) -> String {
    crate::queue::key(&ms.namespace().unwrap_or_default(), &ms.name_any())
}

/// Reconciles the Microservice with this `namespace/name` key as the cache holds it when the reconcile starts;
/// `None` if the cache has no such Microservice (deleted since it was queued). Temporary errors are for the caller
/// to retry; permanent ones were recorded in status and wait for a change. `urgent`: when the urgent change this
/// reconcile answers reached the cache (the Ready lane's), so its wait is measured.
#[instrument(skip_all, fields(object = %key, generation = tracing::field::Empty))]
pub async fn reconcile(ctx: &Context, key: &str, urgent: Option<Instant>) -> Option<Result<()>> {
    // Before the lock: a change from now on may need a reconcile after this one.
    ctx.queue.started(key);
    // One reconcile of an object at a time, whether a worker or the Ready lane runs it.
    let locking = Instant::now();
    let held = ctx.locks.lock(key).await;
    if let Some(seen) = urgent {
        ctx.metrics.urgent_started(seen.elapsed(), locking.elapsed());
    }
    // The CR as cached now, not as it was when this reconcile was queued: a reconcile that held the lock meanwhile
    // may have written status, and its memo is forgotten once the watch shows it, so an older copy would send a
    // stale resourceVersion precondition (409) and retry with backoff.
    let mut ms = ctx.microservices.get(key)?;
    tracing::Span::current().record("generation", ms.metadata.generation.unwrap_or_default());
    // The CR as the server holds it after this replica's own last status write, if the cache lags behind it.
    if let Some((version, status)) =
        ctx.written.overlay(key, ms.metadata.resource_version.as_deref().unwrap_or_default())
    {
        ms.metadata.resource_version = Some(version);
        ms.status = Some(status);
    }
    let _worker = ctx.metrics.worker_started();
    let started = Instant::now();
    let mut outbox = Outbox::default();
    // Boxed, so the future each reconcile's task is spawned with stays small (it is copied whole on every spawn);
    // the children's writes, which hold whole objects, are boxed again inside (`converge_children`).
    let outcome = match Box::pin(converge(&ms, ctx, urgent, &mut outbox)).await {
        Ok(()) => {
            ctx.backoff.succeeded(key);
            Ok(())
        }
        Err(err) if err.is_temporary() => Err(err),
        // Permanent: say so in status (once) so the user sees it; then wait for a change.
        Err(err) => Box::pin(record_permanent(&ms, ctx, &err, &mut outbox)).await.and(Err(err)),
    };
    // The Events are sent once the object is free: a reconcile waiting for it (the Ready lane's, with a completed
    // rollout to report) must not wait for Events as well.
    drop(held);
    outbox.send(ctx, &ms).await;
    match &outcome {
        Ok(_) => ctx.metrics.reconciled("success", started.elapsed()),
        Err(err) => {
            ctx.metrics.reconciled("error", started.elapsed());
            ctx.metrics.failed(err.kind(), !err.is_temporary());
        }
    }
    Some(outcome)
}

async fn converge(ms: &Microservice, ctx: &Context, urgent: Option<Instant>, outbox: &mut Outbox) -> Result<()> {
    if ms.metadata.deletion_timestamp.is_some() {
        // Being deleted (e.g. `--cascade=orphan` waits on the orphan finalizer while the garbage collector strips
        // ownerReferences): writing children now would re-attach them to an owner about to vanish.
        return Ok(());
    }
    let now = now();
    let previous = ms.status.clone().unwrap_or_default();
    let contract = contract::validate_object(ms, &ctx.profile);
    let (deployment, service, conflicts) = match &contract {
        Ok(valid) => {
            let mut report = Report::default();
            let children = converge_children(ms, ctx, valid, &previous, &mut report).await;
            // What was done is told even when a later step failed.
            report.tell(outbox);
            let (deployment, service) = children?;
            (deployment, service, report.conflicts)
        }
        Err(_) => {
            // The spec is refused until its next generation; what the last accepted one asked for keeps running,
            // and is repaired like any drift, so an invalid spec never takes the service down.
            if let Some(last) = &previous.last_accepted {
                keep_last_accepted(ms, ctx, last, &previous, outbox).await?;
            }
            (None, None, Vec::new())
        }
    };
    let new = compute_status(ms, &contract, deployment.as_ref(), service.as_ref(), &conflicts, &now);
    let written = write_status(ms, ctx, &previous, &new).await?;
    // Answered: the repairs are sent and the status that tells them committed (or found already told). The Events
    // that follow are not what a user waits for.
    if let Some(seen) = urgent {
        ctx.metrics.urgent_answered(seen.elapsed());
    }
    if written == StatusWrite::Now {
        if let Err(violations) = &contract {
            let reason = violations.first().map_or(Reason::InvalidSpec, |v| v.reason).as_str();
            info!(reason, "spec refused by the platform contract: {}", contract::summarize(violations));
        }
        outbox.status_events(&previous, &new);
    }
    if let StatusWrite::Later(after) = written {
        ctx.queue.add_after(&key(ms), after);
    }
    Ok(())
}

/// Converges the children to the last accepted generation's contract (while the current one is refused).
async fn keep_last_accepted(
    ms: &Microservice,
    ctx: &Context,
    last: &AcceptedContract,
    previous: &MicroserviceStatus,
    outbox: &mut Outbox,
) -> Result<()> {
    let accepted = as_accepted(ms, last);
    let Ok(contract) = contract::validate_object(&accepted, &ctx.profile) else {
        // The platform profile changed since: the old contract is no longer one the operator may deploy.
        info!(generation = last.generation, "the last accepted generation no longer satisfies the contract");
        return Ok(());
    };
    // That generation was acted on: anything missing or changed now is a repair.
    let acted = MicroserviceStatus { observed_generation: Some(last.generation), ..previous.clone() };
    let mut report = Report::default();
    let children = converge_children(&accepted, ctx, &contract, &acted, &mut report).await;
    report.tell(outbox);
    children.map(|_| ())
}

/// The Deployment, the Service and the HorizontalPodAutoscaler (or its removal), each planned and then written;
/// returns the Deployment and the Service as last seen, for status.
async fn converge_children(
    ms: &Microservice,
    ctx: &Context,
    contract: &Contract,
    previous: &MicroserviceStatus,
    report: &mut Report,
) -> Result<(Option<Deployment>, Option<Service>)> {
    let namespace = ms.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let name = ms.metadata.name.clone().ok_or(Error::MissingMetadata("name"))?;

    // The Service first, then the Deployment, each tried whatever became of the other. A reconcile holds its
    // object's lock while it writes, and the Ready lane's reconcile of a completed rollout waits for it: on a
    // loaded kube-apiserver a Service create (its ClusterIP allocated) took 978 ms at the median where a Deployment
    // create took 23 (N=5,000, docs/benchmarks.md), so with the Deployment first, or both at once, its rollout
    // completed while the Service create still held the lock. Created after it, the rollout finds the lock free
    // but for the status write.
    // A child at rest (most reconciles: those woken by a rollout's status steps) needs no desired object built.
    // What a child's writes hold (desired and live objects, requests) is boxed, allocated only when not at rest:
    // inline, every reconcile allocated and moved a 32 KB converge (5.6 KB now; children 31 KB, now 2.2 KB).
    let judged_for = JudgedFor::of(ms);
    let mut service_report = Report::default();
    let service = async {
        if let Some(view) =
            resting::<Service>(ctx.services.get(&namespace, &name), judged_for, |_, live| at_rest(ms, live))
        {
            return Ok(Some(view));
        }
        Box::pin(async {
            let desired_svc = desired_service(ms, &ctx.profile)?;
            let live = observe(ctx, &ctx.services, &namespace, &name, Some(&desired_svc)).await?;
            let plan = |l: Option<&Live>| plan_child(ms, ChildKind::Service, &desired_svc, l, previous);
            converge_child(ms, ctx, &ctx.services, &desired_svc, live, plan, &mut service_report).await
        })
        .await
    }
    .await;
    let deployment = async {
        let rests =
            |view: &DeploymentView, live: &Live| deployment_at_rest(ms, live, &view.selector.to_label_selector());
        if let Some(view) = resting::<Deployment>(ctx.deployments.get(&namespace, &name), judged_for, rests) {
            return Ok(Some(view));
        }
        Box::pin(async {
            let desired_deploy = desired_deployment(ms, contract, &ctx.profile)?;
            let live = observe(ctx, &ctx.deployments, &namespace, &name, Some(&desired_deploy)).await?;
            let live_deployment = live.as_deref().map(DeploymentView::to_deployment);
            let plan =
                |l: Option<&Live>| plan_deployment(ms, &desired_deploy, l.zip(live_deployment.as_ref()), previous);
            converge_child(ms, ctx, &ctx.deployments, &desired_deploy, live, plan, report).await
        })
        .await
    }
    .await;
    // Events name the Deployment first, as they always have.
    report.absorb(service_report);
    let (deployment, service) = (deployment?, service?);

    if let Some(bounds) = contract.scaling.autoscaling() {
        Box::pin(async {
            let desired = desired_hpa(ms, &bounds, &ctx.profile)?;
            let live = observe(ctx, &ctx.hpas, &namespace, &name, Some(&desired)).await?;
            let plan = |l: Option<&Live>| plan_child(ms, ChildKind::HorizontalPodAutoscaler, &desired, l, previous);
            converge_child(ms, ctx, &ctx.hpas, &desired, live, plan, report).await
        })
        .await?;
    } else {
        let live = observe::<HorizontalPodAutoscaler>(ctx, &ctx.hpas, &namespace, &name, None).await?;
        let plan = plan_autoscaler_removal(
            ms,
            &name,
            live.as_deref().map(|v| live_of::<HorizontalPodAutoscaler>(v, Digest::default())).as_ref(),
        );
        if !plan.is_nothing() {
            Box::pin(perform(ms, ctx, &ctx.hpas, &name, live, plan, None, report)).await?;
        }
    }
    Ok((deployment.map(|d| d.to_deployment()), service.map(|s| s.to_service())))
}

/// The cached child when its plan would write nothing whatever the desired object (`plan::at_rest`, asked through
/// `rests`), going by a verdict judged for this very Microservice generation (by the watch, or by the write that
/// made it so): no desired object is built, nothing serialised.
fn resting<K: Child>(
    cached: Cached<K::View>,
    judged_for: JudgedFor,
    rests: impl Fn(&K::View, &Live) -> bool,
) -> Option<Arc<K::View>> {
    let Cached::View(view) = cached else { return None };
    let meta = K::view_meta(&view);
    let verdict = meta.verdict.as_ref().filter(|v| v.judged_for.matches(judged_for))?;
    let live = Live { meta: meta.object_meta(), changed: Some(verdict.changed.clone()) };
    rests(&view, &live).then_some(view)
}

/// The child as cached. One cached by name only (nothing tied it to a Microservice when the watch saw it) is read
/// once, judged against `desired`, and cached as a view from then on.
async fn observe<K>(
    ctx: &Context,
    cache: &ChildCache<K::View>,
    namespace: &str,
    name: &str,
    desired: Option<&K>,
) -> Result<Option<Arc<K::View>>>
where
    K: Child,
{
    match cache.get(namespace, name) {
        Cached::View(view) => Ok(Some(view)),
        Cached::Absent => Ok(None),
        Cached::NameOnly => {
            let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
            let read = api.get_opt(name).await.map_err(|e| Error::api(format!("read {} {name}", K::KIND), e))?;
            let Some(obj) = read else { return Ok(None) };
            let view = K::view(&obj, desired.and_then(|d| judge(d, &obj)));
            cache.wrote::<K>(view.clone());
            Ok(Some(Arc::new(view)))
        }
    }
}

/// The Events a reconcile has to tell, in the order it found them, sent when it is done (`Outbox::send`).
#[derive(Default)]
struct Outbox(Vec<Event>);

impl Outbox {
    fn push(&mut self, type_: EventType, reason: Reason, action: &str, note: String) {
        let action = series_action(action, &note);
        self.0.push(Event { type_, reason: reason.as_str().to_string(), note, action });
    }

    /// One Event per state the status entered that status alone does not tell (see `status::status_events`).
    fn status_events(&mut self, previous: &MicroserviceStatus, new: &MicroserviceStatus) {
        for event in status_events(Some(previous), new) {
            let type_ = if event.warning { EventType::Warning } else { EventType::Normal };
            self.push(type_, event.reason, "Reconcile", event.note);
        }
    }

    /// Events are best effort: a failure to record one is logged, never fails the reconcile.
    async fn send(self, ctx: &Context, ms: &Microservice) {
        if self.0.is_empty() {
            return;
        }
        let regarding = ms.object_ref(&());
        for event in self.0 {
            if let Err(err) = ctx.events.publish(&event, &regarding).await {
                tracing::warn!(reason = event.reason, error = %err, "could not record an Event");
            }
        }
    }
}

/// What a reconcile found (children it may not write) and did to its children, told at the end (`plan::tell`).
#[derive(Default)]
struct Report {
    conflicts: Vec<Conflict>,
    deeds: Vec<Deed>,
}

impl Report {
    fn absorb(&mut self, other: Report) {
        self.conflicts.extend(other.conflicts);
        self.deeds.extend(other.deeds);
    }

    fn tell(&self, outbox: &mut Outbox) {
        for told in tell(&self.deeds) {
            outbox.push(EventType::Normal, told.reason, &told.action, told.note);
        }
    }
}

/// A cached child as the plan sees it; its verdict counts only when judged against the desired object whose
/// digest is `digest`.
fn live_of<K: Child>(view: &K::View, digest: Digest) -> Live {
    let meta = K::view_meta(view);
    let changed = meta.verdict.as_ref().filter(|v| v.desired_digest.matches(digest)).map(|v| v.changed.clone());
    Live { meta: meta.object_meta(), changed }
}

/// Plans one child from the cache and performs the plan. When the plan needs the live object judged (the cached
/// verdict is for another desired object), reads it once, keeps the verdict in the cache and plans again.
async fn converge_child<K>(
    ms: &Microservice,
    ctx: &Context,
    cache: &ChildCache<K::View>,
    desired: &K,
    view: Option<Arc<K::View>>,
    planner: impl Fn(Option<&Live>) -> ChildPlan<K>,
    report: &mut Report,
) -> Result<Option<Arc<K::View>>>
where
    K: Child,
{
    let kind = K::KIND;
    let name = desired.name_any();
    let digest = digest_of(desired);
    let mut live = view.as_deref().map(|v| live_of::<K>(v, digest));
    let mut plan = planner(live.as_ref());
    let mut fetched = None;
    if let (ChildPlan::Judge, Some(cached), Some(live)) = (&plan, &view, &mut live) {
        let namespace = ms.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
        let full = api.get(&name).await.map_err(|e| Error::api(format!("read {kind} {name}"), e))?;
        let judged = Verdict {
            judged_for: JudgedFor::of(ms),
            ..judge_values::<K>(digest, &to_value(desired)?, &to_value(&full)?)
        };
        cache.judged(&namespace, &name, &K::view_meta(cached).uid, judged.clone(), K::view_meta_mut);
        live.changed = Some(judged.changed);
        fetched = Some(full);
        plan = planner(Some(live));
    }
    perform(ms, ctx, cache, &name, view, plan, fetched, report).await
}

/// Sends a child's planned writes in order and keeps what they answered in the cache; returns the child as last
/// seen (None when it belongs to someone else, recorded in the report, or was deleted). `fetched` is the live
/// object when it was just read, so the first apply does not read it again.
#[allow(clippy::too_many_arguments)] // the executor's inputs: the CR, its context, the child's cache and plan
async fn perform<K>(
    ms: &Microservice,
    ctx: &Context,
    cache: &ChildCache<K::View>,
    name: &str,
    mut current: Option<Arc<K::View>>,
    plan: ChildPlan<K>,
    mut fetched: Option<K>,
    report: &mut Report,
) -> Result<Option<Arc<K::View>>>
where
    K: Child,
{
    let (writes, deed) = match plan {
        ChildPlan::Blocked(problem) => {
            report.conflicts.push(problem);
            return Ok(None);
        }
        // A judged child has a verdict, so a plan never asks twice; nothing is written without one.
        ChildPlan::Judge => return Ok(current),
        ChildPlan::Writes { writes, deed } => (writes, deed),
    };
    let kind = K::KIND;
    let namespace = ms.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let applied = writes.iter().any(|w| matches!(w, Write::Apply(_)));
    for write in writes {
        current = match write {
            Write::Create(desired) => {
                let params = PostParams { field_manager: Some(MANAGER.to_string()), ..PostParams::default() };
                let created: K::Watched = answer::create(&ctx.client, &namespace, &params, &desired)
                    .await
                    .map_err(|e| Error::api(format!("create {kind} {name}"), e))?;
                ctx.metrics.wrote(kind.resource(), "create");
                Some(remember(cache, ms, &desired, &created))
            }
            Write::Apply(desired) => {
                prepare(ctx, &api, name, &desired, kind, fetched.take()).await?;
                let applied = apply(ctx, &namespace, name, &desired, kind).await?;
                Some(remember(cache, ms, &desired, &applied))
            }
            Write::RemoveHandover => {
                let cleaned = remove_handover_annotation(ctx, &api, name, kind).await?;
                // An annotation is no managed field: the verdict of the object before still holds.
                let verdict = current.as_deref().and_then(|v| K::view_meta(v).verdict.clone());
                let view = K::view(&cleaned, verdict);
                cache.wrote::<K>(view.clone());
                Some(Arc::new(view))
            }
            Write::Delete { uid } => {
                let preconditions = Preconditions { uid: Some(uid), resource_version: None };
                let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
                match api.delete(name, &params).await {
                    Ok(_) => ctx.metrics.wrote(kind.resource(), "delete"),
                    // Gone already: nothing was done, nothing to tell.
                    Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                    Err(e) => return Err(Error::api(format!("delete {kind} {name}"), e)),
                }
                None
            }
        };
    }
    if let Some(deed) = deed {
        let labels = ChildLabels { kind: kind.as_str() };
        match deed.reason {
            Reason::Adopted => ctx.metrics.adoptions_total.get_or_create(&labels).inc(),
            Reason::Repaired if applied => ctx.metrics.drift_repairs_total.get_or_create(&labels).inc(),
            _ => 0,
        };
        info!(child = kind.as_str(), "{}", deed.note);
        report.deeds.push(deed);
    }
    Ok(current)
}

/// Puts what a write answered into the cache (with its verdict), so a reconcile before the watch shows it neither
/// creates it again nor judges a stale copy; returns it as cached. The verdict carries its basis, so the watch keeps
/// it through the rollout's status events instead of building the desired object again.
fn remember<K>(cache: &ChildCache<K::View>, ms: &Microservice, desired: &K, written: &K::Watched) -> Arc<K::View>
where
    K: Child,
{
    let basis = crate::children::basis(ms, written.meta());
    let verdict = judge_watched(desired, written).map(|v| Verdict { basis, judged_for: JudgedFor::of(ms), ..v });
    let view = K::view_watched(written, verdict);
    cache.wrote::<K>(view.clone());
    Arc::new(view)
}

fn to_value<T: serde::Serialize>(obj: &T) -> Result<Value> {
    serde_json::to_value(obj).map_err(|source| Error::Serialize { what: "a child object", source })
}

/// Before an apply, with one JSON patch guarded by the resourceVersion just read: moves the operator's Update
/// ownership (its POST create) to its Apply manager, so the apply can drop fields the desired state no longer has;
/// and removes what others added to the parts the platform owns exactly (a sidecar, hostNetwork, a selector key),
/// which an apply cannot remove because those fields are the other manager's. Reads the live object (the cache
/// holds projections, without managedFields) unless the caller just read it: only when a write is due.
async fn prepare<K: Child>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    desired: &K,
    kind: ChildKind,
    live: Option<K>,
) -> Result<()> {
    let live = match live {
        Some(live) => live,
        None => api.get(name).await.map_err(|e| Error::api(format!("read {kind} {name}"), e))?,
    };
    let extras = drift::extras(exact(kind), &to_value(desired)?, &to_value(&live)?);
    let mut ops = match ownership_upgrade_patch(live.meta()) {
        Some(Value::Array(ops)) => ops,
        _ => Vec::new(),
    };
    if !extras.is_empty() {
        if ops.is_empty() {
            let version = live.meta().resource_version.clone().unwrap_or_default();
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": version}));
        }
        ops.extend(drift::removal_ops(&extras));
    }
    if !ops.is_empty() {
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
            .map_err(|source| Error::Serialize { what: "a JSON patch", source })?;
        let params = PatchParams { field_manager: Some(MANAGER.to_string()), ..PatchParams::default() };
        api.patch(name, &params, &Patch::<()>::Json(patch))
            .await
            .map_err(|e| Error::guarded(format!("take over the fields of {kind} {name}"), e))?;
        ctx.metrics.wrote(kind.resource(), "patch");
    }
    hand_over_replicas(ctx, api, name, desired, kind, &live).await
}

/// Field manager that holds a Deployment's `spec.replicas` between the operator releasing it (autoscaling turned
/// on) and the HorizontalPodAutoscaler's first scale, which takes it over.
pub const REPLICAS_HANDOVER_MANAGER: &str = "microservice-operator-replicas-handover";

/// When the desired object stops setting `spec.replicas` (autoscaling turned on) while the operator owns it: the
/// apply would release a field only the operator owns, and the server would reset it to its default (1 pod). An
/// apply of the live count under [`REPLICAS_HANDOVER_MANAGER`] first keeps it until the HPA (or `kubectl scale`)
/// sets it; the operator's later applies force it back when autoscaling ends.
async fn hand_over_replicas<K: Child>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    desired: &K,
    kind: ChildKind,
    live: &K,
) -> Result<()> {
    let (want, have) = (to_value(desired)?, to_value(live)?);
    let Some(replicas) = have.pointer("/spec/replicas").filter(|r| !r.is_null()) else { return Ok(()) };
    if want.pointer("/spec/replicas").is_some_and(|r| !r.is_null()) {
        return Ok(());
    }
    let ours = live.meta().managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() == Some(MANAGER)
            && entry.fields_v1.as_ref().is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
    });
    if !ours {
        return Ok(());
    }
    let partial = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
    });
    api.patch(name, &PatchParams::apply(REPLICAS_HANDOVER_MANAGER), &Patch::Apply(&partial))
        .await
        .map_err(|e| Error::api(format!("hand the replicas of {kind} {name} over"), e))?;
    ctx.metrics.wrote(kind.resource(), "apply");
    Ok(())
}

/// Server-side apply with force: the operator is the rightful owner of the fields it manages (the recommended
/// mode for controllers); whether it may touch the object at all was decided before.
async fn apply<K: Child>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    desired: &K,
    kind: ChildKind,
) -> Result<K::Watched> {
    let params = PatchParams::apply(MANAGER).force();
    let applied = answer::patch::<K, _, _>(&ctx.client, namespace, name, None, &params, &Patch::Apply(desired))
        .await
        .map_err(|e| Error::api(format!("apply {kind} {name}"), e))?;
    ctx.metrics.wrote(kind.resource(), "apply");
    Ok(applied)
}

async fn remove_handover_annotation<K: Child>(ctx: &Context, api: &Api<K>, name: &str, kind: ChildKind) -> Result<K> {
    let patch = handover_cleanup_patch();
    let params = PatchParams { field_manager: Some(MANAGER.to_string()), ..PatchParams::default() };
    let patched = api
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::api(format!("remove the handover annotation of {kind} {name}"), e))?;
    ctx.metrics.wrote(kind.resource(), "patch");
    Ok(patched)
}

/// Writes status with one merge patch when `plan::status_write` says it is due (progress-only changes spaced by
/// [`SPACING`]); answers what it did.
async fn write_status(
    ms: &Microservice,
    ctx: &Context,
    previous: &MicroserviceStatus,
    new: &MicroserviceStatus,
) -> Result<StatusWrite> {
    let key = key(ms);
    let spacing = SPACING.shared(ctx.metrics.in_phase(Phase::Progressing), PROGRESS_WRITES_PER_SECOND, REMEMBER_WRITES);
    let due = status_write(previous, new, ctx.written.since_last_write(&key), spacing);
    if due != StatusWrite::Now {
        return Ok(due);
    }
    let read_version = ms.metadata.resource_version.as_deref().unwrap_or_default();
    // The version read is a precondition: a status computed from an older CR (a stale cache, or a write from a
    // replica that has since been replaced) gets 409 and is recomputed, so observedGeneration never goes back.
    let body = json!({ "metadata": { "resourceVersion": read_version }, "status": status_patch_body(new)? });
    let params = PatchParams { field_manager: Some(MANAGER.to_string()), ..PatchParams::default() };
    let (namespace, name, patch) = (ms.namespace().unwrap_or_default(), ms.name_any(), Patch::Merge(&body));
    let answer =
        answer::patch::<Microservice, Versioned, _>(&ctx.client, &namespace, &name, Some("status"), &params, &patch);
    let written = match answer.await {
        Ok(written) => written,
        Err(e) => {
            // Whatever this replica remembered of the CR is no better than the cache now.
            ctx.written.forget(&key);
            return Err(Error::api(format!("update the status of Microservice {key}"), e));
        }
    };
    tracing::debug!(phase = ?new.phase, previous = ?previous.phase, summary = ?new.replicas_summary, "status written");
    ctx.written.record(&key, written.resource_version(), new);
    ctx.metrics.wrote("microservices/status", "patch");
    Ok(StatusWrite::Now)
}

/// The status as a merge patch: fields that are now absent must be sent as null, or merge keeps the old value.
fn status_patch_body(status: &MicroserviceStatus) -> Result<Value> {
    let mut body = serde_json::to_value(status).map_err(|source| Error::Serialize { what: "status", source })?;
    if let Value::Object(map) = &mut body {
        for field in [
            "observedGeneration",
            "phase",
            "conditions",
            "readyReplicas",
            "replicas",
            "replicasSummary",
            "image",
            "lastAccepted",
        ] {
            map.entry(field).or_insert(Value::Null);
        }
    }
    Ok(body)
}

/// The current time as the API returns it (whole seconds).
fn now() -> Time {
    whole_seconds(&Time(k8s_openapi::jiff::Timestamp::now()))
}

/// Records a permanent failure as Degraded, with a Warning Event the first time.
async fn record_permanent(ms: &Microservice, ctx: &Context, err: &Error, outbox: &mut Outbox) -> Result<()> {
    let previous = ms.status.clone().unwrap_or_default();
    let now = now();
    let reason = failure_reason(err);
    let new = with_failure(&previous, ms.metadata.generation, reason, &err.to_string(), &now);
    if write_status(ms, ctx, &previous, &new).await? == StatusWrite::Now {
        outbox.push(EventType::Warning, reason, "Reconcile", err.to_string());
    }
    Ok(())
}

fn failure_reason(err: &Error) -> Reason {
    match err {
        Error::Api { .. } if err.status_code() == Some(403) => Reason::Forbidden,
        Error::Api { .. } => Reason::ApiRejected,
        Error::Desired(_) | Error::MissingMetadata(_) | Error::Serialize { .. } => Reason::InternalError,
    }
}

/// Events with the same reason and action fold into one series that keeps the series' first
/// note, so "generation 2 is rolled out" would only bump generation 1's count. The action carries a digest of the
/// note: a new fact starts its own series, the same fact repeated still counts up in one (bounded by the facts).
fn series_action(action: &str, note: &str) -> String {
    // FNV-1a: stable across runs and Rust versions, unlike std's hasher; a collision merely folds two notes.
    let digest = note.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{action}-{digest:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_note_starts_a_new_event_series_and_a_repeated_one_does_not() {
        let g1 = series_action("Reconcile", "generation 1 is rolled out: every replica runs a:1");
        let g2 = series_action("Reconcile", "generation 2 is rolled out: every replica runs a:2");
        assert_ne!(g1, g2);
        assert_eq!(g1, series_action("Reconcile", "generation 1 is rolled out: every replica runs a:1"));
        assert!(g1.starts_with("Reconcile-") && g1.len() == "Reconcile-".len() + 8, "{g1}");
    }

    #[test]
    fn a_child_rests_only_on_a_verdict_judged_for_this_generation_that_found_nothing_changed() {
        let ms = |generation| crate::children::tests::microservice("11111111-2222-4333-8444-555555555555", generation);
        let current = ms(2);
        let owner = microservice_core::desired::controller_reference(&current).unwrap();
        let service = Service {
            metadata: kube::api::ObjectMeta {
                name: Some("todo-api".into()),
                namespace: Some("todo".into()),
                uid: Some("22222222-2222-4333-8444-555555555555".into()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            ..Service::default()
        };
        let verdict = |judged: &Microservice, changed: &[&str]| Verdict {
            desired_digest: Digest::default(),
            judged_for: JudgedFor::of(judged),
            changed: changed.iter().map(ToString::to_string).collect(),
            basis: None,
            applied: false,
        };
        let rests = |verdict: Option<Verdict>| {
            let cached = Cached::View(Arc::new(<Service as Child>::view(&service, verdict)));
            resting::<Service>(cached, JudgedFor::of(&current), |_, live| at_rest(&current, live)).is_some()
        };
        assert!(rests(Some(verdict(&current, &[]))));
        assert!(!rests(Some(verdict(&ms(1), &[]))), "judged for the generation before");
        assert!(!rests(Some(verdict(&current, &["spec.ports[8080/TCP]"]))), "drifted");
        assert!(!rests(None), "never judged");
        let mut unsaved = current.clone();
        unsaved.metadata.uid = None;
        assert!(!rests(Some(verdict(&unsaved, &[]))), "judged for no known object");
    }

    #[test]
    fn status_patch_clears_absent_fields() {
        let body = status_patch_body(&MicroserviceStatus::default()).unwrap();
        assert_eq!(body["image"], Value::Null);
        assert!(body.as_object().unwrap().contains_key("image"));
    }
}
