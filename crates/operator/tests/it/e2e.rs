//! The operator end to end against a cluster, every behaviour a service team or a platform team would notice:
//! written once, run on kubesim (the default) and on a real control plane (`TEST_BACKEND=real`).

use std::time::{Duration, Instant};

use crate::support::harness::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use microservice_core::contract::validate_object;
use microservice_core::crd::{ConditionStatus, ConditionType, Phase};
use microservice_core::desired::{desired_deployment, desired_service};
use microservice_core::drift::differs;
use microservice_core::profile::PlatformProfile;
use microservice_testkit::ClusterOptions;
use serde_json::json;

/// Pods take a moment to become ready, so intermediate states are observable.
fn slow_pods() -> ClusterOptions {
    ClusterOptions { pod_ready_delay: Duration::from_millis(300), ..ClusterOptions::default() }
}

fn instant_pods() -> ClusterOptions {
    ClusterOptions::default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_microservice_goes_from_accepted_to_ready_with_the_desired_children() {
    let h = Harness::start(slow_pods()).await;
    let log = h.record_statuses();
    let op = h.operator();
    h.create("todo-api", IMAGE_V1).await;

    let ms = h.wait_ready("todo-api").await;
    let status = ms.status.clone().unwrap_or_default();
    assert_eq!(status.phase, Some(Phase::Ready));
    assert_eq!(status.image.as_deref(), Some(IMAGE_V1));
    assert_eq!(status.replicas_summary.as_deref(), Some("2/2"));
    assert!(holds(&status, ConditionType::Accepted, 1));

    let phases: Vec<Option<Phase>> = log.through(&ms).await.iter().map(|s| s.status.phase).collect();
    let progressing = phases.iter().position(|p| *p == Some(Phase::Progressing));
    let ready = phases.iter().position(|p| *p == Some(Phase::Ready));
    assert!(matches!((progressing, ready), (Some(p), Some(r)) if p < r), "Progressing before Ready: {phases:?}");

    // The live children carry everything the desired state says (the server only adds defaults).
    let profile = PlatformProfile::default();
    let contract = validate_object(&ms, &profile).expect("valid");
    let desired_d = serde_json::to_value(desired_deployment(&ms, &contract, &profile).unwrap()).unwrap();
    let live_d = serde_json::to_value(h.deployments().get("todo-api").await.unwrap()).unwrap();
    assert_eq!(differs(&desired_d, &live_d), Vec::<String>::new());
    let desired_s = serde_json::to_value(desired_service(&ms, &profile).unwrap()).unwrap();
    let live_s = serde_json::to_value(h.services().get("todo-api").await.unwrap()).unwrap();
    assert_eq!(differs(&desired_s, &live_s), Vec::<String>::new());
    assert_eq!(h.deployments_of("todo-api").await.len(), 1);

    // Every status write changed something: none repeats the status the CR already had (a stale cache read after
    // the operator's own write must not cause a second, identical one).
    let writes = succeeded(&h.requests(), "patch", "microservices/status");
    let mut seen = log.snapshot();
    seen.dedup_by(|a, b| a.status == b.status);
    let changes = seen.iter().filter(|s| s.status != Default::default()).count() as u64;
    assert_eq!(writes, changes, "status writes vs. distinct statuses seen: {seen:#?}");

    // The operator's own write metrics agree with what the API server received.
    let metrics = op.metrics.encode();
    for (resource, verb) in [("deployments", "create"), ("services", "create")] {
        let line = format!(r#"microservice_writes_total{{resource="{resource}",verb="{verb}"}} 1"#);
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
    let status_line = format!(r#"microservice_writes_total{{resource="microservices/status",verb="patch"}} {writes}"#);
    assert!(metrics.contains(&status_line), "{status_line} in:\n{metrics}");
    // The completed rollout was answered through the Ready lane, and its lag inside the operator measured.
    let urgent = metrics
        .lines()
        .find_map(|l| l.strip_prefix("microservice_urgent_reconcile_lag_seconds_count "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(urgent.is_some_and(|n| n >= 1), "no urgent reconcile measured in:\n{metrics}");

    // One Created Event tells both creations (the Recorder would fold a second Created into the first's series).
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(h.client.clone(), NS);
    let created: Vec<_> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Created"))
        .collect();
    assert_eq!(created.len(), 1, "one Created Event: {created:#?}");
    let note = created[0].note.clone().unwrap_or_default();
    assert!(note.contains("Deployment todo-api") && note.contains("Service todo-api"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_update_is_never_ready_before_the_new_rollout_completes() {
    let h = Harness::start(slow_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let log = h.record_statuses();
    let patch = json!({"spec": {"image": IMAGE_V2}});
    let updated = h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(updated.metadata.generation, Some(2));

    // While generation 1's pods still serve, the CR says Progressing for generation 2.
    let progressing = h
        .wait_for("todo-api", "Progressing for generation 2", |ms| {
            ms.status.as_ref().is_some_and(|s| holds(s, ConditionType::Progressing, 2))
        })
        .await;
    assert_ne!(progressing.status.as_ref().and_then(|s| s.phase), Some(Phase::Ready));
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.status.as_ref().and_then(|s| s.image.as_deref()), Some(IMAGE_V2));

    // Every status ever written that says Ready for generation 2 already reports the new image, and before it
    // the CR was seen Progressing for generation 2 with old pods still ready.
    let seen = log.through(&ms).await;
    let first_ready = seen.iter().position(|s| holds(&s.status, ConditionType::Ready, 2)).expect("saw Ready for 2");
    for s in &seen {
        if holds(&s.status, ConditionType::Ready, 2) {
            assert_eq!(s.status.image.as_deref(), Some(IMAGE_V2), "{s:#?}");
        }
    }
    assert!(
        seen[..first_ready].iter().any(|s| s.generation == 2
            && holds(&s.status, ConditionType::Progressing, 2)
            && s.status.ready_replicas.unwrap_or(0) > 0),
        "generation 1 pods kept serving while generation 2 rolled out: {seen:#?}"
    );
    let pods = ready_pods_by_image(&h.client).await;
    assert_eq!(pods.get(IMAGE_V1), None, "no old pod is left once Ready: {pods:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_misses_its_deadline_is_degraded_and_a_fixed_image_recovers() {
    let broken = "ghcr.io/example/todo-api:9.9.9-broken";
    let h =
        Harness::start(ClusterOptions { never_ready_images: vec![broken.into()], ..ClusterOptions::default() }).await;
    let mut config = h.config();
    config.profile.progress_deadline_seconds = 2;
    let _op = h.operator_with(config);
    h.create("todo-api", broken).await;

    let degraded = h
        .wait_for("todo-api", "Degraded by ProgressDeadlineExceeded", |ms| {
            ms.status
                .as_ref()
                .and_then(|s| condition(s, ConditionType::Degraded))
                .is_some_and(|c| c.status == ConditionStatus::True && c.reason == "ProgressDeadlineExceeded")
        })
        .await;
    let status = degraded.status.unwrap_or_default();
    assert_eq!(status.phase, Some(Phase::Degraded));
    assert!(!holds(&status, ConditionType::Ready, 1));

    let patch = json!({"spec": {"image": IMAGE_V1}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let ms = h.wait_ready("todo-api").await;
    let degraded = ms.status.as_ref().and_then(|s| condition(s, ConditionType::Degraded)).cloned();
    assert_eq!(degraded.map(|c| c.status), Some(ConditionStatus::False));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_hand_edited_children_are_repaired() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let old_uid = h.services().get("todo-api").await.unwrap().uid();
    let started = Instant::now();
    h.services().delete("todo-api", &DeleteParams::default()).await.unwrap();
    let recreated = h
        .eventually("the Service to be recreated", || async {
            h.services().get_opt("todo-api").await.ok().flatten().filter(|s| s.uid() != old_uid)
        })
        .await;
    eprintln!("repair latency, deleted Service: {:?}", started.elapsed());
    assert!(recreated.owner_references().iter().any(|o| o.controller == Some(true) && o.kind == "Microservice"));

    let edits = [
        ("replicas", json!({"spec": {"replicas": 5}})),
        (
            "env",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [
                {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://elsewhere:4317"}]}]}}}}),
        ),
        (
            "probes",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "app",
                "readinessProbe": {"httpGet": {"path": "/other", "port": "http"}}}]}}}}),
        ),
    ];
    let profile = PlatformProfile::default();
    for (what, edit) in edits {
        let params = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
        let started = Instant::now();
        h.deployments().patch("todo-api", &params, &Patch::Strategic(&edit)).await.unwrap();
        h.eventually(&format!("the {what} edit to be reverted"), || async {
            let ms = h.microservices().get("todo-api").await.ok()?;
            let contract = validate_object(&ms, &profile).ok()?;
            let desired = serde_json::to_value(desired_deployment(&ms, &contract, &profile).ok()?).ok()?;
            let live = serde_json::to_value(h.deployments().get("todo-api").await.ok()?).ok()?;
            differs(&desired, &live).is_empty().then_some(())
        })
        .await;
        eprintln!("repair latency, edited Deployment {what}: {:?}", started.elapsed());
    }
    assert_eq!(h.deployments_of("todo-api").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_spec_is_refused_with_one_status_write_and_nothing_deployed() {
    let h = Harness::start(instant_pods()).await;
    let op = h.operator();
    let before = h.requests();
    h.create("nginx", "docker.io/library/nginx:1.27").await;
    h.create("latest", "ghcr.io/example/todo-api:latest").await;

    for (name, reason) in [("nginx", "ImageNotAllowed"), ("latest", "MutableTag")] {
        let ms = h
            .wait_for(name, "refused", |ms| {
                ms.status
                    .as_ref()
                    .and_then(|s| condition(s, ConditionType::Accepted))
                    .is_some_and(|c| c.status == ConditionStatus::False)
            })
            .await;
        let status = ms.status.unwrap_or_default();
        let accepted = condition(&status, ConditionType::Accepted).unwrap();
        assert_eq!(accepted.reason, reason);
        assert!(!accepted.message.is_empty());
        assert_eq!(status.phase, Some(Phase::Invalid));
        assert_eq!(condition(&status, ConditionType::Ready).map(|c| c.status), Some(ConditionStatus::False));
    }
    // Make the operator reconcile both again (a label is not a new generation) and wait until it has.
    let reconciles = op.metrics.reconciles();
    for name in ["nginx", "latest"] {
        let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
        h.microservices().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    h.eventually("two more reconciles", || async { (op.metrics.reconciles() >= reconciles + 2).then_some(()) }).await;

    let spent = h.requests().since(&before);
    assert_eq!(spent.writes_to("deployments"), 0, "{spent:?}");
    assert_eq!(spent.writes_to("services"), 0, "{spent:?}");
    assert_eq!(spent.count("patch", "microservices/status"), 2, "one status write per invalid CR: {spent:?}");
    assert!(h.deployments().list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_deployment_is_left_alone_until_it_is_handed_over() {
    let h = Harness::start(instant_pods()).await;
    let foreign: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "todo-api", "labels": {"team": "legacy"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "todo-api", "app.kubernetes.io/instance": "todo-api"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "todo-api", "app.kubernetes.io/instance": "todo-api"}},
                "spec": {"containers": [{"name": "app", "image": "ghcr.io/example/todo-api:0.9.0"}]}
            }
        }
    }))
    .unwrap();
    let params = PostParams { field_manager: Some("legacy-deployer".into()), ..PostParams::default() };
    let foreign = h.deployments().create(&params, &foreign).await.unwrap();
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;

    let ms = h
        .wait_for("todo-api", "in conflict", |ms| {
            ms.status
                .as_ref()
                .and_then(|s| condition(s, ConditionType::Degraded))
                .is_some_and(|c| c.status == ConditionStatus::True && c.reason == "ResourceConflict")
        })
        .await;
    let degraded = condition(ms.status.as_ref().unwrap(), ConditionType::Degraded).unwrap().clone();
    assert!(degraded.message.contains("platform.example.com/handover=todo-api"), "{}", degraded.message);
    // The simulated Deployment controller updates its status, but nobody touched what the legacy deployer wrote.
    let untouched = h.deployments().get("todo-api").await.unwrap();
    assert_eq!(untouched.metadata.generation, foreign.metadata.generation, "spec unchanged");
    assert!(untouched.owner_references().is_empty());
    let managers: Vec<String> = untouched.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
    assert!(!managers.iter().any(|m| m == "microservice-operator"), "{managers:?}");

    let handover = json!({"metadata": {"annotations": {"platform.example.com/handover": "todo-api"}}});
    h.deployments().patch("todo-api", &PatchParams::default(), &Patch::Merge(&handover)).await.unwrap();
    h.wait_ready("todo-api").await;
    let adopted = h.deployments().get("todo-api").await.unwrap();
    assert_eq!(adopted.uid(), foreign.uid(), "adopted in place, not replaced");
    assert!(adopted.owner_references().iter().any(|o| o.controller == Some(true) && o.name == "todo-api"));
    assert!(!adopted.annotations().contains_key("platform.example.com/handover"));
    assert_eq!(h.deployments().list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_restart_over_converged_objects_sends_no_writes_and_a_hundred_become_ready() {
    let h = Harness::start(instant_pods()).await;
    let log = h.record_statuses();
    let op = h.operator();
    let names: Vec<String> = (0..100).map(|i| format!("svc-{i:03}")).collect();
    for name in &names {
        h.create(name, IMAGE_V1).await;
    }
    let mut ready = Vec::new();
    for name in &names {
        ready.push(h.wait_ready(name).await);
    }
    op.stop().await;
    for ms in &ready {
        log.through(ms).await;
    }
    // Under load too, every status write changed something (no repeat after a stale cache read).
    let writes = succeeded(&h.requests(), "patch", "microservices/status");
    let changes: usize = names
        .iter()
        .map(|name| {
            let mut seen: Vec<Seen> = log.snapshot().into_iter().filter(|s| &s.name == name).collect();
            seen.dedup_by(|a, b| a.status == b.status);
            seen.iter().filter(|s| s.status != Default::default()).count()
        })
        .sum();
    assert_eq!(writes, changes as u64, "status writes vs. distinct statuses seen over 100 CRs");

    let before = h.requests();
    let op = h.operator();
    // Each of the 100 is reconciled on start; wait for all of them.
    h.eventually("every Microservice reconciled after the restart", || async {
        (op.metrics.reconciles() >= 100).then_some(())
    })
    .await;
    let spent = h.requests().since(&before);
    assert_eq!(spent.writes(), 0, "a restart over converged objects writes nothing: {spent:?}");
    for name in &names {
        assert_eq!(h.deployments_of(name).await.len(), 1);
    }
}

/// Emulator faults (a share of 5xx answers, watches cut after N events): on kubesim whatever the backend; the real
/// server's faults (kube-apiserver killed and restarted) are the chaos suite's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_converges_through_injected_server_errors_and_dropped_watches() {
    let faults = serde_json::from_value(json!({
        "seed": 42,
        "errors": [
            {"verb": "create", "resource": "*", "rate": 0.3, "code": 500},
            {"verb": "patch", "resource": "*", "rate": 0.3, "code": 503},
        ],
        "watch": [{"resource": "*", "dropAfterEvents": 20}]
    }))
    .unwrap();
    let h = Harness::start_emulator_with(kubesim::controllers::ControllerConfig::default(), faults).await;
    let _op = h.operator();
    let names: Vec<String> = (0..10).map(|i| format!("chaos-{i}")).collect();
    for name in &names {
        // Creates of CRs face the same faults: retry them as a user would.
        h.eventually("the Microservice to be created", || async {
            h.microservices().create(&PostParams::default(), &microservice(name, IMAGE_V1)).await.ok()
        })
        .await;
    }
    for name in &names {
        h.wait_ready(name).await;
        assert_eq!(h.deployments_of(name).await.len(), 1, "exactly one Deployment for {name}");
        assert!(h.services().get_opt(name).await.unwrap().is_some(), "a Service for {name}");
    }
    let injected = h.requests().code(500) + h.requests().code(503);
    assert!(injected > 0, "faults were injected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specs_the_crd_schema_rejects_never_reach_the_operator() {
    let h = Harness::start(instant_pods()).await;
    let api = h.microservices();
    let bad = |spec: serde_json::Value| -> microservice_core::crd::Microservice {
        serde_json::from_value(json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": {"name": "bad"}, "spec": {"image": IMAGE_V1, "port": 8080}
        }))
        .map(|mut ms: microservice_core::crd::Microservice| {
            if let Some(port) = spec.get("port").and_then(|p| p.as_i64()) {
                ms.spec.port = port as i32;
            }
            ms
        })
        .unwrap()
    };
    let err = api.create(&PostParams::default(), &bad(json!({"port": 80}))).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.port")), "{err}");

    // Dynamic bodies for what the typed API cannot express: a missing image, an unknown field.
    let dynamic = kube::Api::<kube::core::DynamicObject>::namespaced_with(
        h.client.clone(),
        NS,
        &kube::core::ApiResource::erase::<microservice_core::crd::Microservice>(&()),
    );
    let missing: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
        "metadata": {"name": "no-image"}, "spec": {"port": 8080}
    }))
    .unwrap();
    let err = dynamic.create(&PostParams::default(), &missing).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.image")), "{err}");

    let unknown: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
        "metadata": {"name": "unknown-field"}, "spec": {"image": IMAGE_V1, "port": 8080, "debug": true}
    }))
    .unwrap();
    // kubectl sends fieldValidation=Strict: the server refuses the unknown field, naming it (400 from a create or an
    // update; a server-side apply fails to build its typed object first, which kube-apiserver answers with a 500).
    let apply = PatchParams::apply("kubectl").validation_strict();
    let err = dynamic.patch("unknown-field", &apply, &Patch::Apply(&unknown)).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500 && s.message.contains(".spec.debug: field not declared in schema")),
        "{err}"
    );
    // Without it the field is pruned: it never reaches the operator.
    let created = dynamic.create(&PostParams::default(), &unknown).await.unwrap();
    assert!(created.data["spec"].get("debug").is_none(), "{:?}", created.data);
    // A strict merge patch of a custom resource: 422, the patched object named as an invalid `patch`.
    let strict = PatchParams::default().validation_strict();
    let debug = Patch::Merge(json!({"spec": {"debug": true}}));
    let err = dynamic.patch("unknown-field", &strict, &debug).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422
            && s.message.contains(r#"strict decoding error: unknown field "spec.debug""#)),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_microservice_collects_its_children_unless_orphaned() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    for name in ["collected", "orphaned"] {
        h.create(name, IMAGE_V1).await;
        h.wait_ready(name).await;
    }

    // Background deletion (the default): the garbage collector follows the controller ownerReference.
    h.microservices().delete("collected", &DeleteParams::default()).await.unwrap();
    h.eventually("the Deployment and Service of a deleted Microservice to be collected", || async {
        let deployment = h.deployments().get_opt("collected").await.unwrap();
        let service = h.services().get_opt("collected").await.unwrap();
        (deployment.is_none() && service.is_none()).then_some(())
    })
    .await;

    // `kubectl delete ms orphaned --cascade=orphan`: the children stay, no longer owned.
    h.microservices().delete("orphaned", &DeleteParams::orphan()).await.unwrap();
    h.eventually("the orphaned Microservice to be gone", || async {
        h.microservices().get_opt("orphaned").await.unwrap().is_none().then_some(())
    })
    .await;
    let deployment = h
        .eventually("the orphaned Deployment to lose its ownerReference", || async {
            let d = h.deployments().get_opt("orphaned").await.unwrap()?;
            d.owner_references().is_empty().then_some(d)
        })
        .await;
    assert_eq!(deployment.name_any(), "orphaned");
    let service = h.services().get_opt("orphaned").await.unwrap().expect("the orphaned Service is kept");
    assert!(service.owner_references().is_empty(), "orphaned Service keeps no ownerReference");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_change_converges_like_a_fresh_create_and_leaves_no_old_port_behind() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let patch = json!({"spec": {"port": 8081}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.metadata.generation, Some(2));

    let deployment = h.deployments().get("todo-api").await.unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let ports: Vec<i32> = container.ports.iter().flatten().map(|p| p.container_port).collect();
    assert_eq!(ports, vec![8081], "only the new container port");
    let service = h.services().get("todo-api").await.unwrap();
    let targets: Vec<String> = service
        .spec
        .unwrap()
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.target_port.as_ref().map(|t| format!("{t:?}")))
        .collect();
    assert_eq!(targets.len(), 1, "one Service port: {targets:?}");
    // Degraded never held for generation 2 on the way.
    let status = ms.status.unwrap_or_default();
    assert!(!holds(&status, ConditionType::Degraded, 2), "{status:#?}");
}

