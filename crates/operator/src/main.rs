use std::process::ExitCode;

use clap::{Parser, Subcommand};
use microservice_operator::cli::manifests::{self, ManifestsArgs};
use microservice_operator::crd::crd_yaml;
use microservice_operator::profile::PlatformProfile;

/// Runs Todo API Microservices on Kubernetes as Deployments and Services.
#[derive(Parser)]
#[command(name = "microservice-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Microservice CustomResourceDefinition as YAML (what `deploy/crd.yaml` holds).
    Crd,
    /// Print the default platform profile as YAML, a starting point for a profile file.
    Profile,
    /// Print the install bundle (what `kubectl kustomize deploy` renders): pipe it to `kubectl apply -f -`.
    Manifests(ManifestsArgs),
    /// Show each Microservice: phase, generations, replicas, the rolled-out image, and for anything not Ready why
    /// and what to do next.
    Status(microservice_operator::cli::status::StatusArgs),
    /// Wait until a Microservice is Ready for its current generation: exit 0 Ready, 1 Degraded or refused, 2 on
    /// timeout, 3 when the cluster cannot be queried.
    Wait(microservice_operator::cli::wait::WaitArgs),
    /// Start an in-process cluster (kubesim) and the operator, and walk through what the operator does.
    Demo(microservice_operator::cli::demo::DemoArgs),
}

/// Runs an async subcommand on a multi-threaded tokio runtime.
fn block_on(command: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(command),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let output = match cli.command {
        Command::Crd => crd_yaml().map_err(|e| format!("cannot render the CRD: {e}")),
        Command::Manifests(args) => {
            return match tokio::runtime::Builder::new_current_thread().build() {
                Ok(runtime) => runtime.block_on(manifests::run(args)),
                Err(e) => {
                    eprintln!("error: cannot start the async runtime: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Profile => {
            serde_saphyr::to_string(&PlatformProfile::default()).map_err(|e| format!("cannot render the profile: {e}"))
        }
        Command::Status(args) => return block_on(microservice_operator::cli::status::run(args)),
        Command::Wait(args) => return block_on(microservice_operator::cli::wait::run(args)),
        Command::Demo(args) => return block_on(microservice_operator::cli::demo::run(args)),
    };
    match output {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
