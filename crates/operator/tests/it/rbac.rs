//! The RBAC that `deploy/rbac.yaml` ships is sufficient and minimal (issue 7): the emulator enforces RBAC, the
//! operator runs with its ServiceAccount's token, every scenario passes with the shipped Roles, and removing any
//! single verb makes the scenario that needs it fail with the API server's 403.

mod cluster;
mod scenarios;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use kube::api::{Api, PostParams};
use microservice_core::crd::{ConditionStatus, ConditionType, Microservice};
use tokio::sync::Semaphore;

use cluster::{Cluster, IDENTITY, LEASE_NAME, OPERATOR_NS, describe_rule, shipped, without_verb};
use scenarios::Scenario;

/// How long a scenario may take with sufficient permissions (generous: the machine may be busy).
const DEADLINE: Duration = Duration::from_secs(60);
/// How long a scenario that cannot converge without one permission (a watch, a list, the status write, Events, the
/// Lease) is watched not converging. Its earlier steps must still fit: on a loaded machine a real control plane's
/// rollout alone took more than 15 s (CI failed on that), so this is not the time a step needs but the time it
/// would surely have taken. A scenario whose refusal shows in status ends at once and is given [`DEADLINE`].
const NO_CONVERGENCE_DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_rbac_is_sufficient_for_every_scenario() {
    let roles: Vec<Role> = shipped("Role");
    let cluster = Cluster::start(&roles).await;
    let operator = cluster.operator();
    for scenario in Scenario::ALL {
        let started = std::time::Instant::now();
        if let Err(why) = scenario.run(&cluster, DEADLINE).await {
            panic!("with the shipped RBAC, scenario \"{scenario}\" failed: {why}");
        }
        eprintln!("{scenario}: passed in {:?}", started.elapsed());
    }
    assert_eq!(operator.failure(), None);
    let paged = Scenario::CreateReadyWithoutStreamingLists;
    let paged_cluster = Cluster::start_for(&roles, paged).await;
    let paged_operator = paged_cluster.operator();
    if let Err(why) = paged.run(&paged_cluster, DEADLINE).await {
        panic!("with the shipped RBAC, scenario \"{paged}\" failed: {why}");
    }
    paged_operator.stop().await;
    assert_eq!(paged_cluster.forbidden(), 0, "a request was refused: {:?}", paged_cluster.backend.requests());

    // The leader holds the Lease under its identity and, stopping, releases it for a standby to take at once.
    let leases: Api<Lease> = Api::namespaced(cluster.admin.clone(), OPERATOR_NS);
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder(leases.get(LEASE_NAME).await.unwrap()).as_deref(), Some(IDENTITY));
    operator.stop().await;
    assert_eq!(holder(leases.get(LEASE_NAME).await.unwrap()), None, "the Lease is released on shutdown");
    assert_eq!(cluster.backend.requests().resource("secrets"), 0, "the operator never asks for Secrets");
    assert_eq!(
        cluster.forbidden(),
        0,
        "the operator sent a request its RBAC does not allow: {:?}",
        cluster.backend.requests()
    );
}

