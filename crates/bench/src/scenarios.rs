//! The scenarios. Per N: the floor on a fresh cluster first, then converge, restart, steady state, drift repair
//! and the update wave in that order on one cluster, each starting from the state the previous one left. The
//! cluster is kubesim or a real control plane (`--backend`); the scenarios are the same.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubesim::RequestCounts;
use serde_json::{Value, json};

use crate::child::{OperatorProcess, Usage};
use crate::env::{self, Env};
use crate::error::{BenchError, Result};
use crate::fixture::{Backend, IMAGE_V2, Kind, name};
use crate::floor::{self, FloorTimes};
use crate::observe;
use crate::report::{Report, percentile, write_json};
use crate::scrape::Buckets;
use crate::spread;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    Converge,
    Floor,
    Restart,
    Steady,
    Drift,
    Update,
    /// Only when named: N Microservices beside `--unrelated` Deployments and Services the operator does not own.
    Unrelated,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Where to run: the in-process emulator, or a real control plane with kwok nodes.
    #[arg(long, value_enum, default_value_t = Backend::Kubesim)]
    pub backend: Backend,
    /// Numbers of Microservices, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1000])]
    pub n: Vec<usize>,
    /// Scenarios to report, comma-separated (all when absent). Converge always runs when a later one is chosen:
    /// they start from its converged state.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenario: Vec<Scenario>,
    /// The operator's resync interval (seconds) from the restart on; the steady-state window spans one resync.
    #[arg(long, default_value_t = 20)]
    pub resync_interval: u64,
    /// Children deleted or edited one at a time in the drift scenario.
    #[arg(long, default_value_t = 200)]
    pub drift_edits: usize,
    /// Deployments and Services (each) that belong to nobody's Microservice, in the unrelated scenario.
    #[arg(long, default_value_t = 10_000)]
    pub unrelated: usize,
    /// Where the JSON reports go (default: target/bench, and target/bench/real for the real backend).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Runs everything this many times, each round on fresh clusters with its reports under `round-K/`, then
    /// prints each figure's smallest, median and largest value and how many rounds met its target.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub repeat: u16,
}

impl RunArgs {
    /// The scenarios named, or all but `unrelated` (minutes of setup) when none is.
    pub fn wants(&self, scenario: Scenario) -> bool {
        self.scenario.contains(&scenario) || (self.scenario.is_empty() && scenario != Scenario::Unrelated)
    }
}

const TARGET_REQUESTS_PER_CR: f64 = 5.0;
const TARGET_FLOOR_RATIO: f64 = 1.2;
const TARGET_UPDATE_FLOOR_RATIO: f64 = 1.3;
const TARGET_RSS_MIB: f64 = 40.0;
const TARGET_REPAIR_P99_MS: f64 = 500.0;
const TARGET_READY_P99_MS: f64 = 100.0;
const TARGET_CPU_MS_PER_CR: f64 = 1.2;
const TARGET_MARGINAL_KIB: f64 = 3.0;
const TARGET_UNRELATED_MIB: f64 = 10.0;

fn default_out() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("bench")
}

pub async fn run(args: RunArgs) -> Result<()> {
    let out = args.out.clone().unwrap_or_else(|| match args.backend {
        Backend::Kubesim => default_out(),
        Backend::Real => default_out().join("real"),
    });
    std::fs::create_dir_all(&out).map_err(BenchError::io(format!("cannot create {}", out.display())))?;
    let machine = machine();
    println!("machine: {}", machine["summary"].as_str().unwrap_or_default());
    println!("backend: {}", args.backend.name());
    write_json(&out.join("machine.json"), "the machine", &machine)?;
    let rounds = usize::from(args.repeat);
    let mut missed = 0;
    let mut measured = Vec::new();
    for round in 1..=rounds {
        let out = if rounds == 1 { out.clone() } else { out.join(format!("round-{round}")) };
        if rounds > 1 {
            println!("\n#### round {round} of {rounds}");
            std::fs::create_dir_all(&out).map_err(BenchError::io(format!("cannot create {}", out.display())))?;
        }
        let (reports, round_missed) = one_round(&args, out).await?;
        missed += round_missed;
        measured.push(reports);
    }
    if rounds > 1 {
        let spreads = spread::spread(&measured);
        spread::print(&spreads, rounds);
        let path = out.join("spread.json");
        write_json(&path, "the spread", &spreads)?;
        println!("  written to {}", path.display());
    }
    match (missed, rounds) {
        (0, _) => println!("\nevery target met"),
        (_, 1) => println!("\n{missed} target(s) MISSED (see above)"),
        _ => println!("\n{missed} target verdict(s) MISSED over {rounds} rounds (see above)"),
    }
    Ok(())
}

