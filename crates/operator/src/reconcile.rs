//! One reconcile of one Microservice: a thin layer of I/O around the pure functions (contract, desired state,
//! ownership, drift, status). Reads come from the controller's caches; writes happen only when something differs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, instrument};

use crate::children::{Child, ChildCache, DeploymentView, digest_of, exact, judge_values};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::{Event, EventType};
use crate::metrics::ChildLabels;
use microservice_core::contract::{self, Contract};
use microservice_core::crd::{AcceptedContract, Microservice, MicroserviceSpec, MicroserviceStatus};
use microservice_core::desired::{HANDOVER_ANNOTATION, MANAGER, desired_deployment, desired_hpa, desired_service};
use microservice_core::drift;
use microservice_core::ownership::{
    ChildKind, Conflict, Ownership, conflict, handover_cleanup_patch, ownership, ownership_upgrade_patch,
    selector_conflict,
};
use microservice_core::reason::Reason;
use microservice_core::status::{compute_status, status_events, whole_seconds, with_failure};

/// Progress-only status changes (replica counts and messages, the same phase and condition reasons) are written at
/// most this often per Microservice; a change of phase or condition (Ready above all) is written at once.
/// Zero (every change written) for now: with 5 s the chaos suite left some Microservices Progressing after their
/// rollout completed (not yet understood), so the spacing is off until that is found.
pub const PROGRESS_EVERY: Duration = Duration::ZERO;

/// `namespace/name`, the key of logs and backoff.
pub fn key(ms: &Microservice) -> String {
    format!("{}/{}", ms.namespace().unwrap_or_default(), ms.name_any())
}

#[instrument(skip_all, fields(object = %key(&ms), generation = ms.metadata.generation.unwrap_or_default()))]
pub async fn reconcile(ms: Arc<Microservice>, ctx: Arc<Context>) -> Result<Action> {
    let key = key(&ms);
    // One reconcile of an object at a time, whether the Controller or the Ready lane runs it.
    let _held = ctx.locks.lock(&key).await;
    // The CR as the server holds it after this replica's own last status write, if the cache lags behind it.
    let ms = match ctx.written.overlay(&key, ms.metadata.resource_version.as_deref().unwrap_or_default()) {
        Some((version, status)) => {
            let mut current = Microservice::clone(&ms);
            current.metadata.resource_version = Some(version);
            current.status = Some(status);
            Arc::new(current)
        }
        None => ms,
    };
    let _worker = ctx.metrics.worker_started();
    let started = std::time::Instant::now();
    let outcome = match converge(&ms, &ctx).await {
        Ok(action) => {
            ctx.backoff.succeeded(&key);
            Ok(action)
        }
        Err(err) if err.is_temporary() => Err(err),
        // Permanent: say so in status (once) so the user sees it; the error policy then waits for a change.
        Err(err) => record_permanent(&ms, &ctx, &err).await.and(Err(err)),
    };
    match &outcome {
        Ok(_) => ctx.metrics.reconciled("success", started.elapsed()),
        Err(err) => {
            ctx.metrics.reconciled("error", started.elapsed());
            ctx.metrics.failed(err.kind(), !err.is_temporary());
        }
    }
    outcome
}

