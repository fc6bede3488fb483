//! Two watches (Microservices, Deployments) put back into commit order by resourceVersion. On the real server a
//! resourceVersion is etcd's revision, one counter for every kind, so a Microservice change at revision R comes
//! after every Deployment change below R: it is held until the Deployment watch has passed R, or has said nothing
//! for [`CATCH_UP`] (then nothing changed in between).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a Microservice change waits for the Deployment watch before the observer takes it as caught up.
pub const CATCH_UP: Duration = Duration::from_millis(300);

/// One change and where it sits in the commit order.
pub struct Stamped<T> {
    pub revision: u64,
    pub arrived: Instant,
    pub item: T,
}

pub struct CommitOrder<T> {
    held: VecDeque<Stamped<T>>,
    deployments_at: u64,
}

impl<T> Default for CommitOrder<T> {
    fn default() -> Self {
        CommitOrder { held: VecDeque::new(), deployments_at: 0 }
    }
}

impl<T> CommitOrder<T> {
    /// A Deployment change: the held Microservice changes committed before it, then it.
    pub fn deployment(&mut self, change: Stamped<T>) -> Vec<T> {
        let mut out = self.release(|held| held.revision < change.revision);
        self.deployments_at = self.deployments_at.max(change.revision);
        out.push(change.item);
        out
    }

    /// A Microservice change: held until the Deployment watch has passed it.
    pub fn microservice(&mut self, change: Stamped<T>) -> Vec<T> {
        self.held.push_back(change);
        let passed = self.deployments_at;
        self.release(|held| held.revision < passed)
    }

    /// The held changes that waited [`CATCH_UP`] by `now`.
    pub fn waited(&mut self, now: Instant) -> Vec<T> {
        self.release(|held| now.saturating_duration_since(held.arrived) >= CATCH_UP)
    }

    /// Everything held (a watch started over: the order across the gap is lost anyway).
    pub fn all(&mut self) -> Vec<T> {
        self.release(|_| true)
    }

    /// From the front while `due` holds: a Microservice watch delivers in revision order.
    fn release(&mut self, due: impl Fn(&Stamped<T>) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(&due) {
            out.extend(self.held.pop_front().map(|held| held.item));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(revision: u64, arrived: Instant, item: &'static str) -> Stamped<&'static str> {
        Stamped { revision, arrived, item }
    }

    #[test]
    fn a_ready_status_that_arrives_before_the_completed_rollout_it_followed_is_released_after_it() {
        let now = Instant::now();
        let mut order = CommitOrder::default();
        assert!(order.microservice(at(11, now, "ms Ready")).is_empty());
        assert_eq!(order.deployment(at(10, now, "rollout complete")), ["rollout complete"]);
        assert_eq!(order.deployment(at(12, now, "next deployment")), ["ms Ready", "next deployment"]);
    }

    #[test]
    fn a_change_the_deployment_watch_has_passed_goes_straight_through() {
        let now = Instant::now();
        let mut order = CommitOrder::default();
        assert_eq!(order.deployment(at(20, now, "d")), ["d"]);
        assert_eq!(order.microservice(at(15, now, "ms")), ["ms"]);
    }

    #[test]
    fn held_changes_leave_in_their_order_once_waited_for() {
        let now = Instant::now();
        let mut order = CommitOrder::default();
        assert!(order.microservice(at(5, now, "first")).is_empty());
        assert!(order.microservice(at(6, now + CATCH_UP, "second")).is_empty());
        assert!(order.waited(now + CATCH_UP / 2).is_empty());
        assert_eq!(order.waited(now + CATCH_UP), ["first"]);
        assert_eq!(order.all(), ["second"]);
    }
}
