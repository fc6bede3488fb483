//! `bench operator`: the operator alone in this process, so the benchmark can read its CPU time and RSS from
//! /proc. With `--report-file` it keeps a small JSON file current with its reconcile count, the signal the
//! restart scenario waits on (the operator has no HTTP endpoint of its own here).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use microservice_operator::controller::{self, Config};
use microservice_operator::metrics::Metrics;

use crate::error::{BenchError, Result};
use crate::fixture::NAMESPACE;

#[derive(clap::Args, Debug)]
pub struct OperatorArgs {
    /// The emulator's kubeconfig.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The namespace to watch.
    #[arg(long, default_value = NAMESPACE)]
    pub namespace: String,
    /// Seconds between resyncs of every Microservice.
    #[arg(long, default_value_t = 300)]
    pub resync_interval: u64,
    /// Keep `{"reconciles": N}` current in this file (rewritten every 20 ms).
    #[arg(long)]
    pub report_file: Option<PathBuf>,
}

/// How often the report file is rewritten: the resolution of the restart scenario's timing.
pub const REPORT_EVERY: Duration = Duration::from_millis(20);

pub async fn run(args: OperatorArgs) -> Result<()> {
    let path = args.kubeconfig.display().to_string();
    let text = std::fs::read_to_string(&args.kubeconfig)
        .map_err(|e| BenchError::Kubeconfig { path: path.clone(), message: e.to_string() })?;
    let kubeconfig = Kubeconfig::from_yaml(&text)
        .map_err(|e| BenchError::Kubeconfig { path: path.clone(), message: e.to_string() })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| BenchError::Kubeconfig { path: path.clone(), message: e.to_string() })?;
    let client = Client::try_from(config).map_err(BenchError::kube("cannot build a kube client"))?;
    let metrics = Arc::new(Metrics::new());
    if let Some(report) = args.report_file.clone() {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let tmp = report.with_extension("tmp");
            let mut written = None;
            loop {
                // Only a new count is written: the file costs the operator's CPU figure a write and a rename.
                let reconciles = metrics.reconciles();
                if written != Some(reconciles) {
                    let body = format!("{{\"reconciles\": {reconciles}}}\n");
                    // Rename is atomic, so the reader never sees a half-written file.
                    match std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, &report)) {
                        Ok(()) => written = Some(reconciles),
                        Err(_) => tracing::warn!(path = %report.display(), "cannot write the report file"),
                    }
                }
                tokio::time::sleep(REPORT_EVERY).await;
            }
        });
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
    controller::run(client, config, metrics, shutdown).await;
    Ok(())
}