async fn converge(ms: &Microservice, ctx: &Context) -> Result<Action> {
    if ms.metadata.deletion_timestamp.is_some() {
        // Being deleted (e.g. `--cascade=orphan` waits on the orphan finalizer while the garbage collector strips
        // ownerReferences): writing children now would re-attach them to an owner about to vanish.
        return Ok(Action::await_change());
    }
    let namespace = ms.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let name = ms.metadata.name.clone().ok_or(Error::MissingMetadata("name"))?;
    let now = now();
    let previous = ms.status.clone().unwrap_or_default();

    let contract = contract::validate_object(ms, &ctx.profile);
    let valid = match &contract {
        Ok(valid) => valid,
        Err(violations) => {
            // The spec is refused until its next generation; what the last accepted one asked for keeps running,
            // and is repaired like any drift, so an invalid spec never takes the service down.
            if let Some(last) = &previous.last_accepted {
                keep_last_accepted(ms, ctx, last, &namespace, &name, &previous).await?;
            }
            let new = compute_status(ms, &contract, None, None, &[], &now);
            return match write_status(ms, ctx, &previous, &new).await? {
                Written::Yes => {
                    let reason = violations.first().map_or(Reason::InvalidSpec, |v| v.reason).as_str();
                    info!(reason, "spec refused by the platform contract: {}", contract::summarize(violations));
                    emit_status_events(ms, ctx, &previous, &new).await;
                    Ok(Action::await_change())
                }
                Written::No => Ok(Action::await_change()),
                Written::Later(after) => Ok(Action::requeue(after)),
            };
        }
    };

    let mut report = Report::default();
    let children = async {
        let deployment = converge_deployment(ms, ctx, valid, &namespace, &name, &previous, &mut report).await?;
        let desired = desired_service(ms, &ctx.profile)?;
        let live = ctx.services.get(&namespace, &name);
        let service = converge_child(ms, ctx, &ctx.services, desired, live, &previous, &mut report).await?;
        converge_autoscaler(ms, ctx, valid, &namespace, &name, &previous, &mut report).await?;
        Ok::<_, Error>((deployment.map(|d| d.to_deployment()), service.map(|s| s.to_service())))
    }
    .await;
    // What was done is told even when a later step failed.
    report.publish(ms, ctx).await;
    let conflicts = report.conflicts;
    let (deployment, service) = children?;

    let new = compute_status(ms, &contract, deployment.as_ref(), service.as_ref(), &conflicts, &now);
    match write_status(ms, ctx, &previous, &new).await? {
        Written::Yes => {
            emit_status_events(ms, ctx, &previous, &new).await;
            Ok(Action::await_change())
        }
        Written::No => Ok(Action::await_change()),
        Written::Later(after) => Ok(Action::requeue(after)),
    }
}

/// Converges the children to the last accepted generation's contract (while the current one is refused).
async fn keep_last_accepted(
    ms: &Microservice,
    ctx: &Context,
    last: &AcceptedContract,
    namespace: &str,
    name: &str,
    previous: &MicroserviceStatus,
) -> Result<()> {
    // The children are built as for that generation: its spec, and its number in the generation annotation.
    let mut accepted = ms.clone();
    accepted.spec = MicroserviceSpec {
        image: last.image.clone(),
        port: last.port,
        // Autoscaled, the bounds come back and the count stays the HorizontalPodAutoscaler's.
        replicas: last.autoscaling.is_none().then_some(last.replicas),
        autoscaling: last.autoscaling.clone(),
    };
    accepted.metadata.generation = Some(last.generation);
    let Ok(contract) = contract::validate_object(&accepted, &ctx.profile) else {
        // The platform profile changed since: the old contract is no longer one the operator may deploy.
        info!(generation = last.generation, "the last accepted generation no longer satisfies the contract");
        return Ok(());
    };
    // That generation was acted on: anything missing or changed now is a repair.
    let acted = MicroserviceStatus { observed_generation: Some(last.generation), ..previous.clone() };
    let mut report = Report::default();
    let children = async {
        converge_deployment(&accepted, ctx, &contract, namespace, name, &acted, &mut report).await?;
        let desired = desired_service(&accepted, &ctx.profile)?;
        let live = ctx.services.get(namespace, name);
        converge_child(&accepted, ctx, &ctx.services, desired, live, &acted, &mut report).await?;
        converge_autoscaler(&accepted, ctx, &contract, namespace, name, &acted, &mut report).await?;
        Ok::<_, Error>(())
    }
    .await;
    report.publish(ms, ctx).await;
    children
}

/// One Event per state the status entered that status alone does not tell (see `status::status_events`).
async fn emit_status_events(ms: &Microservice, ctx: &Context, previous: &MicroserviceStatus, new: &MicroserviceStatus) {
    for event in status_events(Some(previous), new) {
        let type_ = if event.warning { EventType::Warning } else { EventType::Normal };
        publish(ctx, ms, type_, event.reason.as_str(), "Reconcile", event.note).await;
    }
}

/// What a reconcile found (children it may not write) and did to its children. What it did is told at the end as
/// one Event per reason naming every child concerned (one "Created" for the Deployment and the Service).
#[derive(Default)]
struct Report {
    conflicts: Vec<Conflict>,
    done: Vec<(&'static str, ChildKind, String)>,
}

impl Report {
    fn did(&mut self, reason: &'static str, kind: ChildKind, note: String) {
        self.done.push((reason, kind, note));
    }

