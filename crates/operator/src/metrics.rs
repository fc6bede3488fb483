//! The operator's Prometheus metrics. Names follow controller-runtime where the meaning is the same, so existing
//! dashboards fit; labels stay bounded (never an object name or an error message).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::controller::CONTROLLER_NAME;

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
    pub name: &'static str,
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
    reconciles: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
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
        registry.register("leader_election_master_status", "1 while this replica leads", leader.clone());
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
            reconciles: AtomicI64::new(0),
        }
    }

    pub fn reconciled(&self, result: &'static str, took: Duration) {
        self.reconcile_total.get_or_create(&ResultLabels { controller: CONTROLLER_NAME, result }).inc();
        self.reconcile_time_seconds
            .get_or_create(&ControllerLabels { controller: CONTROLLER_NAME })
            .observe(took.as_secs_f64());
        self.reconciles.fetch_add(1, Ordering::Relaxed);
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

    /// Reconciles finished so far (any result): lets tests know a reconcile has happened.
    pub fn reconciles(&self) -> i64 {
        self.reconciles.load(Ordering::Relaxed)
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
}
