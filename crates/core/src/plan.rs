//! The reconcile's plan, pure: which writes a child needs, what is told about them, and whether a new status is
//! written now, later or not at all. The operator's reconcile is the executor: it reads what a plan asks for,
//! sends the writes in order and feeds the server's answers to `status::compute_status`. The status is planned
//! after the writes on purpose: it describes what the server answered (a create's answer, an apply's new
//! generation), not what the operator hoped for.

use std::time::Duration;

use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::crd::{AcceptedContract, Microservice, MicroserviceSpec, MicroserviceStatus};
use crate::desired::HANDOVER_ANNOTATION;
use crate::ownership::{ChildKind, Conflict, Ownership, conflict, ownership, selector_conflict, selects_own_pods};
use crate::reason::Reason;

/// A child as the plan sees it: its metadata (ownership, the handover annotation) and the drift verdict.
#[derive(Clone, Debug, Default)]
pub struct Live {
    pub meta: ObjectMeta,
    /// The managed fields that differ from *this* desired object; None when it has not been judged against it
    /// (the cached verdict is for an older desired object), so the plan asks for the live object first.
    pub changed: Option<Vec<String>>,
}

/// One write of a child of type `K`, in the order the executor sends them.
#[derive(Clone, Debug, PartialEq)]
pub enum Write<K> {
    /// POST, never apply: a create must fail (AlreadyExists) rather than merge into an object someone else made
    /// that the cache has not shown yet.
    Create(K),
    /// Takes over the fields the operator manages (its Update-manager fields, extras others added to the exact
    /// parts), then server-side apply with force.
    Apply(K),
    /// Drops the handover annotation, which an apply cannot remove (it is the annotating user's field).
    RemoveHandover,
    /// Deletes the child with this uid as a precondition, so a same-name object made since is left alone.
    Delete { uid: String },
}

/// What a write did, told as an Event (one per reason, naming every child concerned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deed {
    pub reason: Reason,
    pub kind: ChildKind,
    pub note: String,
}

/// The plan for one child of type `K`.
#[derive(Clone, Debug, PartialEq)]
pub enum ChildPlan<K> {
    /// Not the operator's to write: left untouched, reported in status.
    Blocked(Conflict),
    /// The live object must be read and judged against the desired one; then plan again.
    Judge,
    /// These writes (none when the child is as desired), and what they did.
    Writes { writes: Vec<Write<K>>, deed: Option<Deed> },
}

impl<K> ChildPlan<K> {
    fn nothing() -> ChildPlan<K> {
        ChildPlan::Writes { writes: Vec::new(), deed: None }
    }

    /// Whether performing this plan would neither write nor tell anything.
    pub fn is_nothing(&self) -> bool {
        matches!(self, ChildPlan::Writes { writes, deed: None } if writes.is_empty())
    }
}

/// Whether the operator acted on this generation before: a missing or drifted child now is a repair, not a
/// rollout.
pub fn acted_on(ms: &Microservice, previous: &MicroserviceStatus) -> bool {
    previous.observed_generation.is_some() && previous.observed_generation == ms.metadata.generation
}

