//! The Microservice status as a pure function of what the operator observed. It tells the truth about the current
//! generation only: pods of an earlier version never make a new generation Ready, and timestamps move only when a
//! condition's status changes, so an unchanged world produces a byte-identical status (and no write).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::contract::{AutoscalingBounds, Contract, Scaling, Violation, summarize};
use crate::crd::{
    AcceptedContract, Condition, ConditionStatus, ConditionType, Microservice, MicroserviceStatus, Phase,
};
use crate::desired::{CONTAINER_NAME, GENERATION_ANNOTATION};
use crate::ownership::{ChildKind, Conflict};
use crate::reason::Reason;

/// What stands between the current generation and Ready, most important first.
enum Outcome<'a> {
    Invalid(&'a [Violation]),
    Conflict {
        reason: Reason,
        message: String,
    },
    DeadlineExceeded(String),
    /// The Deployment is paused before the current generation rolled out: nothing will progress until resumed.
    Paused(String),
    DeploymentMissing,
    /// The message, and how many replicas of the current generation are available.
    Rolling(String, i32),
    /// The rollout is complete (with this image) but the Service is missing.
    ServiceMissing(String),
    Complete(String),
}

/// The new status. `conflicts` lists children the operator may not write (see `ownership`); `previous` status is
/// read from the CR itself.
pub fn compute_status(
    ms: &Microservice,
    contract: &Result<Contract, Vec<Violation>>,
    deployment: Option<&Deployment>,
    service: Option<&Service>,
    conflicts: &[Conflict],
    now: &Time,
) -> MicroserviceStatus {
    let previous = ms.status.clone().unwrap_or_default();
    let now = &whole_seconds(now);
    let generation = ms.metadata.generation;
    let name = ms.metadata.name.as_deref().unwrap_or_default();
    let namespace = ms.metadata.namespace.as_deref().unwrap_or_default();
    let generation_text = generation.map_or_else(|| "?".to_string(), |g| g.to_string());
    // A Deployment someone else controls says nothing about this Microservice.
    let ours = deployment.filter(|_| !conflicts.iter().any(|c| c.kind == ChildKind::Deployment));

    let outcome = match contract {
        Err(violations) => Outcome::Invalid(violations),
        Ok(_) if !conflicts.is_empty() => {
            let permanent = conflicts.iter().any(Conflict::permanent);
            Outcome::Conflict {
                reason: if permanent { Reason::ImmutableSelector } else { Reason::ResourceConflict },
                message: conflicts.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join("; "),
            }
        }
        Ok(contract) => match ours {
            None => Outcome::DeploymentMissing,
            Some(d) => rollout_outcome(d, contract, service.is_some(), generation, &generation_text, namespace, name),
        },
    };

    use ConditionStatus::{False, True};
    let accepted = match &outcome {
        Outcome::Invalid(violations) => {
            let reason = violations.first().map_or(Reason::InvalidSpec, |v| v.reason);
            (False, reason, summarize(violations))
        }
        _ => (True, Reason::Accepted, "the spec satisfies the platform contract".to_string()),
    };
    let (progressing, ready, degraded, phase) = conditions_for(&outcome, &generation_text, namespace, name);

    let make = |type_: ConditionType, (status, reason, message): (ConditionStatus, Reason, String)| {
        transition(&previous, type_, status, reason, message, generation, now)
    };
    let conditions = vec![
        make(ConditionType::Accepted, accepted),
        make(ConditionType::Progressing, progressing),
        make(ConditionType::Ready, ready),
        make(ConditionType::Degraded, degraded),
    ];

    let observed = ours.and_then(|d| d.status.as_ref());
    let ready_replicas = ours.map(|_| observed.and_then(|s| s.ready_replicas).unwrap_or(0));
    let replicas = ours.map(|_| observed.and_then(|s| s.replicas).unwrap_or(0));
    let desired_replicas = match contract {
        Ok(contract) => match contract.scaling {
            Scaling::Fixed(n) => Some(n),
            Scaling::Autoscaled(_) => ours.map(own_desired_count),
        },
        Err(_) => ours.and_then(|d| d.spec.as_ref()).and_then(|s| s.replicas),
    };
    // The Replicas column counts what serves the generation the status describes: while that generation rolls
    // out, only its own available replicas (an old ReplicaSet's ready pods are not the new version's; a surge
    // never shows 3/2), so the column steps 0/2, 1/2, 2/2 instead of back and forth at every surge.
    let summary_ready = match &outcome {
        Outcome::Rolling(_, available) => Some(*available),
        _ => ready_replicas,
    };
    let image = match &outcome {
        Outcome::Complete(image) | Outcome::ServiceMissing(image) => Some(image.as_str().into()),
        _ => previous.image.clone(),
    };

    MicroserviceStatus {
        observed_generation: previous.observed_generation.max(generation),
        phase: Some(phase),
        conditions,
        ready_replicas,
        replicas,
        replicas_summary: desired_replicas.map(|d| format!("{}/{d}", summary_ready.unwrap_or(0)).into()),
        image,
        last_accepted: last_accepted(contract, generation, &previous),
    }
}

