//! Emulator throughput benchmark: simple writes (ConfigMap creates, then merge patches) from a few concurrent
//! clients over HTTP while many watchers stream the same namespace, all in one process.
//!
//! `cargo run --release -p kubesim --example throughput [-- --writes N --writers N --watchers N]`
//!
//! Prints writes/s, watch events delivered/s and the write-to-delivery latency (from just before the client
//! sends a write to a watcher reading its event) at p50/p99, with the target beside the figure. Bounded: the
//! write phase stops after `--max-seconds`, the drain after a few more seconds.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::Request;
use clap::Parser;
use futures::{AsyncBufReadExt, StreamExt};
use kube::Client;

const TARGET_WRITES_PER_SEC: f64 = 5_000.0;
const NAMESPACE: &str = "bench";
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Parser, Debug)]
struct Args {
    /// Total writes (creates + patches).
    #[arg(long, default_value_t = 20_000)]
    writes: usize,
    /// Concurrent writing clients.
    #[arg(long, default_value_t = 8)]
    writers: usize,
    /// Watchers streaming the namespace.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// ConfigMaps each writer creates and then patches in turn.
    #[arg(long, default_value_t = 20)]
    objects_per_writer: usize,
    /// Upper bound of the write phase.
    #[arg(long, default_value_t = 30)]
    max_seconds: u64,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let sim = kubesim::Sim::builder().start().await?;
    let client = sim.client();
    let epoch = Instant::now();

    post(&client, "/api/v1/namespaces", serde_json::json!({"metadata": {"name": NAMESPACE}})).await?;

    // Watchers: raw line streams (no typed decoding, so the client side costs little of the 2 cores).
    let received = Arc::new(AtomicU64::new(0));
    let connected = Arc::new(AtomicUsize::new(0));
    let last_event_ns = Arc::new(AtomicU64::new(0));
    let mut watchers = Vec::new();
    // One sample vector per watcher: uncontended locks, and samples survive the watcher being aborted.
    let samples: Vec<Arc<Mutex<Vec<u64>>>> = (0..args.watchers).map(|_| Arc::default()).collect();
    for mine in &samples {
        let (client, received, connected, last, mine) =
            (client.clone(), received.clone(), connected.clone(), last_event_ns.clone(), mine.clone());
        watchers.push(tokio::spawn(async move {
            let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps?watch=true&timeoutSeconds=600");
            let req = Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
            let stream = client.request_stream(req).await.map_err(|e| e.to_string())?;
            let mut lines = stream.lines();
            let mut first = true;
            while let Some(line) = lines.next().await {
                let line = line.map_err(|e| e.to_string())?;
                let now = epoch.elapsed().as_nanos() as u64;
                if first {
                    first = false;
                    connected.fetch_add(1, Ordering::Relaxed);
                }
                received.fetch_add(1, Ordering::Relaxed);
                last.fetch_max(now, Ordering::Relaxed);
                if let Some(sent) = sent_at(&line)
                    && let Ok(mut v) = mine.lock()
                {
                    v.push(now.saturating_sub(sent));
                }
            }
            Ok::<_, String>(())
        }));
    }

