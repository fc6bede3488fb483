use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, OwnerReference};

use super::*;
use crate::crd::{Autoscaling, Condition, ConditionStatus, ConditionType, Phase};
use crate::desired::{LABEL_MANAGED_BY, MANAGER, selector_labels};
use crate::ownership::ConflictReason;

const UID: &str = "11111111-2222-4333-8444-555555555555";
const OTHER: &str = "99999999-2222-4333-8444-555555555555";

fn ms(generation: i64) -> Microservice {
    let spec =
        MicroserviceSpec { image: "ghcr.io/example/todo-api:1".into(), port: 8080, replicas: None, autoscaling: None };
    let mut ms = Microservice::new("todo-api", spec);
    ms.metadata.namespace = Some("todo".into());
    ms.metadata.uid = Some(UID.into());
    ms.metadata.generation = Some(generation);
    ms
}

fn observed(generation: Option<i64>) -> MicroserviceStatus {
    MicroserviceStatus { observed_generation: generation, ..MicroserviceStatus::default() }
}

/// Who holds the same-name object, as the cases below name it.
#[derive(Clone, Copy, Debug)]
enum Holder {
    Us,
    /// Ours, with the handover annotation left over from an adoption whose second step failed.
    UsWithLeftoverNote,
    HandedToUs,
    NobodyHandedToOther,
    Nobody,
    /// Labelled as made by this operator, no controller: an orphan of an earlier Microservice.
    OurOrphan,
    OtherController,
}

fn meta(holder: Holder) -> ObjectMeta {
    let controller = |uid: &str| {
        Some(vec![OwnerReference {
            api_version: "platform.example.com/v1alpha1".into(),
            kind: "Microservice".into(),
            name: "todo-api".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: None,
        }])
    };
    let note = |to: &str| Some(BTreeMap::from([(HANDOVER_ANNOTATION.to_string(), to.to_string())]));
    let mut meta = ObjectMeta { name: Some("todo-api".into()), uid: Some("child-uid".into()), ..ObjectMeta::default() };
    match holder {
        Holder::Us => meta.owner_references = controller(UID),
        Holder::UsWithLeftoverNote => {
            meta.owner_references = controller(UID);
            meta.annotations = note("todo-api");
        }
        Holder::HandedToUs => meta.annotations = note("todo-api"),
        Holder::NobodyHandedToOther => meta.annotations = note("other-api"),
        Holder::Nobody => {}
        Holder::OurOrphan => meta.labels = Some(BTreeMap::from([(LABEL_MANAGED_BY.to_string(), MANAGER.to_string())])),
        Holder::OtherController => meta.owner_references = controller(OTHER),
    }
    meta
}

/// The verdict on the managed fields: None when not judged yet.
type Changed = Option<&'static [&'static str]>;

fn service() -> Service {
    Service { metadata: ObjectMeta { name: Some("todo-api".into()), ..ObjectMeta::default() }, ..Service::default() }
}

fn live(holder: Holder, changed: Option<&[&str]>) -> Live {
    Live { meta: meta(holder), changed: changed.map(|c| c.iter().map(ToString::to_string).collect()) }
}

fn writes(writes: &[Write<Service>], deed: Option<(Reason, &str)>) -> ChildPlan<Service> {
    ChildPlan::Writes {
        writes: writes.to_vec(),
        deed: deed.map(|(reason, note)| Deed { reason, kind: ChildKind::Service, note: note.into() }),
    }
}

fn blocked<K>(plan: &ChildPlan<K>) -> Option<ConflictReason> {
    match plan {
        ChildPlan::Blocked(conflict) => Some(conflict.reason),
        _ => None,
    }
}

#[test]
fn a_missing_child_is_created_and_a_child_missing_after_the_generation_was_acted_on_is_a_repair() {
    let ms = ms(2);
    let fresh = plan_child(&ms, ChildKind::Service, &service(), None, &observed(Some(1)));
    assert_eq!(fresh, writes(&[Write::Create(service())], Some((Reason::Created, "created Service todo-api"))));
    let first = plan_child(&ms, ChildKind::Service, &service(), None, &observed(None));
    assert_eq!(first, fresh);
    let repair = plan_child(&ms, ChildKind::Service, &service(), None, &observed(Some(2)));
    assert_eq!(
        repair,
        writes(&[Write::Create(service())], Some((Reason::Repaired, "Service todo-api was missing; recreated it")))
    );
}

