//! What every reconcile shares: the client, the profile, the caches and the publishers. Its own module so the
//! controller (which builds it) and the reconcile (which reads it) do not import each other.

use std::sync::Arc;

use kube::Client;
use microservice_core::profile::PlatformProfile;

use crate::backoff::Backoff;
use crate::children::{ChildCache, DeploymentView, HpaView, ServiceView};
use crate::events::Publisher;
use crate::keylock::KeyLocks;
use crate::metrics::Metrics;
use crate::microservices::Microservices;
use crate::queue::WorkQueue;
use crate::written::WrittenStatuses;

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub profile: PlatformProfile,
    pub microservices: Microservices,
    pub deployments: Arc<ChildCache<DeploymentView>>,
    pub services: Arc<ChildCache<ServiceView>>,
    pub hpas: Arc<ChildCache<HpaView>>,
    pub events: Publisher,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub written: Arc<WrittenStatuses>,
    pub locks: KeyLocks,
    /// The Controller's queue; a reconcile marks its key started (see `queue`).
    pub queue: Arc<WorkQueue>,
}
