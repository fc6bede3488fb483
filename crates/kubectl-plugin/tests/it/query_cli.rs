//! The query tools (`status`, `wait`) and the demo, run as a user would: against kubesim over HTTP, connecting
//! through a kubeconfig file, with the real operator reconciling.

use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kubectl_microservice::demo::{self, DemoArgs};
use kubectl_microservice::status::{self, ClusterArgs, OutputFormat, StatusArgs};
use kubectl_microservice::wait::{self, Outcome, WaitArgs};
use kubesim::Sim;
use microservice_core::crd::Microservice;
use serde_json::json;

use crate::support::{Cluster, DEADLINE, NEVER_READY, NS, TempDir};

#[tokio::test]
async fn wait_exits_0_once_ready_and_status_reports_the_rollout() {
    let cluster = Cluster::start("ready").await;
    cluster.create("todo-api", "ghcr.io/example/todo-api:1.4.2").await;
    assert_eq!(wait::run(cluster.wait_args("todo-api", DEADLINE)).await, ExitCode::from(0));

    let json = status::render(&cluster.status_args(None, OutputFormat::Json)).await.unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let item = &parsed["items"][0];
    assert_eq!(item["name"], "todo-api");
    assert_eq!(item["phase"], "Ready");
    assert_eq!(item["ready"], true);
    assert_eq!((item["generation"].as_i64(), item["observedGeneration"].as_i64()), (Some(1), Some(1)));
    assert_eq!((item["readyReplicas"].as_i64(), item["desiredReplicas"].as_i64()), (Some(2), Some(2)));
    assert_eq!(item["image"], "ghcr.io/example/todo-api:1.4.2");
    assert!(item.get("nextStep").is_none(), "{json}");

    let table = status::render(&cluster.status_args(Some("todo-api"), OutputFormat::Table)).await.unwrap();
    let row = table.lines().nth(1).unwrap();
    assert!(row.starts_with("todo-api") && row.contains("Ready") && row.contains("2/2"), "{table}");
    assert!(!table.contains("next:"), "{table}");
}

#[tokio::test]
async fn wait_with_a_zero_timeout_checks_once_and_answers() {
    let cluster = Cluster::start("zero").await;
    cluster.create("todo-api", "ghcr.io/example/todo-api:1.4.2").await;
    assert_eq!(wait::run(cluster.wait_args("todo-api", DEADLINE)).await, ExitCode::from(0));
    // Ready now: a zero timeout still looks once, and says Ready.
    assert!(matches!(cluster.wait("todo-api", Duration::ZERO).await, Outcome::Ready { .. }));
    assert_eq!(wait::run(cluster.wait_args("todo-api", Duration::ZERO)).await, ExitCode::from(0));
    // A missing one is a timeout that says it does not exist.
    let Outcome::TimedOut { last } = cluster.wait("nope", Duration::ZERO).await else { panic!("expected a timeout") };
    assert!(last.contains("does not exist"), "{last}");
}