/// Creates, repairs, adopts or leaves alone the child `kind` that should be `desired`.
pub fn plan_child<K>(
    ms: &Microservice,
    kind: ChildKind,
    desired: &K,
    live: Option<&Live>,
    previous: &MicroserviceStatus,
) -> ChildPlan<K>
where
    K: Metadata<Ty = ObjectMeta> + Clone,
{
    let name = desired.metadata().name.as_deref().unwrap_or_default();
    let verdict = ownership(ms, live.map(|l| &l.meta));
    if let Some(problem) = conflict(ms, kind, &verdict) {
        return ChildPlan::Blocked(problem);
    }
    let repair = acted_on(ms, previous);
    let Some(live) = live else {
        let deed = if repair {
            Deed { reason: Reason::Repaired, kind, note: format!("{kind} {name} was missing; recreated it") }
        } else {
            Deed { reason: Reason::Created, kind, note: format!("created {kind} {name}") }
        };
        return ChildPlan::Writes { writes: vec![Write::Create(desired.clone())], deed: Some(deed) };
    };
    if verdict == Ownership::HandedOver {
        // Every managed field, whoever held it, and the controller reference; then the note is dropped.
        let note = format!("adopted {kind} {name}, handed over with {HANDOVER_ANNOTATION}");
        let deed = Deed { reason: Reason::Adopted, kind, note };
        return ChildPlan::Writes {
            writes: vec![Write::Apply(desired.clone()), Write::RemoveHandover],
            deed: Some(deed),
        };
    }
    let Some(changed) = &live.changed else { return ChildPlan::Judge };
    let mut writes = Vec::new();
    let mut deed = None;
    if !changed.is_empty() {
        writes.push(Write::Apply(desired.clone()));
        let fields = changed.join(", ");
        deed = Some(if repair {
            Deed { reason: Reason::Repaired, kind, note: format!("reverted changes to {kind} {name}: {fields}") }
        } else {
            Deed { reason: Reason::Updated, kind, note: format!("updated {kind} {name}: {fields}") }
        });
    }
    if has_handover(&live.meta) {
        // Left over from an adoption whose second step failed.
        writes.push(Write::RemoveHandover);
    }
    ChildPlan::Writes { writes, deed }
}

/// As [`plan_child`], after the one rule of Deployments: a selector is immutable, so a Deployment selecting other
/// pods can never become this Microservice's, handed over or not.
pub fn plan_deployment(
    ms: &Microservice,
    desired: &Deployment,
    live: Option<(&Live, &Deployment)>,
    previous: &MicroserviceStatus,
) -> ChildPlan<Deployment> {
    if let Some((view, deployment)) = live
        && ownership(ms, Some(&view.meta)).writable()
        && let Some(problem) = selector_conflict(ms, desired, deployment)
    {
        return ChildPlan::Blocked(problem);
    }
    plan_child(ms, ChildKind::Deployment, desired, live.map(|(view, _)| view), previous)
}

/// Whether [`plan_child`] writes nothing for this live child whatever the desired object is: ours, judged against
/// this generation's desired object and found as desired, without a handover note. The executor then builds no
/// desired object (a reconcile woken by a rollout's status step, most of them).
pub fn at_rest(ms: &Microservice, live: &Live) -> bool {
    ownership(ms, Some(&live.meta)) == Ownership::Owned
        && live.changed.as_ref().is_some_and(Vec::is_empty)
        && !has_handover(&live.meta)
}

/// [`at_rest`] for a Deployment: also selecting this Microservice's pods, as [`plan_deployment`] requires.
pub fn deployment_at_rest(ms: &Microservice, live: &Live, selector: &LabelSelector) -> bool {
    at_rest(ms, live) && selects_own_pods(ms, selector)
}

/// While the contract is not autoscaled, the HorizontalPodAutoscaler this Microservice controls (and only that
/// one) is deleted: with the fixed count applied to the Deployment, nothing else may scale it, or the two fight.
/// Someone else's HPA of that name is not the operator's to delete, nor, while not autoscaled, to report.
pub fn plan_autoscaler_removal(
    ms: &Microservice,
    name: &str,
    live: Option<&Live>,
) -> ChildPlan<HorizontalPodAutoscaler> {
    let Some(live) = live else { return ChildPlan::nothing() };
    if ownership(ms, Some(&live.meta)) != Ownership::Owned {
        return ChildPlan::nothing();
    }
    let kind = ChildKind::HorizontalPodAutoscaler;
    let uid = live.meta.uid.clone().unwrap_or_default();
    let note = format!("deleted {kind} {name}: autoscaling is off, the spec's replicas apply");
    ChildPlan::Writes { writes: vec![Write::Delete { uid }], deed: Some(Deed { reason: Reason::Updated, kind, note }) }
}

