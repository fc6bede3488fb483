//! `microservice-operator run` through the real binary: mistakes give one error line and a non-zero exit; a run
//! against the emulator serves metrics and probes, reconciles, and stops cleanly on SIGTERM.

use std::process::Output;

use crate::support::harness::{Harness, IMAGE_V1};
use crate::support::operator_process::{DEADLINE, Operator, command, eventually, scratch};
use microservice_testkit::ClusterOptions;

fn output(args: &[&str]) -> Output {
    command(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exactly one line, starting with `error:`, and no panic or backtrace.
fn assert_one_error_line(out: &Output) -> String {
    let text = stderr(out);
    assert!(!text.contains("panicked") && !text.contains("RUST_BACKTRACE"), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got:\n{text}");
    assert!(lines[0].starts_with("error: "), "{text}");
    lines[0].to_string()
}

fn kubeconfig_for(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    )
}

#[test]
fn help_explains_every_flag_and_its_variable() {
    let out = output(&["run", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "--namespace",
        "[env: WATCH_NAMESPACE=]",
        "--all-namespaces",
        "--selector",
        "--resync-interval",
        "[default: 5m]",
        "--concurrency",
        "--config",
        "--metrics-bind-address",
        "[default: 0.0.0.0:8080]",
        "--log-format",
        "--kubeconfig",
        "--context",
        "--leader-elect",
        "--leader-election-namespace",
        "--leader-election-id",
        "[default: microservice-operator]",
        "RUST_LOG",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "Exit codes",
    ] {
        assert!(help.contains(expected), "`run --help` lacks {expected}:\n{help}");
    }
}

#[test]
fn a_bad_flag_value_names_the_flag_and_exits_2() {
    let out = output(&["run", "--resync-interval", "5 fortnights"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.lines()
            .next()
            .unwrap_or_default()
            .starts_with("error: invalid value '5 fortnights' for '--resync-interval"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn a_resync_interval_that_would_hot_loop_is_refused_naming_the_flag() {
    let out = output(&["run", "--resync-interval", "0s"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("error: invalid value '0s' for '--resync-interval"), "{text}");
    assert!(first.contains("must be at least 10s"), "{text}");
}

#[test]
fn an_unknown_variable_value_is_refused_like_the_flag() {
    let out = command(&["run"]).env("OPERATOR_CONCURRENCY", "lots").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("'--concurrency <N>'"), "{}", stderr(&out));
}

#[test]
fn an_unreadable_profile_names_the_file() {
    let out = output(&["run", "--config", "/nonexistent/profile.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let line = assert_one_error_line(&out);
    assert!(line.contains("cannot read the platform profile /nonexistent/profile.yaml"), "{line}");
}

#[test]
fn an_invalid_profile_says_what_is_wrong() {
    let dir = scratch("invalid-profile");
    let file = dir.join("profile.yaml");
    std::fs::write(&file, "allowedRepositories: []\n").unwrap();
    let out = output(&["run", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("allowedRepositories is empty"));

    std::fs::write(&file, "allowedRepos: [ghcr.io/example/todo-api]\n").unwrap();
    let out = output(&["run", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("not valid YAML for this operator"));
}

#[test]
fn a_missing_kubeconfig_names_the_file() {
    let out = output(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("/nonexistent/kubeconfig"));
}

#[test]
fn an_unreachable_api_server_is_one_line_naming_its_address() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = scratch("unreachable");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_for(&format!("http://127.0.0.1:{port}"))).unwrap();
    let out = output(&["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let line = assert_one_error_line(&out);
    assert!(line.contains(&format!("cannot reach the Kubernetes API server at http://127.0.0.1:{port}")), "{line}");
}

#[test]
fn an_unknown_context_is_refused() {
    let dir = scratch("context");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, kubeconfig_for("http://127.0.0.1:1")).unwrap();
    let out = output(&["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--context", "prod"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("prod"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_replica_serves_metrics_and_probes_reconciles_and_stops_on_sigterm() {
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("single").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let mut op = Operator::start("single", &kubeconfig, &["--leader-elect=false", "--concurrency", "4"]).await;

    eventually("/readyz to answer 200", || async { (op.get("/readyz").await?.0 == 200).then_some(()) }).await;
    assert_eq!(op.get("/healthz").await.map(|r| r.0), Some(200));
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let metrics = eventually("the Ready phase on /metrics", || async {
        let (_, body) = op.get("/metrics").await?;
        body.contains(r#"microservice_objects{phase="Ready"} 1"#).then_some(body)
    })
    .await;
    for expected in [
        r#"controller_runtime_max_concurrent_reconciles{controller="microservice-operator"} 4"#,
        r#"controller_runtime_active_workers{controller="microservice-operator"}"#,
        r#"controller_runtime_reconcile_total{controller="microservice-operator",result="success"}"#,
        "controller_runtime_reconcile_time_seconds_bucket",
        r#"microservice_writes_total{resource="microservices/status",verb="patch"}"#,
    ] {
        assert!(metrics.contains(expected), "/metrics lacks {expected}:\n{metrics}");
    }

    op.signal("TERM");
    let status = op.exited(DEADLINE).await;
    assert_eq!(status.code(), Some(0), "{}", op.stderr());
    let messages: Vec<String> =
        op.log_events().iter().filter_map(|e| Some(e.get("message")?.as_str()?.to_string())).collect();
    assert!(messages.iter().any(|m| m.starts_with("shutting down")), "{messages:?}");
    assert_eq!(messages.last().map(String::as_str), Some("stopped"), "{messages:?}");
}

#[test]
fn an_invalid_log_filter_is_refused_before_connecting() {
    let out = command(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]).env("RUST_LOG", "info,[[").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("RUST_LOG is not a valid log filter"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_otlp_protocol_is_refused() {
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("otlp-protocol").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let out = command(&["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--leader-elect=false"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(assert_one_error_line(&out).contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/json"));
}

/// Spans go to the OTLP endpoint over gRPC (HTTP/2); a collector that never answers loses spans, never the
/// operator's work or its clean, bounded exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_otlp_set_spans_are_sent_to_the_collector_and_a_silent_one_does_not_block_the_exit() {
    use tokio::io::AsyncReadExt;
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("otlp").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let collector = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", collector.local_addr().unwrap());
    let received = tokio::spawn(async move {
        let (mut connection, _) = collector.accept().await.unwrap();
        let mut preface = [0u8; 24];
        connection.read_exact(&mut preface).await.unwrap();
        // Hold the connection open without answering: a collector that hangs.
        (preface, connection)
    });
    let mut command = command(&[
        "run",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--leader-elect=false",
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ]);
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
    let mut op = Operator::spawn("otlp", command);
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;
    op.signal("TERM");
    let (preface, _connection) = tokio::time::timeout(DEADLINE, received).await.unwrap().unwrap();
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "an HTTP/2 (gRPC) connection to {endpoint}");
    let status = op.exited(DEADLINE).await;
    assert_eq!(status.code(), Some(0), "{}", op.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_the_crd_is_one_line_saying_how_to_install_it() {
    let sim = kubesim::Sim::builder().without_controllers().start().await.unwrap();
    let kubeconfig = scratch("no-crd").join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    let out = output(&["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--log-format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(errors[0].contains("microservice-operator crd | kubectl apply -f -"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_selector_is_refused_at_start() {
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("selector").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let out = output(&["run", "--kubeconfig", kubeconfig.to_str().unwrap(), "--selector", "tier in (web"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(errors[0].contains("--selector `tier in (web` is not a valid label selector"), "{text}");
}
