//! The Microservice status as a pure function of what the operator observed. It tells the truth about the current
//! generation only: pods of an earlier version never make a new generation Ready, and timestamps move only when a
//! condition's status changes, so an unchanged world produces a byte-identical status (and no write).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::contract::{Contract, Violation, summarize};
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
    Rolling(String),
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
            Some(d) => {
                let rollout = Rollout::of(d, generation, contract.replicas);
                if let Some(detail) = rollout.deadline_exceeded(d) {
                    Outcome::DeadlineExceeded(format!("generation {generation_text} {detail}"))
                } else if !rollout.complete() && d.spec.as_ref().and_then(|s| s.paused) == Some(true) {
                    Outcome::Paused(format!(
                        "the Deployment is paused (kubectl rollout pause), so generation {generation_text} will not \
                         roll out ({}); resume it: kubectl rollout resume deployment/{name} -n {namespace}",
                        rollout.message(&generation_text)
                    ))
                } else if !rollout.complete() {
                    Outcome::Rolling(rollout.message(&generation_text))
                } else {
                    let image = rolled_out_image(d).unwrap_or_else(|| contract.image.clone());
                    if service.is_none() { Outcome::ServiceMissing(image) } else { Outcome::Complete(image) }
                }
            }
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
    let (progressing, ready, degraded, phase) = match &outcome {
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
        Outcome::Rolling(message) => (
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
    };

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
        Ok(contract) => Some(contract.replicas),
        Err(_) => ours.and_then(|d| d.spec.as_ref()).and_then(|s| s.replicas),
    };
    let image = match &outcome {
        Outcome::Complete(image) | Outcome::ServiceMissing(image) => Some(image.clone()),
        _ => previous.image.clone(),
    };

    MicroserviceStatus {
        observed_generation: previous.observed_generation.max(generation),
        phase: Some(phase),
        conditions,
        ready_replicas,
        replicas,
        replicas_summary: desired_replicas.map(|d| format!("{}/{d}", ready_replicas.unwrap_or(0))),
        image,
        last_accepted: last_accepted(contract, generation, &previous),
    }
}