/// Every wanted scenario at every N once, writing into `out`: the reports and how many targets they missed.
async fn one_round(args: &RunArgs, out: PathBuf) -> Result<(Vec<Report>, usize)> {
    let mut published = Published { out, reports: Vec::new(), missed: 0 };
    let mut peaks: Vec<(usize, f64)> = Vec::new();
    for &n in &args.n {
        let first = published.reports.len();
        reports_at(args, n, &mut published).await?;
        if let Some(peak) = converge_peak(&published.reports[first..]) {
            peaks.push((n, peak));
        }
    }
    let missed = published.missed + usize::from(marginal_rss_missed(&peaks));
    Ok((published.reports, missed))
}

/// The reports so far, each printed and written as its scenario ends: a run stopped midway keeps what it measured.
struct Published {
    out: PathBuf,
    reports: Vec<Report>,
    missed: usize,
}

impl Published {
    fn add(&mut self, report: Report) -> Result<()> {
        report.print();
        let path = report.write(&self.out)?;
        println!("  written to {}", path.display());
        self.missed += report.missed();
        self.reports.push(report);
        Ok(())
    }
}

/// The wanted scenarios at `n`: the floor on its own cluster, those that start from converge on one, and unrelated
/// on another.
async fn reports_at(args: &RunArgs, n: usize, published: &mut Published) -> Result<()> {
    let first = published.reports.len();
    let mut floor_times = None;
    if args.wants(Scenario::Floor) {
        let (floor_reports, times) =
            floor::floor(args.backend, n, args.wants(Scenario::Update), &published.out).await?;
        floor_times = Some(times);
        for report in floor_reports {
            published.add(report)?;
        }
    }
    if args.wants(Scenario::Converge) || AFTER_CONVERGE.iter().any(|s| args.wants(*s)) {
        from_converge(args, n, floor_times.as_ref(), published).await?;
    }
    if args.wants(Scenario::Unrelated) {
        let peak = converge_peak(&published.reports[first..]);
        let report = unrelated(args.backend, n, args.unrelated, peak, &published.out).await?;
        published.add(report)?;
    }
    Ok(())
}

/// The scenarios that start from converge's state.
const AFTER_CONVERGE: [Scenario; 4] = [Scenario::Restart, Scenario::Steady, Scenario::Drift, Scenario::Update];

/// Converge, then restart, steady state, drift repair and the update wave on the same cluster, each from the state
/// the previous one left; only the wanted ones are reported.
async fn from_converge(args: &RunArgs, n: usize, floor: Option<&FloorTimes>, published: &mut Published) -> Result<()> {
    let wanted = |s: Scenario| args.wants(s);
    let env = Env::start(args.backend, &published.out).await?;
    let (report, op) = converge(&env, n, floor.map(|f| f.converge)).await?;
    if wanted(Scenario::Converge) {
        published.add(report)?;
    }
    if !AFTER_CONVERGE.iter().any(|s| wanted(*s)) {
        return Ok(());
    }
    let (report, mut op, started) = restart(&env, n, op, args).await?;
    if wanted(Scenario::Restart) {
        published.add(report)?;
    }
    if wanted(Scenario::Steady) {
        published.add(steady(&env, n, &mut op, started, args).await?)?;
    }
    if wanted(Scenario::Drift) {
        published.add(drift(&env, n, &mut op, args.drift_edits).await?)?;
    }
    if wanted(Scenario::Update) {
        published.add(update(&env, n, &mut op, floor.and_then(|f| f.update)).await?)?;
    }
    Ok(())
}

/// Converge's peak RSS among `reports`, if it ran.
fn converge_peak(reports: &[Report]) -> Option<f64> {
    reports
        .iter()
        .filter(|r| r.scenario == "converge")
        .find_map(|r| r.figures.iter().find(|f| f.metric == PEAK_RSS))
        .and_then(|f| f.number)
}

/// Prints the peak RSS each further Microservice costs, between the smallest and the largest N; true when over
/// the target.
fn marginal_rss_missed(peaks: &[(usize, f64)]) -> bool {
    let (Some(low), Some(high)) =
        (peaks.iter().min_by_key(|p| p.0).copied(), peaks.iter().max_by_key(|p| p.0).copied())
    else {
        return false;
    };
    if high.0 <= low.0 {
        return false;
    }
    let kib = (high.1 - low.1) * 1024.0 / (high.0 - low.0) as f64;
    let pass = kib <= TARGET_MARGINAL_KIB;
    println!(
        "\nmarginal peak RSS per Microservice between N={} and N={}: {kib:.2} KiB (target <= 3 KiB) {}",
        low.0,
        high.0,
        if pass { "PASS" } else { "MISSED" }
    );
    !pass
}

