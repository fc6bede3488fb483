//! Leader election over a coordination.k8s.io Lease with kube-lease-manager: one replica holds the Lease and runs
//! the controller; the others wait with warm caches. [`Leadership`] publishes "this replica leads" on a watch
//! channel, mirrors it into the probes and `leader_election_master_status`, and releases the Lease on shutdown;
//! standbys look every retry period (2 s) and take a released Lease without waiting for it to expire.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use serde_json::json;
use thiserror::Error;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::{info, warn};

use crate::health::Health;
use crate::metrics::Metrics;
use crate::settings::Election;

/// How often the leader confirms it still holds the Lease (controller-runtime's retry period).
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

#[derive(Debug, Error)]
pub enum LeaderError {
    #[error(
        "cannot use the leader election Lease {namespace}/{name}: {source}; check that the namespace exists and the \
         operator may get, create and patch leases there (or pass --leader-elect=false for a single replica)"
    )]
    Lease { namespace: String, name: String, source: LeaseManagerError },
    #[error("the leader election settings have no namespace for the Lease; pass --leader-election-namespace")]
    NoNamespace,
}

/// This replica's view of the election.
pub struct Leadership {
    receiver: watch::Receiver<bool>,
    /// Without an election the sender is kept here: a closed channel would read as "the election ended".
    _always: Option<watch::Sender<bool>>,
    election: Option<Running>,
}

struct Running {
    name: String,
    namespace: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), LeaseManagerError>>,
}