#[tokio::test]
async fn wait_exits_1_for_a_refused_image_and_says_why() {
    let cluster = Cluster::start("invalid").await;
    cluster.create("todo-api", "docker.io/someone/todo-api:1.0.0").await;
    match cluster.wait("todo-api", DEADLINE).await {
        Outcome::Failed { reason, message, next_step } => {
            assert_eq!(reason, "ImageNotAllowed");
            assert!(message.contains("docker.io/someone/todo-api"), "{message}");
            assert!(next_step.unwrap_or_default().contains("repository"));
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(wait::run(cluster.wait_args("todo-api", DEADLINE)).await, ExitCode::from(1));

    let table = status::render(&cluster.status_args(None, OutputFormat::Table)).await.unwrap();
    assert!(table.contains("Invalid"), "{table}");
    assert!(table.contains("why:  ImageNotAllowed"), "{table}");
    assert!(table.contains("next: use an image from a repository the platform allows"), "{table}");
}

#[tokio::test]
async fn wait_exits_2_when_pods_never_become_ready() {
    let cluster = Cluster::start("timeout").await;
    cluster.create("todo-api", NEVER_READY).await;
    let outcome = cluster.wait("todo-api", Duration::from_secs(2)).await;
    let Outcome::TimedOut { last } = &outcome else { panic!("expected a timeout, got {outcome:?}") };
    assert!(last.contains("RolloutInProgress") || last.contains("waiting"), "{last}");
    assert_eq!(wait::run(cluster.wait_args("todo-api", Duration::from_secs(1))).await, ExitCode::from(2));
}

#[tokio::test]
async fn a_conflict_names_the_handover_command() {
    let cluster = Cluster::start("conflict").await;
    let labels = json!({"app.kubernetes.io/name": "billing", "app.kubernetes.io/instance": "billing"});
    let handmade: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "billing", "namespace": NS},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "ghcr.io/example/todo-api:1.0.0"}]}}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(cluster.backend.client(), NS)
        .create(&PostParams::default(), &handmade)
        .await
        .unwrap();
    cluster.create("billing", "ghcr.io/example/todo-api:1.0.0").await;
    let outcome = cluster.wait("billing", DEADLINE).await;
    assert!(matches!(&outcome, Outcome::Failed { reason, .. } if reason == "ResourceConflict"), "{outcome:?}");

    let json = status::render(&cluster.status_args(Some("billing"), OutputFormat::Json)).await.unwrap();
    let item: serde_json::Value = serde_json::from_str::<serde_json::Value>(&json).unwrap()["items"][0].clone();
    assert_eq!(item["phase"], "Degraded");
    assert_eq!(item["reason"], "ResourceConflict");
    let next = item["nextStep"].as_str().unwrap();
    assert!(
        next.contains("kubectl annotate deployments billing -n todo platform.example.com/handover=billing --overwrite"),
        "{next}"
    );
}

#[tokio::test]
async fn status_names_a_missing_microservice() {
    let cluster = Cluster::start("missing").await;
    let err = status::render(&cluster.status_args(Some("nope"), OutputFormat::Table)).await.unwrap_err();
    assert!(err.to_string().contains("todo/nope not found"), "{err}");
    let empty = status::render(&cluster.status_args(None, OutputFormat::Table)).await.unwrap();
    assert_eq!(empty, "No Microservices found.\n");
}

#[tokio::test]
async fn demo_walks_through_every_step_and_exits_0() {
    let dir = TempDir::new("demo");
    let args =
        DemoArgs { pod_ready_delay: Duration::ZERO, step_timeout: DEADLINE, dir: dir.0.clone(), ..DemoArgs::default() };
    let report = demo::execute(args.clone()).await.unwrap();
    assert_eq!(report.steps.len(), 5, "{report:?}");
    assert!(report.service_restored_in.is_some());
    let refused_at_apply = report.admission_refusal.as_deref().unwrap_or_default();
    assert!(refused_at_apply.contains("ValidatingAdmissionPolicy"), "{refused_at_apply}");
    assert!(refused_at_apply.contains("ImageNotAllowed"), "{refused_at_apply}");
    assert_eq!(report.refusal_reason.as_deref(), Some("ImageNotAllowed"));
    let kubeconfig = std::fs::read_to_string(dir.0.join("kubeconfig")).unwrap();
    // HTTPS with the emulator's CA, so kubectl sends the token; the context's namespace is the demo's.
    assert!(kubeconfig.contains("server: https://127.0.0.1:"), "{kubeconfig}");
    assert!(kubeconfig.contains("certificate-authority-data:"), "{kubeconfig}");
    assert!(kubeconfig.contains("namespace: todo"), "{kubeconfig}");

    // The command as the binary runs it.
    assert_eq!(demo::run(args).await, ExitCode::SUCCESS);
}