/// CPU model, cores and memory, from /proc and the scheduler, and how fast the machine is right now.
fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mem_gib = mem_kib as f64 / (1024.0 * 1024.0);
    let speed = crate::calibrate::desired_deployments_ms();
    let speed_text = speed.map_or_else(String::new, |ms| {
        format!("; 1,000 desired Deployments built, encoded and decoded in {ms:.1} ms (the speed figures scale with)")
    });
    json!({
        "cpu": model,
        "cores": cores,
        "memory_gib": (mem_gib * 10.0).round() / 10.0,
        "calibration_ms_per_1000_deployments": speed.map(|ms| (ms * 10.0).round() / 10.0),
        "summary": format!("{model}, {cores} cores, {mem_gib:.1} GiB RAM{speed_text}"),
    })
}

/// Requests without watches, by "verb resource".
fn by_verb(counts: &RequestCounts) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, v) in &counts.counts {
        if k.verb != "watch" {
            *out.entry(format!("{} {}", k.verb, k.resource)).or_insert(0) += v;
        }
    }
    out
}

pub(crate) fn non_watch(counts: &RequestCounts) -> u64 {
    counts.total() - counts.verb("watch")
}

pub(crate) fn per_cr_note(counts: &RequestCounts, n: usize) -> String {
    let parts: Vec<String> =
        by_verb(counts).iter().map(|(k, v)| format!("{k} {:.2} ({v})", *v as f64 / n as f64)).collect();
    let failed: Vec<String> = counts
        .counts
        .iter()
        .filter(|(k, _)| k.code >= 400)
        .map(|(k, v)| format!("{} {} {}: {v}", k.verb, k.resource, k.code))
        .collect();
    let total: u64 = counts.counts.iter().filter(|(k, _)| k.code >= 400).map(|(_, v)| v).sum();
    let which = if failed.is_empty() { String::new() } else { format!(" ({})", failed.join(", ")) };
    format!(
        "requests per CR by verb, the count in brackets (watch excluded): {}; {total} answered >= 400{which}",
        parts.join(", ")
    )
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

async fn converge(env: &Env, n: usize, floor_time: Option<Duration>) -> Result<(Report, OperatorProcess)> {
    env.create_microservices(n).await?;
    let before = env.requests();
    let started = Instant::now();
    let mut op = OperatorProcess::spawn(&env.kubeconfig, Duration::from_secs(300))?;
    // The server's histograms hold what came before too (the fixture's creates, the floor client's writes).
    let urgent_before = Urgent::now(env, &op).await;
    let last_ready = env.wait_all_ready(n, 1, env.timeout_for(n), &mut op).await?;
    let took = last_ready.saturating_duration_since(started);
    env.wait_quiet(Duration::from_millis(500), Duration::from_secs(10)).await;
    let counts = env.requests().since(&before);
    let usage = op.usage()?;
    // After the CPU figure: serving /metrics costs the operator a little.
    let urgent = Urgent::now(env, &op).await.since(&urgent_before);

    let mut r = Report::new("converge", n);
    r.info("time until all Ready (generation 1)", secs(took), Some(took.as_secs_f64()));
    let per_cr = non_watch(&counts) as f64 / n as f64;
    r.target(
        "API requests per CR (watch excluded)",
        format!("{per_cr:.2}"),
        per_cr,
        "<= 5",
        per_cr <= TARGET_REQUESTS_PER_CR,
    );
    duplicate_creates(&mut r, &counts, n);
    let (latencies, degraded, deployment_changes) = {
        let seen = env.observer.seen();
        (seen.ready_latency_ms.clone(), seen.degraded.clone(), seen.deployment_changes)
    };
    ready_latency(&mut r, latencies, Judged::Target);
    urgent.report(&mut r);
    // What the operator had to look at: the cluster's controllers decide how many Deployment changes a rollout takes.
    let changes = deployment_changes as f64 / n as f64;
    r.info("Deployment changes seen per CR (creates and status writes)", format!("{changes:.2}"), Some(changes));
    if let Some(reconciles) = op.reconciles() {
        let per_cr = reconciles as f64 / n as f64;
        r.info("reconciles per CR", format!("{per_cr:.2}"), Some(per_cr));
    }
    let cpu_ms = usage.cpu_seconds * 1000.0 / n as f64;
    r.target(
        "operator CPU time per Microservice",
        format!("{cpu_ms:.2} ms"),
        cpu_ms,
        "<= 1.2 ms",
        cpu_ms <= TARGET_CPU_MS_PER_CR,
    );
    let writes = counts.writes() as f64 / n as f64;
    r.info("writes per CR", format!("{writes:.2}"), Some(writes));
    r.info("operator CPU time", format!("{:.2} s", usage.cpu_seconds), Some(usage.cpu_seconds));
    rss_figure(&mut r, n, &usage);
    r.info("operator RSS when converged (VmRSS)", format!("{:.1} MiB", usage.rss_mib()), Some(usage.rss_mib()));
    if let Some(floor) = floor_time {
        floor_ratio(&mut r, took, floor, TARGET_FLOOR_RATIO);
    }
    r.note(per_cr_note(&counts, n));
    degraded_note(&mut r, &degraded);
    r.note(env::reasons_note(&BTreeMap::new(), &env.event_reasons().await));
    Ok((r, op))
}

/// Why a wave cost more than its transitions: each turn into Degraded (a rollout past its progress deadline on an
/// overloaded cluster, a conflict) is a status patch and a Warning Event, and the recovery another status patch.
fn degraded_note(r: &mut Report, degraded: &[String]) {
    if !degraded.is_empty() {
        r.note(format!(
            "Microservices that turned Degraded before Ready: {}; each turn is told in a status patch and a \
             Warning Event, and the recovery in another status patch, beyond a plain rollout's requests",
            observe::degraded_summary(degraded)
        ));
    }
}

/// The operator's time against the floor client's for the same wave, with its target.
fn floor_ratio(r: &mut Report, took: Duration, floor: Duration, target: f64) {
    let ratio = took.as_secs_f64() / floor.as_secs_f64().max(1e-6);
    let value = format!("{ratio:.2}x ({} / {})", secs(took), secs(floor));
    r.target("operator time / floor time", value, ratio, &format!("<= {target}x"), ratio <= target);
}

const PEAK_RSS: &str = "operator peak RSS (VmHWM)";

fn rss_figure(r: &mut Report, _n: usize, usage: &Usage) {
    let value = format!("{:.1} MiB", usage.peak_rss_mib());
    r.target(PEAK_RSS, value, usage.peak_rss_mib(), "<= 40 MiB", usage.peak_rss_mib() <= TARGET_RSS_MIB);
}

/// Creates per CR of each child kind (exactly 1) and creates answered AlreadyExists (409; none).
fn duplicate_creates(r: &mut Report, counts: &RequestCounts, n: usize) {
    for resource in ["deployments", "services"] {
        let creates: u64 =
            counts.counts.iter().filter(|(k, _)| k.verb == "create" && k.resource == resource).map(|(_, v)| v).sum();
        let per_cr = creates as f64 / n as f64;
        r.target(&format!("creates of {resource} per CR"), format!("{per_cr:.3}"), per_cr, "= 1", creates == n as u64);
    }
    let exists: u64 = counts
        .counts
        .iter()
        .filter(|(k, _)| k.verb == "create" && k.code == 409 && k.resource != "events")
        .map(|(_, v)| v)
        .sum();
    r.target("creates answered AlreadyExists (409)", exists.to_string(), exists as f64, "0", exists == 0);
}

/// The operator's own histogram of urgent reconciles (a completed rollout seen in its cache → the reconcile that
/// answered it has its status write answered): its share of the Ready latency, the rest being the server's watch
/// delivery to the operator and to the observer.
const URGENT_LAG: &str = "microservice_urgent_reconcile_lag_seconds";
/// Of that, the wait before its reconcile started (a slot of the Ready lane, then the object's lock).
const URGENT_WAIT: &str = "microservice_urgent_reconcile_wait_seconds";
/// Of the wait, the object's lock (held by a reconcile of the same Microservice already running).
const URGENT_LOCK_WAIT: &str = "microservice_urgent_reconcile_lock_wait_seconds";

/// kube-apiserver's histogram of the time it took to serve a request, and the operator's writes by its labels:
/// the server's own share of each (a write's round trip is this and the way to and from the server).
const SERVER_DURATION: &str = "apiserver_request_duration_seconds";
const SERVED: [(&str, [(&str, &str); 3]); 3] = [
    ("status write", [("resource", "microservices"), ("subresource", "status"), ("verb", "PATCH")]),
    ("Deployment create", [("resource", "deployments"), ("subresource", ""), ("verb", "POST")]),
    ("Service create", [("resource", "services"), ("subresource", ""), ("verb", "POST")]),
];

/// The operator's urgent-reconcile histograms at one moment, and (on the real control plane) the server's time
/// serving each of the operator's writes (`SERVED`).
struct Urgent {
    lag: Buckets,
    wait: Buckets,
    lock_wait: Buckets,
    /// Per write of `SERVED`, when the server keeps the histogram.
    served: Vec<Option<Buckets>>,
}

impl Urgent {
    async fn now(env: &Env, op: &OperatorProcess) -> Urgent {
        let text = op.metrics().await;
        Urgent {
            lag: Buckets::parse(&text, URGENT_LAG),
            wait: Buckets::parse(&text, URGENT_WAIT),
            lock_wait: Buckets::parse(&text, URGENT_LOCK_WAIT),
            served: {
                // One read of the server's /metrics for every write.
                let server = env.server_metrics().await;
                SERVED
                    .iter()
                    .map(|(_, labels)| Some(Buckets::parse_where(server.as_deref()?, SERVER_DURATION, labels)))
                    .collect()
            },
        }
    }

    fn since(&self, before: &Urgent) -> Urgent {
        Urgent {
            lag: self.lag.since(&before.lag),
            wait: self.wait.since(&before.wait),
            lock_wait: self.lock_wait.since(&before.lock_wait),
            served: self.served.iter().zip(&before.served).map(|(a, b)| Some(a.as_ref()?.since(b.as_ref()?))).collect(),
        }
    }

    fn report(&self, r: &mut Report) {
        let quantiles = |b: &Buckets| Some((b.quantile(0.5)? * 1000.0, b.quantile(0.99)? * 1000.0));
        let Some((p50, p99)) = quantiles(&self.lag) else {
            r.info("operator's share: urgent reconciles", "none observed (no /metrics?)".to_string(), None);
            return;
        };
        let count = self.lag.count();
        r.info("operator's share: urgent reconciles", count.to_string(), Some(count as f64));
        r.info("operator's share p50 (cache saw it -> status committed)", format!("{p50:.1} ms"), Some(p50));
        r.info("operator's share p99", format!("{p99:.1} ms"), Some(p99));
        if let Some((p50, p99)) = quantiles(&self.wait) {
            r.info(
                "of which waiting to start (lane slot, lock), p50 / p99",
                format!("{p50:.1} / {p99:.1} ms"),
                Some(p99),
            );
        }
        if let Some((p50, p99)) = quantiles(&self.lock_wait) {
            r.info("of which the object's lock, p50 / p99", format!("{p50:.1} / {p99:.1} ms"), Some(p99));
        }
        let mut served = false;
        for ((what, _), buckets) in SERVED.iter().zip(&self.served) {
            if let Some((p50, p99)) = buckets.as_ref().and_then(quantiles) {
                let label = format!("server's time serving a {what}, p50 / p99");
                r.info(&label, format!("{p50:.1} / {p99:.1} ms"), Some(p99));
                served = true;
            }
        }
        if served {
            r.note("the server's time is kube-apiserver's apiserver_request_duration_seconds (its buckets are coarse: 5, 25, 50, 100, 200, 400, 600, 800 ms, 1 s, ...)");
        }
        r.note("the operator's share is estimated from its histograms' buckets (powers of two from 0.5 ms), as histogram_quantile does");
    }
}

/// Whose Ready latency a report prints: the operator's is judged against the target; the floor client's is the
/// reference beside it (what the server and the machine leave to any client).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Target,
    Reference,
}

