//! How the query tools and the demo put a Microservice into words: the one-row summary, the verdict a CI job waits
//! for, and the next step for every status reason. Pure functions over the CR and its children.

use std::fmt::Write as _;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use serde::Serialize;

use microservice_core::crd::{Condition, ConditionStatus, ConditionType, Microservice};
use microservice_core::reason::Reason;

/// Reason shown when the operator has not yet acted on the current generation.
pub const NOT_OBSERVED: &str = Reason::NotObserved.as_str();

/// What `status` shows for one Microservice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    /// The status phase; none (`-` in tables) before the operator wrote one.
    pub phase: Option<String>,
    /// metadata.generation: the spec version asked for.
    pub generation: Option<i64>,
    /// status.observedGeneration: the newest spec version the operator acted on.
    pub observed_generation: Option<i64>,
    pub ready_replicas: Option<i32>,
    pub desired_replicas: Option<i32>,
    /// The image every replica runs (status.image), once a rollout completed.
    pub image: Option<String>,
    /// The image the spec asks for.
    pub spec_image: String,
    /// Ready for the current generation.
    pub ready: bool,
    /// For anything not ready: the machine-readable cause, the operator's explanation and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

/// Whether a Microservice is done, broken or still on its way, for its current generation only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Ready=True with observedGeneration == metadata.generation.
    Ready,
    /// Degraded=True or Accepted=False for the current generation: waiting longer will not help.
    Failed { reason: String, message: String, next_step: Option<String> },
    /// Anything else, with what is happening in words.
    Waiting(String),
}

/// The condition if it was computed for the object's current generation.
fn current(ms: &Microservice, type_: ConditionType) -> Option<&Condition> {
    let generation = ms.metadata.generation;
    ms.condition(type_).filter(|c| generation.is_some() && c.observed_generation == generation)
}

fn observed_current(ms: &Microservice) -> bool {
    let generation = ms.metadata.generation;
    generation.is_some() && ms.status.as_ref().and_then(|s| s.observed_generation) == generation
}

pub fn verdict(ms: &Microservice) -> Verdict {
    let name = ms.metadata.name.as_deref().unwrap_or_default();
    let namespace = ms.metadata.namespace.as_deref().unwrap_or_default();
    let generation = ms.metadata.generation.map_or_else(|| "?".to_string(), |g| g.to_string());
    if !observed_current(ms) {
        return Verdict::Waiting(format!("waiting for the operator to act on generation {generation}"));
    }
    let is = |type_, status| current(ms, type_).filter(|c| c.status == status);
    if is(ConditionType::Ready, ConditionStatus::True).is_some() {
        return Verdict::Ready;
    }
    let failed =
        is(ConditionType::Accepted, ConditionStatus::False).or(is(ConditionType::Degraded, ConditionStatus::True));
    if let Some(c) = failed {
        return Verdict::Failed {
            reason: c.reason.to_string(),
            message: c.message.to_string(),
            next_step: next_step(&c.reason, namespace, name),
        };
    }
    match current(ms, ConditionType::Ready) {
        Some(c) => Verdict::Waiting(format!("{}: {}", c.reason, c.message)),
        None => Verdict::Waiting(format!("waiting for the operator to report on generation {generation}")),
    }
}

/// What a service team should do about a status reason; None when there is nothing to do. Chosen from the reason
/// (parsed into the core's [`Reason`]); one this version does not know gets the general advice.
pub fn next_step(reason: &str, namespace: &str, name: &str) -> Option<String> {
    match reason.parse::<Reason>() {
        Ok(reason) => reason.next_step(namespace, name),
        Err(_) => Some(Reason::describe_step(namespace, name)),
    }
}