/// What our Deployment says about the current generation's rollout (the contract is valid, nothing conflicts).
fn rollout_outcome<'a>(
    d: &Deployment,
    contract: &Contract,
    service_exists: bool,
    generation: Option<i64>,
    generation_text: &str,
    namespace: &str,
    name: &str,
) -> Outcome<'a> {
    // Autoscaled, the count is the HorizontalPodAutoscaler's (or a `kubectl scale`'s): the Deployment's own.
    let desired = match contract.scaling {
        Scaling::Fixed(n) => n,
        Scaling::Autoscaled(_) => own_desired_count(d),
    };
    let rollout = Rollout::of(d, generation, desired);
    if let Some(detail) = rollout.deadline_exceeded(d) {
        Outcome::DeadlineExceeded(format!("generation {generation_text} {detail}"))
    } else if !rollout.complete() && d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
        Outcome::Paused(format!(
            "the Deployment is paused (kubectl rollout pause), so generation {generation_text} will not \
             roll out ({}); resume it: kubectl rollout resume deployment/{name} -n {namespace}",
            rollout.message(generation_text)
        ))
    } else if !rollout.complete() {
        Outcome::Rolling(rollout.message(generation_text), rollout.updated_available())
    } else {
        let image = rolled_out_image(d).unwrap_or_else(|| contract.image.clone());
        if service_exists { Outcome::Complete(image) } else { Outcome::ServiceMissing(image) }
    }
}