#[test]
fn an_owned_child_is_written_only_when_its_managed_fields_differ() {
    let ms = ms(2);
    let cases: [(Changed, i64, ChildPlan<Service>); 5] = [
        (None, 1, ChildPlan::Judge),
        (Some(&[]), 1, writes(&[], None)),
        (Some(&[]), 2, writes(&[], None)),
        (
            Some(&["spec.ports", "metadata.labels"]),
            1,
            writes(
                &[Write::Apply(service())],
                Some((Reason::Updated, "updated Service todo-api: spec.ports, metadata.labels")),
            ),
        ),
        (
            Some(&["spec.ports"]),
            2,
            writes(
                &[Write::Apply(service())],
                Some((Reason::Repaired, "reverted changes to Service todo-api: spec.ports")),
            ),
        ),
    ];
    for (changed, acted, expected) in cases {
        let plan =
            plan_child(&ms, ChildKind::Service, &service(), Some(&live(Holder::Us, changed)), &observed(Some(acted)));
        assert_eq!(plan, expected, "changed {changed:?}, acted on generation {acted}");
    }
}

#[test]
fn a_handed_over_child_is_adopted_whatever_its_fields_and_the_note_is_removed() {
    let ms = ms(1);
    let adopted = writes(
        &[Write::Apply(service()), Write::RemoveHandover],
        Some((Reason::Adopted, &format!("adopted Service todo-api, handed over with {HANDOVER_ANNOTATION}"))),
    );
    for changed in [None, Some(&[][..]), Some(&["spec.ports"][..])] {
        let plan =
            plan_child(&ms, ChildKind::Service, &service(), Some(&live(Holder::HandedToUs, changed)), &observed(None));
        assert_eq!(plan, adopted, "changed {changed:?}");
    }
}

#[test]
fn a_note_left_over_from_an_interrupted_adoption_is_removed_after_any_repair() {
    let ms = ms(1);
    let clean = Some(&[][..]);
    let plan = plan_child(
        &ms,
        ChildKind::Service,
        &service(),
        Some(&live(Holder::UsWithLeftoverNote, clean)),
        &observed(Some(1)),
    );
    assert_eq!(plan, writes(&[Write::RemoveHandover], None));
    let drifted = Some(&["spec.type"][..]);
    let plan = plan_child(
        &ms,
        ChildKind::Service,
        &service(),
        Some(&live(Holder::UsWithLeftoverNote, drifted)),
        &observed(Some(1)),
    );
    assert_eq!(
        plan,
        writes(
            &[Write::Apply(service()), Write::RemoveHandover],
            Some((Reason::Repaired, "reverted changes to Service todo-api: spec.type"))
        )
    );
}

#[test]
fn someone_elses_child_is_never_written_whatever_its_fields() {
    let ms = ms(1);
    let cases = [
        (Holder::Nobody, ConflictReason::NotHandedOver),
        (Holder::NobodyHandedToOther, ConflictReason::NotHandedOver),
        (Holder::OurOrphan, ConflictReason::NotHandedOver),
        (Holder::OtherController, ConflictReason::ControlledByOther),
    ];
    for (holder, reason) in cases {
        for changed in [None, Some(&[][..]), Some(&["spec.ports"][..])] {
            let plan =
                plan_child(&ms, ChildKind::Service, &service(), Some(&live(holder, changed)), &observed(Some(1)));
            assert_eq!(blocked(&plan), Some(reason), "{holder:?}, changed {changed:?}");
        }
    }
}

fn deployment(app: &str) -> Deployment {
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
        ..LabelSelector::default()
    };
    Deployment {
        metadata: ObjectMeta { name: Some("todo-api".into()), ..ObjectMeta::default() },
        spec: Some(DeploymentSpec { selector, ..DeploymentSpec::default() }),
        status: None,
    }
}

