//! Watches through kube-rs and kube-runtime: resuming, 410 Gone, bookmarks, timeouts, selectors, streaming lists,
//! metadata watches, and a reflector that stays in sync across dropped streams and forced 410s.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{api_only, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kubesim::Sim;
use kubesim::faults::{FaultConfig, WatchRule};
use kubesim::store::HistoryLimits;
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": {"k": value}})).unwrap()
}

/// Polls `check` until it holds or `within` passes.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

async fn next<S, T>(s: &mut S) -> T
where
    S: futures::Stream<Item = Result<T, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), s.try_next()).await.expect("no event in time").unwrap().unwrap()
}

#[tokio::test]
async fn a_reflector_stays_in_sync_across_dropped_streams_and_410s() {
    let faults = FaultConfig {
        watch: vec![WatchRule { resource: "configmaps".into(), drop_after_events: Some(3), drop_after_ms: None }],
        ..FaultConfig::default()
    };
    let sim = start(Sim::builder().without_controllers().faults(faults)).await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff();
    let task = tokio::spawn(stream.for_each(|_| async {}));

    let pp = PatchParams::default();
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), json!({}), "1")).await.unwrap();
    }
    sim.faults().force_gone("configmaps");
    for i in 0..10 {
        api.patch(&format!("c{i}"), &pp, &Patch::Merge(json!({"data": {"k": "2"}}))).await.unwrap();
        if i % 4 == 0 {
            sim.faults().force_gone("configmaps");
        }
    }
    for i in 7..10 {
        api.delete(&format!("c{i}"), &DeleteParams::default()).await.unwrap();
    }

    let want: BTreeMap<String, String> = (0..7).map(|i| (format!("c{i}"), "2".to_string())).collect();
    let synced = eventually(Duration::from_secs(30), || {
        let have: BTreeMap<String, String> = reader
            .state()
            .iter()
            .map(|c| (c.metadata.name.clone().unwrap(), c.data.as_ref().unwrap()["k"].clone()))
            .collect();
        have == want
    })
    .await;
    task.abort();
    assert!(
        synced,
        "reflector out of sync: {:?}",
        reader.state().iter().map(|c| c.metadata.name.clone()).collect::<Vec<_>>()
    );
    let requests = sim.requests();
    assert!(requests.count("watch", "configmaps") >= 3, "streams were not dropped: {requests:?}");
    assert!(requests.count("list", "configmaps") >= 2, "410 did not force a re-list: {requests:?}");
}

#[tokio::test]
async fn streaming_lists_end_their_initial_events_with_a_bookmark() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("s{i}"), json!({}), "1")).await.unwrap();
    }
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default().streaming_lists()));
    let task = tokio::spawn(stream.default_backoff().for_each(|_| async {}));
    assert!(eventually(Duration::from_secs(10), || reader.state().len() == 3).await);
    api.create(&PostParams::default(), &cm("s3", json!({}), "1")).await.unwrap();
    assert!(eventually(Duration::from_secs(10), || reader.state().len() == 4).await);
    task.abort();
    assert_eq!(sim.requests().count("list", "configmaps"), 0, "a streaming list needs no LIST");
}

#[tokio::test]
async fn metadata_watches_get_partial_object_metadata() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    api.create(&PostParams::default(), &cm("m", json!({"app": "x"}), "1")).await.unwrap();
    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(sim.client(), "default");
    let mut s = watcher(meta, watcher::Config::default()).applied_objects().boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), s.try_next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("m"));
    assert_eq!(first.metadata.labels.unwrap()["app"], "x");
}

#[tokio::test]
async fn label_selectors_turn_transitions_into_added_and_deleted() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let start = sim.cluster().resource_version().to_string();
    let mut s = api.watch(&WatchParams::default().labels("app=a").timeout(20), &start).await.unwrap().boxed();
    let pp = PatchParams::default();
    api.create(&PostParams::default(), &cm("x", json!({"app": "b"}), "1")).await.unwrap();
    api.create(&PostParams::default(), &cm("y", json!({"app": "a"}), "1")).await.unwrap();
    assert!(matches!(next(&mut s).await, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("y")));
    api.patch("y", &pp, &Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}}))).await.unwrap();
    assert!(matches!(next(&mut s).await, WatchEvent::Deleted(c) if c.metadata.name.as_deref() == Some("y")));
    api.patch("x", &pp, &Patch::Merge(json!({"metadata": {"labels": {"app": "a"}}}))).await.unwrap();
    assert!(matches!(next(&mut s).await, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("x")));
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_gets_410_in_the_stream() {
    let limits = HistoryLimits { max_events: 5, max_age: Duration::from_secs(300) };
    let sim = start(Sim::builder().without_controllers().history(limits)).await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let old = api.create(&PostParams::default(), &cm("h", json!({}), "0")).await.unwrap();
    for i in 1..20 {
        api.patch("h", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": i.to_string()}}))).await.unwrap();
    }
    let rv = old.metadata.resource_version.unwrap();
    let mut s = api.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    match next(&mut s).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert!(e.message.starts_with(&format!("too old resource version: {rv} (")), "{}", e.message);
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    // An exact list at that version is gone too; at a recent one it shows the state of then.
    let lp = ListParams::default().at(&rv).matching(VersionMatch::Exact);
    assert!(matches!(api.list(&lp).await, Err(kube::Error::Api(s)) if s.code == 410));
    let recent = sim.cluster().resource_version() - 1;
    let lp = ListParams::default().at(&recent.to_string()).matching(VersionMatch::Exact);
    let then = api.list(&lp).await.unwrap();
    assert_eq!(then.items[0].data.as_ref().unwrap()["k"], "18");
}

#[tokio::test]
async fn idle_watches_get_bookmarks_and_end_at_their_timeout() {
    let sim = api_only().await;
    sim.cluster().set_bookmark_interval(Duration::from_millis(200));
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let rv = sim.cluster().resource_version();
    let wp = WatchParams { bookmarks: true, ..WatchParams::default() }.timeout(2);
    let mut s = api.watch(&wp, &rv.to_string()).await.unwrap().boxed();
    match next(&mut s).await {
        WatchEvent::Bookmark(b) => assert!(b.metadata.resource_version.parse::<u64>().unwrap() >= rv),
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    let ended = tokio::time::timeout(Duration::from_secs(6), async { while let Some(Ok(_)) = s.next().await {} }).await;
    assert!(ended.is_ok(), "timeoutSeconds=2 did not end the stream");
}
