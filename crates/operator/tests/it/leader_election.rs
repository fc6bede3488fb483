//! Two operator processes (the real binary) against the emulator over HTTP: one Lease, one writer; the standby
//! takes over when the leader is killed and converges what changed meanwhile; SIGTERM releases the Lease.

#[allow(dead_code)]
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::SignedDuration;
use kube::api::{Api, Patch, PatchParams};
use kubesim::faults::ErrorRule;
use microservice_testkit::ClusterOptions;
use serde_json::json;

use crate::support::harness::{Harness, IMAGE_V1, IMAGE_V2, NS};
use crate::support::operator_process::{DEADLINE, Operator, eventually, scratch};

const LEASE: &str = "microservice-operator";
const WRITES: &str = "microservice_writes_total";

async fn holder(h: &Harness) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), NS);
    leases.get_opt(LEASE).await.ok().flatten()?.spec?.holder_identity
}

async fn lease(h: &Harness) -> Lease {
    Api::<Lease>::namespaced(h.client.clone(), NS).get(LEASE).await.unwrap()
}

/// Waits until `op` holds the Lease (its identity is its POD_NAME plus a random suffix).
async fn wait_holder(h: &Harness, op: &Operator) {
    let prefix = format!("{}_", op.name);
    eventually(&format!("{} to hold the Lease", op.name), || async {
        holder(h).await.filter(|id| id.starts_with(&prefix)).map(|_| ())
    })
    .await;
}

/// Waits until `op` itself knows it leads (the Lease alone may name it before its elector heard back).
async fn wait_leads(h: &Harness, op: &Operator) {
    wait_holder(h, op).await;
    eventually(&format!("{} to report that it leads", op.name), || async {
        (master_status(op).await == 1.0).then_some(())
    })
    .await;
}

async fn wait_ready_endpoint(op: &Operator) {
    eventually(&format!("{}'s /readyz", op.name), || async { (op.get("/readyz").await?.0 == 200).then_some(()) }).await;
}

async fn master_status(op: &Operator) -> f64 {
    op.metric_sum("leader_election_master_status").await
}

async fn two_replicas(test: &str) -> (Harness, Operator, Operator) {
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch(test).join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let a = Operator::start("replica-a", &kubeconfig, &[]).await;
    wait_leads(&h, &a).await;
    let b = Operator::start("replica-b", &kubeconfig, &[]).await;
    // A standby is ready too: its caches are warm and it knows it does not lead.
    wait_ready_endpoint(&b).await;
    wait_ready_endpoint(&a).await;
    (h, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_a_standby_takes_over_when_it_is_killed() {
    let (h, mut a, b) = two_replicas("takeover").await;
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    assert!(a.metric_sum(WRITES).await > 0.0, "the leader wrote the children and the status");
    assert_eq!(b.metric_sum(WRITES).await, 0.0, "the standby wrote nothing:\n{}", b.get("/metrics").await.unwrap().1);
    assert_eq!((master_status(&a).await, master_status(&b).await), (1.0, 0.0));

    a.kill();
    let patch = json!({"spec": {"image": IMAGE_V2}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();

    let ms = h.wait_for("todo-api", "Ready for generation 2", crate::support::ready_for_current_generation).await;
    assert_eq!(ms.metadata.generation, Some(2));
    let image =
        h.deployments().get("todo-api").await.unwrap().spec.unwrap().template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some(IMAGE_V2));
    wait_holder(&h, &b).await;
    assert!(b.metric_sum(WRITES).await > 0.0, "the new leader did the writes");
    eventually("replica-b's leader status to read 1", || async { (master_status(&b).await == 1.0).then_some(()) })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_zero_and_releases_the_lease_to_the_standby() {
    let (h, mut a, b) = two_replicas("release").await;
    h.create("todo-api", IMAGE_V1).await;
    h.wait_ready("todo-api").await;

    let held = lease(&h).await.spec.unwrap();
    let old_expiry = held
        .renew_time
        .unwrap()
        .0
        .checked_add(SignedDuration::from_secs(held.lease_duration_seconds.unwrap().into()))
        .unwrap();
    a.signal("TERM");
    let status = a.exited(DEADLINE).await;
    assert_eq!(status.code(), Some(0), "{}", a.stderr());
    assert!(a.stderr().contains("left the leader election"), "{}", a.stderr());
    let after_exit = holder(&h).await;
    assert!(
        after_exit.as_deref().is_none_or(|id| id.starts_with("replica-b_")),
        "replica-a still holds the Lease after it exited: {after_exit:?}"
    );

    wait_holder(&h, &b).await;
    let acquired = lease(&h).await.spec.unwrap().acquire_time.unwrap().0;
    assert!(
        acquired < old_expiry,
        "replica-b took the released Lease at {acquired}, not before replica-a's would have expired ({old_expiry})"
    );
    // The new leader works: a change after the handover converges.
    let patch = json!({"spec": {"image": IMAGE_V2}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    h.wait_for("todo-api", "Ready for generation 2", crate::support::ready_for_current_generation).await;
    assert!(b.metric_sum(WRITES).await > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_its_lease_steps_down_and_exits_1() {
    let mut h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("renew").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let mut a = Operator::start("replica-a", &kubeconfig, &[]).await;
    wait_leads(&h, &a).await;

    // From now on the leader can neither renew nor confirm its Lease: every Lease request fails on kubesim; the
    // real kube-apiserver is killed and stays down.
    match h.cluster.sim() {
        Some(sim) => {
            let mut faults = sim.faults().config();
            faults.errors.push(ErrorRule {
                verb: "*".into(),
                resource: "leases".into(),
                rate: 1.0,
                code: 500,
                retry_after_seconds: None,
            });
            sim.faults().set_config(faults);
        }
        None => h.cluster.real().expect("a real control plane").stop_apiserver().expect("stop kube-apiserver"),
    }

    let status = a.exited(DEADLINE).await;
    assert_eq!(status.code(), Some(1), "{}", a.stderr());
    assert!(a.stderr().contains("could not confirm the Lease"), "{}", a.stderr());
    assert!(
        a.stderr().lines().any(|l| l.starts_with("error: lost the leader election Lease todo/microservice-operator")),
        "{}",
        a.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_was_taken_stops_and_exits_1() {
    let h = Harness::start(ClusterOptions::default()).await;
    let kubeconfig = scratch("taken").join("kubeconfig");
    h.write_kubeconfig(&kubeconfig);
    let mut a = Operator::start("replica-a", &kubeconfig, &[]).await;
    wait_leads(&h, &a).await;

    // Another elector took the Lease (e.g. after this replica's renewals stalled).
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), NS);
    let patch = json!({"spec": {"holderIdentity": "elsewhere_1"}});
    leases.patch(LEASE, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();

    let status = a.exited(DEADLINE).await;
    assert_eq!(status.code(), Some(1), "{}", a.stderr());
    assert!(a.stderr().contains("the Lease is held by elsewhere_1"), "{}", a.stderr());
    assert_eq!(holder(&h).await.as_deref(), Some("elsewhere_1"), "a replica that lost the Lease must not clear it");
}
