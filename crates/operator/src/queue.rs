//! The Controller's work queue: Microservices waiting for a reconcile, each once, handed to kube-runtime's scheduler
//! a few at a time. The scheduler keeps a request of some hundreds of bytes per object (the object reference twice,
//! in a hash table and a delay queue that never shrink); fed every change of a burst (N creates, a resync of all N)
//! it held one per Microservice, about 0.8 KiB each at 3,000. Waiting here costs a key, as controller-runtime's
//! workqueue does.
//!
//! A key handed over stays `released` until a reconcile of it starts: a change meanwhile is not queued again, since
//! the reconcile reads the caches when it starts and so sees it. The scheduler never holds more than
//! [`WorkQueue::in_flight`] keys, so none of its requests is merged with another and every released key is started
//! or reported missing ([`WorkQueue::started`] either way).

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use microservice_core::crd::Microservice;

/// Keys waiting and keys in the scheduler, by `namespace/name`.
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
    waker: Option<Waker>,
}

impl WorkQueue {
    /// At most `in_flight` keys in the scheduler at once: a few times the Controller's concurrency keeps every
    /// worker busy while some of them are held behind a reconcile of the same object.
    pub fn new(in_flight: usize) -> WorkQueue {
        WorkQueue { state: Mutex::default(), in_flight: in_flight.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a reconcile of `namespace/name` unless one is queued already and has not started.
    pub fn add(&self, namespace: &str, name: &str) {
        let key = format!("{namespace}/{name}");
        let mut state = self.lock();
        if state.released.contains(&key) || state.waiting.contains(&key) {
            return;
        }
        state.waiting.insert(key.clone());
        state.order.push_back(key);
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    /// A reconcile of `key` started, or the Controller found no such object: the key leaves the scheduler's count,
    /// and a change from now on queues it again.
    pub fn started(&self, key: &str) {
        let mut state = self.lock();
        if state.released.remove(key)
            && let Some(waker) = state.waker.take()
        {
            waker.wake();
        }
    }

    /// Keys waiting (not yet handed to the scheduler).
    pub fn waiting(&self) -> usize {
        self.lock().order.len()
    }

    /// The next key for the scheduler, if it has room for one.
    fn poll_release(&self, cx: &mut Context<'_>) -> Poll<Option<ObjectRef<Microservice>>> {
        let mut state = self.lock();
        if state.released.len() < self.in_flight
            && let Some(key) = state.order.pop_front()
        {
            state.waiting.remove(&key);
            let object = match key.split_once('/') {
                Some((namespace, name)) => ObjectRef::new(name).within(namespace),
                None => ObjectRef::new(&key),
            };
            state.released.insert(key);
            return Poll::Ready(Some(object));
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// What the Controller reads its requests from; it never ends.
    pub fn stream(self: std::sync::Arc<Self>) -> impl Stream<Item = ObjectRef<Microservice>> + Send + 'static {
        Released(self)
    }
}

struct Released(std::sync::Arc<WorkQueue>);

impl Stream for Released {
    type Item = ObjectRef<Microservice>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_release(cx)
    }
}

/// `namespace/name` of a reference, the queue's key.
pub fn key_of<K: kube::runtime::reflector::Lookup + ?Sized>(object: &ObjectRef<K>) -> String {
    format!("{}/{}", object.namespace.as_deref().unwrap_or_default(), object.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use futures::task::noop_waker_ref;
    use std::sync::Arc;

    fn next(queue: &Arc<WorkQueue>) -> Option<String> {
        let mut cx = Context::from_waker(noop_waker_ref());
        match queue.poll_release(&mut cx) {
            Poll::Ready(Some(object)) => Some(key_of(&object)),
            _ => None,
        }
    }

    #[test]
    fn a_burst_of_changes_to_one_object_queues_it_once() {
        let queue = Arc::new(WorkQueue::new(4));
        for _ in 0..3 {
            queue.add("ns", "a");
        }
        queue.add("ns", "b");
        assert_eq!(queue.waiting(), 2);
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        assert_eq!(next(&queue).as_deref(), Some("ns/b"));
        assert_eq!(next(&queue), None);
    }

    #[test]
    fn the_scheduler_holds_at_most_in_flight_keys_until_reconciles_start() {
        let queue = Arc::new(WorkQueue::new(2));
        for name in ["a", "b", "c"] {
            queue.add("ns", name);
        }
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        assert_eq!(next(&queue).as_deref(), Some("ns/b"));
        assert_eq!(next(&queue), None, "two are in the scheduler; the third waits");
        queue.started("ns/a");
        assert_eq!(next(&queue).as_deref(), Some("ns/c"));
    }

    #[test]
    fn a_change_before_the_reconcile_starts_is_not_queued_again_and_one_after_it_is() {
        let queue = Arc::new(WorkQueue::new(4));
        queue.add("ns", "a");
        assert_eq!(next(&queue).as_deref(), Some("ns/a"));
        queue.add("ns", "a");
        assert_eq!(queue.waiting(), 0, "the released request will read the change when it starts");
        queue.started("ns/a");
        queue.add("ns", "a");
        assert_eq!(next(&queue).as_deref(), Some("ns/a"), "a change after the start needs a reconcile of its own");
    }

    #[test]
    fn a_key_the_controller_could_not_find_frees_its_place() {
        let queue = Arc::new(WorkQueue::new(1));
        queue.add("ns", "gone");
        queue.add("ns", "b");
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
            let first = stream.next().await.map(|o| key_of(&o));
            let second = stream.next().await.map(|o| key_of(&o));
            (first, second)
        });
        tokio::task::yield_now().await;
        queue.add("ns", "a");
        queue.add("ns", "b");
        tokio::task::yield_now().await;
        queue.started("ns/a");
        let (first, second) = reader.await.expect("the reader ends after two keys");
        assert_eq!((first.as_deref(), second.as_deref()), (Some("ns/a"), Some("ns/b")));
    }
}
