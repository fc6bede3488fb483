//! Deployments end to end through a kube client: the simulated controller-manager creates ReplicaSets and pods,
//! pods become ready, and the Deployment status moves as in a real cluster.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::{start, until_some};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use kubesim::Sim;
use kubesim::controllers::{ControllerConfig, ImageRule, PodBehaviour};
use serde_json::json;

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}
            }
        }
    }))
    .unwrap()
}

fn cond(d: &Deployment, type_: &str) -> Option<(String, String, String)> {
    let c = d.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

/// What `kubectl rollout status` checks, in its order.
fn rolled_out(d: &Deployment) -> bool {
    let Some(s) = &d.status else { return false };
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    d.metadata.generation <= s.observed_generation
        && s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
        && s.available_replicas.unwrap_or(0) == s.updated_replicas.unwrap_or(0)
        && cond(d, "Progressing").is_some_and(|c| c.1 == "NewReplicaSetAvailable")
}

async fn deploy(client: &Client, name: &str) -> Option<Deployment> {
    Api::<Deployment>::namespaced(client.clone(), "default").get_opt(name).await.ok().flatten()
}

async fn replica_sets(client: &Client, app: &str) -> Vec<ReplicaSet> {
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let mut rss = api.list(&ListParams::default().labels(&format!("app={app}"))).await.unwrap().items;
    rss.sort_by_key(|rs| rs.metadata.name.clone());
    rss
}

async fn pods(client: &Client, app: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default().labels(&format!("app={app}"))).await.unwrap().items
}

fn image_of(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0].image.clone().unwrap_or_default()
}

fn is_ready(p: &Pod) -> bool {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn a_new_deployment_rolls_out_with_the_upstream_status_sequence() {
    let sim = start(Sim::builder().controllers(ControllerConfig::default())).await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let created = api.create(&PostParams::default(), &deployment("web", 3, "nginx:1.27")).await.unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let d = until_some("rollout", || deploy(&client, "web"), rolled_out).await;

    // The status history, from the watch.
    let mut stream = api.watch(&WatchParams::default().fields("metadata.name=web"), &rv).await.unwrap().boxed();
    let mut reasons: Vec<String> = vec![];
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        if let Ok(WatchEvent::Modified(d)) = ev
            && let Some((_, reason, _)) = cond(&d, "Progressing")
            && reasons.last() != Some(&reason)
        {
            reasons.push(reason);
        }
    }
    assert_eq!(reasons.first().map(String::as_str), Some("NewReplicaSetCreated"), "{reasons:?}");
    assert_eq!(reasons.last().map(String::as_str), Some("NewReplicaSetAvailable"), "{reasons:?}");

    let rss = replica_sets(&client, "web").await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    let rs_name = rs.metadata.name.clone().unwrap();
    assert_eq!(rs_name, format!("web-{hash}"));
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.uid, d.metadata.uid.clone().unwrap());
    assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
    assert_eq!(rs.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "1");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "1");
    let rs_status = rs.status.clone().unwrap();
    assert_eq!(
        (rs_status.replicas, rs_status.fully_labeled_replicas, rs_status.ready_replicas, rs_status.available_replicas),
        (3, Some(3), Some(3), Some(3))
    );

    let s = d.status.clone().unwrap();
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(
        (s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas, s.unavailable_replicas),
        (Some(3), Some(3), Some(3), Some(3), None)
    );
    assert_eq!(cond(&d, "Available").unwrap().1, "MinimumReplicasAvailable");
    assert_eq!(
        cond(&d, "Progressing").unwrap(),
        (
            "True".into(),
            "NewReplicaSetAvailable".into(),
            format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
        )
    );

    let pods = pods(&client, "web").await;
    assert_eq!(pods.len(), 3);
    let mut ips = BTreeSet::new();
    for p in &pods {
        let name = p.metadata.name.clone().unwrap();
        assert!(name.starts_with(&format!("{rs_name}-")) && name.len() == rs_name.len() + 6, "{name}");
        assert_eq!(p.metadata.owner_references.as_ref().unwrap()[0].kind, "ReplicaSet");
        assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("kubesim-node"));
        let st = p.status.as_ref().unwrap();
        assert_eq!(st.phase.as_deref(), Some("Running"));
        assert!(is_ready(p));
        assert!(st.host_ip.is_some() && st.start_time.is_some());
        ips.insert(st.pod_ip.clone().unwrap());
        assert!(st.container_statuses.as_ref().unwrap()[0].ready);
    }
    assert_eq!(ips.len(), 3, "pod IPs are distinct");
}

