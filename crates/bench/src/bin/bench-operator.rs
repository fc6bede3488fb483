//! `bench-operator`: the operator alone in its own process, so the benchmark reads the operator's CPU time and RSS
//! from /proc and nothing else's: this binary links neither the emulator nor the benchmark, so its mapped code is
//! the operator's, as in the shipped image. With `--report` it prints its reconcile count on stdout whenever the count
//! moved, the signal the restart scenario waits on, and serves /metrics on 127.0.0.1 for the operator's own figures.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use microservice_operator::cli::block_on;
use microservice_operator::controller::{self, Config};
use microservice_operator::health::Health;
use microservice_operator::http;
use microservice_operator::metrics::Metrics;
use tokio::sync::watch;

/// Same allocator as the shipped `microservice-operator` binary, so the figures are the shipped operator's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The Microservice operator alone against a kubeconfig (the benchmark starts this as its child process).
#[derive(Parser, Debug)]
#[command(name = "bench-operator", about)]
struct Args {
    /// The emulator's or control plane's kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The namespace to watch.
    #[arg(long)]
    namespace: String,
    /// Seconds between resyncs of every Microservice.
    #[arg(long, default_value_t = 300)]
    resync_interval: u64,
    /// Print `reconciles N` on stdout whenever the reconcile count moved (at most every 20 ms), and, first,
    /// `metrics ADDRESS` with where this process serves /metrics (on 127.0.0.1, a port of the system's choice).
    #[arg(long)]
    report: bool,
}

/// The shortest time between two lines telling the reconcile count: the resolution of the restart scenario's timing.
const REPORT_EVERY: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("cannot read the kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("cannot build a kube client: {0}")]
    Client(#[source] kube::Error),
    #[error("{0}")]
    Http(#[source] http::HttpError),
    #[error("cannot tell the metrics listener's address: {0}")]
    Listen(#[source] std::io::Error),
}

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    block_on(async {
        match run(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

async fn run(args: Args) -> Result<(), Error> {
    let path = args.kubeconfig.display().to_string();
    let unreadable = |message: String| Error::Kubeconfig { path: path.clone(), message };
    let text = std::fs::read_to_string(&args.kubeconfig).map_err(|e| unreadable(e.to_string()))?;
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| unreadable(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| unreadable(e.to_string()))?;
    let client = Client::try_from(config).map_err(Error::Client)?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new());
    if args.report {
        let listener = http::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.map_err(Error::Http)?;
        let address = listener.local_addr().map_err(Error::Listen)?;
        println!("metrics {address}");
        let router = http::router(metrics.clone(), health.clone());
        tokio::spawn(http::serve(listener, router, std::future::pending()));
        tokio::spawn(keep_report(metrics.clone()));
    }
    let config = Config {
        namespace: Some(args.namespace),
        resync_interval: Duration::from_secs(args.resync_interval.max(1)),
        ..Config::default()
    };
    // The benchmark ends this process with SIGKILL (an abrupt stop is part of the restart scenario).
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let (_always, leader) = watch::channel(true);
    controller::run_elected(client, config, metrics, health, leader, shutdown).await;
    Ok(())
}

async fn keep_report(metrics: Arc<Metrics>) {
    let mut told = None;
    loop {
        // Woken by a reconcile, not by a timer: polling every 20 ms cost ~1.5 ms of CPU per second (perf, an idle
        // operator), counted in the operator's CPU figure over a whole converge though the shipped operator has none.
        metrics.reconciled_since_last_asked().await;
        // A line on a pipe the benchmark drains: a file rewritten and renamed as often was 5% of the operator's CPU
        // figure converging 1,000 Microservices (perf), a cost the shipped operator does not have.
        let reconciles = metrics.reconciles();
        if told != Some(reconciles) {
            let mut out = std::io::stdout().lock();
            match writeln!(out, "reconciles {reconciles}").and_then(|()| out.flush()) {
                Ok(()) => told = Some(reconciles),
                Err(_) => tracing::warn!("cannot print the reconcile count"),
            }
        }
        // At most one line per REPORT_EVERY while reconciles keep finishing; those in between are told by the next.
        tokio::time::sleep(REPORT_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_a_kubeconfig_and_a_namespace() {
        assert!(Args::try_parse_from(["bench-operator", "--namespace", "bench"]).is_err());
        let args = Args::try_parse_from([
            "bench-operator",
            "--kubeconfig",
            "/tmp/k",
            "--namespace",
            "bench",
            "--resync-interval",
            "20",
        ])
        .unwrap();
        assert_eq!(args.resync_interval, 20);
        assert_eq!(args.namespace, "bench");
    }
}