/// The election loop of one replica, driving kube-lease-manager's manual API (`changed`, `release`) so that it can
/// add controller-runtime's two rules the crate lacks: a leader that cannot confirm its Lease for the renew
/// deadline steps down, and a standby tries for a released Lease within the retry period instead of waiting for
/// the old lease to expire.
struct Campaign {
    manager: LeaseManager,
    leases: Api<Lease>,
    name: String,
    identity: String,
    renew_deadline: Duration,
    sender: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

impl Campaign {
    async fn run(self, mut stopped: oneshot::Receiver<()>) -> Result<(), LeaseManagerError> {
        let manager = &self.manager;
        // The last time this replica saw itself holding the Lease; `None` while standing by.
        let mut confirmed: Option<Instant> = None;
        let mut check = tokio::time::interval(RETRY_PERIOD);
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut changed: BoxFuture<'_, Result<bool, LeaseManagerError>> = manager.changed().boxed();
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                result = &mut changed => {
                    match result {
                        Ok(true) => {
                            info!(lease = %self.name, "acquired the Lease; this replica leads");
                            confirmed = Some(Instant::now());
                            self.publish(true);
                        }
                        Ok(false) => {
                            self.step_down("lost the Lease to another replica");
                            break;
                        }
                        Err(e) => {
                            warn!(lease = %self.name, error = %e, "leader election request failed; retrying");
                            changed = async move {
                                tokio::time::sleep(RETRY_PERIOD).await;
                                manager.changed().await
                            }
                            .boxed();
                            continue;
                        }
                    }
                    changed = manager.changed().boxed();
                }
                _ = check.tick() => {
                    // Bounded: a request on a connection whose server vanished can wait for the client's read
                    // timeout (minutes), far past the renew deadline this check enforces.
                    let current = match tokio::time::timeout(RETRY_PERIOD, self.leases.get_opt(&self.name)).await {
                        Ok(answer) => answer.map_err(|e| e.to_string()),
                        Err(_) => Err(format!("no answer within {}s", RETRY_PERIOD.as_secs())),
                    };
                    match (confirmed, current) {
                        (Some(_), Ok(Some(lease))) => {
                            let holder = lease.spec.and_then(|s| s.holder_identity);
                            if holder.as_deref() == Some(self.identity.as_str()) {
                                confirmed = Some(Instant::now());
                            } else {
                                self.step_down(&format!("the Lease is held by {}", holder.as_deref().unwrap_or("nobody")));
                                break;
                            }
                        }
                        (Some(_), Ok(None)) => {
                            self.step_down("the Lease was deleted");
                            break;
                        }
                        (Some(since), Err(e)) => {
                            if since.elapsed() >= self.renew_deadline {
                                let seconds = since.elapsed().as_secs();
                                self.step_down(&format!("could not confirm the Lease for {seconds}s ({e})"));
                                break;
                            }
                        }
                        (None, Ok(Some(lease))) if lease.spec.as_ref().is_none_or(|s| s.holder_identity.is_none()) => {
                            // Released by its holder. The manager sleeps until the old expiry; `release` (a no-op
                            // for a non-holder) re-reads the Lease, and `changed` then takes it.
                            changed = async move {
                                let _ = manager.release().await;
                                manager.changed().await
                            }
                            .boxed();
                        }
                        (None, _) => {}
                    }
                }
            }
        }
        drop(changed);
        self.release_if_held().await
    }

    /// Clears holderIdentity so a standby takes over at once, but only while it is still this replica's: the
    /// crate's `release` trusts its cached view and would clear a Lease another replica has taken since. The JSON
    /// patch's `test` makes the check and the write one atomic step on the server (422 when the holder changed).
    async fn release_if_held(&self) -> Result<(), LeaseManagerError> {
        let Some(lease) = self.leases.get_opt(&self.name).await.map_err(LeaseManagerError::from)? else {
            return Ok(());
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let mut ops = vec![
            json!({"op": "test", "path": "/spec/holderIdentity", "value": self.identity}),
            json!({"op": "remove", "path": "/spec/holderIdentity"}),
        ];
        for (present, field) in [
            (spec.acquire_time.is_some(), "acquireTime"),
            (spec.renew_time.is_some(), "renewTime"),
            (spec.lease_duration_seconds.is_some(), "leaseDurationSeconds"),
        ] {
            if present {
                ops.push(json!({"op": "remove", "path": format!("/spec/{field}")}));
            }
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
            .map_err(|e| LeaseManagerError::InconsistentState(e.to_string()))?;
        match self.leases.patch(&self.name, &PatchParams::default(), &Patch::Json::<()>(patch)).await {
            Ok(_) => Ok(()),
            // Someone else holds it now: nothing of ours to release.
            Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => Ok(()),
            Err(e) => Err(LeaseManagerError::from(e)),
        }
    }

    fn publish(&self, leads: bool) {
        self.health.set_leader(Some(leads));
        self.metrics.set_leader(&self.name, leads);
        self.sender.send_replace(leads);
    }

    fn step_down(&self, why: &str) {
        warn!(lease = %self.name, "{why}; this replica no longer leads");
        self.publish(false);
    }
}

impl Leadership {
    /// No election (`--leader-elect=false`): this replica always leads.
    pub fn always(health: &Health) -> Leadership {
        health.set_leader(Some(true));
        let (sender, receiver) = watch::channel(true);
        Leadership { receiver, _always: Some(sender), election: None }
    }

    /// Joins the election for the Lease (created if missing). Returns once the Lease has been read, so the leader
    /// state is known: standby until the Lease is acquired.
    pub async fn join(
        client: Client,
        election: &Election,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Result<Leadership, LeaderError> {
        let namespace = election.namespace.clone().ok_or(LeaderError::NoNamespace)?;
        let name = election.lease_name.clone();
        // kube-lease-manager renews `grace` seconds before expiry: renewing at the renew deadline means the rest.
        let grace = election.lease_duration.as_secs().saturating_sub(election.renew_deadline.as_secs()).max(1);
        let manager = LeaseManagerBuilder::new(client.clone(), &name)
            .with_namespace(&namespace)
            .with_create_mode(LeaseCreateMode::AutoCreate)
            .with_identity(&election.identity)
            .with_field_manager(format!("{}-{}", crate::identity::CONTROLLER_NAME, election.identity))
            .with_duration(election.lease_duration.as_secs())
            .with_grace(grace)
            .build()
            .await
            .map_err(|source| LeaderError::Lease { namespace: namespace.clone(), name: name.clone(), source })?;
        let (sender, receiver) = watch::channel(false);
        health.set_leader(Some(false));
        metrics.set_leader(&name, false);
        info!(lease = %format!("{namespace}/{name}"), identity = %election.identity, "joined the leader election; standing by");

        let (stop, stopped) = oneshot::channel::<()>();
        let campaign = Campaign {
            manager,
            leases: Api::namespaced(client, &namespace),
            name: name.clone(),
            identity: election.identity.clone(),
            renew_deadline: election.renew_deadline,
            sender,
            metrics,
            health,
        };
        let task = tokio::spawn(campaign.run(stopped));
        Ok(Leadership { receiver, _always: None, election: Some(Running { name, namespace, stop, task }) })
    }
    /// True while this replica leads; `changed()` wakes on every transition.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.receiver.clone()
    }

    pub fn leads(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Leaves the election, releasing the Lease if this replica holds it; waits at most `within`.
    pub async fn release(self, within: Duration) {
        let Some(running) = self.election else { return };
        let _ = running.stop.send(());
        let lease = format!("{}/{}", running.namespace, running.name);
        match tokio::time::timeout(within, running.task).await {
            Ok(Ok(Ok(_))) => info!(lease = %lease, "left the leader election (the Lease is released if it was ours)"),
            Ok(Ok(Err(e))) => warn!(lease = %lease, error = %e, "could not release the Lease; it expires by itself"),
            Ok(Err(e)) => {
                warn!(lease = %lease, error = %e, "the leader election task failed; the Lease expires by itself")
            }
            Err(_) => {
                warn!(lease = %lease, seconds = within.as_secs(), "gave up releasing the Lease; it expires by itself")
            }
        }
    }
}