    async fn publish(&self, ms: &Microservice, ctx: &Context) {
        let mut reasons: Vec<&'static str> = self.done.iter().map(|(reason, _, _)| *reason).collect();
        reasons.dedup();
        for reason in reasons {
            let (kinds, notes): (Vec<&str>, Vec<&str>) = self
                .done
                .iter()
                .filter(|(r, _, _)| *r == reason)
                .map(|(_, kind, note)| (kind.as_str(), note.as_str()))
                .unzip();
            // The action names the children, so a later Event about another child is its own series.
            let action = format!("{reason}{}", kinds.join("And"));
            publish(ctx, ms, EventType::Normal, reason, &action, notes.join("; ")).await;
        }
    }
}

async fn converge_deployment(
    ms: &Microservice,
    ctx: &Context,
    contract: &Contract,
    namespace: &str,
    name: &str,
    previous: &MicroserviceStatus,
    report: &mut Report,
) -> Result<Option<Arc<DeploymentView>>> {
    let desired = desired_deployment(ms, contract, &ctx.profile)?;
    let live = ctx.deployments.get(namespace, name);
    // A selector is immutable: a Deployment selecting other pods can never become ours, handed over or not.
    if let Some(live) = &live {
        let meta = live.meta.object_meta();
        if ownership(ms, Some(&meta)).writable()
            && let Some(problem) = selector_conflict(ms, &desired, &live.to_deployment())
        {
            info!(child = "Deployment", "cannot adopt: {}", problem.message);
            report.conflicts.push(problem);
            return Ok(None);
        }
    }
    converge_child(ms, ctx, &ctx.deployments, desired, live, previous, report).await
}

/// The HorizontalPodAutoscaler while the contract is autoscaled, converged like any child. Otherwise the one this
/// Microservice controls (and only that one) is deleted: with the fixed count applied again to the Deployment,
/// nothing else may scale it, or the two would fight.
async fn converge_autoscaler(
    ms: &Microservice,
    ctx: &Context,
    contract: &Contract,
    namespace: &str,
    name: &str,
    previous: &MicroserviceStatus,
    report: &mut Report,
) -> Result<()> {
    let live = ctx.hpas.get(namespace, name);
    if let Some(bounds) = contract.scaling.autoscaling() {
        let desired = desired_hpa(ms, &bounds, &ctx.profile)?;
        converge_child(ms, ctx, &ctx.hpas, desired, live, previous, report).await?;
        return Ok(());
    }
    let Some(live) = live else { return Ok(()) };
    if ownership(ms, Some(&live.meta.object_meta())) != Ownership::Owned {
        // Someone else's HPA of that name: not the operator's to delete (nor, while not autoscaled, to report).
        return Ok(());
    }
    let kind = ChildKind::HorizontalPodAutoscaler;
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(ctx.client.clone(), namespace);
    // The uid precondition: a same-name HPA made since the cache saw ours is left alone.
    let preconditions = Preconditions { uid: Some(live.meta.uid.clone()), resource_version: None };
    match api.delete(name, &DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() }).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(Error::api(format!("delete {kind} {name}"), e)),
    }
    ctx.metrics.wrote(kind.resource(), "delete");
    let note = format!("deleted {kind} {name}: autoscaling is off, the spec's replicas apply");
    info!(child = kind.as_str(), "{note}");
    report.did(Reason::Updated.as_str(), kind, note);
    Ok(())
}