/// Events about `ms/todo-api` with this reason.
async fn events(h: &Harness, reason: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(h.client.clone(), NS);
    let all = api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    all.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
}

fn app_env(d: &Deployment) -> Vec<String> {
    let pod = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let app = pod.and_then(|p| p.containers.iter().find(|c| c.name == "app"));
    app.and_then(|c| c.env.as_ref()).map(|env| env.iter().map(|e| e.name.clone()).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_change_converges_and_generation_2_gets_its_own_event_note() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let patch = json!({"spec": {"replicas": 3}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.metadata.generation, Some(2));
    let deployment = h.deployments().get("todo-api").await.unwrap();
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(3));
    assert_eq!(ms.status.as_ref().and_then(|s| s.replicas_summary.clone()).as_deref(), Some("3/3"));

    // `kubectl describe` tells generation 2's completion in its own words: the Ready condition (a rollout's
    // completion is no longer repeated as an Event), and the change as an Updated Event of its own.
    let ready = ms.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == ConditionType::Ready));
    assert!(ready.is_some_and(|c| c.message.starts_with("generation 2 is rolled out")), "{ready:#?}");
    h.eventually("an Updated Event naming the replicas change", || async {
        let notes: Vec<String> = events(&h, "Updated").await.into_iter().filter_map(|e| e.note).collect();
        notes.iter().any(|n| n.contains("spec.replicas")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_change_removes_what_the_desired_state_no_longer_has() {
    let h = Harness::start(instant_pods()).await;
    let op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;
    let before = h.deployments().get("todo-api").await.unwrap();
    assert!(app_env(&before).contains(&"OTEL_EXPORTER_OTLP_ENDPOINT".to_string()));
    op.stop().await;

    // The platform team drops the exporter endpoint from the profile and restarts the operator: the objects were
    // created (POST) by the previous configuration, and the CR did not change.
    let mut config = h.config();
    config.profile.telemetry.endpoint = String::new();
    let _op = h.operator_with(config);
    let after = h
        .eventually("the dropped env var to be gone", || async {
            let d = h.deployments().get("todo-api").await.ok()?;
            (!app_env(&d).contains(&"OTEL_EXPORTER_OTLP_ENDPOINT".to_string())).then_some(d)
        })
        .await;
    assert!(app_env(&after).contains(&"OTEL_SERVICE_NAME".to_string()), "the other env vars stay");
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.metadata.generation, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_others_add_to_the_exact_parts_is_reverted_and_their_metadata_stays() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    // `kubectl patch`: a second container and the host network; `kubectl rollout restart`: an annotation; and
    // a hand-added Service selector key.
    let params = PatchParams { field_manager: Some("kubectl-patch".into()), ..PatchParams::default() };
    let edit = json!({"spec": {"template": {
        "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T10:00:00Z"}},
        "spec": {"hostNetwork": true, "containers": [{"name": "miner", "image": "docker.io/evil/miner:1"}]}}}});
    h.deployments().patch("todo-api", &params, &Patch::Strategic(&edit)).await.unwrap();
    let selector = json!({"spec": {"selector": {"tier": "web"}}});
    h.services().patch("todo-api", &params, &Patch::Merge(&selector)).await.unwrap();

    let repaired = h
        .eventually("the sidecar and hostNetwork to be removed", || async {
            let d = h.deployments().get("todo-api").await.ok()?;
            let pod = d.spec.as_ref()?.template.spec.as_ref()?;
            (pod.containers.len() == 1 && pod.host_network != Some(true)).then_some(d)
        })
        .await;
    let template = repaired.spec.unwrap().template;
    assert_eq!(template.spec.unwrap().containers[0].name, "app");
    let annotations = template.metadata.and_then(|m| m.annotations).unwrap_or_default();
    assert_eq!(
        annotations.get("kubectl.kubernetes.io/restartedAt").map(String::as_str),
        Some("2026-12-02T10:00:00Z"),
        "a rollout restart is not the platform's to revert"
    );
    h.eventually("the Service selector to be exact", || async {
        let s = h.services().get("todo-api").await.ok()?;
        (!s.spec?.selector?.contains_key("tier")).then_some(())
    })
    .await;
    h.wait_ready("todo-api").await;
    // Events are recorded right after the writes: wait for them rather than race them.
    h.eventually("Repaired Events naming every reverted field", || async {
        let notes: Vec<String> = events(&h, "Repaired").await.into_iter().filter_map(|e| e.note).collect();
        let all = notes.join("\n");
        ["containers[name=miner]", "hostNetwork", "spec.selector.tier"].iter().all(|f| all.contains(f)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_generation_keeps_the_last_accepted_one_running_and_repaired() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let patch = json!({"spec": {"image": "ghcr.io/example/todo-api:latest"}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let refused = h
        .wait_for("todo-api", "Invalid for generation 2", |ms| {
            ms.status.as_ref().is_some_and(|s| s.phase == Some(Phase::Invalid) && s.observed_generation == Some(2))
        })
        .await;
    let last = refused.status.and_then(|s| s.last_accepted).expect("the last accepted contract is recorded");
    assert_eq!((last.generation, last.image.as_str()), (1, IMAGE_V1));

    // Deleting the Deployment must not take the service down: generation 1 comes back.
    let old = h.deployments().get("todo-api").await.unwrap().uid();
    h.deployments().delete("todo-api", &DeleteParams::default()).await.unwrap();
    let back = h
        .eventually("generation 1's Deployment to be recreated", || async {
            h.deployments().get_opt("todo-api").await.ok().flatten().filter(|d| d.uid() != old)
        })
        .await;
    let pod = back.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some(IMAGE_V1));
    assert_eq!(
        back.metadata.annotations.unwrap_or_default().get("platform.example.com/generation").map(String::as_str),
        Some("1")
    );
    h.eventually("generation 1's pods to serve again", || async {
        (ready_pods_by_image(&h.client).await.get(IMAGE_V1).copied().unwrap_or(0) == 2).then_some(())
    })
    .await;

    // A valid generation takes over.
    let patch = json!({"spec": {"image": IMAGE_V2}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.status.and_then(|s| s.image).as_deref(), Some(IMAGE_V2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_deployment_with_a_pending_change_is_reported_with_how_to_resume() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    // `kubectl rollout pause`, then a new image.
    let pause = json!({"spec": {"paused": true}});
    let params = PatchParams { field_manager: Some("kubectl-rollout".into()), ..PatchParams::default() };
    h.deployments().patch("todo-api", &params, &Patch::Merge(&pause)).await.unwrap();
    let patch = json!({"spec": {"image": IMAGE_V2}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let ms = h
        .wait_for("todo-api", "reported as paused", |ms| {
            ms.status.as_ref().and_then(|s| condition(s, ConditionType::Progressing)).is_some_and(|c| {
                c.reason == "DeploymentPaused" && c.status == ConditionStatus::False && c.observed_generation == Some(2)
            })
        })
        .await;
    let progressing = condition(ms.status.as_ref().unwrap(), ConditionType::Progressing).unwrap();
    assert!(
        progressing.message.contains("kubectl rollout resume deployment/todo-api -n todo"),
        "{}",
        progressing.message
    );

    let resume = json!({"spec": {"paused": false}});
    h.deployments().patch("todo-api", &params, &Patch::Merge(&resume)).await.unwrap();
    let ms = h.wait_ready("todo-api").await;
    assert_eq!(ms.status.and_then(|s| s.image).as_deref(), Some(IMAGE_V2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_orphaned_by_an_earlier_microservice_of_the_same_name_are_explained_and_reattach() {
    let h = Harness::start(instant_pods()).await;
    let _op = h.operator();
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    // `kubectl delete ms todo-api --cascade=orphan`, then the team applies it again: a new uid.
    h.microservices().delete("todo-api", &DeleteParams::orphan()).await.unwrap();
    h.eventually("the orphaned Deployment to lose its ownerReference", || async {
        let gone = h.microservices().get_opt("todo-api").await.ok()?.is_none();
        let d = h.deployments().get_opt("todo-api").await.ok()??;
        (gone && d.owner_references().is_empty()).then_some(())
    })
    .await;
    h.create("todo-api", IMAGE_V1).await;
    let ms = h
        .wait_for("todo-api", "in conflict", |ms| {
            ms.status
                .as_ref()
                .and_then(|s| condition(s, ConditionType::Degraded))
                .is_some_and(|c| c.status == ConditionStatus::True && c.reason == "ResourceConflict")
        })
        .await;
    let message = condition(ms.status.as_ref().unwrap(), ConditionType::Degraded).unwrap().message.clone();
    assert!(message.contains("earlier Microservice named todo-api"), "{message}");
    let command = "kubectl annotate deployments todo-api -n todo platform.example.com/handover=todo-api --overwrite";
    assert!(message.contains(command), "{message}");

    // Running the command re-attaches both children in place.
    for api in ["deployments", "services"] {
        let handover = json!({"metadata": {"annotations": {"platform.example.com/handover": "todo-api"}}});
        match api {
            "deployments" => drop(
                h.deployments().patch("todo-api", &PatchParams::default(), &Patch::Merge(&handover)).await.unwrap(),
            ),
            _ => drop(h.services().patch("todo-api", &PatchParams::default(), &Patch::Merge(&handover)).await.unwrap()),
        }
    }
    let ms = h.wait_ready("todo-api").await;
    let deployment = h.deployments().get("todo-api").await.unwrap();
    assert!(
        deployment
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == ms.metadata.uid.as_ref())
    );
}