impl ServiceView {
    pub fn of(ms: &Microservice) -> ServiceView {
        let status = ms.status.clone().unwrap_or_default();
        let namespace = ms.metadata.namespace.clone().unwrap_or_default();
        let name = ms.metadata.name.clone().unwrap_or_default();
        // "ready/desired" carries the desired count the operator chose (the spec may leave it to the platform).
        let desired = status
            .replicas_summary
            .as_deref()
            .and_then(|s| s.split_once('/'))
            .and_then(|(_, d)| d.parse().ok())
            .or(ms.spec.replicas);
        let (ready, reason, message) = match verdict(ms) {
            Verdict::Ready => (true, None, None),
            Verdict::Failed { reason, message, .. } => (false, Some(reason), Some(message)),
            Verdict::Waiting(text) => match current(ms, ConditionType::Ready) {
                Some(c) => (false, Some(c.reason.to_string()), Some(c.message.to_string())),
                None => (false, Some(NOT_OBSERVED.to_string()), Some(text)),
            },
        };
        let next = reason.as_deref().and_then(|r| next_step(r, &namespace, &name));
        ServiceView {
            phase: status.phase.map(|p| format!("{p:?}")),
            generation: ms.metadata.generation,
            observed_generation: status.observed_generation,
            ready_replicas: status.ready_replicas,
            desired_replicas: desired,
            image: status.image.map(|i| i.to_string()),
            spec_image: ms.spec.image.to_string(),
            ready,
            reason,
            message,
            next_step: next,
            namespace,
            name,
        }
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// A kubectl-like table; rows that are not Ready are followed by their reason and next step.
pub fn render_table(views: &[ServiceView], with_namespace: bool) -> String {
    if views.is_empty() {
        return "No Microservices found.\n".to_string();
    }
    let mut header = vec!["NAME", "PHASE", "GENERATION", "OBSERVED", "READY", "IMAGE"];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    let rows: Vec<Vec<String>> = views
        .iter()
        .map(|v| {
            let mut row = vec![
                v.name.clone(),
                opt(v.phase.as_ref()),
                opt(v.generation),
                opt(v.observed_generation),
                match (v.ready_replicas, v.desired_replicas) {
                    (None, None) => "-".to_string(),
                    (ready, desired) => format!("{}/{}", ready.unwrap_or(0), opt(desired)),
                },
                opt(v.image.as_deref()),
            ];
            if with_namespace {
                row.insert(0, v.namespace.clone());
            }
            row
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("{}\n", padded.join("   ").trim_end())
    };
    let mut out = line(header.clone());
    for (view, row) in views.iter().zip(&rows) {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        if let (Some(reason), Some(message)) = (&view.reason, &view.message) {
            let _ = writeln!(out, "  why:  {reason}: {message}");
        }
        if view.image.as_deref() != Some(view.spec_image.as_str()) && !view.ready {
            let _ = writeln!(out, "  spec: {}", view.spec_image);
        }
        if let Some(next) = &view.next_step {
            let _ = writeln!(out, "  next: {next}");
        }
    }
    out
}

/// `{"items": [...]}`, stable field names (camelCase), for scripts.
pub fn render_json(views: &[ServiceView]) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&serde_json::json!({ "items": views })).map(|s| s + "\n")
}

/// One line of the demo's live view: the CR's state and what its Deployment and Service look like.
pub fn live_line(ms: Option<&Microservice>, deployment: Option<&Deployment>, service: Option<&Service>) -> String {
    let mut out = String::new();
    match ms {
        None => out.push_str("microservice: absent"),
        Some(ms) => {
            let v = ServiceView::of(ms);
            let _ = write!(
                out,
                "{}: {} gen {}/{} ready {}/{}",
                v.name,
                opt(v.phase.as_ref()),
                opt(v.observed_generation),
                opt(v.generation),
                v.ready_replicas.unwrap_or(0),
                opt(v.desired_replicas)
            );
            if let Some(image) = &v.image {
                let _ = write!(out, " serving {}", short_image(image));
            }
        }
    }
    out.push_str(" | deploy: ");
    match deployment {
        None => out.push_str("absent"),
        Some(d) => {
            let status = d.status.clone().unwrap_or_default();
            let image = d
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref())
                .map(short_image)
                .unwrap_or("-");
            let _ = write!(
                out,
                "{image} {}/{} available, {} updated, {} total",
                status.available_replicas.unwrap_or(0),
                d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                status.updated_replicas.unwrap_or(0),
                status.replicas.unwrap_or(0)
            );
        }
    }
    out.push_str(" | svc: ");
    match service.and_then(|s| s.spec.as_ref()) {
        None => out.push_str("absent"),
        Some(spec) => {
            let ip = spec.cluster_ip.as_deref().unwrap_or("-");
            let port = spec.ports.iter().flatten().next().map(|p| p.port.to_string()).unwrap_or_else(|| "-".into());
            let _ = write!(out, "{ip}:{port}");
        }
    }
    out
}

/// The tag (or digest) part of an image, which is what changes between versions.
fn short_image(image: &str) -> &str {
    image.rsplit('/').next().unwrap_or(image)
}

/// A state change worth a line: phase, generation and the conditions' reasons.
pub fn transition_key(ms: &Microservice) -> String {
    let status = ms.status.clone().unwrap_or_default();
    let conditions: Vec<String> = status
        .conditions
        .iter()
        .map(|c| format!("{}={:?}/{}@{}", c.type_.as_str(), c.status, c.reason, opt(c.observed_generation)))
        .collect();
    format!(
        "{:?} {} {:?} {}",
        status.phase,
        opt(ms.metadata.generation),
        status.observed_generation,
        conditions.join(",")
    )
}