/// Creates, repairs, adopts or leaves alone one child. Returns the child as last seen (None when it belongs to
/// someone else, recorded in `conflicts`).
async fn converge_child<K>(
    ms: &Microservice,
    ctx: &Context,
    cache: &ChildCache<K::View>,
    desired: K,
    live: Option<Arc<K::View>>,
    previous: &MicroserviceStatus,
    report: &mut Report,
) -> Result<Option<Arc<K::View>>>
where
    K: Child,
    K::View: Clone,
{
    let kind = K::KIND;
    let name = desired.name_any();
    let namespace = ms.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    // Acted on this generation before: a missing or drifted child now is a repair, not a rollout.
    let acted_before = previous.observed_generation.is_some() && previous.observed_generation == ms.metadata.generation;
    let live_meta = live.as_deref().map(|l| K::view_meta(l).object_meta());
    let verdict = ownership(ms, live_meta.as_ref());
    if let Some(problem) = conflict(ms, kind, &verdict) {
        report.conflicts.push(problem);
        return Ok(None);
    }
    let Some(live) = live else {
        // POST, not apply: a create must fail (AlreadyExists) rather than merge into an object someone else made
        // that the cache has not shown yet.
        let params = PostParams { field_manager: Some(MANAGER.to_string()), ..PostParams::default() };
        let created =
            api.create(&params, &desired).await.map_err(|e| Error::api(format!("create {kind} {name}"), e))?;
        ctx.metrics.wrote(kind.resource(), "create");
        let (reason, note) = if acted_before {
            (Reason::Repaired.as_str(), format!("{kind} {name} was missing; recreated it"))
        } else {
            (Reason::Created.as_str(), format!("created {kind} {name}"))
        };
        info!(child = kind.as_str(), "{note}");
        report.did(reason, kind, note);
        return Ok(Some(remember(cache, &desired, &created)));
    };

    if verdict == Ownership::HandedOver {
        // Take every managed field, whoever held it, and become the controller; then drop the handover note.
        write(ctx, &api, &name, &desired, kind, None).await?;
        let adopted = remove_handover_annotation(ctx, &api, &name, kind).await?;
        ctx.metrics.adoptions_total.get_or_create(&ChildLabels { kind: kind.as_str() }).inc();
        let note = format!("adopted {kind} {name}, handed over with {HANDOVER_ANNOTATION}");
        info!(child = kind.as_str(), "{note}");
        report.did(Reason::Adopted.as_str(), kind, note);
        return Ok(Some(remember(cache, &desired, &adopted)));
    }

    // The cached verdict holds when it was judged against this very desired object; else judge the live object.
    let digest = digest_of(&desired);
    let (changed, fetched) = match K::view_meta(&live).verdict.as_ref().filter(|v| v.desired_digest == digest) {
        Some(v) => (v.changed.clone(), None),
        None => {
            let full = api.get(&name).await.map_err(|e| Error::api(format!("read {kind} {name}"), e))?;
            let judged = judge_values::<K>(&digest, &to_value(&desired)?, &to_value(&full)?);
            cache.judged(&namespace, &name, &K::view_meta(&live).uid, judged.clone(), K::view_meta_mut);
            (judged.changed, Some(full))
        }
    };
    let mut current = live;
    if !changed.is_empty() {
        let written = write(ctx, &api, &name, &desired, kind, fetched).await?;
        current = remember(cache, &desired, &written);
        if acted_before {
            ctx.metrics.drift_repairs_total.get_or_create(&ChildLabels { kind: kind.as_str() }).inc();
        }
        let fields = changed.join(", ");
        let (reason, note) = if acted_before {
            (Reason::Repaired.as_str(), format!("reverted changes to {kind} {name}: {fields}"))
        } else {
            (Reason::Updated.as_str(), format!("updated {kind} {name}: {fields}"))
        };
        info!(child = kind.as_str(), fields = %fields, "{note}");
        report.did(reason, kind, note);
    }
    if K::view_meta(&current).handover.is_some() {
        // Left over from an adoption whose second step failed.
        let cleaned = remove_handover_annotation(ctx, &api, &name, kind).await?;
        current = remember(cache, &desired, &cleaned);
    }
    Ok(Some(current))
}

/// Puts what a write answered into the cache (with its verdict), so a reconcile before the watch shows it neither
/// creates it again nor judges a stale copy; returns it as cached.
fn remember<K>(cache: &ChildCache<K::View>, desired: &K, written: &K) -> Arc<K::View>
where
    K: Child,
    K::View: Clone,
{
    let verdict = crate::children::judge(desired, written);
    let view = K::view(written, verdict);
    cache.wrote(view.clone(), K::view_meta);
    Arc::new(view)
}

fn to_value<T: serde::Serialize>(obj: &T) -> Result<Value> {
    serde_json::to_value(obj).map_err(|source| Error::Serialize { what: "a child object", source })
}

