//! `kubectl microservice wait NAME --for ready`: blocks on a watch of one Microservice until it is Ready for its
//! current generation (exit 0), Degraded or refused for it (1), or the timeout passes (2). For CI right after
//! `kubectl apply`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::status::ClusterArgs;
use crate::view::{Verdict, format_duration, parse_duration, verdict};
use microservice_core::crd::Microservice;

/// Exit codes, for scripts.
pub const EXIT_READY: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_TIMEOUT: u8 = 2;
/// Could not check at all: bad kubeconfig, unreachable cluster, the resource type not installed.
pub const EXIT_ERROR: u8 = 3;

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Condition {
    /// Ready for the current generation: every replica runs the spec's image and is available.
    #[default]
    Ready,
}

/// Wait until a Microservice is Ready for its current generation. Exit 0 when Ready, 1 when Degraded or its spec is
/// refused (printing why and what to do), 2 on timeout, 3 when the cluster cannot be queried.
#[derive(clap::Args, Debug, Clone)]
pub struct WaitArgs {
    /// The Microservice to wait for (it may not exist yet: it is waited for too).
    pub name: String,
    /// Namespace; default: the kubeconfig context's namespace.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(long = "for", value_enum, default_value_t = Condition::Ready)]
    pub condition: Condition,
    /// How long to wait, e.g. 90s, 2m, 1h.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ready { message: String },
    Failed { reason: String, message: String, next_step: Option<String> },
    TimedOut { last: String },
}

impl Outcome {
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Ready { .. } => EXIT_READY,
            Outcome::Failed { .. } => EXIT_FAILED,
            Outcome::TimedOut { .. } => EXIT_TIMEOUT,
        }
    }
}

/// Transient feedback while something takes time: a spinner on a terminal, timestamped lines otherwise.
pub struct Progress {
    spinner: Option<ProgressBar>,
    terminal: bool,
    stdout: bool,
    start: Instant,
    last: String,
}

impl Progress {
    /// Progress on stderr (so stdout stays the command's result).
    pub fn stderr() -> Progress {
        Progress::new(false, std::io::stderr().is_terminal())
    }

    /// Progress on stdout, for commands whose output is the narration.
    pub fn stdout() -> Progress {
        Progress::new(true, std::io::stdout().is_terminal())
    }

    fn new(stdout: bool, terminal: bool) -> Progress {
        Progress { spinner: None, terminal, stdout, start: Instant::now(), last: String::new() }
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }

    fn stamp(&self) -> String {
        format!("[{:>6.1}s]", self.start.elapsed().as_secs_f64())
    }

    fn print(&self, line: &str) {
        if self.stdout {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    }

    /// The current state; on a terminal it replaces the previous one, otherwise each new state is a line.
    pub fn spin(&mut self, message: &str) {
        if message == self.last {
            return;
        }
        self.last = message.to_string();
        if !self.terminal {
            self.print(&format!("{} {message}", self.stamp()));
            return;
        }
        let spinner = self.spinner.get_or_insert_with(|| {
            let target = if self.stdout { ProgressDrawTarget::stdout() } else { ProgressDrawTarget::stderr() };
            let bar = ProgressBar::with_draw_target(None, target);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        spinner.set_message(message.to_string());
    }

    /// A line that stays.
    pub fn note(&self, line: &str) {
        let line = format!("{} {line}", self.stamp());
        match &self.spinner {
            Some(spinner) if self.terminal => spinner.suspend(|| self.print(&line)),
            _ => self.print(&line),
        }
    }

    /// Removes the spinner (before a final result is printed).
    pub fn clear(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
        self.last.clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error(transparent)]
    Connect(#[from] crate::status::ConnectError),
    #[error(transparent)]
    Query(#[from] crate::status::QueryError),
}

/// Follows Microservice `namespace/name` on a watch until it is ready or failed for its current generation, or
/// `timeout` passes. A Microservice that does not exist yet is waited for (a pipeline may create it next).
pub async fn wait_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<Outcome, WaitError> {
    let api: Api<Microservice> = Api::namespaced(client.clone(), namespace);
    // One cheap request first, so an unreachable cluster or a missing CRD is an error now, not a timeout later.
    api.list(&ListParams::default().limit(1)).await.map_err(|e| WaitError::Query(crate::status::api_error(e)))?;
    let mut last = format!("Microservice {namespace}/{name} does not exist");
    // Check once before watching: with `--timeout 0s` this is the answer (the deadline would otherwise win the
    // race against the watch's first event), and an object already Ready or refused needs no watch.
    if let Some(ms) = api.get_opt(name).await.map_err(|e| WaitError::Query(crate::status::QueryError::Api(e)))? {
        match verdict(&ms) {
            Verdict::Ready => return Ok(Outcome::Ready { message: ready_message(&ms) }),
            Verdict::Failed { reason, message, next_step } => {
                return Ok(Outcome::Failed { reason, message, next_step });
            }
            Verdict::Waiting(what) => last = what,
        }
    }
    if timeout.is_zero() {
        return Ok(Outcome::TimedOut { last });
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut stream = watcher::watch_object(api, name).default_backoff().boxed();
    progress.spin(&format!("waiting for {namespace}/{name}: connecting"));
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            () = tokio::time::sleep_until(deadline) => return Ok(Outcome::TimedOut { last }),
        };
        match event {
            None => return Ok(Outcome::TimedOut { last: format!("{last} (the watch ended)") }),
            Some(Err(err)) => progress.note(&format!("watch interrupted, resuming: {err}")),
            Some(Ok(None)) => {
                last = format!("Microservice {namespace}/{name} does not exist");
                progress.spin(&format!("waiting for {namespace}/{name}: it does not exist (yet)"));
            }
            Some(Ok(Some(ms))) => match verdict(&ms) {
                Verdict::Ready => {
                    let message = ready_message(&ms);
                    return Ok(Outcome::Ready { message });
                }
                Verdict::Failed { reason, message, next_step } => {
                    return Ok(Outcome::Failed { reason, message, next_step });
                }
                Verdict::Waiting(what) => {
                    last = what;
                    progress.spin(&format!("waiting for {namespace}/{}: {last}", ms.name_any()));
                }
            },
        }
    }
}

fn ready_message(ms: &Microservice) -> String {
    ms.condition(microservice_core::crd::ConditionType::Ready).map(|c| c.message.to_string()).unwrap_or_default()
}

pub async fn run(args: WaitArgs) -> ExitCode {
    let client = match args.cluster.client().await {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let name = &args.name;
    let mut progress = Progress::stderr();
    let started = Instant::now();
    let outcome = wait_ready(&client, &namespace, name, args.timeout, &mut progress).await;
    progress.clear();
    let waited = format_duration(started.elapsed());
    match outcome {
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(EXIT_ERROR)
        }
        Ok(outcome) => {
            match &outcome {
                Outcome::Ready { message } => println!("{namespace}/{name} is Ready after {waited}: {message}"),
                Outcome::Failed { reason, message, next_step } => {
                    eprintln!("{namespace}/{name} is not going to become Ready: {reason}: {message}");
                    if let Some(next) = next_step {
                        eprintln!("next: {next}");
                    }
                }
                Outcome::TimedOut { last } => eprintln!(
                    "timed out after {} waiting for {namespace}/{name} to be Ready; last seen: {last}",
                    format_duration(args.timeout)
                ),
            }
            ExitCode::from(outcome.exit_code())
        }
    }
}