    // Every watcher has seen the sentinel before the clock starts.
    // No `t` in it: its delivery time includes the watchers connecting and is no fan-out sample.
    post(&client, &cm_path(), serde_json::json!({"metadata": {"name": "sentinel"}})).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while connected.load(Ordering::Relaxed) < args.watchers {
        if Instant::now() > deadline {
            return Err(format!(
                "only {} of {} watchers received the sentinel within 30 s",
                connected.load(Ordering::Relaxed),
                args.watchers
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let baseline = received.load(Ordering::Relaxed);

    // Writers.
    let write_deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let per_writer = args.writes.div_ceil(args.writers.max(1));
    let started = Instant::now();
    let started_ns = epoch.elapsed().as_nanos() as u64;
    let mut writers = Vec::new();
    for w in 0..args.writers.max(1) {
        let client = client.clone();
        let objects = args.objects_per_writer.max(1);
        let share = per_writer.min(args.writes.saturating_sub(w * per_writer));
        writers.push(tokio::spawn(async move {
            let mut done = 0usize;
            for i in 0..share {
                if Instant::now() > write_deadline {
                    break;
                }
                let name = format!("w{w}-{}", i % objects);
                if i < objects {
                    post(&client, &cm_path(), configmap(&name, epoch)).await?;
                } else {
                    let body = serde_json::json!({"data": {"t": epoch.elapsed().as_nanos().to_string()}});
                    let req = Request::patch(format!("{}/{name}", cm_path()))
                        .header("Content-Type", "application/merge-patch+json")
                        .body(serde_json::to_vec(&body)?)?;
                    client.request_text(req).await?;
                }
                done += 1;
            }
            Ok::<_, BoxError>(done)
        }));
    }
    let mut writes = 0usize;
    for w in writers {
        writes += w.await??;
    }
    let write_secs = started.elapsed().as_secs_f64();

    // Drain: wait until every watcher has every event, or give up after DRAIN.
    let expected = baseline + (writes * args.watchers) as u64;
    let drain_deadline = Instant::now() + DRAIN;
    while received.load(Ordering::Relaxed) < expected && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delivered = received.load(Ordering::Relaxed) - baseline;
    let delivery_secs = (last_event_ns.load(Ordering::Relaxed).saturating_sub(started_ns) as f64 / 1e9).max(write_secs);
    for w in &watchers {
        w.abort();
    }
    for w in watchers {
        if let Ok(Err(e)) = w.await {
            eprintln!("a watcher failed: {e}");
        }
    }
    let mut latencies: Vec<u64> = Vec::new();
    for s in &samples {
        if let Ok(v) = s.lock() {
            latencies.extend(v.iter().copied());
        }
    }
    latencies.sort_unstable();

    let writes_per_sec = writes as f64 / write_secs;
    println!("kubesim throughput ({} writers, {} watchers, {} cores)", args.writers, args.watchers, cores());
    println!("  writes:            {writes} in {write_secs:.2} s");
    println!(
        "  writes/s:          {writes_per_sec:.0}   (target >= {TARGET_WRITES_PER_SEC:.0}: {})",
        if writes_per_sec >= TARGET_WRITES_PER_SEC { "met" } else { "MISSED" }
    );
    println!(
        "  events delivered:  {delivered} of {} expected ({:.0}/s over {delivery_secs:.2} s){}",
        expected - baseline,
        delivered as f64 / delivery_secs,
        if delivered < expected - baseline { "  -- SOME EVENTS NOT DELIVERED within the drain time" } else { "" }
    );
    match (percentile(&latencies, 0.50), percentile(&latencies, 0.99)) {
        (Some(p50), Some(p99)) => println!(
            "  fan-out latency:   p50 {:.2} ms, p99 {:.2} ms ({} samples)",
            p50 as f64 / 1e6,
            p99 as f64 / 1e6,
            latencies.len()
        ),
        _ => println!("  fan-out latency:   no samples"),
    }
    Ok(())
}

fn cm_path() -> String {
    format!("/api/v1/namespaces/{NAMESPACE}/configmaps")
}

fn configmap(name: &str, epoch: Instant) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"t": epoch.elapsed().as_nanos().to_string()},
    })
}

async fn post(client: &Client, path: &str, body: serde_json::Value) -> Result<(), BoxError> {
    let req = Request::post(path).header("Content-Type", "application/json").body(serde_json::to_vec(&body)?)?;
    client.request_text(req).await?;
    Ok(())
}

/// The send time a writer put into `data.t`, found without parsing the whole event.
fn sent_at(line: &str) -> Option<u64> {
    let start = line.find("\"t\":\"")? + 5;
    let end = start + line[start..].find('"')?;
    line[start..end].parse().ok()
}

fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(idx).copied()
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