/// Makes an existing child the desired one: [`prepare`], then [`apply`].
async fn write<K: Child>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    desired: &K,
    kind: ChildKind,
    live: Option<K>,
) -> Result<K> {
    prepare(ctx, api, name, desired, kind, live).await?;
    apply(ctx, api, name, desired, kind).await
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
async fn apply<K: Child>(ctx: &Context, api: &Api<K>, name: &str, desired: &K, kind: ChildKind) -> Result<K> {
    let params = PatchParams::apply(MANAGER).force();
    let applied = api
        .patch(name, &params, &Patch::Apply(desired))
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

/// Whether a status write went out.
enum Written {
    Yes,
    No,
    /// A progress-only change, held back so one CR's status is not rewritten at every replica step; due after this.
    Later(Duration),
}

/// Same phase, generation, image, accepted contract and conditions (status, reason, generation, transition time):
/// what differs is only replica counts and wording.
fn progress_only(previous: &MicroserviceStatus, new: &MicroserviceStatus) -> bool {
    let shape = |s: &MicroserviceStatus| {
        (
            s.phase,
            s.observed_generation,
            s.image.clone(),
            s.last_accepted.clone(),
            s.conditions
                .iter()
                .map(|c| (c.type_, c.status, c.reason.clone(), c.observed_generation, c.last_transition_time.clone()))
                .collect::<Vec<_>>(),
        )
    };
    previous.phase.is_some() && shape(previous) == shape(new)
}

/// Writes status with one merge patch when it changed, progress-only changes at most every [`PROGRESS_EVERY`].
async fn write_status(
    ms: &Microservice,
    ctx: &Context,
    previous: &MicroserviceStatus,
    new: &MicroserviceStatus,
) -> Result<Written> {
    let key = key(ms);
    if previous == new {
        return Ok(Written::No);
    }
    if progress_only(previous, new)
        && let Some(since) = ctx.written.since_last_write(&key)
        && since < PROGRESS_EVERY
    {
        return Ok(Written::Later(PROGRESS_EVERY - since));
    }
    let read_version = ms.metadata.resource_version.as_deref().unwrap_or_default();
    let api: Api<Microservice> = Api::namespaced(ctx.client.clone(), &ms.namespace().unwrap_or_default());
    // The version read is a precondition: a status computed from an older CR (a stale cache, or a write from a
    // replica that has since been replaced) gets 409 and is recomputed, so observedGeneration never goes back.
    let body = json!({ "metadata": { "resourceVersion": read_version }, "status": status_patch_body(new)? });
    let params = PatchParams { field_manager: Some(MANAGER.to_string()), ..PatchParams::default() };
    let written = match api.patch_status(&ms.name_any(), &params, &Patch::Merge(&body)).await {
        Ok(written) => written,
        Err(e) => {
            // Whatever this replica remembered of the CR is no better than the cache now.
            ctx.written.forget(&key);
            return Err(Error::api(format!("update the status of Microservice {key}"), e));
        }
    };
    tracing::debug!(phase = ?new.phase, previous = ?previous.phase, summary = ?new.replicas_summary, "status written");
    ctx.written.record(&key, written.metadata.resource_version.as_deref().unwrap_or_default(), new);
    ctx.metrics.wrote("microservices/status", "patch");
    Ok(Written::Yes)
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
async fn record_permanent(ms: &Microservice, ctx: &Context, err: &Error) -> Result<()> {
    let previous = ms.status.clone().unwrap_or_default();
    let now = now();
    let reason = failure_reason(err);
    let new = with_failure(&previous, ms.metadata.generation, reason, &err.to_string(), &now);
    if let Written::Yes = write_status(ms, ctx, &previous, &new).await? {
        publish(ctx, ms, EventType::Warning, reason.as_str(), "Reconcile", err.to_string()).await;
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

/// Events are best effort: a failure to record one is logged, never fails the reconcile.
async fn publish(ctx: &Context, ms: &Microservice, type_: EventType, reason: &str, action: &str, note: String) {
    let action = series_action(action, &note);
    let event = Event { type_, reason: reason.to_string(), note, action };
    if let Err(err) = ctx.events.publish(&event, &ms.object_ref(&())).await {
        tracing::warn!(reason, error = %err, "could not record an Event");
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
    fn status_patch_clears_absent_fields() {
        let body = status_patch_body(&MicroserviceStatus::default()).unwrap();
        assert_eq!(body["image"], Value::Null);
        assert!(body.as_object().unwrap().contains_key("image"));
    }
}
