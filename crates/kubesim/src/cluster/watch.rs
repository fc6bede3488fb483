//! One watcher: replays history or synthesises ADDED events, then follows the store's change broadcast, filtering
//! by resource, namespace and selectors, and turning selector transitions into ADDED/DELETED as upstream does.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::{Change, ChangeKind, Inner, WatchEvent, WatchStream, present};
use crate::resources::ResourceRef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{ResourceKey, too_old};

/// What a watcher emits: an event to serialise, or a JSON line shared by every watcher that sends it.
#[derive(Debug, Clone)]
pub enum WatchItem {
    Event(WatchEvent),
    Line(bytes::Bytes),
}

pub struct Filter {
    pub rt: ResourceRef,
    pub key: ResourceKey,
    pub ns: Option<String>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
}

impl Filter {
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.ns
            && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns.as_str())
        {
            return false;
        }
        if let Some(l) = &self.labels {
            let empty = serde_json::Map::new();
            let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
            if !l.matches(labels) {
                return false;
            }
        }
        self.fields.as_ref().is_none_or(|f| crate::builtin::field_selector_matches(&self.rt, f, obj))
    }
}

pub struct Watcher {
    pub inner: Arc<Inner>,
    pub rt: ResourceRef,
    pub filter: Filter,
    pub rx: tokio::sync::broadcast::Receiver<Change>,
    pub pending: VecDeque<WatchItem>,
    /// Emit shared, pre-serialised JSON lines for plain events (the HTTP JSON path).
    pub lines: bool,
    /// The newest resourceVersion this watcher has seen (delivered or filtered out): bookmarks carry it.
    pub last_rv: u64,
    pub deadline: Instant,
    pub bookmarks: Option<Duration>,
    pub done: bool,
}

pub fn bookmark(rt: &ResourceRef, rv: u64, initial_events_end: bool) -> Value {
    // kube-apiserver 1.37 leaves the zero creationTimestamp out of a bookmark's metadata.
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta})
}

impl Watcher {
    fn handle(&mut self, change: &Change) {
        if change.resource_version <= self.last_rv {
            return;
        }
        self.last_rv = change.resource_version;
        if ResourceKey::of(&change.rt) != self.filter.key {
            return;
        }
        let now = self.filter.matches(&change.object);
        let before = change.old.as_deref().is_some_and(|o| self.filter.matches(o));
        if self.lines && now && (before || change.kind != ChangeKind::Modified) {
            // The event every plain watcher of this version sends: serialise it once for all of them.
            self.pending.push_back(WatchItem::Line(self.inner.shared_line(&self.rt, change)));
            return;
        }
        let obj = || present(&self.rt, &change.object);
        let event = match change.kind {
            ChangeKind::Added if now => WatchEvent::Added(obj()),
            ChangeKind::Modified if now && before => WatchEvent::Modified(obj()),
            ChangeKind::Modified if now => WatchEvent::Added(obj()),
            // Upstream's watch cache: an object leaving the selector is DELETED with its previous content
            // (the one that matched) at the event's resourceVersion.
            ChangeKind::Modified if before => {
                let Some(old) = change.old.as_deref() else { return };
                let mut prev = present(&self.rt, old);
                if let Some(meta) = prev.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), Value::String(change.resource_version.to_string()));
                }
                WatchEvent::Deleted(prev)
            }
            ChangeKind::Deleted if now => WatchEvent::Deleted(obj()),
            _ => return,
        };
        self.pending.push_back(WatchItem::Event(event));
    }

    /// After the broadcast dropped messages for this watcher, catch up from the history, or end with 410.
    fn recover(&mut self) {
        let st = self.inner.store.lock();
        match st.changes_after(self.last_rv) {
            Ok(changes) => {
                drop(st);
                for c in &changes {
                    self.handle(c);
                }
            }
            Err(_) => {
                let oldest = st.oldest_available();
                drop(st);
                self.pending.push_back(WatchItem::Event(WatchEvent::Error(too_old(self.last_rv, oldest).to_status())));
                self.done = true;
            }
        }
    }

    async fn next_event(mut self) -> Option<(WatchItem, Self)> {
        let mut tick = self.bookmarks.map(|d| Instant::now() + d);
        loop {
            if let Some(e) = self.pending.pop_front() {
                if matches!(e, WatchItem::Event(WatchEvent::Error(_))) {
                    self.done = true;
                }
                return Some((e, self));
            }
            if self.done {
                return None;
            }
            let far = self.deadline;
            tokio::select! {
                r = self.rx.recv() => match r {
                    Ok(change) => self.handle(&change),
                    Err(RecvError::Lagged(_)) => self.recover(),
                    Err(RecvError::Closed) => return None,
                },
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = tokio::time::sleep_until(tick.unwrap_or(far)), if tick.is_some() => {
                    self.pending.push_back(WatchItem::Event(WatchEvent::Bookmark(bookmark(&self.rt, self.last_rv, false))));
                    tick = self.bookmarks.map(|d| Instant::now() + d);
                }
            }
        }
    }

    pub fn into_stream(self) -> WatchStream {
        futures::stream::unfold(self, |w| w.next_event())
            .filter_map(|item| async move {
                match item {
                    WatchItem::Event(e) => Some(e),
                    // Only produced in `lines` mode, which `into_items` serves.
                    WatchItem::Line(_) => None,
                }
            })
            .boxed()
    }

    pub fn into_items(self) -> BoxStream<'static, WatchItem> {
        futures::stream::unfold(self, |w| w.next_event()).boxed()
    }
}

impl Watcher {
    pub fn replay(&mut self, changes: &[Change]) {
        for c in changes {
            self.handle(c);
        }
    }
}
