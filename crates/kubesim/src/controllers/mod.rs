//! The simulated controller-manager: Deployment and ReplicaSet controllers, a kubelet-like Pod lifecycle, the
//! garbage collector, the namespace finalizer and the admission policies' status. Controllers act through [`crate::cluster::Cluster`] like any
//! client would.
//!
//! Each controller's decisions are pure functions ([`deployment`], [`replicaset`], [`kubelet`], [`gc`], [`policy_status`]) so they
//! can be tested step by step; `manager` is the one event loop that feeds them from `Cluster::subscribe()` and
//! timers and performs their writes.

pub mod deployment;
pub mod gc;
pub mod kubelet;
mod manager;
pub mod policy_status;
pub mod replicaset;
pub mod util;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;

/// How simulated Pods behave.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ControllerConfig {
    /// Time from Pod creation to being scheduled (nodeName, PodScheduled). 0 for benchmarks.
    #[serde(with = "duration_ms")]
    pub schedule_delay: Duration,
    /// Time from scheduling to Ready. 0 for benchmarks.
    #[serde(with = "duration_ms")]
    pub ready_delay: Duration,
    /// Images whose pods never become ready or crash-loop.
    pub image_rules: Vec<ImageRule>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageRule {
    /// Matches when the container image contains this text.
    pub image_contains: String,
    pub behaviour: PodBehaviour,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum PodBehaviour {
    /// Running but never Ready.
    NeverReady,
    /// CrashLoopBackOff with a growing restartCount.
    CrashLoop,
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// Running controllers; dropping it stops them.
pub struct Controllers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the controllers on the current tokio runtime.
pub fn spawn(cluster: Cluster, config: ControllerConfig) -> Controllers {
    let manager = manager::Manager::new(cluster, config);
    Controllers { tasks: vec![tokio::spawn(manager.run())] }
}