/// The sentence for a state the CR entered, e.g. "todo-api generation 2: Progressing (Accepted): RolloutInProgress:
/// 1/2 updated replicas available for generation 2".
pub fn transition_line(ms: &Microservice) -> String {
    let v = ServiceView::of(ms);
    let generation = opt(v.generation);
    if !observed_current(ms) {
        return format!("{} generation {generation}: submitted; the operator has not acted on it yet", v.name);
    }
    let accepted = match current(ms, ConditionType::Accepted).map(|c| c.status) {
        Some(ConditionStatus::True) => " (Accepted)",
        Some(ConditionStatus::False) => " (not Accepted)",
        _ => "",
    };
    let mut line = format!("{} generation {generation}: {}{accepted}", v.name, opt(v.phase.as_ref()));
    match (&v.reason, &v.message) {
        (Some(reason), Some(message)) => {
            let _ = write!(line, ": {reason}: {message}");
        }
        _ => {
            if let Some(c) = current(ms, ConditionType::Ready) {
                let _ = write!(line, ": {}", c.message);
            }
        }
    }
    line
}

/// Durations as people write them, parsed by humantime: `90s`, `2m`, `1h30m`, `1.5s`, `500ms`; a bare number is
/// seconds (as kubectl's `--timeout=45` is).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is not a usable duration"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 90s, 2m, 1h30m or 500ms"))
}

