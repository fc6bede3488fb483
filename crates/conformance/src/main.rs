//! `kubesim-conformance record` re-records the real server's answers; `fidelity` prints the figure.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use conformance::{Error, record, runner, scenario, target::Target};
use microservice_testkit::control_plane::ADMIN;
use microservice_testkit::{ControlPlane, Options};

#[derive(Parser)]
#[command(about = "kubesim's differential conformance suite")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the scenarios against a real kube-apiserver and store its normalised answers in recorded/.
    Record {
        /// The real server's kubeconfig; without it a local control plane is started from the built binaries.
        #[arg(long, env = "CONFORMANCE_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Only scenarios whose id starts with this.
        #[arg(long, default_value = "")]
        only: String,
        /// Runs of each controller-sequence scenario (the real controllers are concurrent: the recording says
        /// whether the runs agreed).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// Run the scenarios against kubesim and print identical scenarios out of all, per area, and every difference.
    Fidelity {
        #[arg(long, default_value = "")]
        only: String,
    },
    /// Run the scenarios against any server and print its normalised answers (for writing scenarios).
    Show {
        #[arg(long, env = "CONFORMANCE_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        #[arg(long, default_value = "")]
        only: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn select(only: &str) -> Result<Vec<scenario::Scenario>, Error> {
    let all = scenario::load_all(&record::scenarios_dir())?;
    Ok(all.into_iter().filter(|s| s.id.starts_with(only)).collect())
}

async fn server_version(target: &Target) -> String {
    match target.admin().apiserver_version().await {
        Ok(v) => v.git_version,
        Err(e) => format!("unknown ({e})"),
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Record { kubeconfig, only, repeat } => {
            let scenarios = select(&only)?;
            let (_plane, target) = real_target(kubeconfig).await?;
            let server = server_version(&target).await;
            let recorded_at = jiff::Timestamp::now().to_string();
            let mut failed = 0;
            for s in &scenarios {
                let run = runner::run(&target, s).await;
                if let Some(f) = &run.failure {
                    failed += 1;
                    eprintln!("{}: {f}", s.id);
                }
                let stability = if s.file.steps.iter().any(|st| st.sequence.is_some()) {
                    let st = stability(&target, s, &run, repeat).await;
                    println!("{}: {st}", s.id);
                    Some(st)
                } else {
                    None
                };
                record::store(&record::Recording {
                    server: server.clone(),
                    recorded_at: recorded_at.clone(),
                    stability,
                    run,
                })?;
            }
            println!("recorded {} scenarios against {server} ({failed} stopped early)", scenarios.len());
            Ok(ExitCode::SUCCESS)
        }
        Command::Fidelity { only } => {
            let scenarios = select(&only)?;
            let verdicts = conformance::check_kubesim(&scenarios).await?;
            let known = record::known_deviations()?;
            print!("{}", record::report(&scenarios, &verdicts, &known));
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { kubeconfig, only } => {
            let scenarios = select(&only)?;
            let (_sim, target) = match kubeconfig {
                Some(p) => (None, Target::from_kubeconfig("server", &p).await?),
                None => {
                    let (sim, t) = conformance::start_kubesim().await?;
                    (Some(sim), t)
                }
            };
            for s in &scenarios {
                let run = runner::run(&target, s).await;
                println!("{}", serde_json::to_string_pretty(&run).unwrap_or_default());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Runs `s` `repeat - 1` more times (each in its own namespace) and counts the runs whose compared answers and raw
/// status sequences agree with the first run's.
async fn stability(target: &Target, s: &scenario::Scenario, first: &runner::Run, repeat: usize) -> record::Stability {
    let raw = |r: &runner::Run| -> Vec<_> { r.outcomes.iter().map(|o| o.observed_sequence.clone()).collect() };
    let runs = repeat.max(1);
    let mut st = record::Stability { runs, compared_identical: 1, raw_identical: 1, differences: Vec::new() };
    for k in 2..=runs {
        let mut again = s.clone();
        again.file.namespace = Some(format!("{}-r{k}", s.namespace()));
        let run = runner::run(target, &again).await;
        let lines = record::compare(first, &run);
        if lines.is_empty() {
            st.compared_identical += 1;
        } else {
            st.differences.push(format!("run {k}: {}", lines.join("; ")));
        }
        st.raw_identical += usize::from(raw(first) == raw(&run));
    }
    st
}

/// The real server: the given kubeconfig, or testkit's control plane started for this run (stopped on drop).
async fn real_target(kubeconfig: Option<PathBuf>) -> Result<(Option<ControlPlane>, Target), Error> {
    if let Some(p) = kubeconfig {
        return Ok((None, Target::from_kubeconfig("real", &p).await?));
    }
    let options =
        Options { never_ready_images: vec![conformance::NEVER_READY_IMAGE.to_string()], ..Options::default() };
    let plane = ControlPlane::start(options).await.map_err(|e| Error::ControlPlane(e.to_string()))?;
    let token = plane.token(ADMIN).map_err(|e| Error::ControlPlane(e.to_string()))?.to_string();
    let target = Target::direct("kube-apiserver", plane.url(), Some(plane.ca_pem()), &token).await?;
    Ok((Some(plane), target))
}
