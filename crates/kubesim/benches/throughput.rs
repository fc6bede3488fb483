//! Write throughput with watch fan-out: `cargo bench -p kubesim --bench throughput`.
//! Prints writes/s through the in-process Cluster API and through HTTP (kube client), each with 100 HTTP watchers
//! that must all receive every event. A measurement, not a test: it asserts nothing about timing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kubesim::Sim;
use kubesim::cluster::WriteOptions;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WATCHERS: usize = 100;

/// Raw HTTP watch streams counting event lines, so the numbers measure the server, not client-side decoding.
async fn start_watchers(sim: &Sim, delivered: &Arc<AtomicU64>) {
    let rv = sim.cluster().resource_version();
    for _ in 0..WATCHERS {
        let mut s = tokio::net::TcpStream::connect(sim.addr()).await.expect("connect");
        let req = format!(
            "GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=290 HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            sim.addr(),
            sim.token()
        );
        s.write_all(req.as_bytes()).await.expect("request");
        let delivered = delivered.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            let mut prev = 0u8;
            loop {
                let n = match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                // Event lines end in a bare `\n`; HTTP and chunk framing end in `\r\n`.
                let mut events = 0u64;
                for &b in &buf[..n] {
                    if b == b'\n' && prev != b'\r' {
                        events += 1;
                    }
                    prev = b;
                }
                delivered.fetch_add(events, Ordering::Relaxed);
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
