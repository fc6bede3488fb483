//! `bench`: measures the Microservice operator against the in-process kubesim emulator (pod readiness delay 0, so
//! the operator is what is measured) or, with `--backend real`, a real control plane with kwok nodes. The operator
//! runs in a child process (the `bench-operator` binary beside this one) so its CPU time and peak RSS are its own.
//! Each scenario prints a table with its targets and writes JSON under `target/bench/`.

mod calibrate;
mod child;
mod commit_order;
mod env;
mod error;
mod fixture;
mod floor;
mod observe;
mod report;
mod rollout;
mod scenarios;
mod scrape;
mod spread;

use std::process::ExitCode;

use clap::Parser;
use microservice_operator::cli::block_on;

use crate::scenarios::RunArgs;

/// Benchmarks of the Microservice operator against the in-process emulator or a real control plane.
#[derive(Parser)]
#[command(name = "bench", about)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

/// The allocator: glibc's malloc and free were about a quarter of the operator's CPU time converging 1,000
/// Microservices (perf), most of it in the short-lived objects of decoding watch events.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The control-plane harness polls kube-apiserver before it is up; kube's client logs each refused
                // probe as an error.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    block_on(async {
        tokio::select! {
            result = scenarios::run(cli.run) => match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            },
            // Dropping the run stops what it started: the operator child and the control plane's processes.
            signal = stopped() => {
                eprintln!("bench: {signal}; the operator and the cluster were stopped, reports so far are written");
                ExitCode::from(130)
            }
        }
    })
}

/// Resolves on SIGINT or SIGTERM; never when neither can be listened for.
async fn stopped() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => "interrupted",
        Some(()) = async { term.as_mut()?.recv().await } => "terminated",
        else => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::Scenario;

    #[test]
    fn parses_sizes_and_scenarios() {
        let cli = Cli::try_parse_from(["bench", "--n", "100,1000", "--scenario", "converge,drift"]).unwrap();
        assert_eq!(cli.run.n, vec![100, 1000]);
        assert_eq!(cli.run.scenario, vec![Scenario::Converge, Scenario::Drift]);
        assert_eq!(cli.run.repeat, 1);
    }

    #[test]
    fn repeats_at_least_once() {
        assert_eq!(Cli::try_parse_from(["bench", "--repeat", "3"]).unwrap().run.repeat, 3);
        assert!(Cli::try_parse_from(["bench", "--repeat", "0"]).is_err());
    }

    #[test]
    fn the_unrelated_scenario_runs_only_when_named() {
        let all = Cli::try_parse_from(["bench"]).unwrap();
        assert!(all.run.wants(Scenario::Update) && !all.run.wants(Scenario::Unrelated));
        let named = Cli::try_parse_from(["bench", "--scenario", "converge,unrelated", "--unrelated", "500"]).unwrap();
        assert!(named.run.wants(Scenario::Unrelated) && !named.run.wants(Scenario::Drift));
        assert_eq!(named.run.unrelated, 500);
    }
}
