//! Seeded, deterministic fault injection for the HTTP layer: error rates per verb and resource, added latency,
//! dropped watch streams, forced 410 Gone, and a pause that holds requests.
//!
//! Determinism: one `StdRng` seeded from [`FaultConfig::seed`] is drawn from, in request order, only by rules that
//! match a request. The same seed and the same sequence of requests therefore inject the same faults. Setting a
//! config reseeds the generator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The whole fault configuration, settable at start and at run time (admin endpoint, library handle).
///
/// ```json
/// {"seed": 7,
///  "errors": [{"verb": "patch", "resource": "microservices/status", "rate": 0.2, "code": 409},
///             {"verb": "*", "resource": "*", "rate": 0.05, "code": 429, "retryAfterSeconds": 1}],
///  "latency": [{"verb": "*", "resource": "deployments", "fixedMs": 20, "jitterMs": 10}],
///  "watch": [{"resource": "pods", "dropAfterEvents": 5}, {"resource": "*", "dropAfterMs": 3000}],
///  "forceGone": ["microservices"],
///  "paused": false}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultConfig {
    pub seed: u64,
    /// Checked in order; the first rule whose draw fires decides the error.
    pub errors: Vec<ErrorRule>,
    /// The first matching rule adds its latency.
    pub latency: Vec<LatencyRule>,
    /// The first matching rule limits a new watch stream.
    pub watch: Vec<WatchRule>,
    /// Resources whose next watch answers 410 Gone (each entry is consumed by one watch).
    pub force_gone: Vec<String>,
    /// While true, requests wait in [`FaultInjector::wait_unpaused`].
    pub paused: bool,
}

/// Fail a share of the matching requests with one status code.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRule {
    /// A Kubernetes verb or `*`.
    #[serde(default = "any")]
    pub verb: String,
    /// A resource plural (with `/status` for the subresource), `*`, or a pattern with `*` wildcards
    /// (`microservices*` matches the resource and its subresources).
    #[serde(default = "any")]
    pub resource: String,
    /// Probability in [0, 1].
    pub rate: f64,
    /// 500, 503, 429 or 409.
    pub code: u16,
    /// Sent as `Retry-After` and `details.retryAfterSeconds` with 429 (and 503 when set).
    #[serde(default)]
    pub retry_after_seconds: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LatencyRule {
    #[serde(default = "any")]
    pub verb: String,
    #[serde(default = "any")]
    pub resource: String,
    #[serde(default)]
    pub fixed_ms: u64,
    /// A uniform extra delay in [0, jitterMs].
    #[serde(default)]
    pub jitter_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WatchRule {
    #[serde(default = "any")]
    pub resource: String,
    #[serde(default)]
    pub drop_after_events: Option<u64>,
    #[serde(default)]
    pub drop_after_ms: Option<u64>,
}

fn any() -> String {
    "*".to_string()
}

/// The status codes an [`ErrorRule`] may inject.
pub const INJECTABLE_CODES: &[u16] = &[409, 429, 500, 503];

impl FaultConfig {
    /// Rejects rules the HTTP layer could not honour (unknown codes, rates outside [0, 1]).
    pub fn validate(&self) -> Result<(), ApiError> {
        for (i, r) in self.errors.iter().enumerate() {
            if !INJECTABLE_CODES.contains(&r.code) {
                return Err(ApiError::bad_request(format!(
                    "errors[{i}].code: {} is not one of 409, 429, 500, 503",
                    r.code
                )));
            }
            if !(0.0..=1.0).contains(&r.rate) {
                return Err(ApiError::bad_request(format!("errors[{i}].rate: {} is not within [0, 1]", r.rate)));
            }
        }
        Ok(())
    }
}

/// What to do with one request before it is served.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultDecision {
    /// Answer with this error instead of serving the request.
    Fail(ApiError),
}

