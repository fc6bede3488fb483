use std::collections::BTreeMap;

use super::*;
use crate::contract::validate;
use crate::crd::MicroserviceSpec;
use crate::ownership::{ConflictReason, Ownership, conflict};
use crate::profile::PlatformProfile;
use crate::shared_text::SharedText;
use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_780_000_000 + seconds).unwrap())
}

fn ms(image: &str, generation: i64, previous: Option<MicroserviceStatus>) -> Microservice {
    let spec = MicroserviceSpec { image: image.into(), port: 8080, replicas: Some(2), autoscaling: None };
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
                annotations: Some(BTreeMap::from([(GENERATION_ANNOTATION.to_string(), self.built_for.to_string())])),
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
    D { built_for, image, generation: built_for, observed: built_for, counters: (2, 2, 2, 2), deadline_exceeded: false }
}

fn run(ms: &Microservice, deployment: Option<&Deployment>, service: bool, now: &Time) -> MicroserviceStatus {
    let contract = validate(&ms.spec, &PlatformProfile::default());
    compute_status(ms, &contract, deployment, service.then(Service::default).as_ref(), &[], now)
}

fn condition(status: &MicroserviceStatus, type_: ConditionType) -> &Condition {
    status.condition(type_).unwrap()
}

fn summary(status: &MicroserviceStatus) -> Vec<(ConditionType, ConditionStatus, String)> {
    status.conditions.iter().map(|c| (c.type_, c.status, c.reason.to_string())).collect()
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
        assert_eq!(status.replicas_summary, Some(count.into()), "{name}: the Replicas column counts the new version");
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
    let expected =
        AcceptedContract { generation: 1, image: IMAGE_V1.into(), port: 8080, replicas: 2, autoscaling: None };
    assert_eq!(accepted.last_accepted.as_ref(), Some(&expected));
    // Generation 2 is refused (a mutable tag) and generation 3 too: generation 1's contract is what runs.
    let refused = run(&ms("ghcr.io/example/todo-api:latest", 2, Some(accepted)), None, false, &at(1));
    assert_eq!(refused.phase, Some(Phase::Invalid));
    assert_eq!(refused.last_accepted.as_ref(), Some(&expected));
    let again = run(&ms("ghcr.io/example/todo-api:latest", 3, Some(refused)), None, false, &at(2));
    assert_eq!(again.last_accepted.as_ref(), Some(&expected));
    // A valid generation replaces it, even before it rolls out.
    let fixed = run(&ms(IMAGE_V2, 4, Some(again)), None, false, &at(3));
    assert_eq!(fixed.last_accepted.map(|c| (c.generation, c.image)), Some((4, IMAGE_V2.into())));
    // Never accepted: nothing to keep.
    assert_eq!(run(&ms("ghcr.io/example/todo-api:latest", 1, None), None, false, &at(0)).last_accepted, None);
}

#[test]
fn a_missed_progress_deadline_is_degraded() {
    let d = D { counters: (3, 1, 2, 2), deadline_exceeded: true, generation: 2, observed: 2, ..complete(2, IMAGE_V2) };
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
    assert_eq!((degraded.status, degraded.reason.as_str()), (ConditionStatus::True, Reason::ResourceConflict.as_str()));
    assert!(degraded.message.contains("platform.example.com/handover=todo-api"), "{}", degraded.message);
    assert_eq!(condition(&status, ConditionType::Ready).status, ConditionStatus::False);
    assert_eq!((status.ready_replicas, status.image.as_deref()), (None, None), "a foreign Deployment is not mirrored");

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
    assert!(status_events(None, &first).is_empty(), "the first verdict is the Accepted condition's to tell");
    let still = run(&ms(IMAGE_V1, 1, Some(first.clone())), Some(&rolling), true, &at(5));
    assert!(status_events(Some(&first), &still).is_empty());

    let ready = run(&ms(IMAGE_V1, 1, Some(still.clone())), Some(&complete(1, IMAGE_V1).build()), true, &at(9));
    assert!(status_events(Some(&still), &ready).is_empty(), "Ready=True (RolloutComplete) tells it");

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
    assert_eq!(reasons_of(&events), ["ResourceConflict"]);
    assert!(events[0].note.contains("platform.example.com/handover=todo-api"));
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
        message: SharedText::default(),
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

#[test]
fn autoscaled_ready_counts_against_the_deployments_own_replicas() {
    let mut autoscaled = ms(IMAGE_V1, 1, None);
    autoscaled.spec.replicas = None;
    autoscaled.spec.autoscaling = Some(crate::crd::Autoscaling {
        min_replicas: Some(1),
        max_replicas: 5,
        target_cpu_utilization_percentage: None,
    });
    // Scaled to 3 (by the HorizontalPodAutoscaler or `kubectl scale`) and rolled out at 3: Ready at 3.
    let mut scaled = D { counters: (3, 3, 3, 3), ..complete(1, IMAGE_V1) }.build();
    if let Some(spec) = scaled.spec.as_mut() {
        spec.replicas = Some(3);
    }
    let status = run(&autoscaled, Some(&scaled), true, &at(0));
    assert_eq!(status.phase, Some(Phase::Ready), "{:?}", summary(&status));
    assert_eq!(status.replicas_summary.as_deref(), Some("3/3"));
    let accepted = status.last_accepted.unwrap();
    assert_eq!((accepted.replicas, accepted.autoscaling.map(|a| a.max_replicas)), (1, Some(5)));
    // The same Deployment against a fixed count of 2 is not rolled out as asked.
    let fixed = run(&ms(IMAGE_V1, 1, None), Some(&scaled), true, &at(0));
    assert_eq!(fixed.phase, Some(Phase::Progressing), "{:?}", summary(&fixed));
}