#[tokio::test]
async fn a_rolling_update_keeps_old_pods_available_until_the_new_ones_are() {
    let sim = start(
        Sim::builder().controllers(ControllerConfig { ready_delay: Duration::from_millis(400), ..Default::default() }),
    )
    .await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 4, "app:1")).await.unwrap();
    until_some("first rollout", || deploy(&client, "web"), rolled_out).await;

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}});
    let d = api.patch("web", &PatchParams::default(), &Patch::Strategic(patch)).await.unwrap();
    assert_eq!(d.metadata.generation, Some(2));

    // Mid-rollout: the old version serves (Available), the new one is not rolled out.
    let mid = until_some(
        "a rollout in progress",
        || deploy(&client, "web"),
        |d| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation == Some(2) && s.updated_replicas.unwrap_or(0) > 0 && s.updated_replicas < Some(4)
        },
    )
    .await;
    assert_eq!(cond(&mid, "Available").unwrap().0, "True");
    assert!(!rolled_out(&mid));
    let total = mid.status.as_ref().unwrap().replicas.unwrap_or(0);
    assert!(total <= 5, "maxSurge 25% of 4 allows 5 pods, saw {total}");

    let d = until_some("second rollout", || deploy(&client, "web"), rolled_out).await;
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "2");
    let rss = replica_sets(&client, "web").await;
    let sizes: Vec<i32> = rss.iter().map(|rs| rs.spec.as_ref().unwrap().replicas.unwrap()).collect();
    assert_eq!(sizes.iter().sum::<i32>(), 4);
    assert!(sizes.contains(&0) && sizes.contains(&4));
    let pods = until_some("old pods gone", || async { Some(pods(&client, "web").await) }, |p| p.len() == 4).await;
    assert!(pods.iter().all(|p| image_of(p) == "app:2" && is_ready(p)));
}

#[tokio::test]
async fn a_rollout_of_a_never_ready_image_misses_its_progress_deadline() {
    let rules = vec![ImageRule { image_contains: "broken".into(), behaviour: PodBehaviour::NeverReady }];
    let sim = start(Sim::builder().controllers(ControllerConfig { image_rules: rules, ..Default::default() })).await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let mut d = deployment("web", 2, "app:1");
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(2);
    api.create(&PostParams::default(), &d).await.unwrap();
    until_some("first rollout", || deploy(&client, "web"), rolled_out).await;

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "broken:2"}]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Strategic(patch)).await.unwrap();
    let d = until_some(
        "ProgressDeadlineExceeded",
        || deploy(&client, "web"),
        |d| cond(d, "Progressing").is_some_and(|c| c.1 == "ProgressDeadlineExceeded"),
    )
    .await;
    let (status, _, message) = cond(&d, "Progressing").unwrap();
    assert_eq!(status, "False");
    assert!(message.ends_with("has timed out progressing."), "{message}");
    // The old pods still serve.
    assert_eq!(cond(&d, "Available").unwrap().0, "True");
    let broken: Vec<Pod> = pods(&client, "web").await.into_iter().filter(|p| image_of(p) == "broken:2").collect();
    assert!(!broken.is_empty());
    for p in &broken {
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
        assert!(!is_ready(p));
    }
}

