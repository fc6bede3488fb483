//! What Go's JSON encoding of a typed object prints for fields a client left unset. A struct-typed field cannot
//! be left out by `omitempty` (a zero `metav1.Time` prints as null, other structs as `{}`), strings without
//! `omitempty` print as "", and omitempty fields holding a zero value are left out. kubesim stores what the
//! client sent, so the kinds whose answers show such fields get them here, on the way out.

use serde_json::{Map, Value};

/// A Deployment: a condition's times are `metav1.Time` (a struct), null when a client wrote none.
pub fn encode_deployment(obj: &mut Value) {
    let Some(conditions) = obj.pointer_mut("/status/conditions").and_then(Value::as_array_mut) else { return };
    for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
        for time in ["lastUpdateTime", "lastTransitionTime"] {
            c.entry(time).or_insert(Value::Null);
        }
    }
}

/// A core/v1 Event as Go encodes the typed object: the struct-typed fields (omitempty cannot leave out a struct:
/// times print as null, the others as `{}`) and the two strings without omitempty appear even when unset; zero
/// values of omitempty fields do not.
pub fn encode_core_event(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    for time in ["eventTime", "firstTimestamp", "lastTimestamp"] {
        m.entry(time).or_insert(Value::Null);
    }
    for reference in ["involvedObject", "source"] {
        fill_struct(m, reference);
    }
    for always in ["reportingComponent", "reportingInstance"] {
        fill_string(m, always);
    }
    omit_zero(m, &["reason", "message", "type", "action", "count"]);
}

/// An events.k8s.io/v1 Event as Go encodes the typed object (see [`encode_core_event`]); here eventTime has no
/// omitempty and the reporting fields do.
pub fn encode_events_v1_event(obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    for time in ["eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"] {
        m.entry(time).or_insert(Value::Null);
    }
    for reference in ["regarding", "deprecatedSource"] {
        fill_struct(m, reference);
    }
    omit_zero(m, &["reportingController", "reportingInstance", "action", "reason", "note", "type", "deprecatedCount"]);
}

fn fill_struct(m: &mut Map<String, Value>, field: &str) {
    let v = m.entry(field).or_insert(Value::Null);
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
}

fn fill_string(m: &mut Map<String, Value>, field: &str) {
    let v = m.entry(field).or_insert(Value::Null);
    if v.is_null() {
        *v = Value::String(String::new());
    }
}

/// Removes omitempty fields holding their zero value ("" or 0) or null.
fn omit_zero(m: &mut Map<String, Value>, fields: &[&str]) {
    for f in fields {
        let zero = match m.get(*f) {
            Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            _ => false,
        };
        if zero {
            m.remove(*f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unset_event_fields_print_as_go_prints_them() {
        let mut core = json!({"involvedObject": {"kind": "ConfigMap"}, "reason": "", "count": 0});
        encode_core_event(&mut core);
        assert_eq!(
            core,
            json!({"involvedObject": {"kind": "ConfigMap"}, "source": {}, "eventTime": null, "firstTimestamp": null,
                   "lastTimestamp": null, "reportingComponent": "", "reportingInstance": ""})
        );
        let mut v1 = json!({"reportingController": "", "note": "n"});
        encode_events_v1_event(&mut v1);
        assert_eq!(
            v1,
            json!({"note": "n", "regarding": {}, "deprecatedSource": {}, "eventTime": null,
                   "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null})
        );
    }

    #[test]
    fn deployment_condition_times_are_null_when_unset() {
        let mut d = json!({"status": {"conditions": [{"type": "Available", "lastUpdateTime": "t"}]}});
        encode_deployment(&mut d);
        assert_eq!(
            d["status"]["conditions"][0],
            json!({"type": "Available", "lastUpdateTime": "t", "lastTransitionTime": null})
        );
    }
}
