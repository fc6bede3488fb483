//! Garbage collection and namespace deletion end to end: the three propagation policies through a kube client
//! and through kubectl, owners of any kind (by uid), and a terminating namespace emptied then removed.

use crate::support::{sim, until};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::{Api, Client};
use serde_json::json;

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
        }
    }))
    .unwrap()
}

async fn counts(client: &Client, ns: &str, app: &str) -> (usize, usize, usize) {
    let lp = ListParams::default().labels(&format!("app={app}"));
    let d = Api::<Deployment>::namespaced(client.clone(), ns).list(&lp).await.map_or(0, |l| l.items.len());
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns).list(&lp).await.map_or(0, |l| l.items.len());
    let p = Api::<Pod>::namespaced(client.clone(), ns).list(&lp).await.map_or(0, |l| l.items.len());
    (d, rs, p)
}

async fn running(client: &Client, app: &str, replicas: usize) {
    until("the Deployment's pods", || counts(client, "default", app), |c| *c == (1, 1, replicas)).await;
}

#[tokio::test]
async fn background_deletion_collects_replica_sets_and_pods() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2)).await.unwrap();
    running(&client, "web", 2).await;
    api.delete("web", &DeleteParams::background()).await.unwrap();
    until("everything gone", || counts(&client, "default", "web"), |c| *c == (0, 0, 0)).await;
}

#[tokio::test]
async fn foreground_deletion_keeps_the_owner_until_its_dependents_are_gone() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2)).await.unwrap();
    running(&client, "web", 2).await;
    let pending = api.delete("web", &DeleteParams::foreground()).await.unwrap();
    let d = pending.left().expect("a foreground deletion answers with the object");
    assert!(d.metadata.deletion_timestamp.is_some());
    assert!(d.metadata.finalizers.unwrap().contains(&"foregroundDeletion".to_string()));
    // The owner outlives its pods: whenever the Deployment is gone, so is everything it owned.
    let end = until("everything gone", || counts(&client, "default", "web"), |c| c.0 == 0).await;
    assert_eq!(end, (0, 0, 0));
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_and_strips_their_owner_reference() {
    let sim = sim().await;
    let client = sim.client();
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 2)).await.unwrap();
    running(&client, "web", 2).await;
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Orphan), ..Default::default() };
    api.delete("web", &dp).await.unwrap();
    until("the Deployment gone", || counts(&client, "default", "web"), |c| c.0 == 0).await;
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let rs = until(
        "the ReplicaSet orphaned",
        || async { rss.list(&ListParams::default().labels("app=web")).await.unwrap().items },
        |l| l.len() == 1 && l[0].metadata.owner_references.as_ref().is_none_or(|r| r.is_empty()),
    )
    .await;
    // The orphan keeps its pods.
    let (_, _, pods) = counts(&client, "default", "web").await;
    assert_eq!(pods, 2);
    let owned_by_rs = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .iter()
        .all(|p| p.metadata.owner_references.as_ref().unwrap()[0].uid == rs[0].metadata.uid.clone().unwrap());
    assert!(owned_by_rs);
}

fn owned_config_map(name: &str, owner: &ConfigMap) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
        }]},
    }))
    .unwrap()
}

#[tokio::test]
async fn owners_of_any_kind_are_tracked_by_uid() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let owner = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap())
        .await
        .unwrap();
    cms.create(&PostParams::default(), &owned_config_map("child", &owner)).await.unwrap();

    // A dependent whose owner never existed (same name, another uid) is collected.
    let mut impostor = owner.clone();
    impostor.metadata.uid = Some("00000000-0000-4000-8000-000000000000".into());
    cms.create(&PostParams::default(), &owned_config_map("stray", &impostor)).await.unwrap();
    until("stray collected", || async { cms.get_opt("stray").await.unwrap() }, Option::is_none).await;
    assert!(cms.get_opt("child").await.unwrap().is_some(), "a live owner protects its dependent");

    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    until("child collected", || async { cms.get_opt("child").await.unwrap() }, Option::is_none).await;
}

#[tokio::test]
async fn a_deleted_namespace_is_emptied_then_removed() {
    let sim = sim().await;
    let client = sim.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap())
        .await
        .unwrap();
    Api::<Deployment>::namespaced(client.clone(), "team")
        .create(&PostParams::default(), &deployment("web", 2))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    cms.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "cfg"}})).unwrap())
        .await
        .unwrap();
    until("pods", || counts(&client, "team", "web"), |c| *c == (1, 1, 2)).await;

    let ns = nss.delete("team", &DeleteParams::default()).await.unwrap().left().unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    until("namespace gone", || async { nss.get_opt("team").await.unwrap() }, Option::is_none).await;
    assert_eq!(counts(&client, "team", "web").await, (0, 0, 0));
    assert!(cms.get_opt("cfg").await.unwrap().is_none());
}

#[tokio::test]
async fn a_namespace_waits_for_objects_held_by_finalizers() {
    let sim = sim().await;
    let client = sim.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "held"}})).unwrap())
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "held");
    let cm = json!({"metadata": {"name": "cfg", "finalizers": ["example.com/cleanup"]}});
    cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap()).await.unwrap();
    nss.delete("held", &DeleteParams::default()).await.unwrap();
    let held = until(
        "the config map marked for deletion",
        || async { cms.get_opt("cfg").await.unwrap() },
        |c| c.as_ref().is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
    )
    .await;
    assert!(held.is_some());
    assert!(nss.get_opt("held").await.unwrap().is_some(), "the namespace waits");
    let patch = kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}}));
    cms.patch("cfg", &Default::default(), &patch).await.unwrap();
    until("namespace gone", || async { nss.get_opt("held").await.unwrap() }, Option::is_none).await;
}
