//! Fault injection seen by real clients: injected status codes (with Retry-After), a pause that holds requests,
//! and a kube-runtime watcher that survives dropped streams and forced 410s without losing an update.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{api_only, start};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kubesim::Sim;
use kubesim::faults::{ErrorRule, FaultConfig, WatchRule};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": value}})).unwrap()
}

fn rule(verb: &str, resource: &str, code: u16) -> ErrorRule {
    ErrorRule { verb: verb.into(), resource: resource.into(), rate: 1.0, code, retry_after_seconds: Some(7) }
}

/// One raw HTTP/1.1 request: (status code, headers and body as text).
async fn raw_get(sim: &Sim, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        sim.addr(),
        sim.token()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text)
}

#[tokio::test]
async fn clients_see_the_injected_codes() {
    let sim = start(Sim::builder().without_controllers().faults(FaultConfig {
        seed: 1,
        errors: vec![rule("create", "configmaps", 409), rule("get", "configmaps", 500), rule("list", "secrets", 429)],
        ..Default::default()
    }))
    .await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let err = api.create(&PostParams::default(), &cm("a", "1")).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "Conflict"), "{err:?}");
    let err = api.get("a").await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 500 && s.reason == "InternalError"), "{err:?}");

    let (code, text) = raw_get(&sim, "/api/v1/namespaces/default/secrets").await;
    assert_eq!(code, 429);
    assert!(text.to_lowercase().contains("retry-after: 7"), "{text}");
    assert!(text.contains("\"retryAfterSeconds\":7"), "{text}");

    // Changed at run time: the faults stop.
    sim.faults().set_config(FaultConfig::default());
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    assert_eq!(raw_get(&sim, "/api/v1/namespaces/default/secrets").await.0, 200);
}

#[tokio::test]
async fn a_pause_holds_requests_until_released() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    sim.faults().set_paused(true);
    let pending = tokio::spawn({
        let api = api.clone();
        async move { api.create(&PostParams::default(), &cm("held", "1")).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!pending.is_finished(), "the request was not held");
    assert!(
        sim.cluster().get(&sim.cluster().resolve("", "v1", "configmaps").unwrap(), Some("default"), "held").is_err()
    );
    sim.faults().set_paused(false);
    let created = tokio::time::timeout(Duration::from_secs(10), pending).await.unwrap().unwrap().unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("held"));
}

#[tokio::test]
async fn a_watcher_recovers_from_dropped_streams_and_410s_without_losing_updates() {
    let sim = start(Sim::builder().without_controllers().faults(FaultConfig {
        watch: vec![WatchRule { resource: "configmaps".into(), drop_after_events: Some(3), drop_after_ms: None }],
        ..Default::default()
    }))
    .await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let mut seen = watcher(api.clone(), watcher::Config::default()).default_backoff().applied_objects().boxed();
    let mut latest: BTreeMap<String, String> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    // Each write waits until the watcher has delivered the previous one, so every write crosses a stream.
    for step in 0..20 {
        let (name, value) = (format!("cm-{}", step % 10), if step < 10 { "0" } else { "final" });
        if step < 10 {
            api.create(&PostParams::default(), &cm(&name, value)).await.unwrap();
        } else {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"data": {"v": value}}))).await.unwrap();
        }
        if step == 7 || step == 15 {
            sim.faults().force_gone("configmaps");
        }
        while latest.get(&name).map(String::as_str) != Some(value) {
            match tokio::time::timeout_at(deadline, seen.next()).await {
                Ok(Some(Ok(cm))) => {
                    let v = cm.data.unwrap_or_default().get("v").cloned().unwrap_or_default();
                    latest.insert(cm.metadata.name.unwrap(), v);
                }
                // The 410s surface as errors the watcher recovers from by re-listing.
                Ok(Some(Err(e))) => eprintln!("watcher error (recovered): {e}"),
                other => panic!("watcher ended or timed out ({other:?}); saw {latest:?}"),
            }
        }
    }
    assert!(latest.len() == 10 && latest.values().all(|v| v == "final"), "{latest:?}");
    let watches = sim.requests().count("watch", "configmaps");
    assert!(watches >= 6, "streams were dropped and re-opened ({watches} watches)");
    assert!(sim.requests().count("list", "configmaps") >= 3, "the 410s made the watcher re-list");
}