/// The Deployment's own `spec.replicas`; the API server defaults an absent one to 1.
fn own_desired_count(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// (status, reason, message) of a condition.
type Verdict = (ConditionStatus, Reason, String);

/// Progressing, Ready and Degraded, and the phase, for what stands between the generation and Ready.
fn conditions_for(
    outcome: &Outcome<'_>,
    generation_text: &str,
    namespace: &str,
    name: &str,
) -> (Verdict, Verdict, Verdict, Phase) {
    use ConditionStatus::{False, True};
    match outcome {
        Outcome::Invalid(_) => {
            let message = format!("nothing is rolled out for generation {generation_text} until the spec is fixed");
            (
                (False, Reason::InvalidSpec, message.clone()),
                (False, Reason::InvalidSpec, message.clone()),
                (False, Reason::InvalidSpec, message),
                Phase::Invalid,
            )
        }
        Outcome::Conflict { reason, message } => (
            (False, *reason, message.clone()),
            (False, *reason, message.clone()),
            (True, *reason, message.clone()),
            Phase::Degraded,
        ),
        Outcome::DeadlineExceeded(message) => (
            (False, Reason::ProgressDeadlineExceeded, message.clone()),
            (False, Reason::ProgressDeadlineExceeded, message.clone()),
            (True, Reason::ProgressDeadlineExceeded, message.clone()),
            Phase::Degraded,
        ),
        Outcome::Paused(message) => (
            (False, Reason::DeploymentPaused, message.clone()),
            (False, Reason::DeploymentPaused, message.clone()),
            (True, Reason::DeploymentPaused, message.clone()),
            Phase::Degraded,
        ),
        Outcome::DeploymentMissing => {
            let message = format!("creating Deployment {namespace}/{name} for generation {generation_text}");
            (
                (True, Reason::Creating, message.clone()),
                (False, Reason::Creating, message),
                as_expected(),
                Phase::Pending,
            )
        }
        Outcome::Rolling(message, _) => (
            (True, Reason::RolloutInProgress, message.clone()),
            (False, Reason::RolloutInProgress, message.clone()),
            as_expected(),
            Phase::Progressing,
        ),
        Outcome::ServiceMissing(_) => {
            let message =
                format!("creating Service {namespace}/{name}; the rollout of generation {generation_text} is complete");
            (
                (True, Reason::ServiceNotFound, message.clone()),
                (False, Reason::ServiceNotFound, message),
                as_expected(),
                Phase::Progressing,
            )
        }
        Outcome::Complete(image) => {
            let message =
                format!("generation {generation_text} is rolled out: every replica runs {image} and is available");
            (
                (False, Reason::RolloutComplete, message.clone()),
                (True, Reason::RolloutComplete, message),
                as_expected(),
                Phase::Ready,
            )
        }
    }
}

/// The contract of this generation when it is valid, else the one recorded before (what keeps running).
pub fn last_accepted(
    contract: &Result<Contract, Vec<Violation>>,
    generation: Option<i64>,
    previous: &MicroserviceStatus,
) -> Option<AcceptedContract> {
    match (contract, generation) {
        (Ok(c), Some(generation)) => Some(AcceptedContract {
            generation,
            image: c.image.as_str().into(),
            port: c.port,
            replicas: c.scaling.floor(),
            autoscaling: c.scaling.autoscaling().map(AutoscalingBounds::to_spec),
        }),
        _ => previous.last_accepted.clone(),
    }
}

/// metav1.Time has whole seconds on the wire: a finer value would differ from its own read-back and cause a second,
/// needless status write. Every time the status carries goes through here.
pub fn whole_seconds(time: &Time) -> Time {
    Time(Timestamp::from_second(time.0.as_second()).unwrap_or(time.0))
}

/// The condition `type_` as it is now, computed for `generation`. Its transition time moves only when its status
/// changes against `previous`: the one transition rule of every condition the operator writes.
pub fn transition(
    previous: &MicroserviceStatus,
    type_: ConditionType,
    status: ConditionStatus,
    reason: Reason,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let unchanged = previous.condition(type_).filter(|c| c.status == status);
    Condition {
        type_,
        status,
        observed_generation: generation,
        last_transition_time: unchanged.map_or_else(|| whole_seconds(now), |c| c.last_transition_time.clone()),
        reason: reason.as_str().into(),
        message: message.into(),
    }
}

/// `previous` with Degraded=True for `reason` (a permanent reconcile failure), Ready=False and phase Degraded;
/// other conditions kept.
pub fn with_failure(
    previous: &MicroserviceStatus,
    generation: Option<i64>,
    reason: Reason,
    message: &str,
    now: &Time,
) -> MicroserviceStatus {
    let mut status = previous.clone();
    for (type_, value) in
        [(ConditionType::Degraded, ConditionStatus::True), (ConditionType::Ready, ConditionStatus::False)]
    {
        let condition = transition(previous, type_, value, reason, message.to_string(), generation, now);
        status.conditions.retain(|c| c.type_ != type_);
        status.conditions.push(condition);
    }
    status.conditions.sort_by_key(|c| c.type_);
    status.phase = Some(Phase::Degraded);
    status.observed_generation = status.observed_generation.max(generation);
    status
}

/// An Event a status change deserves (Events for writes to children are the reconcile's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusEvent {
    pub warning: bool,
    pub reason: Reason,
    pub note: String,
}

/// Events for the states `next` entered that need telling beyond status: a refusal, a refusal ended, a rollout
/// that failed or is paused, a conflict. A state is identified by a condition's (status, reason, generation), so
/// a reconcile that changes nothing, or only a message, emits nothing: one Event per state and generation.
pub fn status_events(previous: Option<&MicroserviceStatus>, next: &MicroserviceStatus) -> Vec<StatusEvent> {
    let entered = |type_: ConditionType, wanted: ConditionStatus| {
        let now = next.condition(type_).filter(|c| c.status == wanted)?;
        let before = previous.and_then(|p| p.condition(type_));
        let same = before.is_some_and(|b| {
            b.status == now.status && b.reason == now.reason && b.observed_generation == now.observed_generation
        });
        (!same).then_some(now)
    };
    let mut events = Vec::new();
    use ConditionStatus::{False, True};
    if let Some(c) = entered(ConditionType::Accepted, False) {
        events.push(StatusEvent { warning: true, reason: Reason::InvalidSpec, note: c.message.to_string() });
    }
    // Accepted is news only when it ends a refusal, not on every new generation, nor on the first verdict (the
    // Accepted condition says so, and the Created Event that follows tells what was done with it).
    let was_refused = previous.and_then(|p| p.condition(ConditionType::Accepted)).is_some_and(|c| c.status == False);
    if was_refused && let Some(c) = entered(ConditionType::Accepted, True) {
        events.push(StatusEvent { warning: false, reason: Reason::Accepted, note: c.message.to_string() });
    }
    if let Some(c) = entered(ConditionType::Degraded, True) {
        let reason = match c.reason.parse() {
            Ok(Reason::ProgressDeadlineExceeded) => Reason::RolloutFailed,
            Ok(Reason::DeploymentPaused) => Reason::RolloutPaused,
            _ => Reason::ResourceConflict,
        };
        events.push(StatusEvent { warning: true, reason, note: c.message.to_string() });
    }
    // A completed rollout is told by the Ready condition itself (reason RolloutComplete, the generation and image
    // in its message, the moment in lastTransitionTime), which `kubectl describe` and `kubectl get` show: an Event
    // would repeat it at the cost of a request per rollout (see docs/design.md, "What a rollout costs").
    events
}