#[test]
fn a_deployment_selecting_other_pods_is_blocked_even_when_handed_over_and_ownership_comes_first() {
    let ms = ms(1);
    let desired = deployment("todo-api");
    let other_pods = deployment("legacy");
    let plan = |holder, live: &Deployment| {
        let view = live_with(holder);
        plan_deployment(&ms, &desired, Some((&view, live)), &observed(Some(1)))
    };
    assert_eq!(blocked(&plan(Holder::HandedToUs, &other_pods)), Some(ConflictReason::ImmutableSelector));
    assert_eq!(blocked(&plan(Holder::Us, &other_pods)), Some(ConflictReason::ImmutableSelector));
    // Not writable anyway: the ownership conflict is what the user can act on first.
    assert_eq!(blocked(&plan(Holder::Nobody, &other_pods)), Some(ConflictReason::NotHandedOver));
    assert_eq!(plan(Holder::Us, &desired), ChildPlan::Writes { writes: vec![], deed: None });
    let absent = plan_deployment(&ms, &desired, None, &observed(None));
    assert!(
        matches!(absent, ChildPlan::Writes { ref writes, .. } if writes == &[Write::Create(desired.clone())]),
        "{absent:?}"
    );
}

fn live_with(holder: Holder) -> Live {
    live(holder, Some(&[]))
}

#[test]
fn a_child_is_at_rest_only_when_its_plan_writes_nothing_whatever_the_desired_object() {
    let ms = ms(2);
    let holders = [
        Holder::Us,
        Holder::UsWithLeftoverNote,
        Holder::HandedToUs,
        Holder::NobodyHandedToOther,
        Holder::Nobody,
        Holder::OurOrphan,
        Holder::OtherController,
    ];
    let verdicts: [Changed; 3] = [None, Some(&[]), Some(&["spec.ports[8080/TCP]"])];
    let mut at_rest_cases = Vec::new();
    for holder in holders {
        for changed in verdicts {
            for previous in [observed(None), observed(Some(1)), observed(Some(2))] {
                let live = live(holder, changed);
                if at_rest(&ms, &live) {
                    let plan = plan_child(&ms, ChildKind::Service, &service(), Some(&live), &previous);
                    assert_eq!(plan, writes(&[], None), "{holder:?}, changed {changed:?}");
                    at_rest_cases.push(format!("{holder:?} {changed:?}"));
                }
            }
        }
    }
    // Not judged, changed, noted, handed over or someone else's: the plan needs the desired object (or blocks).
    assert_eq!(at_rest_cases, vec!["Us Some([])"; 3]);
}

#[test]
fn a_deployment_is_at_rest_only_while_it_selects_this_microservices_pods() {
    let ms = ms(1);
    let ours = LabelSelector { match_labels: Some(selector_labels(&ms).unwrap()), ..LabelSelector::default() };
    let desired = Deployment {
        spec: Some(DeploymentSpec { selector: ours.clone(), ..DeploymentSpec::default() }),
        ..deployment("todo-api")
    };
    let mut wider = ours.clone();
    wider.match_labels.get_or_insert_default().insert("tier".into(), "web".into());
    let mut with_expression = ours.clone();
    with_expression.match_expressions =
        Some(vec![LabelSelectorRequirement { key: "tier".into(), operator: "Exists".into(), values: None }]);
    let view = live_with(Holder::Us);
    for (selector, rests) in [(&ours, true), (&wider, false), (&with_expression, false)] {
        assert_eq!(deployment_at_rest(&ms, &view, selector), rests, "{selector:?}");
        let live = Deployment {
            spec: Some(DeploymentSpec { selector: selector.clone(), ..DeploymentSpec::default() }),
            ..deployment("todo-api")
        };
        let plan = plan_deployment(&ms, &desired, Some((&view, &live)), &observed(Some(1)));
        let expected = if rests { None } else { Some(ConflictReason::ImmutableSelector) };
        assert_eq!(blocked(&plan), expected, "{selector:?}");
    }
}

