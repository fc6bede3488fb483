//! The operator's Prometheus metrics. Names follow controller-runtime where the meaning is the same, so existing
//! dashboards fit; labels stay bounded (never an object name or an error message).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::identity::CONTROLLER_NAME;
use microservice_core::crd::Phase;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: &'static str,
    /// success | error | requeue | requeue_after
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorKindLabels {
    pub controller: &'static str,
    /// A bounded error kind (see `Error::kind`).
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChildLabels {
    /// Deployment | Service
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// The written resource: deployments, services, microservices/status, events.
    pub resource: &'static str,
    /// create | apply | patch
    pub verb: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    /// The Lease name (`--leader-election-id`).
    pub name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// Pending | Progressing | Ready | Degraded | Invalid | Unknown (no status yet)
    pub phase: &'static str,
}

/// Every phase label, so each series exists (at 0) from the start and dashboards need no `or vector(0)`.
const PHASES: [&str; 6] = ["Pending", "Progressing", "Ready", "Degraded", "Invalid", "Unknown"];

pub fn phase_label(phase: Option<Phase>) -> &'static str {
    match phase {
        Some(Phase::Pending) => "Pending",
        Some(Phase::Progressing) => "Progressing",
        Some(Phase::Ready) => "Ready",
        Some(Phase::Degraded) => "Degraded",
        Some(Phase::Invalid) => "Invalid",
        None => "Unknown",
    }
}

pub struct Metrics {
    registry: Registry,
    pub reconcile_total: Family<ResultLabels, Counter>,
    pub reconcile_errors_total: Family<ControllerLabels, Counter>,
    pub terminal_reconcile_errors_total: Family<ControllerLabels, Counter>,
    pub reconcile_errors_by_kind_total: Family<ErrorKindLabels, Counter>,
    pub reconcile_time_seconds: Family<ControllerLabels, Histogram>,
    pub drift_repairs_total: Family<ChildLabels, Counter>,
    pub adoptions_total: Family<ChildLabels, Counter>,
    pub writes_total: Family<WriteLabels, Counter>,
    pub leader: Family<LeaderLabels, Gauge>,
    pub max_concurrent_reconciles: Family<ControllerLabels, Gauge>,
    pub active_workers: Family<ControllerLabels, Gauge>,
    pub objects_by_phase: Family<PhaseLabels, Gauge>,
    pub urgent_lag_seconds: Histogram,
    pub urgent_wait_seconds: Histogram,
    pub urgent_lock_wait_seconds: Histogram,
    reconciles: AtomicI64,
    /// Signalled at every finished reconcile, for a watcher of the count that should not poll it.
    reconciled_signal: tokio::sync::Notify,
}

/// Counts a reconcile as running until dropped (also when the reconcile future is cancelled).
pub struct ActiveWorker<'a> {
    gauge: &'a Family<ControllerLabels, Gauge>,
}

