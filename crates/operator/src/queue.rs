//! The work queue: Microservices waiting for a reconcile, each once, handed to the workers as they free up
//! (`controller::run_workers`). Waiting here costs a key, as controller-runtime's workqueue does (kube-runtime's
//! scheduler, which fed its Controller before, kept some hundreds of bytes per object in tables that never shrink).
//!
//! A key handed over stays `released` until a reconcile of it starts: a change meanwhile is not queued again, since
//! the reconcile reads the caches when it starts and so sees it. At most `in_flight` keys are released at once, and
//! every released key is started, or found missing, which starts it too ([`WorkQueue::started`]).
//!
//! A reconcile that asks to run again later (a held-back status step, a retry after a temporary failure) waits here
//! too ([`WorkQueue::add_after`]): while thousands of rollouts share the progress budget, nearly every one of them
//! waits so. Any reconcile of the object before then decides again, so a start forgets the wait.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use tokio::time::{Instant, Sleep};

/// Keys waiting and keys released to the workers, by `namespace/name`.
#[derive(Debug)]
pub struct WorkQueue {
    state: Mutex<State>,
    in_flight: usize,
}

#[derive(Debug, Default)]
struct State {
    order: VecDeque<String>,
    waiting: HashSet<String>,
    released: HashSet<String>,
    /// Keys due later, by when; `delayed` holds each key's one entry in `due`.
    due: BTreeSet<(Instant, String)>,
    delayed: HashMap<String, Instant>,
    waker: Option<Waker>,
}

impl State {
    /// Queues `key` now unless it is queued or released already.
    fn enqueue(&mut self, key: &str) -> bool {
        self.forget_delay(key);
        if self.released.contains(key) || self.waiting.contains(key) {
            return false;
        }
        self.waiting.insert(key.to_string());
        self.order.push_back(key.to_string());
        true
    }

    fn forget_delay(&mut self, key: &str) {
        if let Some(at) = self.delayed.remove(key) {
            self.due.remove(&(at, key.to_string()));
        }
    }

    /// Moves the keys whose time has come to the queue; returns when the next one is due.
    fn promote(&mut self, now: Instant) -> Option<Instant> {
        while let Some((at, _)) = self.due.first() {
            if *at > now {
                return Some(*at);
            }
            if let Some((_, key)) = self.due.pop_first() {
                self.delayed.remove(&key);
                self.enqueue(&key);
            }
        }
        None
    }

    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

impl WorkQueue {
    /// At most `in_flight` keys released at once: a few times the workers' concurrency keeps every worker busy while
    /// some of them are held behind a reconcile of the same object.
    pub fn new(in_flight: usize) -> WorkQueue {
        WorkQueue { state: Mutex::default(), in_flight: in_flight.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a reconcile of the `namespace/name` key unless one is queued already and has not started.
    pub fn add(&self, key: &str) {
        let mut state = self.lock();
        if state.enqueue(key) {
            state.wake();
        }
    }

    /// Queues a reconcile of the `namespace/name` key after `delay`, unless one is queued already or due sooner.
    pub fn add_after(&self, key: &str, delay: Duration) {
        let at = Instant::now() + delay;
        let mut state = self.lock();
        if state.released.contains(key) || state.waiting.contains(key) {
            return;
        }
        match state.delayed.get(key) {
            Some(sooner) if *sooner <= at => return,
            Some(_) => state.forget_delay(key),
            None => {}
        }
        state.delayed.insert(key.to_string(), at);
        state.due.insert((at, key.to_string()));
        // The stream may be sleeping until a later time.
        state.wake();
    }

    /// A reconcile of `key` started (or found no such object): the key leaves the released count,
    /// a wait for it is forgotten (the reconcile decides again), and a change from now on queues it again.
    pub fn started(&self, key: &str) {
        let mut state = self.lock();
        state.forget_delay(key);
        if state.released.remove(key) {
            state.wake();
        }
    }

    /// Keys waiting for a later time.
    pub fn delayed(&self) -> usize {
        self.lock().delayed.len()
    }

    /// Keys waiting (not yet handed to a worker).
    pub fn waiting(&self) -> usize {
        self.lock().order.len()
    }

    /// The next key for a worker, if fewer than `in_flight` are out; otherwise when the next delayed key is due.
    fn poll_release(&self, cx: &mut Context<'_>) -> Result<String, Option<Instant>> {
        let mut state = self.lock();
        let next_due = state.promote(Instant::now());
        if state.released.len() < self.in_flight
            && let Some(key) = state.order.pop_front()
        {
            state.waiting.remove(&key);
            state.released.insert(key.clone());
            return Ok(key);
        }
        state.waker = Some(cx.waker().clone());
        Err(next_due)
    }

    /// What the workers read their `namespace/name` keys from; it never ends.
    pub fn stream(self: Arc<Self>) -> impl Stream<Item = String> + Send + 'static {
        Released { queue: self, timer: Box::pin(tokio::time::sleep(Duration::ZERO)), armed: None }
    }
}

struct Released {
    queue: Arc<WorkQueue>,
    timer: Pin<Box<Sleep>>,
    /// The time the timer is set to, while a delayed key is due.
    armed: Option<Instant>,
}

impl Stream for Released {
    type Item = String;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let next_due = match self.queue.poll_release(cx) {
                Ok(key) => return Poll::Ready(Some(key)),
                Err(next_due) => next_due,
            };
            let Some(at) = next_due else {
                self.armed = None;
                return Poll::Pending;
            };
            if self.armed != Some(at) {
                self.timer.as_mut().reset(at);
                self.armed = Some(at);
            }
            match self.timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Due now: promote it on the next turn.
                Poll::Ready(()) => self.armed = None,
            }
        }
    }
}

