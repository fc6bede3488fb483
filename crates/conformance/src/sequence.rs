//! Controller scenarios: a step with `sequence:` watches one Deployment from a captured resourceVersion and
//! records the sequence of its DISTINCT status tuples (consecutive duplicates removed) until a settled state.
//! Timings never matter, only the order of values: the watch replays every change after the resourceVersion,
//! and it ends at the settled state (or fails at `timeout_seconds`, a bound, not an assertion).
//!
//! The real kube-controller-manager is concurrent (the ReplicaSet controller's status writes race the Deployment
//! controller's syncs), so the raw sequence can differ between two recordings of the same scenario. A step
//! therefore compares either the raw sequence (`form: raw`) or its [`normal_form`] (`form: normal`): the
//! sequence of condition sets, the settled tuple and invariants. The recording says which and why.

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// What ends a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Settle {
    /// The rollout is complete: what `kubectl rollout status` waits for, plus Progressing=NewReplicaSetAvailable.
    Complete,
    /// The controller has observed the current generation (a paused Deployment does nothing more).
    Observed,
    /// Progressing=False/ProgressDeadlineExceeded.
    Deadline,
}

/// What of the sequence is compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Form {
    /// Every distinct tuple in order.
    Raw,
    /// [`normal_form`].
    #[default]
    Normal,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceSpec {
    pub until: Settle,
    #[serde(default)]
    pub form: Form,
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

fn default_timeout() -> u64 {
    90
}

fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// `Type=Status/Reason` of each condition, sorted by type (messages and times are not compared).
fn conditions(d: &Value) -> Vec<String> {
    let mut out: Vec<(String, String)> = d
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    (s("type"), format!("{}={}/{}", s("type"), s("status"), s("reason")))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.into_iter().map(|(_, c)| c).collect()
}

/// The compared status of one Deployment: observedGeneration relative to generation, the counters (absent = 0,
/// as Go's omitempty writes them), the conditions.
pub fn tuple(d: &Value) -> Value {
    let behind = int(d, "/status/observedGeneration") < int(d, "/metadata/generation");
    json!({
        "observed": if behind { "behind" } else { "current" },
        "replicas": int(d, "/status/replicas"),
        "updated": int(d, "/status/updatedReplicas"),
        "ready": int(d, "/status/readyReplicas"),
        "available": int(d, "/status/availableReplicas"),
        "unavailable": int(d, "/status/unavailableReplicas"),
        "conditions": conditions(d),
    })
}

fn has_condition(d: &Value, want: &str) -> bool {
    conditions(d).iter().any(|c| c == want)
}

/// Whether `d` (a whole Deployment) is in the state `until` waits for.
pub fn settled(d: &Value, until: Settle) -> bool {
    let current = int(d, "/status/observedGeneration") >= int(d, "/metadata/generation");
    match until {
        Settle::Observed => current,
        Settle::Deadline => current && has_condition(d, "Progressing=False/ProgressDeadlineExceeded"),
        Settle::Complete => {
            let want = d.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
            current
                && int(d, "/status/replicas") == want
                && int(d, "/status/updatedReplicas") == want
                && int(d, "/status/availableReplicas") == want
                && int(d, "/status/unavailableReplicas") == 0
                && has_condition(d, "Progressing=True/NewReplicaSetAvailable")
        }
    }
}

/// Collects Deployment objects (watch event objects) as distinct tuples, consecutive duplicates removed, with
/// what the invariants need.
#[derive(Debug, Default)]
pub struct Collector {
    pub tuples: Vec<Value>,
    invariants: Invariants,
}

#[derive(Debug)]
struct Invariants {
    last_observed_generation: i64,
    last_updated: i64,
    /// `spec.replicas - maxUnavailable` was reached at some point.
    min_available_reached: bool,
    observed_generation_never_decreases: bool,
    updated_never_decreases: bool,
    available_kept_once_reached: bool,
    replicas_within_surge: bool,
}

impl Default for Invariants {
    fn default() -> Self {
        Invariants {
            last_observed_generation: 0,
            last_updated: 0,
            min_available_reached: false,
            observed_generation_never_decreases: true,
            updated_never_decreases: true,
            available_kept_once_reached: true,
            replicas_within_surge: true,
        }
    }
}

/// An absolute `maxSurge`/`maxUnavailable`; a percentage is not resolved (the scenarios use numbers).
fn rolling(d: &Value, field: &str) -> Option<i64> {
    d.pointer(&format!("/spec/strategy/rollingUpdate/{field}")).and_then(Value::as_i64)
}

impl Collector {
    pub fn push(&mut self, d: &Value) {
        let inv = &mut self.invariants;
        let observed = int(d, "/status/observedGeneration");
        inv.observed_generation_never_decreases &= observed >= inv.last_observed_generation;
        inv.last_observed_generation = observed;
        let want = d.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
        let updated = int(d, "/status/updatedReplicas");
        // A new ReplicaSet starts updatedReplicas again from 0; a scale-down lowers it to spec.replicas.
        let same_rollout = !has_condition(d, "Progressing=True/NewReplicaSetCreated");
        inv.updated_never_decreases &= !same_rollout || updated >= inv.last_updated.min(want);
        inv.last_updated = updated;
        let available = int(d, "/status/availableReplicas");
        if let Some(max_unavailable) = rolling(d, "maxUnavailable") {
            let min_available = want - max_unavailable;
            if inv.min_available_reached && available < min_available {
                inv.available_kept_once_reached = false;
            }
            inv.min_available_reached |= available >= min_available;
        }
        if let Some(max_surge) = rolling(d, "maxSurge") {
            // Only once the controller has observed this spec (before, the status describes the old one).
            let current = observed >= int(d, "/metadata/generation");
            inv.replicas_within_surge &= !current || int(d, "/status/replicas") <= want + max_surge;
        }
        let t = tuple(d);
        if self.tuples.last() != Some(&t) {
            self.tuples.push(t);
        }
    }

    /// The compared value of the sequence in `form`.
    pub fn compared(&self, form: Form) -> Value {
        match form {
            Form::Raw => json!({"form": "raw", "sequence": self.tuples}),
            Form::Normal => normal_form(&self.tuples, &self.invariants),
        }
    }
}

/// The normal form: the ordered sequence of condition sets (consecutive duplicates removed), the settled final
/// tuple, and invariants that hold on every correct run whatever the interleaving of the controllers:
/// observedGeneration never goes back; updatedReplicas never decreases within a rollout; once
/// `spec.replicas - maxUnavailable` pods were available, availability never falls below that; the controller never
/// runs more than `spec.replicas + maxSurge` pods for an observed spec. The counters between the first and the last
/// tuple are what the concurrency changes (how many intermediate ReplicaSet status writes the Deployment
/// controller happened to see), so they are not compared.
fn normal_form(tuples: &[Value], inv: &Invariants) -> Value {
    let mut sets: Vec<Value> = Vec::new();
    for t in tuples {
        let c = t.get("conditions").cloned().unwrap_or(Value::Null);
        if sets.last() != Some(&c) {
            sets.push(c);
        }
    }
    let mut invariants = Map::new();
    invariants.insert("observedGenerationNeverDecreases".into(), inv.observed_generation_never_decreases.into());
    invariants.insert("updatedReplicasNeverDecreasesWithinARollout".into(), inv.updated_never_decreases.into());
    invariants.insert("availabilityKeptOnceMinAvailableReached".into(), inv.available_kept_once_reached.into());
    invariants.insert("replicasWithinMaxSurge".into(), inv.replicas_within_surge.into());
    json!({
        "form": "normal",
        "conditionSequence": sets,
        "final": tuples.last().cloned().unwrap_or(Value::Null),
        "invariants": invariants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(generation: i64, observed: i64, counts: [i64; 4], conds: &[(&str, &str, &str)]) -> Value {
        let conditions: Vec<Value> =
            conds.iter().map(|(t, s, r)| json!({"type": t, "status": s, "reason": r, "message": "m"})).collect();
        json!({
            "metadata": {"generation": generation},
            "spec": {"replicas": 3, "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
            "status": {"observedGeneration": observed, "replicas": counts[0], "updatedReplicas": counts[1],
                       "readyReplicas": counts[2], "availableReplicas": counts[3], "conditions": conditions},
        })
    }

    const DONE: (&str, &str, &str) = ("Progressing", "True", "NewReplicaSetAvailable");
    const AVAILABLE: (&str, &str, &str) = ("Available", "True", "MinimumReplicasAvailable");

    #[test]
    fn settles_only_on_a_complete_observed_rollout() {
        assert!(settled(&d(1, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]), Settle::Complete));
        assert!(!settled(&d(2, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]), Settle::Complete));
        assert!(!settled(&d(1, 1, [4, 3, 3, 3], &[AVAILABLE, DONE]), Settle::Complete));
        assert!(settled(&d(2, 2, [3, 0, 3, 3], &[]), Settle::Observed));
    }

    #[test]
    fn removes_consecutive_duplicates_and_normalises() {
        let mut c = Collector::default();
        c.push(&d(1, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]));
        c.push(&d(1, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]));
        assert_eq!(c.tuples.len(), 1);
        let n = c.compared(Form::Normal);
        assert_eq!(n["conditionSequence"].as_array().map(Vec::len), Some(1));
        assert_eq!(n["invariants"]["availabilityKeptOnceMinAvailableReached"], json!(true));
    }

    #[test]
    fn invariants_can_fail() {
        let mut c = Collector::default();
        c.push(&d(1, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]));
        c.push(&d(1, 1, [5, 2, 2, 2], &[AVAILABLE, DONE]));
        c.push(&d(1, 0, [5, 2, 2, 2], &[AVAILABLE, DONE]));
        // A scale-down to spec.replicas is not a decrease within a rollout.
        let mut down = Collector::default();
        down.push(&d(1, 1, [5, 5, 5, 5], &[AVAILABLE, DONE]));
        down.push(&d(1, 1, [3, 3, 3, 3], &[AVAILABLE, DONE]));
        assert_eq!(
            down.compared(Form::Normal)["invariants"]["updatedReplicasNeverDecreasesWithinARollout"],
            json!(true)
        );
        let n = c.compared(Form::Normal);
        for k in [
            "observedGenerationNeverDecreases",
            "updatedReplicasNeverDecreasesWithinARollout",
            "availabilityKeptOnceMinAvailableReached",
            "replicasWithinMaxSurge",
        ] {
            assert_eq!(n["invariants"][k], json!(false), "{k}");
        }
    }
}
