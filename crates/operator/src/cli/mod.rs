//! The binary's subcommands, one module each (`main.rs` only dispatches). The commands for people (status, wait,
//! demo) live in the `kubectl-microservice` plugin crate.

pub mod manifests;
pub mod run;

use std::future::Future;
use std::process::ExitCode;

/// Subcommands are async library functions (so tests can call them); a binary gives them a multi-threaded runtime
/// (this one and the `kubectl-microservice` plugin's).
pub fn block_on(command: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(command),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}