/// The binary as the bundle's Deployment runs it (its args, the downward-API variables, the ServiceAccount's
/// credentials in place of the mounted token) converges the sample with nothing refused: `run`'s own start-up
/// requests and leader election included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_as_the_deployment_runs_it_with_the_shipped_rbac() {
    let cluster = Cluster::start(&shipped::<Role>("Role")).await;
    let dir = std::env::temp_dir().join(format!("rbac-binary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let token = cluster.backend.service_account_token(OPERATOR_NS, cluster::SERVICE_ACCOUNT).await.unwrap();
    std::fs::write(&kubeconfig, cluster.backend.kubeconfig_yaml_for_token(&token)).unwrap();

    let deployment: Deployment = shipped("Deployment").remove(0);
    let container = deployment.spec.unwrap().template.spec.unwrap().containers.remove(0);
    let pod_name = "microservice-operator-5d8f7c9b4-x2x7q";
    let mut operator = tokio::process::Command::new(env!("CARGO_BIN_EXE_microservice-operator"))
        .args(container.args.unwrap_or_default())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--metrics-bind-address", "127.0.0.1:0", "--log-format", "text"])
        .env("POD_NAME", pod_name)
        .env("POD_NAMESPACE", OPERATOR_NS)
        .env("RUST_LOG", "warn")
        .env_remove("KUBECONFIG")
        .env_remove("WATCH_NAMESPACE")
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/samples/todo-api.yaml");
    let sample: Microservice = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let api: Api<Microservice> = Api::namespaced(cluster.admin.clone(), "todo");
    api.create(&PostParams::default(), &sample).await.unwrap();
    let started = std::time::Instant::now();
    loop {
        let ms = api.get("todo-api").await.unwrap();
        let status = ms.status.clone().unwrap_or_default();
        let ready = status.conditions.iter().any(|c| {
            c.type_ == ConditionType::Ready
                && c.status == ConditionStatus::True
                && c.observed_generation == ms.metadata.generation
        });
        if ready {
            break;
        }
        if let Ok(Some(exit)) = operator.try_wait() {
            panic!("the operator exited with {exit} before the sample was Ready; last status: {status:?}");
        }
        assert!(started.elapsed() < DEADLINE, "the sample never became Ready; last status: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let leases: Api<Lease> = Api::namespaced(cluster.admin.clone(), OPERATOR_NS);
    let holder = leases.get(LEASE_NAME).await.unwrap().spec.and_then(|s| s.holder_identity);
    // controller-runtime's identity shape: the pod name, then a per-process suffix.
    assert!(holder.as_deref().is_some_and(|h| h.starts_with(pod_name)), "the pod leads under its POD_NAME: {holder:?}");
    let _ = operator.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(cluster.forbidden(), 0, "a request was refused: {:?}", cluster.backend.requests());
    assert_eq!(cluster.backend.requests().resource("secrets"), 0, "the operator never asks for Secrets");
}

/// How a scenario fails without a permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The operator records the refusal: Degraded, reason Forbidden, its message naming the verb and resource.
    ForbiddenInStatus,
    /// The operator cannot see or say anything (a watch, a list, the status write itself, Events): the scenario
    /// never converges.
    NoConvergence,
}

/// The scenario that needs `verb` on the resource of `rule`, and how it fails without it; `None` for a rule no
/// scenario can be tied to, which fails the test: every shipped verb must be justified here.
fn needed_by(rule: &PolicyRule, verb: &str) -> Option<(Scenario, Expect)> {
    use Expect::*;
    let resource = rule.resources.as_deref().and_then(|r| r.first()).map(String::as_str)?;
    Some(match (resource, verb) {
        // Only the watch brings later changes of a CR (without it the probe is refused, so the caches list, and each
        // CR is reconciled once).
        ("microservices", "watch") => (Scenario::Update, NoConvergence),
        // Recording a failure needs the same write: nothing can be said.
        ("microservices/status", "patch") => (Scenario::CreateReady, NoConvergence),
        // Where the server does not stream lists, every cache must list (the Microservices' list is all that
        // reconciles them; the children's, before a reconcile may trust "absent").
        ("microservices" | "deployments" | "services" | "horizontalpodautoscalers", "list") => {
            (Scenario::CreateReadyWithoutStreamingLists, NoConvergence)
        }
        // A Deployment's rollout progress reaches the operator only through its watch.
        ("deployments", "watch") => (Scenario::CreateReady, NoConvergence),
        ("services", "watch") => (Scenario::RepairDeletedService, NoConvergence),
        ("deployments" | "services", "create") => (Scenario::CreateReady, ForbiddenInStatus),
        ("deployments" | "services", "patch") => (Scenario::RepairEdits, ForbiddenInStatus),
        // Every write to an existing child first reads it (managedFields and exact fields the cache trims).
        ("deployments" | "services", "get") => (Scenario::RepairEdits, ForbiddenInStatus),
        // The HPA of an autoscaled Microservice: created, its edits and deletion repaired (read before the write,
        // seen by the watch), deleted when autoscaling is turned off.
        ("horizontalpodautoscalers", "watch") => (Scenario::Autoscaling, NoConvergence),
        ("horizontalpodautoscalers", "create" | "get" | "patch" | "delete") => {
            (Scenario::Autoscaling, ForbiddenInStatus)
        }
        // Events are best effort: a refused one is logged, never fails a reconcile.
        ("events", "create" | "patch") => (Scenario::EventsRecorded, NoConvergence),
        // Leader election (kube-lease-manager: get, create when absent, patch to take and renew, and the operator's
        // own get to confirm it still leads): a replica that cannot lead never reconciles.
        ("leases", "get" | "create" | "patch") => (Scenario::CreateReady, NoConvergence),
        _ => return None,
    })
}

struct Case {
    role: usize,
    rule: usize,
    verb: String,
    what: String,
    /// The rule's first resource (each shipped rule names one).
    resource: String,
    needed: Option<(Scenario, Expect)>,
}

/// One case's outcome: the scenario's result without the verb, and how many requests were refused with 403.
type Outcome = (Result<(), String>, u64);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_verb_is_needed_by_a_scenario() {
    let roles: Vec<Role> = shipped("Role");
    let cases = cases(&roles);
    assert!(!cases.is_empty(), "the bundle ships no Role");
    let outcomes = run_each_without_its_verb(&roles, &cases).await;
    let problems: Vec<String> =
        cases.iter().zip(outcomes).filter_map(|(case, outcome)| problem(case, outcome)).collect();
    assert!(
        problems.is_empty(),
        "RBAC rules not proven needed (remove a rule nothing needs from deploy/rbac.yaml, or add the scenario that \
         needs it), or refusals the operator does not report:\n  {}",
        problems.join("\n  ")
    );
}

/// Every verb of every rule of the shipped Roles, with the scenario that needs it.
fn cases(roles: &[Role]) -> Vec<Case> {
    let mut cases = Vec::new();
    for (r, role) in roles.iter().enumerate() {
        for (i, rule) in role.rules.as_deref().unwrap_or_default().iter().enumerate() {
            for verb in &rule.verbs {
                let what = format!(
                    "{verb} {} (Role {}/{})",
                    describe_rule(rule),
                    role.metadata.namespace.as_deref().unwrap_or_default(),
                    role.metadata.name.as_deref().unwrap_or_default()
                );
                let resource = rule.resources.as_deref().and_then(|r| r.first()).cloned().unwrap_or_default();
                cases.push(Case {
                    role: r,
                    rule: i,
                    verb: verb.clone(),
                    what,
                    resource,
                    needed: needed_by(rule, verb),
                });
            }
        }
    }
    cases
}

/// Runs each case's scenario on a cluster whose Roles lack the case's verb; `None` for a case no scenario needs.
async fn run_each_without_its_verb(roles: &[Role], cases: &[Case]) -> Vec<Option<Outcome>> {
    // Each case has its own emulator; a few at once keep the run short without starving a 2-core machine.
    let parallel = Arc::new(Semaphore::new(4));
    let mut runs = tokio::task::JoinSet::new();
    for (index, case) in cases.iter().enumerate() {
        let Some((scenario, expect)) = case.needed else { continue };
        let deadline = match expect {
            Expect::ForbiddenInStatus => DEADLINE,
            Expect::NoConvergence => NO_CONVERGENCE_DEADLINE,
        };
        let roles = without_verb(roles, case.role, case.rule, &case.verb);
        let parallel = parallel.clone();
        runs.spawn(async move {
            let _permit = parallel.acquire_owned().await;
            let cluster = Cluster::start_for(&roles, scenario).await;
            let operator = cluster.operator();
            let outcome = scenario.run(&cluster, deadline).await;
            let outcome = match (outcome, operator.failure()) {
                (Err(why), Some(failure)) => Err(format!("{why}; the operator: {failure}")),
                (outcome, _) => outcome,
            };
            operator.stop().await;
            (index, outcome, cluster.forbidden())
        });
    }
    let mut outcomes = vec![None; cases.len()];
    while let Some(joined) = runs.join_next().await {
        let (index, outcome, forbidden) = joined.expect("a case panicked");
        outcomes[index] = Some((outcome, forbidden));
    }
    outcomes
}

/// What is wrong with a case's outcome, if anything: the verb must be needed, and its refusal reported as expected.
fn problem(case: &Case, outcome: Option<Outcome>) -> Option<String> {
    let Some((scenario, expect)) = case.needed else {
        return Some(format!("{}: no scenario needs it", case.what));
    };
    // kube-apiserver's wording, e.g. `cannot patch resource "deployments" in API group "apps"`.
    let names_it = format!("cannot {} resource \"{}\"", case.verb, case.resource);
    match outcome {
        Some((Err(why), forbidden)) if forbidden > 0 => {
            if expect == Expect::ForbiddenInStatus && !(why.contains("Forbidden") && why.contains(&names_it)) {
                return Some(format!(
                    "{}: \"{scenario}\" fails, but the status does not say Forbidden naming `{names_it}`: {why}",
                    case.what
                ));
            }
            eprintln!("without {}: \"{scenario}\" fails ({forbidden} requests forbidden): {why}", case.what);
            None
        }
        Some((Err(why), _)) => Some(format!(
            "{}: \"{scenario}\" failed but no request was forbidden, so not for lack of it: {why}",
            case.what
        )),
        Some((Ok(()), _)) | None => Some(format!("{}: \"{scenario}\" passes without it", case.what)),
    }
}
