//! The binary's subcommands, one module each (`main.rs` only dispatches). The commands for people (status, wait,
//! demo) live in the `kubectl-microservice` plugin crate.

pub mod manifests;
pub mod run;

use std::future::Future;
use std::process::ExitCode;

/// Subcommands are async library functions (so tests can call them); a binary gives them a multi-threaded runtime
/// (this one and the `kubectl-microservice` plugin's). The command runs as a task, on the runtime's workers: polled
/// by `block_on` on the main thread instead, every task it spawns and awaits (a reconcile each) crossed between the
/// main thread and a worker twice, two thread wake-ups per reconcile.
pub fn block_on(command: impl Future<Output = ExitCode> + Send + 'static) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = runtime.spawn(command);
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: the command stopped abnormally: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_runs_on_a_runtime_worker_not_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let elsewhere = block_on(async move {
            if std::thread::current().id() == caller { ExitCode::from(3) } else { ExitCode::SUCCESS }
        });
        assert_eq!(elsewhere, ExitCode::SUCCESS);
    }

    #[test]
    fn a_command_that_panics_fails_instead_of_taking_the_process_down() {
        assert_eq!(block_on(async { panic!("a bug") }), ExitCode::FAILURE);
    }
}
