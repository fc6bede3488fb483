//! The basic verbs through kube-rs: create, get, list, patch, watch, delete.

use std::time::Duration;

use crate::support::sim;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "data": {"key": value},
    }))
    .unwrap()
}

#[tokio::test]
async fn create_get_list_patch_delete() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");

    let created = api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(uuid::Uuid::parse_str(&uid).unwrap().get_version_num(), 4);
    assert!(created.metadata.creation_timestamp.is_some());
    let rv1: u64 = created.metadata.resource_version.clone().unwrap().parse().unwrap();

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.unwrap()["key"], "1");

    let patched = api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"key": "2"}}))).await.unwrap();
    let rv2: u64 = patched.metadata.resource_version.clone().unwrap().parse().unwrap();
    assert!(rv2 > rv1);
    assert_eq!(patched.data.unwrap()["key"], "2");

    api.create(&PostParams::default(), &cm("b", "1")).await.unwrap();
    let list = api.list(&ListParams::default().labels("app=demo")).await.unwrap();
    let names: Vec<_> = list.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(list.metadata.resource_version.is_some());

    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right(), "an immediate delete answers with a Status");
    let err = api.get("a").await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
}

#[tokio::test]
async fn initial_namespaces_exist() {
    let sim = sim().await;
    let api: Api<Namespace> = Api::all(sim.client());
    let names: Vec<_> =
        api.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|n| n.metadata.name).collect();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.iter().any(|n| n == ns), "{ns} missing from {names:?}");
    }
}

#[tokio::test]
async fn watch_from_a_resource_version_sees_later_changes() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let first = api.create(&PostParams::default(), &cm("w", "1")).await.unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    api.patch("w", &PatchParams::default(), &Patch::Merge(json!({"data": {"key": "2"}}))).await.unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let deadline = Duration::from_secs(5);
    let ev = tokio::time::timeout(deadline, stream.try_next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(ev, WatchEvent::Modified(c) if c.data.as_ref().unwrap()["key"] == "2"));
    let ev = tokio::time::timeout(deadline, stream.try_next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(ev, WatchEvent::Deleted(_)));
}
