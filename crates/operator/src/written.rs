//! What this replica last wrote to each Microservice's status, until the CR cache shows it (read your own writes).
//! The cache shows a status write only once its watch event arrives; a reconcile in between (a child changed, or
//! the Ready lane) would read the stale CR: without this memo it computes the same status and writes it again, or
//! writes a newer one with the stale resourceVersion as precondition and gets 409. With it, the reconcile reads the
//! CR as the server holds it after the write: the status written and the resourceVersion it answered.
//!
//! An entry lives from the write until the watch shows that resourceVersion (or the CR is deleted), so the memo
//! holds only the writes in flight, not one status per Microservice. It also remembers when each CR's status was
//! last written, for a short while, so progress-only changes can be spaced out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use microservice_core::crd::MicroserviceStatus;

#[derive(Debug)]
struct Entry {
    /// The resourceVersion the server answered the write with.
    written_version: String,
    status: MicroserviceStatus,
}

#[derive(Debug, Default)]
pub struct WrittenStatuses {
    /// Boxed, so a table a burst of writes grew holds a pointer per slot, not a status.
    by_object: Mutex<HashMap<String, Box<Entry>>>,
    last_write: Mutex<LastWrites>,
}

#[derive(Debug, Default)]
struct LastWrites {
    /// By the hash of the key: a write's time is kept for every Microservice written in the last five minutes
    /// (all N of a wave), and two keys sharing a 64-bit hash would only space one's progress steps by the other's.
    at: HashMap<u64, Instant>,
    /// The size at which old entries are dropped next: twice what was left at the last pruning, so a wave of 10,000
    /// writes prunes a handful of times, not at every write.
    prune_at: usize,
}

impl LastWrites {
    /// Drops the times older than any spacing asks about.
    fn prune(&mut self, now: Instant) {
        self.at.retain(|_, at| now.duration_since(*at) < REMEMBER_WRITES);
        self.prune_at = self.at.len() * 2;
    }
}

/// How long a time of last write is kept: the longest spacing asked of [`WrittenStatuses::since_last_write`]
/// (`reconcile::SPACING`, shared by many rollouts).
pub const REMEMBER_WRITES: Duration = Duration::from_secs(300);

impl WrittenStatuses {
    /// The status and resourceVersion this replica wrote, when the cache (at `cached_version`) has not shown it yet.
    pub fn overlay(&self, key: &str, cached_version: &str) -> Option<(String, MicroserviceStatus)> {
        let by_object = self.by_object.lock().unwrap_or_else(|p| p.into_inner());
        let entry = by_object.get(key)?;
        (entry.written_version != cached_version).then(|| (entry.written_version.clone(), entry.status.clone()))
    }

    pub fn record(&self, key: &str, written_version: &str, status: &MicroserviceStatus) {
        let mut by_object = self.by_object.lock().unwrap_or_else(|p| p.into_inner());
        let entry = Entry { written_version: written_version.to_string(), status: status.clone() };
        by_object.insert(key.to_string(), Box::new(entry));
        drop(by_object);
        let now = Instant::now();
        let mut last = self.last_write.lock().unwrap_or_else(|p| p.into_inner());
        if last.at.len() >= last.prune_at.max(1024) {
            last.prune(now);
        }
        last.at.insert(hash(key), now);
    }

    /// The watch showed `version` of the CR: a write up to it is no longer in flight. True when that version is
    /// this replica's own write: the server answered it with this resourceVersion, so the object is exactly what
    /// the writing reconcile saw plus the status it wrote (the write's precondition made sure of that), and
    /// nothing in it asks for another reconcile.
    pub fn seen(&self, key: &str, version: &str) -> bool {
        let mut by_object = self.by_object.lock().unwrap_or_else(|p| p.into_inner());
        let own = by_object.get(key).is_some_and(|e| e.written_version == version);
        if own {
            by_object.remove(key);
            shrink(&mut by_object);
        }
        own
    }

    /// Forgets the write (the CR was deleted, or a write over this memo failed its precondition: someone else
    /// changed the CR, so the cache is what to trust).
    pub fn forget(&self, key: &str) {
        let mut by_object = self.by_object.lock().unwrap_or_else(|p| p.into_inner());
        by_object.remove(key);
        shrink(&mut by_object);
    }

    /// Keeps only the Microservices `exists` still knows (called on resync, in case a deletion was missed).
    pub fn retain(&self, exists: impl Fn(&str) -> bool) {
        let mut by_object = self.by_object.lock().unwrap_or_else(|p| p.into_inner());
        by_object.retain(|key, _| exists(key));
        shrink(&mut by_object);
        drop(by_object);
        self.last_write.lock().unwrap_or_else(|p| p.into_inner()).prune(Instant::now());
    }

    /// How long ago this replica last wrote the CR's status, if recently.
    pub fn since_last_write(&self, key: &str) -> Option<Duration> {
        let last = self.last_write.lock().unwrap_or_else(|p| p.into_inner());
        last.at.get(&hash(key)).map(Instant::elapsed).filter(|d| *d < REMEMBER_WRITES)
    }

    /// Writes in flight (not yet seen by the watch).
    pub fn in_flight(&self) -> usize {
        self.by_object.lock().map(|m| m.len()).unwrap_or(0)
    }
}

fn hash(key: &str) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    // One state for the process, so a key hashes the same at every write and read.
    static STATE: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);
    STATE.hash_one(key)
}

/// Gives back the table a burst of writes grew, once most of it is empty.
fn shrink<V>(map: &mut HashMap<String, V>) {
    if map.capacity() > 1024 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use microservice_core::crd::Phase;

    fn status(phase: Phase) -> MicroserviceStatus {
        MicroserviceStatus { phase: Some(phase), ..MicroserviceStatus::default() }
    }

    #[test]
    fn a_write_overlays_the_cache_until_the_watch_shows_it() {
        let memo = WrittenStatuses::default();
        memo.record("todo/a", "42", &status(Phase::Progressing));
        assert_eq!(memo.overlay("todo/a", "41"), Some(("42".to_string(), status(Phase::Progressing))));
        assert_eq!(memo.overlay("todo/a", "42"), None, "the cache is as new as the write");
        assert_eq!(memo.overlay("todo/b", "41"), None);
        assert!(!memo.seen("todo/a", "41"), "an older version is not the write");
        assert_eq!(memo.in_flight(), 1, "an older version seen does not end the write");
        assert!(memo.seen("todo/a", "42"), "the version the write answered is its echo");
        assert!(!memo.seen("todo/a", "42"), "an echo is told once");
        assert_eq!(memo.in_flight(), 0);
        assert!(memo.since_last_write("todo/a").is_some());
        memo.record("todo/c", "7", &status(Phase::Ready));
        memo.retain(|key| key != "todo/c");
        assert_eq!(memo.overlay("todo/c", "6"), None, "deleted CRs are forgotten");
    }

    #[test]
    fn a_burst_of_writes_seen_gives_back_its_table() {
        let memo = WrittenStatuses::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("todo/ms-{i}")).collect();
        for key in &keys {
            memo.record(key, "1", &status(Phase::Progressing));
        }
        let grown = memo.by_object.lock().unwrap().capacity();
        for key in &keys {
            assert!(memo.seen(key, "1"));
        }
        assert_eq!(memo.in_flight(), 0);
        assert!(memo.by_object.lock().unwrap().capacity() < grown / 4, "the table a burst grew stays grown");
        assert!(keys.iter().all(|k| memo.since_last_write(k).is_some()), "the times of the writes stay");
    }
}