/// p50 and p99 of the time from a Deployment's completed rollout committed to its CR's Ready=True committed.
pub fn ready_latency(r: &mut Report, mut samples: Vec<f64>, judged: Judged) {
    samples.sort_by(f64::total_cmp);
    r.info("Ready latency samples", samples.len().to_string(), Some(samples.len() as f64));
    let p50 = percentile(&samples, 50.0);
    r.info("Ready latency p50 (rollout complete -> Ready committed)", format!("{p50:.1} ms"), Some(p50));
    let p99 = percentile(&samples, 99.0);
    match judged {
        Judged::Target => {
            r.target("Ready latency p99", format!("{p99:.1} ms"), p99, "< 100 ms", p99 < TARGET_READY_P99_MS)
        }
        Judged::Reference => r.info("Ready latency p99", format!("{p99:.1} ms"), Some(p99)),
    }
}

/// N Microservices converge on a fresh cluster whose namespace also holds `count` Deployments and Services of
/// someone else's: the operator caches every child kind of the namespace (it must see a same-name object it does
/// not own), so this is what a busy namespace costs it.
async fn unrelated(backend: Backend, n: usize, count: usize, converge_peak: Option<f64>, out: &Path) -> Result<Report> {
    let env = Env::start(backend, out).await?;
    let started = Instant::now();
    env.create_unrelated(count).await?;
    eprintln!("  created {count} unrelated Deployments and Services in {}", secs(started.elapsed()));
    env.create_microservices(n).await?;
    let before = env.requests();
    let started = Instant::now();
    let mut op = OperatorProcess::spawn(&env.kubeconfig, Duration::from_secs(300))?;
    let last_ready = env.wait_all_ready(n, 1, env.timeout_for(n + count / 10), &mut op).await?;
    let took = last_ready.saturating_duration_since(started);
    env.wait_quiet(Duration::from_millis(500), Duration::from_secs(10)).await;
    let counts = env.requests().since(&before);
    let usage = op.usage()?;
    let mut r = Report::new("unrelated", n);
    r.info("unrelated Deployments and Services (each)", count.to_string(), Some(count as f64));
    r.info("time until all Ready (generation 1)", secs(took), Some(took.as_secs_f64()));
    let writes = counts.writes() as f64 / n as f64;
    r.info("writes per CR", format!("{writes:.2}"), Some(writes));
    r.info(PEAK_RSS, format!("{:.1} MiB", usage.peak_rss_mib()), Some(usage.peak_rss_mib()));
    match converge_peak {
        Some(alone) => {
            let over = usage.peak_rss_mib() - alone;
            r.target(
                "peak RSS over converge's at this N (no unrelated objects)",
                format!("{over:.1} MiB ({:.1} - {alone:.1})", usage.peak_rss_mib()),
                over,
                "<= 10 MiB",
                over <= TARGET_UNRELATED_MIB,
            );
        }
        None => r.note("run with --scenario converge,unrelated to compare with the figure without unrelated objects"),
    }
    r.note("the unrelated Deployments have 0 replicas: pods are not what the operator caches");
    r.note(per_cr_note(&counts, n));
    Ok(r)
}

