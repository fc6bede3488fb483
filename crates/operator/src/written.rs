//! What this replica last wrote to each Microservice's status, and which version of the CR it had read then. The
//! CR cache shows a status write only once its watch event arrives; a reconcile in between (a child changed) reads
//! the same stale CR, computes the same status and, without this memo, writes it again.

use std::collections::HashMap;
use std::sync::Mutex;

use microservice_core::crd::MicroserviceStatus;

#[derive(Debug, Default)]
pub struct WrittenStatuses {
    by_object: Mutex<HashMap<String, (String, MicroserviceStatus)>>,
}

impl WrittenStatuses {
    /// True when `status` was already written on top of the very CR version `read_version`: the cache has not
    /// caught up yet. Any newer version (our own write seen, or someone else's change) is judged afresh.
    pub fn already_written(&self, key: &str, read_version: &str, status: &MicroserviceStatus) -> bool {
        let by_object = self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        by_object.get(key).is_some_and(|(version, written)| version == read_version && written == status)
    }

    pub fn record(&self, key: &str, read_version: &str, status: &MicroserviceStatus) {
        let mut by_object = self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        by_object.insert(key.to_string(), (read_version.to_string(), status.clone()));
    }

    /// Keeps only the Microservices `exists` still knows (called on resync, so deleted CRs do not pile up).
    pub fn retain(&self, exists: impl Fn(&str) -> bool) {
        let mut by_object = self.by_object.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        by_object.retain(|key, _| exists(key));
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
    fn a_status_counts_as_written_only_on_top_of_the_same_read_version() {
        let memo = WrittenStatuses::default();
        memo.record("todo/a", "41", &status(Phase::Progressing));
        assert!(memo.already_written("todo/a", "41", &status(Phase::Progressing)));
        assert!(!memo.already_written("todo/a", "41", &status(Phase::Ready)), "a different status is written");
        assert!(!memo.already_written("todo/a", "42", &status(Phase::Progressing)), "a newer CR is judged afresh");
        assert!(!memo.already_written("todo/b", "41", &status(Phase::Progressing)));
        memo.retain(|key| key != "todo/a");
        assert!(!memo.already_written("todo/a", "41", &status(Phase::Progressing)), "deleted CRs are forgotten");
    }
}