/// Limits applied to one watch stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchFaults {
    pub drop_after_events: Option<u64>,
    pub drop_after: Option<Duration>,
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

fn injected_error(rule: &ErrorRule, resource: &str) -> ApiError {
    match rule.code {
        409 => ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource}: the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
        429 => ApiError::too_many_requests(rule.retry_after_seconds.unwrap_or(1)),
        503 => {
            let mut e = ApiError::service_unavailable("kubesim: injected fault: the server is currently unavailable");
            e.details.retry_after_seconds = rule.retry_after_seconds;
            e
        }
        _ => ApiError::internal("kubesim: injected fault"),
    }
}

#[derive(Debug)]
struct State {
    config: FaultConfig,
    rng: StdRng,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Mirrors "the config has error or latency rules", so a quiet config costs one atomic load per request.
    request_rules: AtomicBool,
    watch_rules: AtomicBool,
    paused: tokio::sync::watch::Sender<bool>,
}

/// Shared by the server's request path; cheap to clone.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    inner: Arc<Inner>,
}

impl Default for FaultInjector {
    fn default() -> Self {
        Self::new(FaultConfig::default())
    }
}

impl FaultInjector {
    pub fn new(config: FaultConfig) -> Self {
        let inner = Inner {
            state: Mutex::new(State { rng: StdRng::seed_from_u64(config.seed), config: FaultConfig::default() }),
            request_rules: AtomicBool::new(false),
            watch_rules: AtomicBool::new(false),
            paused: tokio::sync::watch::Sender::new(false),
        };
        let injector = FaultInjector { inner: Arc::new(inner) };
        injector.set_config(config);
        injector
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent (every update is a single assignment).
        self.inner.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Replaces the configuration and reseeds the generator.
    pub fn set_config(&self, config: FaultConfig) {
        let mut state = self.state();
        self.inner
            .request_rules
            .store(config.errors.iter().any(|r| r.rate > 0.0) || !config.latency.is_empty(), Ordering::Release);
        self.inner.watch_rules.store(!config.watch.is_empty() || !config.force_gone.is_empty(), Ordering::Release);
        self.inner.paused.send_replace(config.paused);
        state.rng = StdRng::seed_from_u64(config.seed);
        state.config = config;
    }

    /// The configuration in force (`forceGone` lists only the 410s not yet delivered).
    pub fn config(&self) -> FaultConfig {
        self.state().config.clone()
    }

    /// Holds (or releases) requests without touching the rest of the configuration.
    pub fn set_paused(&self, paused: bool) {
        self.state().config.paused = paused;
        self.inner.paused.send_replace(paused);
    }

    /// Makes the next watch of `resource` answer 410 Gone.
    pub fn force_gone(&self, resource: &str) {
        self.state().config.force_gone.push(resource.to_string());
        self.inner.watch_rules.store(true, Ordering::Release);
    }

    /// `verb` is the Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection);
    /// `resource` the plural, with `/status` for subresources (e.g. `microservices/status`).
    /// Returns the added latency to sleep first (possibly zero) and an optional failure.
    pub fn decide(&self, verb: &str, resource: &str) -> (Duration, Option<FaultDecision>) {
        if !self.inner.request_rules.load(Ordering::Acquire) {
            return (Duration::ZERO, None);
        }
        let mut guard = self.state();
        let State { config, rng } = &mut *guard;
        let latency = config
            .latency
            .iter()
            .find(|r| glob_match(&r.verb, verb) && glob_match(&r.resource, resource))
            .map(|r| {
                let jitter = if r.jitter_ms > 0 { rng.random_range(0..=r.jitter_ms) } else { 0 };
                Duration::from_millis(r.fixed_ms.saturating_add(jitter))
            })
            .unwrap_or(Duration::ZERO);
        let failure = config
            .errors
            .iter()
            .filter(|r| r.rate > 0.0 && glob_match(&r.verb, verb) && glob_match(&r.resource, resource))
            .find(|r| rng.random::<f64>() < r.rate)
            .map(|r| FaultDecision::Fail(injected_error(r, resource)));
        (latency, failure)
    }

    /// Limits for a watch that starts now.
    pub fn watch_faults(&self, resource: &str) -> WatchFaults {
        if !self.inner.watch_rules.load(Ordering::Acquire) {
            return WatchFaults::default();
        }
        let state = self.state();
        state
            .config
            .watch
            .iter()
            .find(|r| glob_match(&r.resource, resource))
            .map(|r| WatchFaults {
                drop_after_events: r.drop_after_events,
                drop_after: r.drop_after_ms.map(Duration::from_millis),
            })
            .unwrap_or_default()
    }

    /// True once after a forced 410 was requested: the next watch of `resource` must answer 410 Gone.
    pub fn take_forced_gone(&self, resource: &str) -> bool {
        if !self.inner.watch_rules.load(Ordering::Acquire) {
            return false;
        }
        let mut state = self.state();
        match state.config.force_gone.iter().position(|r| glob_match(r, resource)) {
            Some(i) => {
                state.config.force_gone.remove(i);
                true
            }
            None => false,
        }
    }

    /// Resolves when no pause is in force.
    pub async fn wait_unpaused(&self) {
        let mut rx = self.inner.paused.subscribe();
        // Err only if the sender is gone, which cannot happen while `self` holds it.
        let _ = rx.wait_for(|paused| !*paused).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verb: &str, resource: &str, rate: f64, code: u16) -> ErrorRule {
        ErrorRule { verb: verb.into(), resource: resource.into(), rate, code, retry_after_seconds: None }
    }

    fn outcomes(f: &FaultInjector, n: usize) -> Vec<Option<u16>> {
        (0..n)
            .map(|_| match f.decide("get", "pods").1 {
                Some(FaultDecision::Fail(e)) => Some(e.code),
                None => None,
            })
            .collect()
    }

    #[test]
    fn same_seed_same_faults_different_seed_different_faults() {
        let config = |seed| FaultConfig { seed, errors: vec![rule("*", "*", 0.5, 503)], ..Default::default() };
        let a = outcomes(&FaultInjector::new(config(42)), 200);
        let b = outcomes(&FaultInjector::new(config(42)), 200);
        let c = outcomes(&FaultInjector::new(config(43)), 200);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let failed = a.iter().filter(|o| o.is_some()).count();
        assert!((60..=140).contains(&failed), "rate 0.5 failed {failed} of 200");
    }

    #[test]
    fn set_config_reseeds() {
        let config = FaultConfig { seed: 9, errors: vec![rule("*", "*", 0.3, 500)], ..Default::default() };
        let f = FaultInjector::new(config.clone());
        let first = outcomes(&f, 50);
        f.set_config(config);
        assert_eq!(outcomes(&f, 50), first);
    }

    #[test]
    fn rules_match_verb_and_resource_with_wildcards() {
        let f = FaultInjector::new(FaultConfig {
            errors: vec![rule("patch", "microservices*", 1.0, 409)],
            ..Default::default()
        });
        assert!(f.decide("get", "microservices").1.is_none());
        assert!(f.decide("patch", "deployments").1.is_none());
        let Some(FaultDecision::Fail(e)) = f.decide("patch", "microservices/status").1 else {
            panic!("expected an injected conflict");
        };
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let mut r = rule("*", "*", 1.0, 429);
        r.retry_after_seconds = Some(3);
        let f = FaultInjector::new(FaultConfig { errors: vec![r], ..Default::default() });
        let Some(FaultDecision::Fail(e)) = f.decide("list", "pods").1 else { panic!("expected a 429") };
        assert_eq!(e.code, 429);
        assert_eq!(e.details.retry_after_seconds, Some(3));
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 3);
    }

