//! Write throughput with watch fan-out: `cargo bench -p kubesim --bench throughput`.
//! Prints writes/s through the in-process Cluster API and through HTTP (kube client), each with 100 HTTP watchers
//! that must all receive every event. A measurement, not a test: it asserts nothing about timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use kubesim::Sim;
use kubesim::cluster::WriteOptions;
use serde_json::json;

const WATCHERS: usize = 100;

async fn start_watchers(sim: &Sim, delivered: &Arc<AtomicU64>) {
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let rv = sim.cluster().resource_version().to_string();
    for _ in 0..WATCHERS {
        let mut s = api.watch(&WatchParams::default().timeout(290), &rv).await.expect("watch").boxed();
        let delivered = delivered.clone();
        tokio::spawn(async move {
            while let Some(Ok(ev)) = s.next().await {
                if matches!(ev, WatchEvent::Added(_)) {
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

async fn wait_delivered(delivered: &AtomicU64, want: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if delivered.load(Ordering::Relaxed) >= want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

fn report(label: &str, writes: u64, write_time: Duration, fanout_time: Duration, complete: bool) {
    println!(
        "{label}: {writes} writes in {:.2}s = {:.0} writes/s; all {WATCHERS} watchers had every event after {:.2}s ({:.0} events/s delivered){}",
        write_time.as_secs_f64(),
        writes as f64 / write_time.as_secs_f64(),
        fanout_time.as_secs_f64(),
        (writes * WATCHERS as u64) as f64 / fanout_time.as_secs_f64(),
        if complete { "" } else { " [INCOMPLETE: some events not delivered in 120 s]" }
    );
}

async fn in_process(writes: u64) {
    let sim = Sim::builder().without_controllers().start().await.expect("sim");
    let delivered = Arc::new(AtomicU64::new(0));
    start_watchers(&sim, &delivered).await;
    let rt = sim.cluster().resolve("", "v1", "configmaps").expect("configmaps");
    let opts = WriteOptions { field_manager: Some("bench".into()), ..WriteOptions::default() };
    let start = Instant::now();
    for i in 0..writes {
        let obj = json!({"metadata": {"name": format!("c{i}")}, "data": {"k": "v"}});
        sim.cluster().create(&rt, Some("default"), obj, &opts).expect("create");
        if i % 256 == 0 {
            // Let the watchers' tasks run on this runtime too.
            tokio::task::yield_now().await;
        }
    }
    let write_time = start.elapsed();
    let complete = wait_delivered(&delivered, writes * WATCHERS as u64).await;
    report("in-process Cluster::create", writes, write_time, start.elapsed(), complete);
}

async fn over_http(writes: u64, concurrency: u64) {
    let sim = Sim::builder().without_controllers().start().await.expect("sim");
    let delivered = Arc::new(AtomicU64::new(0));
    start_watchers(&sim, &delivered).await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (t..writes).step_by(concurrency as usize) {
                    let cm: ConfigMap =
                        serde_json::from_value(json!({"metadata": {"name": format!("c{i}")}, "data": {"k": "v"}}))
                            .expect("configmap");
                    api.create(&PostParams::default(), &cm).await.expect("create");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer");
    }
    let write_time = start.elapsed();
    let complete = wait_delivered(&delivered, writes * WATCHERS as u64).await;
    report(&format!("HTTP POST x{concurrency} (kube client)"), writes, write_time, start.elapsed(), complete);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        in_process(20_000).await;
        over_http(10_000, 16).await;
    });
}
