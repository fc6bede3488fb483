//! The real `microservice-operator run` binary as a child process: its stderr log lines (JSON), its HTTP
//! endpoints, and signals. Shared by `run_cli` and `leader_election`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BINARY: &str = env!("CARGO_BIN_EXE_microservice-operator");
/// Generous: five engineers share two cores.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Variables of the test's own environment that would change the operator's flags.
const OPERATOR_VARIABLES: &[&str] = &[
    "KUBECONFIG",
    "WATCH_NAMESPACE",
    "POD_NAME",
    "POD_NAMESPACE",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OPERATOR_ALL_NAMESPACES",
    "OPERATOR_SELECTOR",
    "OPERATOR_RESYNC_INTERVAL",
    "OPERATOR_CONCURRENCY",
    "OPERATOR_CONFIG",
    "OPERATOR_ALLOWED_REPOSITORIES",
    "OPERATOR_METRICS_BIND_ADDRESS",
    "OPERATOR_LOG_FORMAT",
    "OPERATOR_CONTEXT",
    "OPERATOR_LEADER_ELECT",
    "OPERATOR_LEADER_ELECTION_NAMESPACE",
    "OPERATOR_LEADER_ELECTION_ID",
    "OPERATOR_LEADER_ELECTION_LEASE_DURATION",
    "OPERATOR_LEADER_ELECTION_RENEW_DEADLINE",
    "OPERATOR_SHUTDOWN_TIMEOUT",
];

/// A command for the binary with a clean operator environment.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BINARY);
    command.args(args);
    for var in OPERATOR_VARIABLES {
        command.env_remove(var);
    }
    command.env("RUST_LOG", "info").stdin(Stdio::null());
    command
}

/// A scratch directory per test, under the target directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct Operator {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    pub address: Option<SocketAddr>,
}

impl Operator {
    /// Starts `run` with `POD_NAME=name`, JSON logs and a free port, and waits until it serves HTTP.
    pub async fn start(name: &str, kubeconfig: &Path, extra: &[&str]) -> Operator {
        let mut args = vec![
            "run",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ];
        args.extend_from_slice(extra);
        let mut command = command(&args);
        command.env("POD_NAME", name);
        let mut operator = Operator::spawn(name, command);
        let start = Instant::now();
        while operator.address.is_none() {
            operator.address = operator.logged_address();
            if let Some(status) = operator.child.try_wait().unwrap() {
                panic!("{name} exited with {status} before serving HTTP:\n{}", operator.stderr());
            }
            assert!(start.elapsed() < DEADLINE, "{name} did not log its address:\n{}", operator.stderr());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        operator
    }

    pub fn spawn(name: &str, mut command: Command) -> Operator {
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if std::env::var_os("OPERATOR_TEST_LOGS").is_some() {
                    eprintln!("{line}");
                }
                sink.lock().unwrap().push(line);
            }
        });
        Operator { name: name.to_string(), child, lines, address: None }
    }

    fn logged_address(&self) -> Option<SocketAddr> {
        self.log_events().into_iter().find_map(|event| {
            let message = event.get("message")?.as_str()?;
            message.starts_with("serving /metrics").then(|| event.get("address")?.as_str()?.parse().ok())?
        })
    }

    pub fn log_events(&self) -> Vec<serde_json::Value> {
        self.lines.lock().unwrap().iter().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    pub fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// (status, body) of a GET on the operator's HTTP endpoint; None while it does not answer.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        microservice_testkit::http::get(self.address?, path).await.map(|a| (a.status, a.body))
    }

    /// Sum of every sample of `metric` (any labels) on /metrics; 0 when the metric has no sample yet.
    pub async fn metric_sum(&self, metric: &str) -> f64 {
        let (_, body) = self.get("/metrics").await.unwrap_or_default();
        sum_samples(&body, metric)
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([&format!("-{signal}"), &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill -{signal} {}", self.child.id());
    }

    /// SIGKILL: the process dies without releasing anything.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to exit, failing the test after `within`.
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread take the last lines.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return status;
            }
            assert!(start.elapsed() < within, "{} still runs after {within:?}:\n{}", self.name, self.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sum_samples(exposition: &str, metric: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(metric).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Polls `probe` until it returns Some, failing the test with `what` after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    super::poll(what, DEADLINE, Duration::from_millis(50), probe).await
}