fn as_expected() -> (ConditionStatus, Reason, String) {
    (ConditionStatus::False, Reason::AsExpected, "no problem observed".to_string())
}

/// The Deployment's progress towards the current generation.
struct Rollout {
    /// The Deployment was built for the Microservice's current generation.
    built_for_generation: bool,
    /// The Deployment controller has acted on the Deployment's latest spec.
    observed: bool,
    desired: i32,
    spec_replicas: i32,
    total: i32,
    updated: i32,
    available: i32,
}

impl Rollout {
    fn of(d: &Deployment, generation: Option<i64>, desired: i32) -> Self {
        let annotation = d.metadata.annotations.as_ref().and_then(|a| a.get(GENERATION_ANNOTATION));
        let status = d.status.clone().unwrap_or_default();
        Rollout {
            built_for_generation: generation.is_some_and(|g| annotation.is_some_and(|a| *a == g.to_string())),
            observed: matches!(
                (status.observed_generation, d.metadata.generation),
                (Some(observed), Some(current)) if observed >= current
            ),
            desired,
            // The API server defaults an absent spec.replicas to 1; absent counters are zero (omitempty).
            spec_replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            total: status.replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            available: status.available_replicas.unwrap_or(0),
        }
    }

    fn current(&self) -> bool {
        self.built_for_generation && self.observed
    }

    /// Every replica runs the current template and is available, and no old replica remains.
    fn complete(&self) -> bool {
        self.current()
            && self.spec_replicas == self.desired
            && self.updated == self.desired
            && self.available == self.desired
            && self.total == self.desired
    }

    /// A missed deadline counts only for the current generation's rollout, not a stale condition of an older one.
    fn deadline_exceeded(&self, d: &Deployment) -> Option<String> {
        if !self.current() {
            return None;
        }
        let conditions = d.status.as_ref().and_then(|s| s.conditions.as_ref())?;
        let missed = conditions.iter().find(|c| {
            c.type_ == "Progressing" && c.status == "False" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        })?;
        let deadline = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).unwrap_or(600);
        let detail = missed.message.as_deref().filter(|m| !m.is_empty()).unwrap_or("the rollout stalled");
        Some(format!(
            "made no progress within {deadline}s ({detail}); check the image and the pods' events, then change \
             the spec to retry"
        ))
    }

    /// Pods of an older template still counted in the Deployment's total.
    fn old(&self) -> i32 {
        (self.total - self.updated).max(0)
    }

    /// Available replicas of the current template: available pods of old versions are not counted, so at least
    /// this many updated ones are available.
    fn updated_available(&self) -> i32 {
        if self.current() { self.updated.min((self.available - self.old()).max(0)).max(0) } else { 0 }
    }

    fn message(&self, generation: &str) -> String {
        let old = self.old();
        let updated_available = self.updated_available();
        let mut message =
            format!("{updated_available}/{} updated replicas available for generation {generation}", self.desired);
        if !self.built_for_generation {
            message.push_str("; the Deployment is not yet updated to this generation");
        } else if !self.observed {
            message.push_str("; waiting for the Deployment controller to observe the change");
        } else {
            if old > 0 {
                message.push_str(&format!("; {old} old replica(s) still running"));
            }
            if self.spec_replicas != self.desired {
                message.push_str(&format!(
                    "; the Deployment asks for {} replicas instead of {}",
                    self.spec_replicas, self.desired
                ));
            }
        }
        message
    }
}

fn rolled_out_image(d: &Deployment) -> Option<String> {
    let pod = d.spec.as_ref()?.template.spec.as_ref()?;
    pod.containers.iter().find(|c| c.name == CONTAINER_NAME)?.image.clone()
}

#[cfg(test)]
mod tests;
