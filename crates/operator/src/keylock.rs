//! One reconcile of an object at a time, across the Controller's workers and the Ready lane (see `controller`).
//! A lock exists only while someone holds or waits for it, so the map stays as small as the work in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

#[derive(Default)]
pub struct KeyLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

pub struct KeyGuard<'a> {
    owner: &'a KeyLocks,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyLocks {
    pub async fn lock(&self, key: &str) -> KeyGuard<'_> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(key.to_string()).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        KeyGuard { owner: self, key: key.to_string(), guard: Some(guard) }
    }

    pub fn len(&self) -> usize {
        self.locks.lock().map(|l| l.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        // Release first, then forget the lock unless someone else holds a handle to it (waiting, or about to).
        drop(self.guard.take());
        let mut locks = self.owner.locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.get(&self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lock_is_forgotten_once_released() {
        let locks = KeyLocks::default();
        {
            let _a = locks.lock("ns/a").await;
            assert_eq!(locks.len(), 1);
        }
        assert!(locks.is_empty());
    }

    #[tokio::test]
    async fn a_second_holder_waits() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks.lock("ns/a").await;
        let other = locks.clone();
        let waiter = tokio::spawn(async move {
            let _g = other.lock("ns/a").await;
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(first);
        waiter.await.unwrap();
        assert!(locks.is_empty());
    }
}
