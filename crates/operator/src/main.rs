use std::process::ExitCode;

use clap::{Parser, Subcommand};
use microservice_core::crd::crd_yaml;
use microservice_core::profile::PlatformProfile;
use microservice_operator::cli::block_on;
use microservice_operator::cli::manifests::{self, ManifestsArgs};
use microservice_operator::cli::run::{self, RunArgs};

/// The allocator: glibc's malloc and free were about a quarter of the operator's CPU time converging 1,000
/// Microservices (perf), most of it in the short-lived objects of decoding watch events.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Runs Todo API Microservices on Kubernetes as Deployments and Services.
#[derive(Parser)]
#[command(name = "microservice-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against a cluster (in-cluster or through a kubeconfig).
    Run(Box<RunArgs>),
    /// Print the Microservice CustomResourceDefinition as YAML (what `deploy/crd.yaml` holds).
    Crd,
    /// Print the default platform profile as YAML, a starting point for a profile file.
    Profile,
    /// Print the install bundle (what `kubectl kustomize deploy` renders): pipe it to `kubectl apply -f -`.
    Manifests(ManifestsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => block_on(run::run(*args)),
        Command::Manifests(args) => block_on(manifests::run(args)),
        Command::Crd => print(crd_yaml().map_err(|e| format!("cannot render the CRD: {e}"))),
        Command::Profile => print(
            serde_saphyr::to_string(&PlatformProfile::default()).map_err(|e| format!("cannot render the profile: {e}")),
        ),
    }
}

fn print(output: Result<String, String>) -> ExitCode {
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