#[tokio::test]
async fn scaling_through_the_scale_subresource_and_rolling_back() {
    let sim = start(Sim::builder().controllers(ControllerConfig::default())).await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2, "app:1")).await.unwrap();
    until_some("first rollout", || deploy(&client, "web"), rolled_out).await;

    // kubectl scale deployment/web --replicas=5
    api.patch_scale("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 5}}))).await.unwrap();
    let d = until_some(
        "scaled",
        || deploy(&client, "web"),
        |d| rolled_out(d) && d.status.as_ref().unwrap().replicas == Some(5),
    )
    .await;
    assert_eq!(d.status.unwrap().ready_replicas, Some(5));
    assert_eq!(pods(&client, "web").await.len(), 5);

    let set_image =
        |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Strategic(set_image("app:2"))).await.unwrap();
    until_some("rev 2", || deploy(&client, "web"), |d| d.metadata.generation == Some(3) && rolled_out(d)).await;
    let first = replica_sets(&client, "web")
        .await
        .into_iter()
        .find(|rs| rs.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"] == "1")
        .unwrap();

    // kubectl rollout undo: the template of revision 1 again.
    api.patch("web", &PatchParams::default(), &Patch::Strategic(set_image("app:1"))).await.unwrap();
    let d =
        until_some("rollback", || deploy(&client, "web"), |d| d.metadata.generation == Some(4) && rolled_out(d)).await;
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "3");
    let rss = replica_sets(&client, "web").await;
    assert_eq!(rss.len(), 2, "the old ReplicaSet was reused");
    let back = rss.iter().find(|rs| rs.metadata.name == first.metadata.name).unwrap();
    let a = back.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        (a["deployment.kubernetes.io/revision"].as_str(), a["deployment.kubernetes.io/revision-history"].as_str()),
        ("3", "1")
    );
    assert_eq!(back.spec.as_ref().unwrap().replicas, Some(5));
    let pods = until_some("old pods gone", || async { Some(pods(&client, "web").await) }, |p| p.len() == 5).await;
    assert!(pods.iter().all(|p| image_of(p) == "app:1"));
}

#[tokio::test]
async fn crash_looping_pods_restart_with_a_growing_count() {
    let rules = vec![ImageRule { image_contains: "crash".into(), behaviour: PodBehaviour::CrashLoop }];
    let sim = start(Sim::builder().controllers(ControllerConfig { image_rules: rules, ..Default::default() })).await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 1, "crash:1")).await.unwrap();
    let restarts = |p: &Vec<Pod>| {
        p.first()
            .and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first().cloned())
            .map(|c| (c.restart_count, c.state.and_then(|s| s.waiting).and_then(|w| w.reason)))
    };
    let seen = until_some(
        "a restart",
        || async { Some(pods(&client, "web").await) },
        |p| restarts(p).is_some_and(|(n, _)| n >= 1),
    )
    .await;
    let (first, reason) = restarts(&seen).unwrap();
    assert_eq!(reason.as_deref(), Some("CrashLoopBackOff"));
    until_some(
        "another restart",
        || async { Some(pods(&client, "web").await) },
        |p| restarts(p).is_some_and(|(n, _)| n > first),
    )
    .await;
    let d = deploy(&client, "web").await.unwrap();
    assert_eq!(d.status.unwrap().available_replicas, None);
}

#[tokio::test]
async fn deleted_pods_are_replaced() {
    let sim = start(Sim::builder().controllers(ControllerConfig::default())).await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2, "app:1")).await.unwrap();
    until_some("rollout", || deploy(&client, "web"), rolled_out).await;
    let before = pods(&client, "web").await;
    let victim = before[0].metadata.name.clone().unwrap();
    Api::<Pod>::namespaced(client.clone(), "default").delete(&victim, &Default::default()).await.unwrap();
    let after = until_some(
        "replacement",
        || async { Some(pods(&client, "web").await) },
        |p| p.len() == 2 && p.iter().all(|p| p.metadata.name.as_deref() != Some(victim.as_str()) && is_ready(p)),
    )
    .await;
    assert_eq!(after.len(), 2);
}
