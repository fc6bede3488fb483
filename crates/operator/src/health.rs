//! What the probes report: whether the caches are synced, whether their watch streams still run, and what this
//! replica knows about leadership. Written by the controller and the leader elector, read by `/healthz` and
//! `/readyz`.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub struct Health {
    caches_synced: AtomicBool,
    /// Cache tasks started minus cache tasks that ended; an ended watch stream never recovers by itself.
    watches_started: AtomicUsize,
    watches_ended: AtomicUsize,
    /// 0 unknown, 1 standby, 2 leader.
    leader: AtomicU8,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_caches_synced(&self) {
        self.caches_synced.store(true, Ordering::Release);
    }

    /// Every child cache has listed once, so "absent from the cache" means absent.
    pub fn caches_synced(&self) -> bool {
        self.caches_synced.load(Ordering::Acquire)
    }

    pub(crate) fn watch_started(&self) {
        self.watches_started.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn watch_ended(&self) {
        self.watches_ended.fetch_add(1, Ordering::AcqRel);
    }

    /// True while every watch stream that was started still runs (they retry with backoff; they end only on a bug
    /// or at shutdown, and the process is then not live).
    pub fn watches_alive(&self) -> bool {
        self.watches_ended.load(Ordering::Acquire) == 0
    }

    /// `None` while the election has not answered yet.
    pub fn set_leader(&self, leader: Option<bool>) {
        let value = match leader {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        self.leader.store(value, Ordering::Release);
    }

    pub fn leader(&self) -> Option<bool> {
        match self.leader.load(Ordering::Acquire) {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        }
    }

    /// Readiness: caches synced and the leader state known (a standby is ready: it serves metrics and takes over
    /// warm).
    pub fn ready(&self) -> bool {
        self.caches_synced() && self.leader().is_some()
    }

    /// Liveness: the process answers and its watch streams still run.
    pub fn live(&self) -> bool {
        self.watches_alive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_synced_caches_and_a_known_leader_state() {
        let health = Health::new();
        assert!(!health.ready());
        health.set_caches_synced();
        assert!(!health.ready(), "leader state still unknown");
        health.set_leader(Some(false));
        assert!(health.ready(), "a standby with warm caches is ready");
        health.set_leader(None);
        assert!(!health.ready());
    }

    #[test]
    fn an_ended_watch_makes_the_process_not_live() {
        let health = Health::new();
        health.watch_started();
        assert!(health.live());
        health.watch_ended();
        assert!(!health.live());
    }
}
