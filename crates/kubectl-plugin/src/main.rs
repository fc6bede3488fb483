//! The `kubectl-microservice` binary: on PATH, kubectl runs it for `kubectl microservice …`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kubectl_microservice::{demo, status, wait};
// The one runtime set-up for both binaries.
use microservice_operator::cli::block_on;

/// Shows and waits for Microservices, and demonstrates the operator on an in-process cluster.
#[derive(Parser)]
#[command(name = "kubectl-microservice", bin_name = "kubectl microservice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show each Microservice: phase, generations, replicas, the rolled-out image, and for anything not Ready why
    /// and what to do next.
    Status(status::StatusArgs),
    /// Wait until a Microservice is Ready for its current generation: exit 0 Ready, 1 Degraded or refused, 2 on
    /// timeout, 3 when the cluster cannot be queried.
    Wait(wait::WaitArgs),
    /// Start an in-process cluster (kubesim) and the operator, and walk through what the operator does.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Status(args) => block_on(status::run(args)),
        Command::Wait(args) => block_on(wait::run(args)),
        Command::Demo(args) => block_on(demo::run(args)),
    }
}
