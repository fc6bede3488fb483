//! kubesim conformance: a differential suite. Scenarios (HTTP request sequences, as data) run against the real
//! kube-apiserver, whose normalised answers are recorded in `recorded/`; the hermetic test runs them against
//! kubesim and compares. See the crate README for the layout, the normalisation rules and the commands.

pub mod diff;
pub mod normalize;
pub mod pointer;
pub mod record;
pub mod runner;
pub mod scenario;
pub mod sequence;
pub mod target;

/// Everything that can go wrong loading, running or recording scenarios.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("scenario {path}: {message}")]
    Scenario { path: String, message: String },
    #[error("recording {path}: {message}")]
    Recording { path: String, message: String },
    #[error("target: {0}")]
    Target(String),
    #[error("request {step}: {message}")]
    Request { step: String, message: String },
    #[error("control plane: {0}")]
    ControlPlane(String),
}

/// Pods running this image start but never become Ready, on both servers (kwok's stage and kubesim's image rule):
/// the controller scenarios' rollout that hits its progress deadline.
pub const NEVER_READY_IMAGE: &str = "registry.example/never-ready:1";

/// Starts kubesim as the suite compares it: RBAC enforced (the real server enforces it), controllers on, pods
/// Ready at once except for [`NEVER_READY_IMAGE`] (as testkit's control plane with its default pod delay).
pub async fn start_kubesim() -> Result<(kubesim::Sim, target::Target), Error> {
    use kubesim::controllers::{ControllerConfig, ImageRule, PodBehaviour};
    let controllers = ControllerConfig {
        image_rules: vec![ImageRule {
            image_contains: NEVER_READY_IMAGE.to_string(),
            behaviour: PodBehaviour::NeverReady,
        }],
        ..ControllerConfig::default()
    };
    let sim = kubesim::Sim::builder()
        .rbac(true)
        .controllers(controllers)
        .start()
        .await
        .map_err(|e| Error::Target(e.to_string()))?;
    let target = target::Target::direct("kubesim", &sim.https_url(), Some(sim.ca_pem()), sim.token()).await?;
    Ok((sim, target))
}

/// Runs `scenarios` against kubesim and compares each with its recording.
pub async fn check_kubesim(scenarios: &[scenario::Scenario]) -> Result<Vec<record::Verdict>, Error> {
    let (_sim, target) = start_kubesim().await?;
    let mut verdicts = Vec::new();
    for s in scenarios {
        let Some(rec) = record::load(&s.id)? else {
            verdicts.push(record::Verdict::Unrecorded);
            continue;
        };
        let run = runner::run(&target, s).await;
        let lines = record::compare(&rec.run, &run);
        verdicts.push(if lines.is_empty() { record::Verdict::Identical } else { record::Verdict::Different(lines) });
    }
    Ok(verdicts)
}