/// `1.23s`, `250ms`, `2m05s`.
pub fn format_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.2}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use microservice_core::crd::{MicroserviceSpec, MicroserviceStatus, Phase};

    fn cond(type_: ConditionType, status: ConditionStatus, reason: &str, message: &str, generation: i64) -> Condition {
        Condition {
            type_,
            status,
            observed_generation: Some(generation),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn ms(generation: i64, status: Option<MicroserviceStatus>) -> Microservice {
        let mut ms = Microservice::new(
            "todo-api",
            MicroserviceSpec {
                image: "ghcr.io/example/todo-api:1.5.0".into(),
                port: 8080,
                replicas: Some(2),
                autoscaling: None,
            },
        );
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.generation = Some(generation);
        ms.status = status;
        ms
    }

    fn status(generation: i64, phase: Phase, conditions: Vec<Condition>) -> MicroserviceStatus {
        MicroserviceStatus {
            observed_generation: Some(generation),
            phase: Some(phase),
            conditions,
            ready_replicas: Some(1),
            replicas: Some(2),
            replicas_summary: Some("1/2".into()),
            image: Some("ghcr.io/example/todo-api:1.4.2".into()),
            last_accepted: None,
        }
    }

    use ConditionStatus::{False, True};
    use ConditionType::{Accepted, Degraded, Progressing, Ready};

    fn ready(generation: i64) -> Microservice {
        let conditions = vec![
            cond(Accepted, True, "Accepted", "ok", generation),
            cond(Progressing, False, "RolloutComplete", "done", generation),
            cond(Ready, True, "RolloutComplete", "generation rolled out", generation),
            cond(Degraded, False, "AsExpected", "no problem observed", generation),
        ];
        ms(generation, Some(status(generation, Phase::Ready, conditions)))
    }

    #[test]
    fn ready_only_for_the_current_generation() {
        assert_eq!(verdict(&ready(2)), Verdict::Ready);
        // The spec moved on to generation 3: the Ready of generation 2 says nothing about it.
        let mut stale = ready(2);
        stale.metadata.generation = Some(3);
        assert!(matches!(verdict(&stale), Verdict::Waiting(w) if w.contains("generation 3")));
    }

    #[test]
    fn refused_spec_fails_with_the_contract_reason_and_a_next_step() {
        let conditions = vec![
            cond(Accepted, False, "ImageNotAllowed", "spec.image: docker.io/x is not allowed", 3),
            cond(Ready, False, "InvalidSpec", "nothing is rolled out", 3),
            cond(Degraded, False, "InvalidSpec", "nothing is rolled out", 3),
        ];
        let m = ms(3, Some(status(3, Phase::Invalid, conditions)));
        let Verdict::Failed { reason, message, next_step } = verdict(&m) else { panic!("not failed") };
        assert_eq!(reason, "ImageNotAllowed");
        assert!(message.contains("docker.io/x"));
        assert!(next_step.unwrap().contains("allows"));
    }

    #[test]
    fn degraded_for_an_old_generation_is_not_a_failure_of_the_new_one() {
        let conditions = vec![
            cond(Accepted, True, "Accepted", "ok", 1),
            cond(Degraded, True, "ProgressDeadlineExceeded", "stalled", 1),
            cond(Ready, False, "ProgressDeadlineExceeded", "stalled", 1),
        ];
        let mut m = ms(1, Some(status(1, Phase::Degraded, conditions)));
        assert!(matches!(verdict(&m), Verdict::Failed { reason, .. } if reason == "ProgressDeadlineExceeded"));
        m.metadata.generation = Some(2);
        assert!(matches!(verdict(&m), Verdict::Waiting(_)));
    }

    #[test]
    fn every_reason_that_blocks_ready_has_a_next_step() {
        let blocking = [
            "InvalidImageReference",
            "MissingTag",
            "MutableTag",
            "ImageNotAllowed",
            "PortOutOfRange",
            "PortReserved",
            "ReplicasOutOfRange",
            "InvalidName",
            "InvalidSpec",
            "Creating",
            "RolloutInProgress",
            "ServiceNotFound",
            "ProgressDeadlineExceeded",
            "ResourceConflict",
            "ImmutableSelector",
            NOT_OBSERVED,
            "SomethingNew",
        ];
        for reason in blocking {
            let step = next_step(reason, "todo", "todo-api").unwrap_or_default();
            assert!(!step.is_empty(), "{reason} has no next step");
        }
        for reason in ["RolloutComplete", "AsExpected", "Accepted"] {
            assert_eq!(next_step(reason, "todo", "todo-api"), None, "{reason} needs no action");
        }
    }

    #[test]
    fn conflicts_name_the_exact_handover_command() {
        let step = next_step("ResourceConflict", "todo", "billing").unwrap();
        assert!(
            step.contains(
                "kubectl annotate deployments billing -n todo platform.example.com/handover=billing --overwrite"
            ),
            "{step}"
        );
        let deadline = next_step("ProgressDeadlineExceeded", "todo", "billing").unwrap();
        assert!(deadline.contains("kubectl -n todo describe deploy billing"));
        assert!(next_step("SomethingNew", "todo", "billing").unwrap().contains("describe microservice billing"));
    }

    #[test]
    fn the_table_explains_rows_that_are_not_ready() {
        let conditions = vec![
            cond(Accepted, True, "Accepted", "ok", 2),
            cond(Degraded, True, "ProgressDeadlineExceeded", "generation 2 made no progress within 120s", 2),
            cond(Ready, False, "ProgressDeadlineExceeded", "generation 2 made no progress within 120s", 2),
        ];
        let stuck = ms(2, Some(status(2, Phase::Degraded, conditions)));
        let table = render_table(&[ServiceView::of(&ready(1)), ServiceView::of(&stuck)], false);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("NAME"), "{table}");
        assert!(lines[1].contains("Ready") && lines[1].contains("1/2"), "{table}");
        assert!(lines[1].contains("ghcr.io/example/todo-api:1.4.2"), "{table}");
        // The ready row has no explanation; the stuck one says why and what to do.
        assert!(lines[2].contains("Degraded"), "{table}");
        assert!(table.contains("why:  ProgressDeadlineExceeded: generation 2 made no progress"), "{table}");
        assert!(table.contains("next: pods are not becoming ready"), "{table}");
        assert!(table.contains("spec: ghcr.io/example/todo-api:1.5.0"), "{table}");
        assert_eq!(table.matches("next:").count(), 1, "{table}");
    }

    #[test]
    fn json_is_machine_readable() {
        let never_seen = ms(1, None);
        let json: serde_json::Value =
            serde_json::from_str(&render_json(&[ServiceView::of(&ready(4)), ServiceView::of(&never_seen)]).unwrap())
                .unwrap();
        let items = json["items"].as_array().unwrap();
        assert_eq!(items[0]["phase"], "Ready");
        assert_eq!(items[0]["ready"], true);
        assert_eq!(items[0]["generation"], 4);
        assert_eq!(items[0]["desiredReplicas"], 2);
        assert!(items[0].get("reason").is_none());
        assert_eq!(items[1]["phase"], serde_json::Value::Null);
        assert_eq!(items[1]["reason"], NOT_OBSERVED);
        assert!(items[1]["nextStep"].as_str().unwrap().contains("operator"));
    }

    #[test]
    fn durations_read_like_kubectl_timeouts() {
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("2 fortnights").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1234)), "1.23s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m05s");
    }

    #[test]
    fn transitions_say_which_generation_and_whether_it_was_accepted() {
        let line = transition_line(&ready(2));
        assert_eq!(line, "todo-api generation 2: Ready (Accepted): generation rolled out");
        let mut submitted = ready(2);
        submitted.metadata.generation = Some(3);
        assert_eq!(
            transition_line(&submitted),
            "todo-api generation 3: submitted; the operator has not acted on it yet"
        );
    }

    #[test]
    fn the_live_line_shows_the_cr_and_its_children() {
        let line = live_line(Some(&ready(1)), None, None);
        assert!(line.starts_with("todo-api: Ready gen 1/1 ready 1/2 serving todo-api:1.4.2"), "{line}");
        assert!(line.contains("deploy: absent") && line.contains("svc: absent"), "{line}");
    }
}
