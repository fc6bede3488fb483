//! Request counting by verb, resource and status code: the library handle reads snapshots, /metrics prints them.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// One counter's labels. `resource` is the plural with `/status` or `/scale` for subresources, and empty for
/// non-resource paths (discovery, /version, /openapi).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    pub verb: String,
    pub resource: String,
    pub code: u16,
}

/// The verbs that change state.
pub const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// A snapshot of the request counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub counts: BTreeMap<RequestKey, u64>,
}

impl RequestCounts {
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    fn sum(&self, pred: impl Fn(&RequestKey) -> bool) -> u64 {
        self.counts.iter().filter(|(k, _)| pred(k)).map(|(_, v)| *v).sum()
    }

    /// Requests with this verb (any resource, any code).
    pub fn verb(&self, verb: &str) -> u64 {
        self.sum(|k| k.verb == verb)
    }

    /// Requests with this verb on this resource (e.g. `("patch", "microservices/status")`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.sum(|k| k.verb == verb && k.resource == resource)
    }

    /// Requests on this resource (any verb) - `resource` matches with or without a subresource suffix.
    pub fn resource(&self, resource: &str) -> u64 {
        self.sum(|k| k.resource == resource || k.resource.split('/').next() == Some(resource))
    }

    /// Writes of any kind (create, update, patch, delete, deletecollection), whatever their outcome.
    pub fn writes(&self) -> u64 {
        self.sum(|k| WRITE_VERBS.contains(&k.verb.as_str()))
    }

    /// Writes on one resource (with its subresources).
    pub fn writes_to(&self, resource: &str) -> u64 {
        self.sum(|k| {
            WRITE_VERBS.contains(&k.verb.as_str())
                && (k.resource == resource || k.resource.split('/').next() == Some(resource))
        })
    }

    /// Answers with this status code.
    pub fn code(&self, code: u16) -> u64 {
        self.sum(|k| k.code == code)
    }

    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        let counts = self
            .counts
            .iter()
            .filter_map(|(k, v)| {
                let d = v.saturating_sub(earlier.counts.get(k).copied().unwrap_or(0));
                (d > 0).then(|| (k.clone(), d))
            })
            .collect();
        RequestCounts { counts }
    }
}

/// The live counters; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    inner: Arc<Mutex<BTreeMap<RequestKey, u64>>>,
}

impl Counters {
    pub fn record(&self, verb: &str, resource: &str, code: u16) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = RequestKey { verb: verb.to_string(), resource: resource.to_string(), code };
        *m.entry(key).or_insert(0) += 1;
    }

    pub fn snapshot(&self) -> RequestCounts {
        RequestCounts { counts: self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone() }
    }

    /// Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let snap = self.snapshot();
        let mut out = String::from(
            "# HELP kubesim_requests_total Requests served, by Kubernetes verb, resource and HTTP status code.\n# TYPE kubesim_requests_total counter\n",
        );
        for (k, v) in &snap.counts {
            let _ = writeln!(
                out,
                "kubesim_requests_total{{verb=\"{}\",resource=\"{}\",code=\"{}\"}} {v}",
                escape(&k.verb),
                escape(&k.resource),
                k.code
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reports_only_the_difference() {
        let c = Counters::default();
        c.record("get", "pods", 200);
        let before = c.snapshot();
        c.record("get", "pods", 200);
        c.record("patch", "pods/status", 200);
        let d = c.snapshot().since(&before);
        assert_eq!(d.total(), 2);
        assert_eq!(d.writes(), 1);
        assert_eq!(d.writes_to("pods"), 1);
        assert_eq!(d.count("get", "pods"), 1);
    }

    #[test]
    fn prometheus_lists_every_counter() {
        let c = Counters::default();
        c.record("list", "configmaps", 200);
        c.record("create", "configmaps", 409);
        let text = c.prometheus();
        assert!(text.contains("kubesim_requests_total{verb=\"list\",resource=\"configmaps\",code=\"200\"} 1"));
        assert!(text.contains("kubesim_requests_total{verb=\"create\",resource=\"configmaps\",code=\"409\"} 1"));
    }
}