impl Drop for ActiveWorker<'_> {
    fn drop(&mut self) {
        self.gauge.get_or_create(&ControllerLabels { controller: CONTROLLER_NAME }).dec();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    // Over 80 lines on purpose: A table: one registration per metric with its help text.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabels, Counter>::default();
        let reconcile_errors_total = Family::<ControllerLabels, Counter>::default();
        let terminal_reconcile_errors_total = Family::<ControllerLabels, Counter>::default();
        let reconcile_errors_by_kind_total = Family::<ErrorKindLabels, Counter>::default();
        let reconcile_time_seconds = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let drift_repairs_total = Family::<ChildLabels, Counter>::default();
        let adoptions_total = Family::<ChildLabels, Counter>::default();
        let writes_total = Family::<WriteLabels, Counter>::default();
        let leader = Family::<LeaderLabels, Gauge>::default();
        let max_concurrent_reconciles = Family::<ControllerLabels, Gauge>::default();
        let active_workers = Family::<ControllerLabels, Gauge>::default();
        let objects_by_phase = Family::<PhaseLabels, Gauge>::default();
        let urgent_lag_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let urgent_wait_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let urgent_lock_wait_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let controller = ControllerLabels { controller: CONTROLLER_NAME };
        active_workers.get_or_create(&controller).set(0);
        for phase in PHASES {
            objects_by_phase.get_or_create(&PhaseLabels { phase }).set(0);
        }
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile_errors_total.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal (permanent) reconciliation errors per controller",
            terminal_reconcile_errors_total.clone(),
        );
        registry.register(
            "microservice_reconcile_errors_by_kind",
            "Reconciliation errors by error kind",
            reconcile_errors_by_kind_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time_seconds.clone(),
        );
        registry.register(
            "microservice_drift_repairs",
            "Children recreated or reverted because they were deleted or edited",
            drift_repairs_total.clone(),
        );
        registry.register("microservice_adoptions", "Children adopted after a handover", adoptions_total.clone());
        registry.register(
            "microservice_writes",
            "Writes the operator sent, by resource and verb",
            writes_total.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            leader.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            max_concurrent_reconciles.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            active_workers.clone(),
        );
        registry.register(
            "microservice_objects",
            "Microservices this replica watches, by status.phase (Unknown: no status yet)",
            objects_by_phase.clone(),
        );
        registry.register(
            "microservice_urgent_reconcile_lag_seconds",
            "Time from a change that makes a reconcile urgent (a completed rollout, a child deleted or edited) \
             reaching this replica's cache to the reconcile that answered it having sent its writes and status",
            urgent_lag_seconds.clone(),
        );
        registry.register(
            "microservice_urgent_reconcile_wait_seconds",
            "Of that lag, the time before its reconcile started: a free slot of the Ready lane, then the object's lock \
             (held by a reconcile of the same object already running)",
            urgent_wait_seconds.clone(),
        );
        registry.register(
            "microservice_urgent_reconcile_lock_wait_seconds",
            "Of that wait, the time its reconcile waited for the object's lock, held by a reconcile of the same \
             object already running",
            urgent_lock_wait_seconds.clone(),
        );
        Metrics {
            registry,
            reconcile_total,
            reconcile_errors_total,
            terminal_reconcile_errors_total,
            reconcile_errors_by_kind_total,
            reconcile_time_seconds,
            drift_repairs_total,
            adoptions_total,
            writes_total,
            leader,
            max_concurrent_reconciles,
            active_workers,
            objects_by_phase,
            urgent_lag_seconds,
            urgent_wait_seconds,
            urgent_lock_wait_seconds,
            reconciles: AtomicI64::new(0),
            reconciled_signal: tokio::sync::Notify::new(),
        }
    }

    pub fn reconciled(&self, result: &'static str, took: Duration) {
        self.reconcile_total.get_or_create(&ResultLabels { controller: CONTROLLER_NAME, result }).inc();
        self.reconcile_time_seconds
            .get_or_create(&ControllerLabels { controller: CONTROLLER_NAME })
            .observe(took.as_secs_f64());
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        self.reconciled_signal.notify_one();
    }

    /// An urgent change (`children::urgent`) was answered (repairs sent, status committed or already telling it)
    /// `lag` after the cache saw it: the operator's own share of a Ready's latency, the rest being the server's watch.
    pub fn urgent_answered(&self, lag: Duration) {
        self.urgent_lag_seconds.observe(lag.as_secs_f64());
    }

    /// An urgent change waited `wait` for its reconcile to start (a lane slot, then the object's lock), `locked`
    /// of it for the lock.
    pub fn urgent_started(&self, wait: Duration, locked: Duration) {
        self.urgent_wait_seconds.observe(wait.as_secs_f64());
        self.urgent_lock_wait_seconds.observe(locked.as_secs_f64());
    }

    pub fn failed(&self, kind: &'static str, permanent: bool) {
        let controller = ControllerLabels { controller: CONTROLLER_NAME };
        self.reconcile_errors_total.get_or_create(&controller).inc();
        if permanent {
            self.terminal_reconcile_errors_total.get_or_create(&controller).inc();
        }
        self.reconcile_errors_by_kind_total.get_or_create(&ErrorKindLabels { controller: CONTROLLER_NAME, kind }).inc();
    }

    pub fn wrote(&self, resource: &'static str, verb: &'static str) {
        self.writes_total.get_or_create(&WriteLabels { resource, verb }).inc();
    }

    /// Call at the start of a reconcile; the returned guard counts it in `controller_runtime_active_workers`.
    pub fn worker_started(&self) -> ActiveWorker<'_> {
        self.active_workers.get_or_create(&ControllerLabels { controller: CONTROLLER_NAME }).inc();
        ActiveWorker { gauge: &self.active_workers }
    }

    pub fn set_max_concurrent_reconciles(&self, concurrency: u16) {
        self.max_concurrent_reconciles
            .get_or_create(&ControllerLabels { controller: CONTROLLER_NAME })
            .set(i64::from(concurrency));
    }

    /// `leader_election_master_status{name}`: 1 while this replica holds the Lease `name`, else 0.
    pub fn set_leader(&self, name: &str, leader: bool) {
        self.leader.get_or_create(&LeaderLabels { name: name.to_string() }).set(i64::from(leader));
    }

    /// An object moved from one phase to another: `None` before for an object new to the cache, `None` after for
    /// one gone from it (deleted, or out of the watched scope). The cache, which holds each object's last phase,
    /// tells both.
    pub fn phase_moved(&self, before: Option<Option<Phase>>, after: Option<Option<Phase>>) {
        let (before, after) = (before.map(phase_label), after.map(phase_label));
        if before == after {
            return;
        }
        if let Some(phase) = before {
            self.objects_by_phase.get_or_create(&PhaseLabels { phase }).dec();
        }
        if let Some(phase) = after {
            self.objects_by_phase.get_or_create(&PhaseLabels { phase }).inc();
        }
    }

    /// How many objects the CR cache shows in `phase`.
    pub fn in_phase(&self, phase: Phase) -> u64 {
        let count = self.objects_by_phase.get_or_create(&PhaseLabels { phase: phase_label(Some(phase)) }).get();
        u64::try_from(count).unwrap_or(0)
    }

    /// Replaces every count with those of the objects a re-list showed (deletions may have been missed).
    pub fn set_phases(&self, current: impl IntoIterator<Item = Option<Phase>>) {
        let mut counts: HashMap<&'static str, i64> = PHASES.iter().map(|p| (*p, 0)).collect();
        for phase in current {
            *counts.entry(phase_label(phase)).or_default() += 1;
        }
        for (phase, count) in counts {
            self.objects_by_phase.get_or_create(&PhaseLabels { phase }).set(count);
        }
    }

    /// Reconciles finished so far (any result): lets tests know a reconcile has happened.
    pub fn reconciles(&self) -> i64 {
        self.reconciles.load(Ordering::Relaxed)
    }

    /// Resolves once a reconcile has finished since the last time it resolved (at once if one already has): a
    /// process reporting the count wakes when it moves, not on a timer while nothing happens.
    pub async fn reconciled_since_last_asked(&self) {
        self.reconciled_signal.notified().await;
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_controller_runtime() {
        let m = Metrics::new();
        m.reconciled("success", Duration::from_millis(3));
        m.failed("server_error", false);
        let text = m.encode();
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="microservice-operator",result="success"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"controller_runtime_reconcile_errors_total{controller="microservice-operator"} 1"#));
        assert!(text.contains("controller_runtime_reconcile_time_seconds_bucket"));
        assert_eq!(m.reconciles(), 1);
    }

    #[test]
    fn the_reconciled_signal_wakes_once_for_the_reconciles_since_it_was_last_asked() {
        use futures::FutureExt;
        let m = Metrics::new();
        assert!(m.reconciled_since_last_asked().now_or_never().is_none(), "nothing reconciled yet");
        m.reconciled("success", Duration::from_millis(1));
        m.reconciled("error", Duration::from_millis(1));
        assert!(m.reconciled_since_last_asked().now_or_never().is_some(), "two reconciles since asked");
        assert!(m.reconciled_since_last_asked().now_or_never().is_none(), "both were told by that one signal");
    }

    #[test]
    fn workers_and_concurrency_use_controller_runtime_names() {
        let m = Metrics::new();
        m.set_max_concurrent_reconciles(8);
        let worker = m.worker_started();
        let second = m.worker_started();
        let text = m.encode();
        assert!(text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="microservice-operator"} 8"#));
        assert!(text.contains(r#"controller_runtime_active_workers{controller="microservice-operator"} 2"#), "{text}");
        drop((worker, second));
        assert!(m.encode().contains(r#"controller_runtime_active_workers{controller="microservice-operator"} 0"#));
    }

    #[test]
    fn urgent_reconciles_are_a_histogram_of_their_lag() {
        let m = Metrics::new();
        m.urgent_answered(Duration::from_millis(3));
        m.urgent_answered(Duration::from_millis(300));
        let text = m.encode();
        assert!(text.contains("microservice_urgent_reconcile_lag_seconds_count 2"), "{text}");
        assert!(text.contains(r#"microservice_urgent_reconcile_lag_seconds_bucket{le="0.004"} 1"#), "{text}");
        assert!(text.contains(r#"microservice_urgent_reconcile_lag_seconds_bucket{le="0.512"} 2"#), "{text}");
    }

    #[test]
    fn leader_status_is_labelled_with_the_lease_name() {
        let m = Metrics::new();
        m.set_leader("microservice-operator", false);
        assert!(m.encode().contains(r#"leader_election_master_status{name="microservice-operator"} 0"#));
        m.set_leader("microservice-operator", true);
        assert!(m.encode().contains(r#"leader_election_master_status{name="microservice-operator"} 1"#));
    }

    fn phase_count(m: &Metrics, phase: &str) -> i64 {
        let prefix = format!("microservice_objects{{phase=\"{phase}\"}} ");
        let text = m.encode();
        let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix} in {text}"));
        line[prefix.len()..].parse().unwrap()
    }

    #[test]
    fn objects_by_phase_follow_each_object() {
        let m = Metrics::new();
        assert_eq!(phase_count(&m, "Ready"), 0, "every phase series exists from the start");
        m.phase_moved(None, Some(None));
        m.phase_moved(None, Some(Some(Phase::Progressing)));
        assert_eq!((phase_count(&m, "Unknown"), phase_count(&m, "Progressing")), (1, 1));
        m.phase_moved(Some(None), Some(Some(Phase::Progressing)));
        m.phase_moved(Some(Some(Phase::Progressing)), Some(Some(Phase::Progressing)));
        assert_eq!((phase_count(&m, "Unknown"), phase_count(&m, "Progressing")), (0, 2));
        m.phase_moved(Some(Some(Phase::Progressing)), Some(Some(Phase::Ready)));
        m.phase_moved(Some(Some(Phase::Progressing)), None);
        assert_eq!((phase_count(&m, "Progressing"), phase_count(&m, "Ready")), (0, 1));
        m.set_phases([Some(Phase::Invalid)]);
        assert_eq!((phase_count(&m, "Ready"), phase_count(&m, "Invalid")), (0, 1));
    }
}
