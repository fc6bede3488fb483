//! The real control plane harness itself: it starts, it is real, two run side by side, kube-apiserver restarts over
//! its data, and nothing is left behind. Needs the binaries (`hack/control-plane/build.sh`), so these run with
//! `--ignored` (.ci/run's real-control-plane stage does).

use std::process::Command;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{ListParams, PostParams};
use microservice_testkit::control_plane::bin_dir;
use microservice_testkit::{ControlPlane, Options};
use serde_json::json;

#[test]
#[ignore = "needs the real control plane: run hack/control-plane/build.sh, then --ignored"]
fn every_binary_reports_its_pinned_version() {
    let dir = bin_dir().expect("built");
    let version = |bin: &str, arg: &str| {
        let out = Command::new(dir.join(bin)).arg(arg).output().expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    for bin in ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] {
        assert!(version(bin, "--version").contains("Kubernetes v1.37.2"), "{bin}: {}", version(bin, "--version"));
    }
    assert!(version("kubectl", "version").contains("Client Version: v1.37.2"), "{}", version("kubectl", "version"));
    assert!(version("etcd", "--version").contains("etcd Version: 3.6.16"), "{}", version("etcd", "--version"));
    assert!(version("kwok", "--version").contains("0.8.0"), "{}", version("kwok", "--version"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: run hack/control-plane/build.sh, then --ignored"]
async fn two_control_planes_run_side_by_side_and_leave_nothing_behind() {
    let (a, b) = tokio::join!(ControlPlane::start(Options::default()), ControlPlane::start(Options::default()));
    let (a, b) = (a.unwrap_or_else(|e| panic!("{e}")), b.unwrap_or_else(|e| panic!("{e}")));
    assert_ne!(a.url(), b.url());
    for plane in [&a, &b] {
        let nodes: Api<Node> = Api::all(plane.client().await.expect("client"));
        let ready = nodes
            .list(&ListParams::default())
            .await
            .expect("list nodes")
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        assert_eq!(ready, 3, "kwok's nodes are Ready");
    }
    // An object made in one is not in the other.
    let cms: Api<ConfigMap> = Api::namespaced(a.client().await.expect("client"), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "only-in-a"}})).expect("configmap");
    cms.create(&PostParams::default(), &cm).await.expect("create");
    let other: Api<ConfigMap> = Api::namespaced(b.client().await.expect("client"), "default");
    assert!(other.get_opt("only-in-a").await.expect("get").is_none());

    let dir = a.kubeconfig().parent().expect("dir").to_path_buf();
    let url = a.url().to_string();
    drop(a);
    assert!(!dir.exists(), "{} removed", dir.display());
    let port = url.rsplit(':').next().expect("port");
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err(), "nothing listens on {url} any more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real control plane: run hack/control-plane/build.sh, then --ignored"]
async fn a_restarted_kube_apiserver_serves_what_etcd_kept() {
    let mut plane = ControlPlane::start(Options::default()).await.unwrap_or_else(|e| panic!("{e}"));
    let cms: Api<ConfigMap> = Api::namespaced(plane.client().await.expect("client"), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "kept"}, "data": {"k": "v"}})).expect("cm");
    cms.create(&PostParams::default(), &cm).await.expect("create");

    plane.restart_apiserver().await.expect("restart");
    let kept = cms.get("kept").await.expect("the ConfigMap survived the restart");
    assert_eq!(kept.data.and_then(|d| d.get("k").cloned()).as_deref(), Some("v"));
}