/// `namespace/name`: an object's key in the queue, the caches, the locks, the memos and the logs.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The namespace and name of a `namespace/name` key (a name alone for a key without a namespace).
pub fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use futures::task::noop_waker_ref;

    fn next(queue: &Arc<WorkQueue>) -> Option<String> {
        let mut cx = Context::from_waker(noop_waker_ref());
        queue.poll_release(&mut cx).ok()
    }

    #[test]
    fn a_burst_of_changes_to_one_object_queues_it_once() {
        let queue = Arc::new(WorkQueue::new(4));
        for _ in 0..3 {
            queue.add("ns/a");
        }
        queue.add("ns/b");
        assert_eq!(queue.waiting(), 2);
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        assert_eq!(next(&queue).as_deref(), Some("ns/b"));
        assert_eq!(next(&queue), None);
    }

    #[test]
    fn at_most_in_flight_keys_are_released_until_reconciles_start() {
        let queue = Arc::new(WorkQueue::new(2));
        for name in ["a", "b", "c"] {
            queue.add(&key("ns", name));
        }
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        assert_eq!(next(&queue).as_deref(), Some("ns/b"));
        assert_eq!(next(&queue), None, "two are released; the third waits");
        queue.started("ns/a");
        assert_eq!(next(&queue).as_deref(), Some("ns/c"));
    }

    #[test]
    fn a_change_before_the_reconcile_starts_is_not_queued_again_and_one_after_it_is() {
        let queue = Arc::new(WorkQueue::new(4));
        queue.add("ns/a");
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        queue.add("ns/a");
        assert_eq!(queue.waiting(), 0, "the released request will read the change when it starts");
        queue.started("ns/a");
        queue.add("ns/a");
        assert_eq!(next(&queue).as_deref(), Some("ns/a"), "a change after the start needs a reconcile of its own");
    }

    #[test]
    fn a_key_whose_object_is_gone_frees_its_place() {
        let queue = Arc::new(WorkQueue::new(1));
        queue.add("ns/gone");
        queue.add("ns/b");
        assert_eq!(next(&queue).as_deref(), Some("ns/gone"));
        assert_eq!(next(&queue), None);
        queue.started("ns/gone");
        assert_eq!(next(&queue).as_deref(), Some("ns/b"));
    }

    #[tokio::test]
    async fn the_stream_wakes_when_a_key_is_added_or_a_place_frees() {
        let queue = Arc::new(WorkQueue::new(1));
        let mut stream = queue.clone().stream();
        let reader = tokio::spawn(async move {
            let first = stream.next().await;
            let second = stream.next().await;
            (first, second)
        });
        tokio::task::yield_now().await;
        queue.add("ns/a");
        queue.add("ns/b");
        tokio::task::yield_now().await;
        queue.started("ns/a");
        let (first, second) = reader.await.expect("the reader ends after two keys");
        assert_eq!((first.as_deref(), second.as_deref()), (Some("ns/a"), Some("ns/b")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_is_released_when_its_time_comes() {
        let queue = Arc::new(WorkQueue::new(4));
        let mut stream = queue.clone().stream();
        queue.add_after("ns/later", Duration::from_secs(5));
        queue.add_after("ns/sooner", Duration::from_secs(1));
        let started = Instant::now();
        let first = stream.next().await;
        assert_eq!(first.as_deref(), Some("ns/sooner"));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        let second = stream.next().await;
        assert_eq!(second.as_deref(), Some("ns/later"));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(queue.delayed(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sooner_reason_wins_and_a_reconcile_forgets_the_wait() {
        let queue = Arc::new(WorkQueue::new(4));
        queue.add_after("ns/a", Duration::from_secs(30));
        queue.add_after("ns/a", Duration::from_secs(60));
        queue.add_after("ns/a", Duration::from_secs(2));
        assert_eq!(queue.delayed(), 1, "one wait per key, the soonest");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));

        queue.add_after("ns/b", Duration::from_secs(10));
        queue.started("ns/b");
        assert_eq!(queue.delayed(), 0, "the reconcile that started decides again whether to wait");
        queue.add_after("ns/c", Duration::from_secs(10));
        queue.add("ns/c");
        assert_eq!((queue.delayed(), queue.waiting()), (0, 1), "a change queues it now, once");
    }
}
