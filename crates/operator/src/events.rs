//! Events (events.k8s.io/v1) with a bounded memory. kube's `Recorder` keeps every Event it sent for six minutes, as
//! a whole object, and scans that whole cache on every publish: at 10,000 Microservices that is megabytes and
//! a quadratic CPU cost. This publisher keeps, per series (regarding uid, reason, action), only the Event's name,
//! its count and when it was last sent, in a map bounded to [`CAPACITY`] series: a repeated fact within
//! [`SERIES_TTL`] counts up in one Event (a merge patch of `series`), as the Recorder does; a fact whose series was
//! forgotten (evicted, or older than the TTL) starts a new Event, which is what the Recorder does after its TTL too.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// Series remembered at once; beyond it the least recently sent is forgotten.
pub const CAPACITY: usize = 1024;
/// How long a series stays open (kube's Recorder uses the same six minutes).
pub const SERIES_TTL: Duration = Duration::from_secs(360);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// One fact about one object.
#[derive(Clone, Debug)]
pub struct Event {
    pub type_: EventType,
    pub reason: String,
    pub note: String,
    pub action: String,
}

struct Series {
    name: String,
    count: i32,
    last: Instant,
}

pub struct Publisher {
    client: Client,
    controller: String,
    instance: String,
    series: Mutex<HashMap<u64, Series>>,
}

impl Publisher {
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Publisher {
        Publisher {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            series: Mutex::new(HashMap::new()),
        }
    }

    /// Series currently remembered (for tests and the benchmark's curiosity).
    pub fn remembered(&self) -> usize {
        self.series.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".to_string());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let key = series_key(event, regarding);
        let now = Instant::now();
        let open = {
            let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
            match series.get_mut(&key) {
                Some(s) if now.duration_since(s.last) < SERIES_TTL => {
                    s.count += 1;
                    s.last = now;
                    Some((s.name.clone(), s.count))
                }
                _ => None,
            }
        };
        if let Some((name, count)) = open {
            let patch = json!({
                "series": {"count": count, "lastObservedTime": MicroTime(Timestamp::now())}
            });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            return Ok(());
        }
        let at = Timestamp::now();
        let name = format!("{}.{:x}", regarding.name.as_deref().unwrap_or(&self.controller), at.as_nanosecond());
        let body = K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: Some(event.note.clone()),
            event_time: Some(MicroTime(at)),
            regarding: Some(regarding.clone()),
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(namespace), ..ObjectMeta::default() },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(match event.type_ {
                EventType::Normal => "Normal".to_string(),
                EventType::Warning => "Warning".to_string(),
            }),
            series: None::<EventSeries>,
            ..K8sEvent::default()
        };
        api.create(&PostParams::default(), &body).await?;
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        if series.len() >= CAPACITY {
            // Forget the expired series, then (if still full) the least recently sent one.
            series.retain(|_, s| now.duration_since(s.last) < SERIES_TTL);
            if series.len() >= CAPACITY
                && let Some(oldest) = series.iter().min_by_key(|(_, s)| s.last).map(|(k, _)| *k)
            {
                series.remove(&oldest);
            }
        }
        series.insert(key, Series { name, count: 1, last: now });
        Ok(())
    }
}

/// FNV-1a over what identifies a series: the object (uid, else kind/namespace/name), type, reason and action.
fn series_key(event: &Event, regarding: &ObjectReference) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    let mut feed = |s: &str| {
        for b in s.bytes().chain(std::iter::once(0)) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    };
    match regarding.uid.as_deref() {
        Some(uid) => feed(uid),
        None => {
            feed(regarding.kind.as_deref().unwrap_or_default());
            feed(regarding.namespace.as_deref().unwrap_or_default());
            feed(regarding.name.as_deref().unwrap_or_default());
        }
    }
    feed(if event.type_ == EventType::Warning { "Warning" } else { "Normal" });
    feed(&event.reason);
    feed(&event.action);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, action: &str) -> Event {
        Event { type_: EventType::Normal, reason: reason.into(), note: "n".into(), action: action.into() }
    }

    #[test]
    fn a_series_is_one_object_one_reason_one_action() {
        let a = ObjectReference { uid: Some("u1".into()), ..ObjectReference::default() };
        let b = ObjectReference { uid: Some("u2".into()), ..ObjectReference::default() };
        assert_eq!(series_key(&event("Created", "x"), &a), series_key(&event("Created", "x"), &a));
        assert_ne!(series_key(&event("Created", "x"), &a), series_key(&event("Created", "x"), &b));
        assert_ne!(series_key(&event("Created", "x"), &a), series_key(&event("Repaired", "x"), &a));
        assert_ne!(series_key(&event("Created", "x"), &a), series_key(&event("Created", "y"), &a));
    }
}