fn has_handover(meta: &ObjectMeta) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(HANDOVER_ANNOTATION))
}

/// The Microservice as its last accepted generation was: the children are built from it while the current
/// generation is refused (its spec, and its number in the generation annotation), so an invalid spec never takes
/// the service down.
pub fn as_accepted(ms: &Microservice, last: &AcceptedContract) -> Microservice {
    let mut accepted = ms.clone();
    accepted.spec = MicroserviceSpec {
        image: last.image.clone(),
        port: last.port,
        // Autoscaled, the bounds come back and the count stays the HorizontalPodAutoscaler's.
        replicas: last.autoscaling.is_none().then_some(last.replicas),
        autoscaling: last.autoscaling.clone(),
    };
    accepted.metadata.generation = Some(last.generation);
    accepted
}

/// What the reconcile did, as Events: one per reason, in the order first done, naming every child concerned (one
/// "Created" for the Deployment and the Service).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Told {
    pub reason: Reason,
    /// The Event's action: the reason and the children, so a later Event about another child is its own series.
    pub action: String,
    pub note: String,
}

pub fn tell(deeds: &[Deed]) -> Vec<Told> {
    let mut reasons: Vec<Reason> = Vec::new();
    for deed in deeds {
        if !reasons.contains(&deed.reason) {
            reasons.push(deed.reason);
        }
    }
    reasons
        .into_iter()
        .map(|reason| {
            let (kinds, notes): (Vec<&str>, Vec<&str>) =
                deeds.iter().filter(|d| d.reason == reason).map(|d| (d.kind.as_str(), d.note.as_str())).unzip();
            Told { reason, action: format!("{}{}", reason.as_str(), kinds.join("And")), note: notes.join("; ") }
        })
        .collect()
}

/// Whether a new status goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusWrite {
    /// Nothing changed.
    Skip,
    Now,
    /// A progress-only change, held back so one CR's status is not rewritten at every replica step; due after
    /// this.
    Later(Duration),
}

/// How long progress-only changes are held back after this replica's last status write of a Microservice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spacing {
    /// A change `kubectl get ms` shows (the ready/desired count).
    pub counts: Duration,
    /// A change only `kubectl describe` or `-o yaml` shows (the pods' total, the wording): it rides along with the
    /// next other write, or goes out on its own after this, so a stalled rollout's words are never stale for long.
    pub details: Duration,
}

impl Spacing {
    /// Every change at once.
    pub const NONE: Spacing = Spacing { counts: Duration::ZERO, details: Duration::ZERO };

    /// This spacing stretched so that `in_progress` rollouts together write progress-only changes about `per_second`
    /// times a second: one rollout keeps its steps, a wave of thousands shares one budget instead of rewriting every
    /// Microservice's counts while it waits. No tier is stretched beyond `longest`, so a count a user watches is
    /// never older than that; changes of phase or condition are never held (see [`status_write`]).
    pub fn shared(self, in_progress: u64, per_second: u32, longest: Duration) -> Spacing {
        let share = (Duration::from_secs(in_progress) / per_second.max(1)).min(longest);
        Spacing { counts: self.counts.max(share), details: self.details.max(share) }
    }
}

/// Writes a changed status at once, a progress-only change (replica counts and wording) after `spacing`;
/// `since_last_write` is the time since this replica last wrote this Microservice's status, if it remembers.
pub fn status_write(
    previous: &MicroserviceStatus,
    new: &MicroserviceStatus,
    since_last_write: Option<Duration>,
    spacing: Spacing,
) -> StatusWrite {
    if previous == new {
        return StatusWrite::Skip;
    }
    let Some(since) = since_last_write.filter(|_| progress_only(previous, new)) else { return StatusWrite::Now };
    let wait = if previous.replicas_summary == new.replicas_summary { spacing.details } else { spacing.counts };
    if since < wait { StatusWrite::Later(wait - since) } else { StatusWrite::Now }
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

#[cfg(test)]
mod tests;
