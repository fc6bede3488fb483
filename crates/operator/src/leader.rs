//! Leader election over a coordination.k8s.io Lease with kube-lease-manager: one replica holds the Lease and runs
//! the controller; the others wait with warm caches. [`Leadership`] publishes "this replica leads" on a watch
//! channel, mirrors it into the probes and `leader_election_master_status`, and releases the Lease on shutdown so
//! a standby can take over without waiting for it to expire.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder, LeaseManagerError};
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
    forwarder: JoinHandle<()>,
    manager: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
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
            .with_field_manager(format!("{}-{}", crate::controller::CONTROLLER_NAME, election.identity))
            .with_duration(election.lease_duration.as_secs())
            .with_grace(grace)
            .build()
            .await
            .map_err(|source| LeaderError::Lease { namespace: namespace.clone(), name: name.clone(), source })?;
        let (mut lease, manager) = manager.watch().await;
        let (sender, receiver) = watch::channel(false);
        health.set_leader(Some(false));
        metrics.set_leader(&name, false);
        info!(lease = %format!("{namespace}/{name}"), identity = %election.identity, "joined the leader election; standing by");

        let (stop, mut stopped) = oneshot::channel::<()>();
        let lease_name = name.clone();
        let leases: Api<Lease> = Api::namespaced(client, &namespace);
        let identity = election.identity.clone();
        let renew_deadline = election.renew_deadline;
        let forwarder = tokio::spawn(async move {
            let step_down = |why: &str| {
                warn!(lease = %lease_name, "{why}; this replica no longer leads");
                health.set_leader(Some(false));
                metrics.set_leader(&lease_name, false);
                sender.send_replace(false);
            };
            let mut leading_since_confirmed: Option<Instant> = None;
            let mut check = tokio::time::interval(RETRY_PERIOD);
            check.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    changed = lease.changed() => {
                        if changed.is_err() {
                            // The manager task ended (it only does on an unrecoverable error): nobody renews.
                            step_down("the leader election stopped");
                            break;
                        }
                        let leads = *lease.borrow_and_update();
                        if leads {
                            info!(lease = %lease_name, "acquired the Lease; this replica leads");
                            leading_since_confirmed = Some(Instant::now());
                            health.set_leader(Some(true));
                            metrics.set_leader(&lease_name, true);
                            sender.send_replace(true);
                        } else {
                            step_down("lost the Lease to another replica");
                            break;
                        }
                    }
                    _ = check.tick(), if leading_since_confirmed.is_some() => {
                        // kube-lease-manager keeps believing it leads while its renewals fail; controller-runtime's
                        // rule is to stop leading once the Lease could not be confirmed for the renew deadline, so a
                        // partitioned leader steps down before a standby may take over.
                        match leases.get_opt(&lease_name).await {
                            Ok(Some(current)) => {
                                let holder = current.spec.and_then(|s| s.holder_identity);
                                if holder.as_deref() == Some(identity.as_str()) {
                                    leading_since_confirmed = Some(Instant::now());
                                } else {
                                    step_down(&format!("the Lease is held by {}", holder.as_deref().unwrap_or("nobody")));
                                    break;
                                }
                            }
                            Ok(None) => {
                                step_down("the Lease was deleted");
                                break;
                            }
                            Err(e) => {
                                let since = leading_since_confirmed.map(|t| t.elapsed()).unwrap_or_default();
                                if since >= renew_deadline {
                                    step_down(&format!("could not confirm the Lease for {}s ({e})", since.as_secs()));
                                    break;
                                }
                            }
                        }
                    }
                }
            }
            // Dropping `lease` here tells the manager task to release the Lease (if still ours) and end.
        });
        Ok(Leadership {
            receiver,
            _always: None,
            election: Some(Running { name, namespace, stop, forwarder, manager }),
        })
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
        let done = async {
            let _ = running.forwarder.await;
            running.manager.await
        };
        match tokio::time::timeout(within, done).await {
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
