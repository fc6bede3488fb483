//! kubectl against the simulated controllers: `rollout status`, `scale`, `rollout undo` and
//! `delete --cascade=orphan|foreground`.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::{start, until};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use kubesim::Sim;
use kubesim::controllers::{self, ControllerConfig};
use serde_json::json;

struct Server {
    client: Client,
    kubeconfig: PathBuf,
    _sim: Sim,
}

/// An emulator with these controller settings and its kubeconfig (https, CA and token) in a temp dir.
async fn serve(config: ControllerConfig, tag: &str) -> Server {
    let sim = start(Sim::builder().controllers(config)).await;
    let dir = std::env::temp_dir().join(format!("kubesim-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).unwrap();
    Server { client: sim.client(), kubeconfig, _sim: sim }
}

fn have_kubectl() -> bool {
    std::process::Command::new("kubectl").args(["version", "--client"]).output().is_ok_and(|o| o.status.success())
}

/// Runs kubectl beside the test's runtime (which serves its requests); returns (success, stdout, stderr).
async fn kubectl(s: &Server, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(args)
        .output()
        .await
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

async fn ok(s: &Server, args: &[&str]) -> String {
    let (success, out, err) = kubectl(s, args).await;
    assert!(success, "kubectl {args:?} failed: {err}");
    out
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": image}]}}
        }
    }))
    .unwrap()
}

async fn counts(client: &Client, app: &str) -> (usize, usize, usize) {
    let lp = ListParams::default().labels(&format!("app={app}"));
    let d = Api::<Deployment>::namespaced(client.clone(), "default").list(&lp).await.map_or(0, |l| l.items.len());
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), "default").list(&lp).await.map_or(0, |l| l.items.len());
    let p = Api::<Pod>::namespaced(client.clone(), "default").list(&lp).await.map_or(0, |l| l.items.len());
    (d, rs, p)
}

#[tokio::test]
async fn kubectl_rollout_status_scale_and_undo() {
    if !have_kubectl() {
        eprintln!("kubectl not installed; skipping");
        return;
    }
    let s = serve(ControllerConfig { ready_delay: Duration::from_millis(200), ..Default::default() }, "rollout").await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2, "nginx:1.26")).await.unwrap();
    let out = ok(&s, &["rollout", "status", "deployment/web", "--timeout=20s"]).await;
    assert!(out.contains("deployment \"web\" successfully rolled out"), "{out}");

    ok(&s, &["set", "image", "deployment/web", "app=nginx:1.27"]).await;
    let out = ok(&s, &["rollout", "status", "deployment/web", "--timeout=20s"]).await;
    assert!(out.contains("successfully rolled out"), "{out}");
    let d = api.get("web").await.unwrap();
    assert_eq!(d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"], "2");

    ok(&s, &["scale", "deployment/web", "--replicas=4"]).await;
    ok(&s, &["rollout", "status", "deployment/web", "--timeout=20s"]).await;
    assert_eq!(api.get("web").await.unwrap().status.unwrap().available_replicas, Some(4));

    let history = ok(&s, &["rollout", "history", "deployment/web"]).await;
    assert!(history.contains('1') && history.contains('2'), "{history}");
    ok(&s, &["rollout", "undo", "deployment/web"]).await;
    ok(&s, &["rollout", "status", "deployment/web", "--timeout=20s"]).await;
    let d = api.get("web").await.unwrap();
    assert_eq!(d.spec.unwrap().template.spec.unwrap().containers[0].image.as_deref(), Some("nginx:1.26"));
    assert_eq!(d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"], "3");
}

#[tokio::test]
async fn kubectl_rollout_status_fails_on_a_missed_deadline() {
    if !have_kubectl() {
        eprintln!("kubectl not installed; skipping");
        return;
    }
    let rules = vec![controllers::ImageRule {
        image_contains: "broken".into(),
        behaviour: controllers::PodBehaviour::NeverReady,
    }];
    let s = serve(ControllerConfig { image_rules: rules, ..Default::default() }, "deadline").await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), "default");
    let mut d = deployment("web", 1, "broken:1");
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(1);
    api.create(&PostParams::default(), &d).await.unwrap();
    let (success, _, err) = kubectl(&s, &["rollout", "status", "deployment/web", "--timeout=20s"]).await;
    assert!(!success);
    assert!(err.contains("exceeded its progress deadline"), "{err}");
}

#[tokio::test]
async fn kubectl_delete_cascade_orphan_and_foreground() {
    if !have_kubectl() {
        eprintln!("kubectl not installed; skipping");
        return;
    }
    let s = serve(ControllerConfig::default(), "cascade").await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), "default");
    for name in ["orphaned", "fg"] {
        api.create(&PostParams::default(), &deployment(name, 1, "nginx")).await.unwrap();
        until("pods", || counts(&s.client, name), |c| *c == (1, 1, 1)).await;
    }
    ok(&s, &["delete", "deployment", "orphaned", "--cascade=orphan"]).await;
    until("orphaned ReplicaSet kept", || counts(&s.client, "orphaned"), |c| *c == (0, 1, 1)).await;
    let rs = Api::<ReplicaSet>::namespaced(s.client.clone(), "default")
        .list(&ListParams::default().labels("app=orphaned"))
        .await
        .unwrap();
    let refs = rs.items[0].metadata.owner_references.clone().unwrap_or_default();
    assert!(refs.is_empty(), "{refs:?}");
    ok(&s, &["delete", "deployment", "fg", "--cascade=foreground", "--timeout=20s"]).await;
    // kubectl waits for the owner, which outlives its dependents.
    assert_eq!(counts(&s.client, "fg").await, (0, 0, 0));
}
