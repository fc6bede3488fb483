//! Per-object exponential backoff. kube-runtime's `error_policy` is stateless and is not told about successes
//! (kube issues #297, #1916), so the failure count per object lives here, is bumped on each temporary error and
//! is reset by the next successful reconcile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

/// The delay schedule: `base · 2^(failures-1)`, capped, with ±`jitter` spread so that many objects failing
/// together (an API outage) do not retry in lockstep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    pub base: Duration,
    pub cap: Duration,
    /// Fraction of the delay, 0.0..1.0.
    pub jitter: f64,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        BackoffPolicy { base: Duration::from_millis(100), cap: Duration::from_secs(300), jitter: 0.1 }
    }
}

impl BackoffPolicy {
    /// The delay before retry number `failures` (1 = first retry), before jitter.
    pub fn nominal(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(32);
        let factor = 1u64 << exponent;
        let nanos = (self.base.as_nanos() as u64).saturating_mul(factor);
        Duration::from_nanos(nanos).min(self.cap)
    }

    /// `nominal` spread by a uniform factor in [1 - jitter, 1 + jitter), never above the cap, and never below
    /// what the server asked for with Retry-After.
    pub fn delay(&self, failures: u32, retry_after: Option<Duration>, rng: &mut impl Rng) -> Duration {
        let nominal = self.nominal(failures);
        let spread = if self.jitter > 0.0 { rng.random_range(1.0 - self.jitter..1.0 + self.jitter) } else { 1.0 };
        let jittered = nominal.mul_f64(spread).min(self.cap);
        match retry_after {
            Some(server) => jittered.max(server),
            None => jittered,
        }
    }
}

/// Failure counters by object key (`namespace/name`).
#[derive(Debug, Default)]
pub struct Backoff {
    policy: BackoffPolicy,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    pub fn new(policy: BackoffPolicy) -> Self {
        Backoff { policy, failures: Mutex::new(HashMap::new()) }
    }

    /// Records a temporary failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        let failures = {
            let mut map = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let n = map.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        self.policy.delay(failures, retry_after, &mut rand::rng())
    }

    /// Forgets the failures of `key` after a successful reconcile (or its deletion).
    pub fn succeeded(&self, key: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.remove(key);
    }

    /// How many consecutive failures `key` has had.
    pub fn failures(&self, key: &str) -> u32 {
        let map = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        map.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn doubles_from_100ms_to_the_cap() {
        let p = BackoffPolicy::default();
        assert_eq!(p.nominal(1), Duration::from_millis(100));
        assert_eq!(p.nominal(2), Duration::from_millis(200));
        assert_eq!(p.nominal(4), Duration::from_millis(800));
        assert_eq!(p.nominal(12), Duration::from_millis(204_800));
        assert_eq!(p.nominal(13), Duration::from_secs(300));
        assert_eq!(p.nominal(1000), Duration::from_secs(300), "huge counts saturate instead of overflowing");
    }

    #[test]
    fn jitter_stays_within_its_band_and_varies() {
        let p = BackoffPolicy::default();
        let mut rng = StdRng::seed_from_u64(7);
        let delays: Vec<Duration> = (0..200).map(|_| p.delay(3, None, &mut rng)).collect();
        for d in &delays {
            assert!(*d >= Duration::from_millis(360) && *d < Duration::from_millis(440), "{d:?}");
        }
        let distinct: std::collections::HashSet<_> = delays.iter().collect();
        assert!(distinct.len() > 50, "jitter spreads retries");
    }

    #[test]
    fn retry_after_is_a_floor() {
        let p = BackoffPolicy::default();
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(p.delay(1, Some(Duration::from_secs(2)), &mut rng), Duration::from_secs(2));
    }

    #[test]
    fn success_resets_the_count() {
        let b = Backoff::new(BackoffPolicy { jitter: 0.0, ..BackoffPolicy::default() });
        assert_eq!(b.failed("todo/a", None), Duration::from_millis(100));
        assert_eq!(b.failed("todo/a", None), Duration::from_millis(200));
        assert_eq!(b.failed("todo/b", None), Duration::from_millis(100), "objects back off independently");
        b.succeeded("todo/a");
        assert_eq!(b.failures("todo/a"), 0);
        assert_eq!(b.failed("todo/a", None), Duration::from_millis(100));
    }
}