#[test]
fn only_this_microservices_own_autoscaler_is_deleted_when_autoscaling_ends() {
    let ms = ms(3);
    let nothing = ChildPlan::Writes { writes: vec![], deed: None };
    assert_eq!(plan_autoscaler_removal(&ms, "todo-api", None), nothing);
    for holder in [Holder::HandedToUs, Holder::Nobody, Holder::OurOrphan, Holder::OtherController] {
        assert_eq!(plan_autoscaler_removal(&ms, "todo-api", Some(&live_with(holder))), nothing, "{holder:?}");
    }
    let ours = plan_autoscaler_removal(&ms, "todo-api", Some(&live_with(Holder::Us)));
    let deed = Deed {
        reason: Reason::Updated,
        kind: ChildKind::HorizontalPodAutoscaler,
        note: "deleted HorizontalPodAutoscaler todo-api: autoscaling is off, the spec's replicas apply".into(),
    };
    assert_eq!(ours, ChildPlan::Writes { writes: vec![Write::Delete { uid: "child-uid".into() }], deed: Some(deed) });
    assert!(nothing.is_nothing() && !ours.is_nothing());
    assert!(!ChildPlan::<HorizontalPodAutoscaler>::Judge.is_nothing());
}

#[test]
fn the_children_of_a_refused_generation_are_built_from_the_last_accepted_one() {
    let mut current = ms(5);
    current.spec.image = "docker.io/evil:1".into();
    let fixed = AcceptedContract {
        generation: 3,
        image: "ghcr.io/example/todo-api:3".into(),
        port: 9090,
        replicas: 4,
        autoscaling: None,
    };
    let accepted = as_accepted(&current, &fixed);
    assert_eq!(accepted.metadata.generation, Some(3));
    assert_eq!(
        (accepted.spec.image.as_str(), accepted.spec.port, accepted.spec.replicas),
        ("ghcr.io/example/todo-api:3", 9090, Some(4))
    );
    assert_eq!(accepted.metadata.uid, current.metadata.uid);

    let bounds = Autoscaling { min_replicas: Some(2), max_replicas: 6, target_cpu_utilization_percentage: Some(70) };
    let scaled = AcceptedContract { autoscaling: Some(bounds.clone()), ..fixed };
    let accepted = as_accepted(&current, &scaled);
    assert_eq!((accepted.spec.replicas, accepted.spec.autoscaling), (None, Some(bounds)));
}

#[test]
fn deeds_are_told_as_one_event_per_reason_naming_every_child_in_the_order_done() {
    let deed = |reason, kind, note: &str| Deed { reason, kind, note: note.into() };
    let deeds = [
        deed(Reason::Created, ChildKind::Deployment, "created Deployment todo-api"),
        deed(Reason::Repaired, ChildKind::Service, "reverted changes to Service todo-api: spec.type"),
        deed(Reason::Created, ChildKind::HorizontalPodAutoscaler, "created HorizontalPodAutoscaler todo-api"),
    ];
    let told = tell(&deeds);
    let summary: Vec<(Reason, &str, &str)> =
        told.iter().map(|t| (t.reason, t.action.as_str(), t.note.as_str())).collect();
    assert_eq!(
        summary,
        [
            (
                Reason::Created,
                "CreatedDeploymentAndHorizontalPodAutoscaler",
                "created Deployment todo-api; created HorizontalPodAutoscaler todo-api"
            ),
            (Reason::Repaired, "RepairedService", "reverted changes to Service todo-api: spec.type"),
        ]
    );
    assert!(tell(&[]).is_empty());
}

fn status(phase: Phase, ready: i32, reason: &str) -> MicroserviceStatus {
    MicroserviceStatus {
        observed_generation: Some(2),
        phase: Some(phase),
        conditions: vec![Condition {
            type_: ConditionType::Ready,
            status: if phase == Phase::Ready { ConditionStatus::True } else { ConditionStatus::False },
            observed_generation: Some(2),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            reason: reason.into(),
            message: format!("{ready} ready").into(),
        }],
        ready_replicas: Some(ready),
        replicas_summary: Some(format!("{ready}/3").into()),
        ..MicroserviceStatus::default()
    }
}

