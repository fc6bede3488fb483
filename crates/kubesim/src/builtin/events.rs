//! core/v1 Events and events.k8s.io/v1 Events are one resource with two views, as upstream serves them: one
//! storage (the core shape), converted field by field on the way in and out (upstream's
//! pkg/apis/events/v1 conversion). So `kubectl get events` shows what kube-rs's Recorder wrote.

use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// (events.k8s.io/v1 name, core/v1 name) of every field whose name differs; the rest are shared.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// Whether `rt` is the events.k8s.io view of the shared Event storage.
pub fn is_events_view(rt: &ResourceType) -> bool {
    rt.group == "events.k8s.io" && rt.plural == "events"
}

/// Renames the differing top-level fields: events.k8s.io → core when `to_core`, else back.
fn rename(obj: &Value, to_core: bool) -> Value {
    let Some(m) = obj.as_object() else { return obj.clone() };
    let mut out = Map::with_capacity(m.len());
    for (k, v) in m {
        let renamed = RENAMED.iter().find_map(|&(new, old)| match to_core {
            true if new == k => Some(old),
            false if old == k => Some(new),
            _ => None,
        });
        out.insert(renamed.map(String::from).unwrap_or_else(|| k.clone()), v.clone());
    }
    Value::Object(out)
}

/// An events.k8s.io/v1 Event in the stored (core/v1) shape.
pub fn to_core(obj: &Value) -> Value {
    let mut out = rename(obj, true);
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::String("v1".into()));
    }
    out
}

/// A stored (core/v1) Event as events.k8s.io/v1 shows it.
pub fn to_events_v1(obj: &Value) -> Value {
    rename(obj, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_two_views_convert_into_each_other() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "todo"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "microservice-operator",
            "reportingInstance": "op-1", "action": "Reconcile", "reason": "Created", "type": "Normal",
            "regarding": {"kind": "Microservice", "name": "todo-api", "namespace": "todo"},
            "note": "created the Deployment", "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
        });
        let core = to_core(&v1);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "created the Deployment");
        assert_eq!(core["involvedObject"]["name"], "todo-api");
        assert_eq!(core["reportingComponent"], "microservice-operator");
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        let mut back = to_events_v1(&core);
        back["apiVersion"] = json!("events.k8s.io/v1");
        assert_eq!(back, v1);
    }
}
