//! What the operator's integration tests share: the repository root, the one check of "Ready for the current
//! generation", polling with a deadline, the in-process cluster (`harness`) and the operator binary as a child
//! process (`operator_process`).
#![allow(dead_code)]

pub mod harness;
pub mod operator_process;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// True when the Microservice's Ready condition is True for its current `metadata.generation`. Works on what the
/// tests hold: a typed Microservice, or the JSON the emulator's change feed carries (chaos).
pub fn ready_for_current_generation(ms: &impl Serialize) -> bool {
    // Serializing a Microservice or a JSON value cannot fail; a failure reads as "not ready".
    let Ok(ms) = serde_json::to_value(ms) else { return false };
    let generation = ms.pointer("/metadata/generation").and_then(Value::as_i64);
    ms.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True" && c["observedGeneration"].as_i64() == generation)
    })
}

/// Polls `probe` every `interval` until it returns Some, failing the test with `what` after `deadline`.
pub async fn poll<T, F, Fut>(what: &str, deadline: Duration, interval: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(interval).await;
    }
}

/// The sample Microservice from `deploy/samples/todo-api.yaml`.
pub fn sample_microservice() -> microservice_core::crd::Microservice {
    let path = repo_root().join("deploy/samples/todo-api.yaml");
    let text = std::fs::read_to_string(&path).expect("read the sample");
    serde_saphyr::from_str(&text).expect("the sample is a Microservice")
}