#[test]
fn a_status_is_written_at_once_unless_unchanged_or_only_progress_within_the_spacing() {
    let spacing = Spacing { counts: Duration::from_secs(5), details: Duration::from_secs(30) };
    let one = status(Phase::Progressing, 1, "RollingOut");
    let two = status(Phase::Progressing, 2, "RollingOut");
    let ready = status(Phase::Ready, 3, "RolledOut");
    // The same ready count with other wording and another pods' total: a detail.
    let one_reworded = MicroserviceStatus { replicas: Some(3), ..status(Phase::Progressing, 1, "RollingOut") };
    let one_reworded = MicroserviceStatus {
        conditions: vec![Condition {
            message: "1 ready; 2 old replica(s) still running".into(),
            ..one.conditions[0].clone()
        }],
        ..one_reworded
    };
    let secs = |s| Some(Duration::from_secs(s));
    let cases = [
        (&one, &one, secs(1), StatusWrite::Skip),
        (&one, &one, None, StatusWrite::Skip),
        // A new ready count waits for the counts' spacing.
        (&one, &two, secs(1), StatusWrite::Later(Duration::from_secs(4))),
        (&one, &two, secs(5), StatusWrite::Now),
        (&one, &two, None, StatusWrite::Now),
        // Wording and the pods' total wait for the details' spacing, or for another write to ride along with.
        (&one, &one_reworded, secs(5), StatusWrite::Later(Duration::from_secs(25))),
        (&one, &one_reworded, secs(30), StatusWrite::Now),
        (&one, &one_reworded, None, StatusWrite::Now),
        // A change of phase or condition (Ready above all) never waits.
        (&two, &ready, secs(1), StatusWrite::Now),
        (&one_reworded, &ready, secs(1), StatusWrite::Now),
        (&MicroserviceStatus::default(), &one, secs(1), StatusWrite::Now),
    ];
    for (i, (previous, new, since, expected)) in cases.into_iter().enumerate() {
        assert_eq!(status_write(previous, new, since, spacing), expected, "case {i}");
    }
    // With no spacing configured every change goes out.
    assert_eq!(status_write(&one, &two, secs(0), Spacing::NONE), StatusWrite::Now);
    assert_eq!(status_write(&one, &one_reworded, secs(0), Spacing::NONE), StatusWrite::Now);
}

#[test]
fn many_rollouts_at_once_share_one_budget_of_progress_only_writes() {
    let spacing = Spacing { counts: Duration::from_secs(5), details: Duration::from_secs(30) };
    let (minute, secs) = (Duration::from_secs(60), Duration::from_secs);
    // A few rollouts keep their steps.
    assert_eq!(spacing.shared(0, 10, minute), spacing);
    assert_eq!(spacing.shared(50, 10, minute), spacing);
    // 200 at once at 10 progress writes a second: counts every 20 s, the words still every 30 s.
    assert_eq!(spacing.shared(200, 10, minute), Spacing { counts: secs(20), details: secs(30) });
    // 500: every 50 s; 1,000 would be every 100 s, but no count is held longer than the minute.
    assert_eq!(spacing.shared(500, 10, minute), Spacing { counts: secs(50), details: secs(50) });
    let wave = spacing.shared(1000, 10, minute);
    assert_eq!(wave, Spacing { counts: minute, details: minute });
    // What the stretched spacing holds back is progress only: Ready still goes out at once.
    let one = status(Phase::Progressing, 1, "RollingOut");
    let two = status(Phase::Progressing, 2, "RollingOut");
    let ready = status(Phase::Ready, 3, "RolledOut");
    assert_eq!(status_write(&one, &two, Some(secs(6)), wave), StatusWrite::Later(secs(54)));
    assert_eq!(status_write(&one, &two, Some(secs(60)), wave), StatusWrite::Now);
    assert_eq!(status_write(&two, &ready, Some(secs(1)), wave), StatusWrite::Now);
    // A budget of zero is read as one a second, not as a division by zero.
    assert_eq!(spacing.shared(40, 0, minute).counts, secs(40));
}