/// The contract of this generation when it is valid, else the one recorded before (what keeps running).
pub fn last_accepted(
    contract: &Result<Contract, Vec<Violation>>,
    generation: Option<i64>,
    previous: &MicroserviceStatus,
) -> Option<AcceptedContract> {
    match (contract, generation) {
        (Ok(c), Some(generation)) => {
            Some(AcceptedContract { generation, image: c.image.clone(), port: c.port, replicas: c.replicas })
        }
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
        reason: reason.as_str().to_string(),
        message,
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

/// Events for the states `next` entered. A state is identified by a condition's (status, reason, generation), so
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
        events.push(StatusEvent { warning: true, reason: Reason::InvalidSpec, note: c.message.clone() });
    }
    // Accepted is news only when it ends a refusal (or is the first verdict), not on every new generation.
    let was_accepted = previous.and_then(|p| p.condition(ConditionType::Accepted)).is_some_and(|c| c.status == True);
    if !was_accepted && let Some(c) = entered(ConditionType::Accepted, True) {
        events.push(StatusEvent { warning: false, reason: Reason::Accepted, note: c.message.clone() });
    }
    if let Some(c) = entered(ConditionType::Degraded, True) {
        let reason = match c.reason.parse() {
            Ok(Reason::ProgressDeadlineExceeded) => Reason::RolloutFailed,
            Ok(Reason::DeploymentPaused) => Reason::RolloutPaused,
            _ => Reason::ResourceConflict,
        };
        events.push(StatusEvent { warning: true, reason, note: c.message.clone() });
    }
    if let Some(c) = entered(ConditionType::Ready, True) {
        events.push(StatusEvent { warning: false, reason: Reason::RolloutComplete, note: c.message.clone() });
    }
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

    fn message(&self, generation: &str) -> String {
        // Available pods of old versions are not counted: at least this many updated ones are available.
        let old = (self.total - self.updated).max(0);
        let updated_available = if self.current() { self.updated.min((self.available - old).max(0)).max(0) } else { 0 };
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
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::contract::validate;
    use crate::crd::MicroserviceSpec;
    use crate::ownership::{ConflictReason, Ownership, conflict};
    use crate::profile::PlatformProfile;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentSpec, DeploymentStatus};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
    const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(1_780_000_000 + seconds).unwrap())
    }

    fn ms(image: &str, generation: i64, previous: Option<MicroserviceStatus>) -> Microservice {
        let spec = MicroserviceSpec { image: image.into(), port: 8080, replicas: Some(2) };
        let mut ms = Microservice::new("todo-api", spec);
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.uid = Some("u-1".into());
        ms.metadata.generation = Some(generation);
        ms.status = previous;
        ms
    }

    /// A Deployment built for CR generation `built_for`, at Deployment generation `generation`, observed at
    /// `observed`, with status counters (replicas, updated, available, ready).
    struct D {
        built_for: i64,
        image: &'static str,
        generation: i64,
        observed: i64,
        counters: (i32, i32, i32, i32),
        deadline_exceeded: bool,
    }

    impl D {
        fn build(&self) -> Deployment {
            let (replicas, updated, available, ready) = self.counters;
            let zero_is_absent = |n: i32| (n != 0).then_some(n);
            Deployment {
                metadata: ObjectMeta {
                    generation: Some(self.generation),
                    annotations: Some(BTreeMap::from([(
                        GENERATION_ANNOTATION.to_string(),
                        self.built_for.to_string(),
                    )])),
                    ..ObjectMeta::default()
                },
                spec: Some(DeploymentSpec {
                    replicas: Some(2),
                    progress_deadline_seconds: Some(120),
                    template: PodTemplateSpec {
                        metadata: None,
                        spec: Some(PodSpec {
                            containers: vec![Container {
                                name: "app".into(),
                                image: Some(self.image.into()),
                                ..Container::default()
                            }],
                            ..PodSpec::default()
                        }),
                    },
                    ..DeploymentSpec::default()
                }),
                status: Some(DeploymentStatus {
                    observed_generation: Some(self.observed),
                    replicas: zero_is_absent(replicas),
                    updated_replicas: zero_is_absent(updated),
                    available_replicas: zero_is_absent(available),
                    ready_replicas: zero_is_absent(ready),
                    conditions: self.deadline_exceeded.then(|| {
                        vec![DeploymentCondition {
                            type_: "Progressing".into(),
                            status: "False".into(),
                            reason: Some("ProgressDeadlineExceeded".into()),
                            message: Some("ReplicaSet \"todo-api-7d9\" has timed out progressing.".into()),
                            ..DeploymentCondition::default()
                        }]
                    }),
                    ..DeploymentStatus::default()
                }),
            }
        }
    }

    fn complete(built_for: i64, image: &'static str) -> D {
        D {
            built_for,
            image,
            generation: built_for,
            observed: built_for,
            counters: (2, 2, 2, 2),
            deadline_exceeded: false,
        }
    }

    fn run(ms: &Microservice, deployment: Option<&Deployment>, service: bool, now: &Time) -> MicroserviceStatus {
        let contract = validate(&ms.spec, &PlatformProfile::default());
        compute_status(ms, &contract, deployment, service.then(Service::default).as_ref(), &[], now)
    }

    fn condition(status: &MicroserviceStatus, type_: ConditionType) -> &Condition {
        status.condition(type_).unwrap()
    }

    fn summary(status: &MicroserviceStatus) -> Vec<(ConditionType, ConditionStatus, String)> {
        status.conditions.iter().map(|c| (c.type_, c.status, c.reason.clone())).collect()
    }

    #[test]
    fn a_complete_rollout_is_ready() {
        let ms = ms(IMAGE_V1, 1, None);
        let status = run(&ms, Some(&complete(1, IMAGE_V1).build()), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Ready));
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::True);
        assert_eq!(condition(&status, ConditionType::Progressing).status, ConditionStatus::False);
        assert_eq!(condition(&status, ConditionType::Accepted).status, ConditionStatus::True);
        assert_eq!(condition(&status, ConditionType::Degraded).status, ConditionStatus::False);
        assert_eq!(status.image.as_deref(), Some(IMAGE_V1));
        assert_eq!((status.ready_replicas, status.replicas), (Some(2), Some(2)));
        assert_eq!(status.replicas_summary.as_deref(), Some("2/2"));
        assert_eq!(status.observed_generation, Some(1));
    }

    #[test]
    fn before_the_deployment_exists_the_microservice_is_pending() {
        let status = run(&ms(IMAGE_V1, 1, None), None, false, &at(0));
        assert_eq!(status.phase, Some(Phase::Pending));
        assert_eq!(condition(&status, ConditionType::Progressing).reason, Reason::Creating.as_str());
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        assert_eq!((status.ready_replicas, status.replicas), (None, None));
        assert_eq!(status.replicas_summary.as_deref(), Some("0/2"));
        assert_eq!(status.image, None);
    }

    #[test]
    fn a_running_rollout_is_progressing_with_a_count() {
        let d = D { counters: (1, 1, 1, 1), ..complete(3, IMAGE_V1) };
        let status = run(&ms(IMAGE_V1, 3, None), Some(&d.build()), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Progressing));
        let progressing = condition(&status, ConditionType::Progressing);
        assert_eq!(
            (progressing.status, progressing.reason.as_str()),
            (ConditionStatus::True, Reason::RolloutInProgress.as_str())
        );
        assert_eq!(progressing.message, "1/2 updated replicas available for generation 3");
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        assert_eq!(status.replicas_summary.as_deref(), Some("1/2"));
    }

    /// Generation 2 changed the image; generation 1's pods are still ready. None of these may be Ready.
    #[test]
    fn old_replica_set_ready_pods_never_make_the_new_generation_ready() {
        let previous = run(&ms(IMAGE_V1, 1, None), Some(&complete(1, IMAGE_V1).build()), true, &at(0));
        assert_eq!(previous.phase, Some(Phase::Ready));
        let cases = [
            // Two old pods available, one new pod surged but not available yet.
            ("surge", D { generation: 2, observed: 2, counters: (3, 1, 2, 2), ..complete(2, IMAGE_V2) }, "0/2"),
            // Available equals desired but one of them is old.
            ("mixed", D { generation: 2, observed: 2, counters: (2, 1, 2, 2), ..complete(2, IMAGE_V2) }, "1/2"),
            // New pods all available, an old one still terminating.
            ("old left", D { generation: 2, observed: 2, counters: (3, 2, 3, 3), ..complete(2, IMAGE_V2) }, "2/2"),
            // Counters look complete but the Deployment controller has not seen the new template yet.
            ("not observed", D { generation: 2, observed: 1, ..complete(2, IMAGE_V2) }, "0/2"),
            // The Deployment still carries the previous generation's template (operator has not applied yet).
            ("old template", complete(1, IMAGE_V1), "0/2"),
        ];
        for (name, d, count) in cases {
            let ms = ms(IMAGE_V2, 2, Some(previous.clone()));
            let status = run(&ms, Some(&d.build()), true, &at(60));
            assert_eq!(status.phase, Some(Phase::Progressing), "{name}");
            let ready = condition(&status, ConditionType::Ready);
            assert_eq!(ready.status, ConditionStatus::False, "{name}");
            assert_eq!(ready.observed_generation, Some(2), "{name}");
            let progressing = condition(&status, ConditionType::Progressing);
            assert_eq!(progressing.status, ConditionStatus::True, "{name}");
            assert!(
                progressing.message.starts_with(&format!("{count} updated replicas available for generation 2")),
                "{name}: {}",
                progressing.message
            );
            assert_eq!(
                status.image.as_deref(),
                Some(IMAGE_V1),
                "{name}: the rolled-out image stays until the rollout completes"
            );
            assert_eq!(status.observed_generation, Some(2), "{name}");
        }
        let done = run(&ms(IMAGE_V2, 2, Some(previous)), Some(&complete(2, IMAGE_V2).build()), true, &at(90));
        assert_eq!(done.phase, Some(Phase::Ready));
        assert_eq!(done.image.as_deref(), Some(IMAGE_V2));
    }

    #[test]
    fn a_paused_deployment_with_a_pending_change_says_so_and_how_to_resume() {
        let paused = |d: D| {
            let mut d = d.build();
            d.spec.as_mut().unwrap().paused = Some(true);
            d
        };
        // Generation 2 changed the image; the Deployment was paused and still runs generation 1's pods.
        let pending = paused(D { counters: (2, 0, 2, 2), ..complete(2, IMAGE_V2) });
        let status = run(&ms(IMAGE_V2, 2, None), Some(&pending), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let progressing = condition(&status, ConditionType::Progressing);
        assert_eq!(
            (progressing.status, progressing.reason.as_str()),
            (ConditionStatus::False, Reason::DeploymentPaused.as_str())
        );
        assert!(
            progressing.message.contains("kubectl rollout resume deployment/todo-api -n todo"),
            "{}",
            progressing.message
        );
        assert!(!progressing.message.contains("is running"), "{}", progressing.message);
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        let events = status_events(None, &status);
        assert!(events.iter().any(|e| e.reason == Reason::RolloutPaused && e.warning), "{events:?}");
        // Paused after the rollout completed: nothing is pending, so it is Ready.
        let done = paused(complete(2, IMAGE_V2));
        assert_eq!(run(&ms(IMAGE_V2, 2, None), Some(&done), true, &at(0)).phase, Some(Phase::Ready));
    }

    #[test]
    fn the_last_accepted_contract_survives_refused_generations() {
        let accepted = run(&ms(IMAGE_V1, 1, None), Some(&complete(1, IMAGE_V1).build()), true, &at(0));
        let expected = AcceptedContract { generation: 1, image: IMAGE_V1.to_string(), port: 8080, replicas: 2 };
        assert_eq!(accepted.last_accepted.as_ref(), Some(&expected));
        // Generation 2 is refused (a mutable tag) and generation 3 too: generation 1's contract is what runs.
        let refused = run(&ms("ghcr.io/example/todo-api:latest", 2, Some(accepted)), None, false, &at(1));
        assert_eq!(refused.phase, Some(Phase::Invalid));
        assert_eq!(refused.last_accepted.as_ref(), Some(&expected));
        let again = run(&ms("ghcr.io/example/todo-api:latest", 3, Some(refused)), None, false, &at(2));
        assert_eq!(again.last_accepted.as_ref(), Some(&expected));
        // A valid generation replaces it, even before it rolls out.
        let fixed = run(&ms(IMAGE_V2, 4, Some(again)), None, false, &at(3));
        assert_eq!(fixed.last_accepted.map(|c| (c.generation, c.image)), Some((4, IMAGE_V2.to_string())));
        // Never accepted: nothing to keep.
        assert_eq!(run(&ms("ghcr.io/example/todo-api:latest", 1, None), None, false, &at(0)).last_accepted, None);
    }

    #[test]
    fn a_missed_progress_deadline_is_degraded() {
        let d =
            D { counters: (3, 1, 2, 2), deadline_exceeded: true, generation: 2, observed: 2, ..complete(2, IMAGE_V2) };
        let status = run(&ms(IMAGE_V2, 2, None), Some(&d.build()), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, ConditionType::Degraded);
        assert_eq!(
            (degraded.status, degraded.reason.as_str()),
            (ConditionStatus::True, Reason::ProgressDeadlineExceeded.as_str())
        );
        assert!(degraded.message.contains("generation 2 made no progress within 120s"), "{}", degraded.message);
        assert!(degraded.message.contains("timed out progressing"), "{}", degraded.message);
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        assert_eq!(condition(&status, ConditionType::Progressing).status, ConditionStatus::False);
    }

    #[test]
    fn a_stale_deadline_of_the_previous_generation_does_not_degrade_the_fix() {
        // Generation 3 fixes the image; the Deployment controller has not yet replaced generation 2's condition.
        let stale =
            D { counters: (3, 1, 2, 2), deadline_exceeded: true, generation: 2, observed: 2, ..complete(2, IMAGE_V2) };
        let status = run(&ms(IMAGE_V1, 3, None), Some(&stale.build()), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Progressing));
        let not_observed = D { built_for: 3, generation: 3, ..stale };
        let status = run(&ms(IMAGE_V1, 3, None), Some(&not_observed.build()), true, &at(0));
        assert_eq!(status.phase, Some(Phase::Progressing));
    }

    #[test]
    fn an_invalid_spec_is_refused_and_says_why() {
        let previous = run(&ms(IMAGE_V1, 1, None), Some(&complete(1, IMAGE_V1).build()), true, &at(0));
        let ms = ms("ghcr.io/example/todo-api:latest", 2, Some(previous));
        let status = run(&ms, Some(&complete(1, IMAGE_V1).build()), true, &at(10));
        assert_eq!(status.phase, Some(Phase::Invalid));
        let accepted = condition(&status, ConditionType::Accepted);
        assert_eq!((accepted.status, accepted.reason.as_str()), (ConditionStatus::False, "MutableTag"));
        assert!(accepted.message.contains("spec.image") && accepted.message.contains(":1.4.2"), "{}", accepted.message);
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        assert_eq!(status.image.as_deref(), Some(IMAGE_V1), "the previous version keeps running");
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.replicas_summary.as_deref(), Some("2/2"), "mirrors the still-running Deployment");
    }

    #[test]
    fn a_conflicting_child_is_degraded_with_handover_instructions() {
        let ms = ms(IMAGE_V1, 1, None);
        let contract = validate(&ms.spec, &PlatformProfile::default());
        let conflicts = [conflict(&ms, ChildKind::Deployment, &Ownership::Unowned).unwrap()];
        let foreign = complete(7, "nginx:1.27").build();
        let status = compute_status(&ms, &contract, Some(&foreign), None, &conflicts, &at(0));
        assert_eq!(status.phase, Some(Phase::Degraded));
        let degraded = condition(&status, ConditionType::Degraded);
        assert_eq!(
            (degraded.status, degraded.reason.as_str()),
            (ConditionStatus::True, Reason::ResourceConflict.as_str())
        );
        assert!(degraded.message.contains("platform.example.com/handover=todo-api"), "{}", degraded.message);
        assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
        assert_eq!(
            (status.ready_replicas, status.image.as_deref()),
            (None, None),
            "a foreign Deployment is not mirrored"
        );

        let service_conflict = [conflict(&ms, ChildKind::Service, &Ownership::Unowned).unwrap()];
        let ours = complete(1, IMAGE_V1).build();
        let status = compute_status(&ms, &contract, Some(&ours), None, &service_conflict, &at(0));
        assert_eq!(status.phase, Some(Phase::Degraded));
        assert_eq!(status.ready_replicas, Some(2), "our Deployment is still mirrored");
    }

    #[test]
    fn an_immutable_selector_is_a_permanent_conflict() {
        let ms = ms(IMAGE_V1, 1, None);
        let contract = validate(&ms.spec, &PlatformProfile::default());
        let conflicts = [Conflict {
            kind: ChildKind::Deployment,
            name: "todo-api".into(),
            reason: ConflictReason::ImmutableSelector,
            message: "cannot".into(),
        }];
        let status = compute_status(&ms, &contract, None, None, &conflicts, &at(0));
        assert_eq!(condition(&status, ConditionType::Degraded).reason, Reason::ImmutableSelector.as_str());
    }

    #[test]
    fn a_missing_service_keeps_it_from_ready() {
        let status = run(&ms(IMAGE_V1, 1, None), Some(&complete(1, IMAGE_V1).build()), false, &at(0));
        assert_eq!(status.phase, Some(Phase::Progressing));
        assert_eq!(condition(&status, ConditionType::Ready).reason, Reason::ServiceNotFound.as_str());
        assert_eq!(status.image.as_deref(), Some(IMAGE_V1), "the rollout itself is complete");
    }

    #[test]
    fn transition_times_move_only_when_a_status_changes() {
        let d1 = D { counters: (1, 1, 0, 0), ..complete(1, IMAGE_V1) }.build();
        let first = run(&ms(IMAGE_V1, 1, None), Some(&d1), true, &at(0));
        assert!(first.conditions.iter().all(|c| c.last_transition_time == at(0)));

        // Same world later: byte-identical status, so the reconcile writes nothing.
        let again = run(&ms(IMAGE_V1, 1, Some(first.clone())), Some(&d1), true, &at(30));
        assert_eq!(serde_json::to_vec(&again).unwrap(), serde_json::to_vec(&first).unwrap());

        // Progress changes the message, not the status: times stay.
        let d2 = D { counters: (2, 2, 1, 1), ..complete(1, IMAGE_V1) }.build();
        let progressed = run(&ms(IMAGE_V1, 1, Some(first.clone())), Some(&d2), true, &at(40));
        assert_ne!(
            condition(&progressed, ConditionType::Progressing).message,
            condition(&first, ConditionType::Progressing).message
        );
        assert!(progressed.conditions.iter().all(|c| c.last_transition_time == at(0)));

        // Completion flips Ready and Progressing only.
        let done = run(&ms(IMAGE_V1, 1, Some(progressed)), Some(&complete(1, IMAGE_V1).build()), true, &at(50));
        assert_eq!(condition(&done, ConditionType::Ready).last_transition_time, at(50));
        assert_eq!(condition(&done, ConditionType::Progressing).last_transition_time, at(50));
        assert_eq!(condition(&done, ConditionType::Accepted).last_transition_time, at(0));
        assert_eq!(condition(&done, ConditionType::Degraded).last_transition_time, at(0));
    }

    #[test]
    fn transition_times_have_whole_seconds_like_the_server_returns() {
        let precise =
            Time(Timestamp::from_second(1_780_000_000).unwrap() + k8s_openapi::jiff::SignedDuration::from_millis(750));
        let status = run(&ms(IMAGE_V1, 1, None), None, false, &precise);
        let written: MicroserviceStatus = serde_json::from_slice(&serde_json::to_vec(&status).unwrap()).unwrap();
        assert_eq!(written, status, "what is written reads back equal, so the next reconcile writes nothing");
    }

    fn reasons_of(events: &[StatusEvent]) -> Vec<&'static str> {
        events.iter().map(|e| e.reason.as_str()).collect()
    }

    #[test]
    fn events_are_emitted_once_per_state_and_generation() {
        let rolling = D { counters: (1, 1, 0, 0), ..complete(1, IMAGE_V1) }.build();
        let first = run(&ms(IMAGE_V1, 1, None), Some(&rolling), true, &at(0));
        assert_eq!(reasons_of(&status_events(None, &first)), ["Accepted"]);
        let still = run(&ms(IMAGE_V1, 1, Some(first.clone())), Some(&rolling), true, &at(5));
        assert!(status_events(Some(&first), &still).is_empty());

        let ready = run(&ms(IMAGE_V1, 1, Some(still.clone())), Some(&complete(1, IMAGE_V1).build()), true, &at(9));
        let events = status_events(Some(&still), &ready);
        assert_eq!(reasons_of(&events), ["RolloutComplete"]);
        assert!(!events[0].warning);

        // A new, invalid generation: one warning; the same refusal again: nothing.
        let invalid = run(&ms("ghcr.io/example/todo-api:latest", 2, Some(ready.clone())), None, true, &at(20));
        let events = status_events(Some(&ready), &invalid);
        assert_eq!(reasons_of(&events), ["InvalidSpec"]);
        assert!(events[0].warning && events[0].note.contains("latest"));
        let again = run(&ms("ghcr.io/example/todo-api:latest", 2, Some(invalid.clone())), None, true, &at(30));
        assert!(status_events(Some(&invalid), &again).is_empty());
        // The user tries another invalid image: a new generation deserves a new warning.
        let other = run(&ms("nginx:1", 3, Some(again.clone())), None, true, &at(40));
        assert_eq!(reasons_of(&status_events(Some(&again), &other)), ["InvalidSpec"]);

        // Fixed, but the rollout misses its deadline.
        let failing =
            D { deadline_exceeded: true, counters: (3, 1, 2, 2), generation: 4, observed: 4, ..complete(4, IMAGE_V2) };
        let failed = run(&ms(IMAGE_V2, 4, Some(other.clone())), Some(&failing.build()), true, &at(50));
        assert_eq!(reasons_of(&status_events(Some(&other), &failed)), ["Accepted", "RolloutFailed"]);
    }

    #[test]
    fn a_conflict_is_announced_once() {
        let ms1 = ms(IMAGE_V1, 1, None);
        let contract = validate(&ms1.spec, &PlatformProfile::default());
        let conflicts = [conflict(&ms1, ChildKind::Service, &Ownership::Unowned).unwrap()];
        let first = compute_status(&ms1, &contract, None, None, &conflicts, &at(0));
        let events = status_events(None, &first);
        assert_eq!(reasons_of(&events), ["Accepted", "ResourceConflict"]);
        assert!(events[1].note.contains("platform.example.com/handover=todo-api"));
        let ms2 = ms(IMAGE_V1, 1, Some(first.clone()));
        let second = compute_status(&ms2, &contract, None, None, &conflicts, &at(10));
        assert!(status_events(Some(&first), &second).is_empty());
    }

    #[test]
    fn observed_generation_never_decreases() {
        let previous = MicroserviceStatus { observed_generation: Some(5), ..MicroserviceStatus::default() };
        // A reconcile over a stale cached copy of generation 4.
        let status = run(&ms(IMAGE_V1, 4, Some(previous)), Some(&complete(4, IMAGE_V1).build()), true, &at(0));
        assert_eq!(status.observed_generation, Some(5));
    }

    #[test]
    fn every_outcome_has_four_conditions_with_camel_case_reasons_for_the_current_generation() {
        let ms1 = ms(IMAGE_V1, 4, None);
        let invalid = ms("nginx", 4, None);
        let rolling = D { counters: (1, 1, 0, 0), ..complete(4, IMAGE_V1) }.build();
        let deadline = D { deadline_exceeded: true, counters: (1, 1, 0, 0), ..complete(4, IMAGE_V1) }.build();
        let done = complete(4, IMAGE_V1).build();
        let statuses = [
            run(&ms1, None, false, &at(0)),
            run(&ms1, Some(&rolling), true, &at(0)),
            run(&ms1, Some(&deadline), true, &at(0)),
            run(&ms1, Some(&done), false, &at(0)),
            run(&ms1, Some(&done), true, &at(0)),
            run(&invalid, None, false, &at(0)),
        ];
        let mut phases = Vec::new();
        for status in &statuses {
            let types: Vec<_> = status.conditions.iter().map(|c| c.type_).collect();
            assert_eq!(
                types,
                [ConditionType::Accepted, ConditionType::Progressing, ConditionType::Ready, ConditionType::Degraded]
            );
            for c in &status.conditions {
                assert!(c.reason.starts_with(|ch: char| ch.is_ascii_uppercase()), "{:?}", summary(status));
                assert!(c.reason.chars().all(|ch| ch.is_ascii_alphanumeric()), "{:?}", summary(status));
                assert!(!c.message.is_empty());
                assert_eq!(c.observed_generation, Some(4));
            }
            phases.push(status.phase);
        }
        use Phase::*;
        assert_eq!(
            phases,
            [Some(Pending), Some(Progressing), Some(Degraded), Some(Progressing), Some(Ready), Some(Invalid)]
        );
    }

    fn cond(type_: ConditionType, status: ConditionStatus, reason: &str, generation: i64, at: &Time) -> Condition {
        Condition {
            type_,
            status,
            observed_generation: Some(generation),
            last_transition_time: at.clone(),
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn a_permanent_failure_degrades_and_keeps_other_conditions() {
        let previous = MicroserviceStatus {
            observed_generation: Some(2),
            phase: Some(Phase::Ready),
            conditions: vec![
                cond(ConditionType::Accepted, ConditionStatus::True, "Accepted", 2, &at(0)),
                cond(ConditionType::Ready, ConditionStatus::True, "RolloutComplete", 2, &at(0)),
            ],
            ..MicroserviceStatus::default()
        };
        let now = at(86_400);
        let s = with_failure(&previous, Some(3), Reason::Forbidden, "no patch on deployments", &now);
        assert_eq!(s.phase, Some(Phase::Degraded));
        assert_eq!(s.observed_generation, Some(3));
        let degraded = condition(&s, ConditionType::Degraded);
        assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, "Forbidden"));
        assert_eq!(degraded.last_transition_time, now);
        let ready = condition(&s, ConditionType::Ready);
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.last_transition_time, now, "Ready changed status, so it moved");
        let accepted = condition(&s, ConditionType::Accepted);
        assert_eq!(accepted.last_transition_time, at(0));
        // Recording the same failure again changes nothing (no second status write, no second Event).
        assert_eq!(with_failure(&s, Some(3), Reason::Forbidden, "no patch on deployments", &now), s);
    }
}