#[tokio::test]
async fn without_the_crd_wait_exits_3_and_status_says_how_to_install_it() {
    let sim = Sim::builder().start().await.unwrap();
    let dir = TempDir::new("nocrd");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let cluster = ClusterArgs { kubeconfig: Some(kubeconfig), context: None };
    let args = WaitArgs {
        name: "todo-api".into(),
        namespace: Some(NS.into()),
        condition: wait::Condition::Ready,
        timeout: DEADLINE,
        cluster: cluster.clone(),
    };
    // At once, not after the timeout: waiting cannot help.
    let started = std::time::Instant::now();
    assert_eq!(wait::run(args).await, ExitCode::from(wait::EXIT_ERROR));
    assert!(started.elapsed() < DEADLINE);
    let status = StatusArgs { name: None, namespace: None, all_namespaces: true, output: OutputFormat::Table, cluster };
    let err = status::render(&status).await.unwrap_err();
    assert!(err.to_string().contains("microservice-operator crd | kubectl apply -f -"), "{err}");
}

#[tokio::test]
async fn all_namespaces_lists_every_namespace_with_its_name() {
    let cluster = Cluster::start("all").await;
    cluster.create("todo-api", "ghcr.io/example/todo-api:1.4.2").await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "staging"}})).unwrap();
    Api::<Namespace>::all(cluster.backend.client()).create(&PostParams::default(), &ns).await.unwrap();
    let ms: Microservice = serde_json::from_value(json!({
        "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
        "metadata": {"name": "todo-api", "namespace": "staging"},
        "spec": {"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080}
    }))
    .unwrap();
    Api::<Microservice>::namespaced(cluster.backend.client(), "staging")
        .create(&PostParams::default(), &ms)
        .await
        .unwrap();

    let mut args = cluster.status_args(None, OutputFormat::Table);
    args.namespace = None;
    args.all_namespaces = true;
    let table = status::render(&args).await.unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE"), "{table}");
    let rows: Vec<&str> = lines.iter().copied().filter(|l| !l.starts_with(' ') && l.contains("todo-api")).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[0].starts_with("staging") && rows[1].starts_with("todo"), "sorted by namespace: {table}");
    // The operator watches only `todo`: the staging one is never reconciled, and says so.
    assert!(rows[0].split_whitespace().nth(2) == Some("-"), "no phase was ever written: {table}");
    assert!(table.contains("why:  NotObserved"), "{table}");

    // With the bundle's operator Deployment installed, status knows what it watches and names it.
    let operator_ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "microservice-operator"}})).unwrap();
    Api::<Namespace>::all(cluster.backend.client()).create(&PostParams::default(), &operator_ns).await.unwrap();
    let operator: Deployment = serde_saphyr::from_str(include_str!("../../../../deploy/deployment.yaml")).unwrap();
    Api::<Deployment>::namespaced(cluster.backend.client(), "microservice-operator")
        .create(&PostParams::default(), &operator)
        .await
        .unwrap();
    let table = status::render(&args).await.unwrap();
    assert!(
        table.contains(
            "no operator watches namespace staging (microservice-operator/microservice-operator watches namespace \
             todo)"
        ),
        "{table}"
    );
}

#[tokio::test]
async fn a_demo_step_that_cannot_finish_names_the_step_and_why() {
    let dir = TempDir::new("demo-fail");
    // Pods take far longer than a step may: step 1 cannot reach Ready.
    let args = DemoArgs {
        pod_ready_delay: Duration::from_secs(600),
        step_timeout: Duration::from_secs(2),
        dir: dir.0.clone(),
        ..DemoArgs::default()
    };
    let err = demo::execute(args.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, demo::DemoError::Step { step: 1, .. }), "{text}");
    assert!(text.starts_with("step 1/5 (create the sample Microservice"), "{text}");
    assert!(text.contains("timed out after 2.00s waiting for todo-api to be Ready for generation 1"), "{text}");
    assert!(text.contains("last seen: todo-api: Progressing"), "{text}");
    assert_eq!(demo::run(args).await, ExitCode::FAILURE);
}