    #[test]
    fn rate_zero_and_empty_config_inject_nothing() {
        let f = FaultInjector::new(FaultConfig { errors: vec![rule("*", "*", 0.0, 500)], ..Default::default() });
        assert!(outcomes(&f, 100).iter().all(Option::is_none));
        let quiet = FaultInjector::default();
        assert_eq!(quiet.decide("get", "pods"), (Duration::ZERO, None));
        assert_eq!(quiet.watch_faults("pods"), WatchFaults::default());
        assert!(!quiet.take_forced_gone("pods"));
    }

    #[test]
    fn latency_is_fixed_plus_bounded_jitter() {
        let f = FaultInjector::new(FaultConfig {
            latency: vec![LatencyRule { verb: "*".into(), resource: "pods".into(), fixed_ms: 20, jitter_ms: 10 }],
            ..Default::default()
        });
        let delays: Vec<Duration> = (0..50).map(|_| f.decide("get", "pods").0).collect();
        assert!(delays.iter().all(|d| (Duration::from_millis(20)..=Duration::from_millis(30)).contains(d)));
        assert!(delays.iter().any(|d| *d != delays[0]), "jitter never varied");
        assert_eq!(f.decide("get", "services").0, Duration::ZERO);
    }

    #[test]
    fn forced_gone_is_delivered_once_per_request() {
        let f = FaultInjector::new(FaultConfig { force_gone: vec!["microservices".into()], ..Default::default() });
        assert!(!f.take_forced_gone("pods"));
        assert!(f.take_forced_gone("microservices"));
        assert!(!f.take_forced_gone("microservices"));
        f.force_gone("pods");
        assert!(f.take_forced_gone("pods"));
        assert!(f.config().force_gone.is_empty());
    }

