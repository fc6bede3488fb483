//! The loop's work queue: first in, first out, at most one entry per item (client-go's workqueue without its
//! in-flight set, which a single-threaded loop does not need). Marking an item that is already queued keeps its
//! place, so a Deployment that keeps changing cannot starve the Pods queued behind it, nor they it.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;

pub(super) struct Queue<T> {
    order: VecDeque<T>,
    queued: HashSet<T>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue { order: VecDeque::new(), queued: HashSet::new() }
    }
}

impl<T: Clone + Eq + Hash> Queue<T> {
    pub(super) fn push(&mut self, item: T) {
        if self.queued.insert(item.clone()) {
            self.order.push_back(item);
        }
    }

    pub(super) fn pop(&mut self) -> Option<T> {
        let item = self.order.pop_front()?;
        self.queued.remove(&item);
        Some(item)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.order.len()
    }
}

impl<T: Clone + Eq + Hash> Extend<T> for Queue<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            self.push(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;

    fn drain(q: &mut Queue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn items_come_out_in_the_order_they_were_first_marked() {
        let mut q = Queue::default();
        q.extend(["deployment", "pod-a", "pod-b"]);
        assert_eq!(drain(&mut q), ["deployment", "pod-a", "pod-b"]);
        assert!(q.is_empty());
    }

    #[test]
    fn marking_a_queued_item_again_keeps_one_entry_in_its_first_place() {
        let mut q = Queue::default();
        q.extend(["deployment", "pod-a", "deployment", "pod-b", "deployment"]);
        assert_eq!(q.len(), 3);
        assert_eq!(drain(&mut q), ["deployment", "pod-a", "pod-b"]);
    }

    #[test]
    fn an_item_marked_after_it_was_taken_goes_to_the_back() {
        let mut q = Queue::default();
        q.extend(["deployment", "pod-a"]);
        assert_eq!(q.pop(), Some("deployment"));
        q.push("deployment");
        assert_eq!(drain(&mut q), ["pod-a", "deployment"]);
    }
}