/// Kills the converged operator (SIGKILL) and starts a new one with the short resync interval.
async fn restart(
    env: &Env,
    n: usize,
    op: OperatorProcess,
    args: &RunArgs,
) -> Result<(Report, OperatorProcess, Instant)> {
    op.kill()?;
    let before = env.requests();
    let started = Instant::now();
    let resync = Duration::from_secs(args.resync_interval);
    let mut op = OperatorProcess::spawn(&env.kubeconfig, resync)?;
    let mut r = Report::new("restart", n);
    // Every object is queued by the initial list; the queue has drained once the count has reached N and then
    // stopped moving (the operator tells its count every 20 ms while it moves).
    let quiet = Duration::from_secs(1);
    let deadline = started + env.timeout_for(n);
    let mut first = None;
    let mut last = (0i64, started);
    let outcome = loop {
        op.check_alive()?;
        let count = op.reconciles().unwrap_or(0);
        let now = Instant::now();
        if count > 0 && first.is_none() {
            first = Some(now);
        }
        if count != last.0 {
            last = (count, now);
        }
        if count >= n as i64 && now.duration_since(last.1) >= quiet {
            break Some(last.1);
        }
        if now > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let counts = env.requests().since(&before);
    if let Some(f) = first {
        r.info(
            "time until caches synced and a first reconcile done",
            secs(f - started),
            Some((f - started).as_secs_f64()),
        );
    }
    match outcome {
        Some(done) => {
            r.info("time until every object reconciled", secs(done - started), Some((done - started).as_secs_f64()))
        }
        None => r.target(
            "time until every object reconciled",
            format!("not within {} ({} reconciles)", secs(env.timeout_for(n)), last.0),
            f64::NAN,
            "finishes",
            false,
        ),
    }
    r.info("reconciles", last.0.to_string(), Some(last.0 as f64));
    let writes = counts.writes();
    r.target("writes sent", writes.to_string(), writes as f64, "0", writes == 0);
    r.note(per_cr_note(&counts, n));
    Ok((r, op, started))
}

/// Requests over a window that contains one resync tick of the operator started at `started`.
async fn steady(env: &Env, n: usize, op: &mut OperatorProcess, started: Instant, args: &RunArgs) -> Result<Report> {
    let resync = Duration::from_secs(args.resync_interval);
    let since_start = started.elapsed();
    let ticks = (since_start.as_secs_f64() / resync.as_secs_f64()).floor() as u32 + 1;
    // Long enough after the tick for N reconciles to run.
    let margin = Duration::from_secs(5) + Duration::from_millis(2 * n as u64);
    let end = started + resync * ticks + margin;
    let before = env.requests();
    let reconciles_before = op.reconciles().unwrap_or(0);
    let window_start = Instant::now();
    while Instant::now() < end {
        op.check_alive()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let window = window_start.elapsed();
    let counts = env.requests().since(&before);
    let reconciled = op.reconciles().unwrap_or(0) - reconciles_before;
    let minutes = window.as_secs_f64() / 60.0;
    let mut r = Report::new("steady", n);
    r.info("window", secs(window), Some(window.as_secs_f64()));
    r.info("reconciles in the window (the resync)", reconciled.to_string(), Some(reconciled as f64));
    let per_min = non_watch(&counts) as f64 / minutes;
    r.info("requests per minute (watch excluded)", format!("{per_min:.1}"), Some(per_min));
    let watches = counts.verb("watch") as f64 / minutes;
    r.info("watch requests per minute (re-established streams)", format!("{watches:.1}"), Some(watches));
    let writes = counts.writes();
    r.target("writes in the window", writes.to_string(), writes as f64, "0", writes == 0);
    if reconciled < n as i64 {
        r.note(format!(
            "only {reconciled} reconciles ran in the window, fewer than N: the resync did not cover every object, so \
             0 writes proves less than it should"
        ));
    }
    r.note(per_cr_note(&counts, n));
    Ok(r)
}

#[derive(Clone, Copy, Debug)]
enum Edit {
    DeleteDeployment,
    ScaleDeployment,
    DeleteService,
}

impl Edit {
    const ALL: [Edit; 3] = [Edit::DeleteDeployment, Edit::ScaleDeployment, Edit::DeleteService];

    fn kind(self) -> Kind {
        match self {
            Edit::DeleteService => Kind::Service,
            _ => Kind::Deployment,
        }
    }
}

/// How long the operator is given to repair one edit.
const REPAIR_LIMIT: Duration = Duration::from_secs(10);

/// Deletes or edits children one at a time, each on a Ready CR, and times until the operator has repaired it.
async fn drift(env: &Env, n: usize, op: &mut OperatorProcess, edits: usize) -> Result<Report> {
    let mut samples: Vec<(Edit, f64)> = Vec::new();
    let mut timeouts = 0;
    let mut missing = 0;
    for i in 0..edits {
        op.check_alive()?;
        // Spread over the CRs (coprime step), one edit per CR while edits <= N.
        let target = name((i * 7919) % n.max(1));
        let ready_by = Instant::now() + Duration::from_secs(30);
        while !env.observer.seen().ready_name(&target) && Instant::now() < ready_by {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let edit = Edit::ALL[i % 3];
        // A Ready CR should have its child; if not, wait for the operator and say so.
        let mut current = env.get(edit.kind(), &target).await;
        if current.is_none() {
            missing += 1;
            current = wait_for_child(env, edit.kind(), &target).await;
        }
        let Some(current) = current else { continue };
        let (ms, repaired) = time_repair(env, edit, &target, &current).await?;
        samples.push((edit, ms));
        timeouts += usize::from(!repaired);
    }
    Ok(drift_report(n, &samples, timeouts, missing))
}

/// The child `target` of `kind` once it exists, polled for up to [`REPAIR_LIMIT`].
async fn wait_for_child(env: &Env, kind: Kind, target: &str) -> Option<Value> {
    let by = Instant::now() + REPAIR_LIMIT;
    while Instant::now() < by {
        tokio::time::sleep(Duration::from_millis(2)).await;
        if let Some(child) = env.get(kind, target).await {
            return Some(child);
        }
    }
    None
}

fn uid(v: &Value) -> Option<String> {
    v.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string)
}

/// Makes `edit` to `current` and polls until the operator has repaired it: the milliseconds it took (the limit
/// when it did not), and whether it did.
async fn time_repair(env: &Env, edit: Edit, target: &str, current: &Value) -> Result<(f64, bool)> {
    let kind = edit.kind();
    let old_uid = uid(current);
    let want_replicas = current.pointer("/spec/replicas").and_then(Value::as_i64);
    let started = Instant::now();
    match edit {
        Edit::DeleteDeployment | Edit::DeleteService => env.delete(kind, target).await?,
        Edit::ScaleDeployment => env.patch(kind, target, json!({"spec": {"replicas": 5}})).await?,
    }
    let repaired = |v: &Value| match edit {
        Edit::ScaleDeployment => v.pointer("/spec/replicas").and_then(Value::as_i64) == want_replicas,
        _ => uid(v).is_some() && uid(v) != old_uid,
    };
    loop {
        if env.get(kind, target).await.as_ref().is_some_and(repaired) {
            return Ok((started.elapsed().as_secs_f64() * 1000.0, true));
        }
        if started.elapsed() > REPAIR_LIMIT {
            return Ok((REPAIR_LIMIT.as_secs_f64() * 1000.0, false));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn drift_report(n: usize, samples: &[(Edit, f64)], timeouts: usize, missing: usize) -> Report {
    let mut all: Vec<f64> = samples.iter().map(|(_, ms)| *ms).collect();
    all.sort_by(f64::total_cmp);
    let mut r = Report::new("drift", n);
    r.info("children deleted or edited", samples.len().to_string(), Some(samples.len() as f64));
    r.info("repair p50", format!("{:.1} ms", percentile(&all, 50.0)), Some(percentile(&all, 50.0)));
    let p99 = percentile(&all, 99.0);
    r.target("repair p99", format!("{p99:.1} ms"), p99, "< 500 ms", p99 < TARGET_REPAIR_P99_MS);
    r.info("repair max", format!("{:.1} ms", percentile(&all, 100.0)), Some(percentile(&all, 100.0)));
    r.target("not repaired within 10 s", timeouts.to_string(), timeouts as f64, "0", timeouts == 0);
    r.target("children missing before their edit (CR Ready)", missing.to_string(), missing as f64, "0", missing == 0);
    for kind in Edit::ALL {
        let mut these: Vec<f64> = samples
            .iter()
            .filter(|(e, _)| std::mem::discriminant(e) == std::mem::discriminant(&kind))
            .map(|s| s.1)
            .collect();
        these.sort_by(f64::total_cmp);
        r.note(format!(
            "{kind:?}: {} samples, p50 {:.1} ms, p99 {:.1} ms",
            these.len(),
            percentile(&these, 50.0),
            percentile(&these, 99.0)
        ));
    }
    r.note(
        "each edit waits for its CR to be Ready first; the time runs from the edit to the repaired object in the store",
    );
    r
}

/// Changes the image of all N and times until all are Ready for generation 2, checking every Ready status seen.
async fn update(env: &Env, n: usize, op: &mut OperatorProcess, floor_time: Option<Duration>) -> Result<Report> {
    let (checked_before, early_before, lagged_before, latency_before, degraded_before) = {
        let seen = env.observer.seen();
        (seen.ready_checked, seen.early_ready.len(), seen.lagged, seen.ready_latency_ms.len(), seen.degraded.len())
    };
    let events_before = env.event_reasons().await;
    let before = env.requests();
    let urgent_before = Urgent::now(env, op).await;
    let started = Instant::now();
    env.set_images(n, IMAGE_V2).await?;
    let last_ready = env.wait_all_ready(n, 2, env.timeout_for(n), op).await?;
    let took = last_ready.saturating_duration_since(started);
    env.wait_quiet(Duration::from_millis(500), Duration::from_secs(10)).await;
    let counts = env.requests().since(&before);
    let urgent = Urgent::now(env, op).await.since(&urgent_before);
    let events = env::reasons_note(&events_before, &env.event_reasons().await);
    let seen = env.observer.seen();
    let mut r = Report::new("update", n);
    r.info("time until all Ready (generation 2)", secs(took), Some(took.as_secs_f64()));
    if let Some(floor) = floor_time {
        floor_ratio(&mut r, took, floor, TARGET_UPDATE_FLOOR_RATIO);
    }
    let per_cr = non_watch(&counts) as f64 / n as f64;
    r.info("API requests per CR (watch excluded)", format!("{per_cr:.2}"), Some(per_cr));
    let checked = seen.ready_checked - checked_before;
    let early = seen.early_ready.len() - early_before;
    let lagged = seen.lagged - lagged_before;
    ready_latency(&mut r, seen.ready_latency_ms[latency_before..].to_vec(), Judged::Target);
    urgent.report(&mut r);
    r.info("Ready statuses checked against the Deployment", checked.to_string(), Some(checked as f64));
    r.target("Ready before the rollout completed", early.to_string(), early as f64, "0", early == 0);
    r.target(
        "observer gaps: feed overflows or re-lists (check incomplete when > 0)",
        lagged.to_string(),
        lagged as f64,
        "0",
        lagged == 0,
    );
    for e in seen.early_ready.iter().skip(early_before).take(5) {
        r.note(e.clone());
    }
    r.note(per_cr_note(&counts, n));
    degraded_note(&mut r, &seen.degraded[degraded_before..]);
    r.note(events);
    Ok(r)
}