    #[test]
    fn watch_rules_limit_streams() {
        let f = FaultInjector::new(FaultConfig {
            watch: vec![
                WatchRule { resource: "pods".into(), drop_after_events: Some(5), drop_after_ms: None },
                WatchRule { resource: "*".into(), drop_after_events: None, drop_after_ms: Some(1500) },
            ],
            ..Default::default()
        });
        assert_eq!(f.watch_faults("pods").drop_after_events, Some(5));
        assert_eq!(f.watch_faults("deployments").drop_after, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn config_round_trips_through_camel_case_json() {
        let json = serde_json::json!({
            "seed": 7,
            "errors": [{"verb": "patch", "resource": "microservices/status", "rate": 0.2, "code": 409},
                       {"rate": 0.1, "code": 429, "retryAfterSeconds": 2}],
            "latency": [{"fixedMs": 5}],
            "watch": [{"resource": "pods", "dropAfterEvents": 3}],
            "forceGone": ["pods"],
            "paused": true
        });
        let config: FaultConfig = serde_json::from_value(json).unwrap();
        assert_eq!(config.errors[1].verb, "*");
        assert_eq!(config.errors[1].retry_after_seconds, Some(2));
        assert_eq!(config.latency[0].resource, "*");
        assert!(config.validate().is_ok());
        let back: FaultConfig = serde_json::from_value(serde_json::to_value(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        let bad = FaultConfig { errors: vec![rule("*", "*", 0.5, 404)], ..Default::default() };
        assert_eq!(bad.validate().unwrap_err().code, 400);
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("pods", "pods"));
        assert!(!glob_match("pods", "pods/status"));
        assert!(glob_match("*/status", "pods/status"));
        assert!(glob_match("micro*ces*", "microservices/status"));
        assert!(!glob_match("a*a", "a"));
    }

    #[tokio::test]
    async fn pause_holds_requests_until_unpaused() {
        let f = FaultInjector::new(FaultConfig { paused: true, ..Default::default() });
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.wait_unpaused().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        f.set_paused(false);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        assert!(!f.config().paused);
        // Unpaused: returns at once.
        tokio::time::timeout(Duration::from_secs(5), f.wait_unpaused()).await.unwrap();
    }
}
