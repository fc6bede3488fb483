//! Seeded, deterministic fault injection for the HTTP layer: error rates per verb and resource, added latency,
//! dropped watch streams, forced 410 Gone, and a pause that holds requests.
//!
//! (Interface fixed first; bodies are being written.)

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// The whole fault configuration, settable at start and at run time (admin endpoint, library handle).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultConfig {
    pub seed: u64,
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

/// Shared by the server's request path; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct FaultInjector {}

impl FaultInjector {
    pub fn new(_config: FaultConfig) -> Self {
        FaultInjector {}
    }

    pub fn set_config(&self, _config: FaultConfig) {}

    pub fn config(&self) -> FaultConfig {
        FaultConfig::default()
    }

    /// `verb` is the Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection);
    /// `resource` the plural, with `/status` for subresources (e.g. `microservices/status`).
    /// Returns the added latency to sleep first (possibly zero) and an optional failure.
    pub fn decide(&self, _verb: &str, _resource: &str) -> (Duration, Option<FaultDecision>) {
        (Duration::ZERO, None)
    }

    /// Limits for a watch that starts now.
    pub fn watch_faults(&self, _resource: &str) -> WatchFaults {
        WatchFaults::default()
    }

    /// True once after a forced 410 was requested: the next watch of `resource` must answer 410 Gone.
    pub fn take_forced_gone(&self, _resource: &str) -> bool {
        false
    }

    /// Resolves when no pause is in force.
    pub async fn wait_unpaused(&self) {}
}
