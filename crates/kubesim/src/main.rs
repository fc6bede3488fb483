//! `kubesim serve`: the emulator as a process, for kubectl, demos and operators run from the shell.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use kubesim::Sim;
use kubesim::faults::FaultConfig;

#[derive(Parser)]
#[command(name = "kubesim", about = "An in-memory Kubernetes API server emulator", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the emulated API on 127.0.0.1 until interrupted.
    Serve {
        /// 0 picks a free port.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Where to write a kubeconfig for the server (URL + bearer token).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// /readyz fails for this many milliseconds after start.
        #[arg(long, default_value_t = 0)]
        ready_delay_ms: u64,
        /// A JSON file with the fault configuration (see /_kubesim/faults).
        #[arg(long)]
        faults: Option<PathBuf>,
        /// The bearer token clients must present.
        #[arg(long, default_value = "kubesim-token")]
        token: String,
        /// Enforce RBAC (the kubeconfig's token stays system:admin in system:masters); ServiceAccount tokens
        /// come from `kubectl create token NAME -n NAMESPACE`.
        #[arg(long)]
        rbac: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve { port, kubeconfig, ready_delay_ms, faults, token, rbac } => {
            let fault_config = match faults {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
                    serde_json::from_str::<FaultConfig>(&text)
                        .map_err(|e| anyhow::anyhow!("invalid fault configuration in {}: {e}", path.display()))?
                }
                None => FaultConfig::default(),
            };
            let sim = Sim::builder()
                .port(port)
                .token(token)
                .rbac(rbac)
                .faults(fault_config)
                .ready_delay(Duration::from_millis(ready_delay_ms))
                .start()
                .await?;
            if let Some(path) = &kubeconfig {
                sim.write_kubeconfig(path)?;
            }
            println!("kubesim listening on {}", sim.https_url());
            if let Some(path) = &kubeconfig {
                println!("kubeconfig written to {}", path.display());
            }
            tokio::signal::ctrl_c().await?;
            drop(sim);
            Ok(())
        }
    }
}
