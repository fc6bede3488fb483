//! Unknown fields of built-in kinds, found as a real server finds them: by decoding into the typed object
//! (k8s-openapi's structs, which drop what they do not know) and seeing which keys did not survive. Only those
//! keys are removed from the request's object, so every known value stays exactly as sent.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::resources::ResourceType;

macro_rules! typed_kinds {
    ($( ($group:literal, $kind:literal) => $ty:ty ),* $(,)?) => {
        /// `obj` decoded into its typed struct and encoded again (None: no typed struct, or it does not decode,
        /// which validation reports on its own).
        fn round_trip(rt: &ResourceType, obj: &Value) -> Option<Value> {
            match (rt.group.as_str(), rt.kind.as_str()) {
                $( ($group, $kind) => typed::<$ty>(obj), )*
                _ => None,
            }
        }
    };
}

crate::builtin::stored_kinds!(typed_kinds {});

fn typed<T: DeserializeOwned + Serialize>(obj: &Value) -> Option<Value> {
    let t: T = serde_json::from_value(obj.clone()).ok()?;
    serde_json::to_value(t).ok()
}

/// Removes the fields of a built-in object that its kind does not have; returns their paths as upstream's
/// `unknown field` messages name them (`spec.template.spec.containers[0].bogus`).
pub fn prune_unknown(rt: &ResourceType, obj: &mut Value) -> Vec<String> {
    // The typed structs insist on apiVersion and kind; the request may have left them out.
    let mut probe = obj.clone();
    if let Some(m) = probe.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(rt.api_version()));
        m.insert("kind".into(), Value::String(rt.kind.clone()));
    }
    let Some(known) = round_trip(rt, &probe) else { return Vec::new() };
    let mut pruned = Vec::new();
    prune(obj, &known, "", &mut pruned);
    pruned
}

fn prune(obj: &mut Value, known: &Value, path: &str, pruned: &mut Vec<String>) {
    match (obj, known) {
        (Value::Object(m), Value::Object(k)) => {
            let gone: Vec<String> =
                m.iter().filter(|(key, v)| !v.is_null() && !k.contains_key(*key)).map(|(key, _)| key.clone()).collect();
            for key in gone {
                m.remove(&key);
                pruned.push(if path.is_empty() { key } else { format!("{path}.{key}") });
            }
            for (key, v) in m.iter_mut() {
                if let Some(kv) = k.get(key) {
                    let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    prune(v, kv, &child, pruned);
                }
            }
        }
        (Value::Array(a), Value::Array(k)) if a.len() == k.len() => {
            for (i, (v, kv)) in a.iter_mut().zip(k).enumerate() {
                prune(v, kv, &format!("{path}[{i}]"), pruned);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rt(group: &str, kind: &str) -> ResourceType {
        crate::resources::builtin_types().into_iter().find(|t| t.group == group && t.kind == kind).unwrap()
    }

    #[test]
    fn unknown_fields_go_and_known_values_stay_as_sent() {
        let mut d = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}, "bogusMeta": 1},
            "spec": {
                "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "nope": true,
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "500m"}}, "imagePullPolicyy": "Always"}
                ]}}
            }
        });
        let before = d.clone();
        let pruned = prune_unknown(&rt("apps", "Deployment"), &mut d);
        assert_eq!(pruned, ["metadata.bogusMeta", "spec.nope", "spec.template.spec.containers[0].imagePullPolicyy"]);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["resources"],
            before["spec"]["template"]["spec"]["containers"][0]["resources"]
        );
        assert!(d.get("apiVersion").is_none(), "nothing added");
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        assert!(prune_unknown(&rt("", "ConfigMap"), &mut cm).is_empty());
        // What the typed struct cannot decode is validation's to report, not pruning's.
        let mut broken = json!({"metadata": {"name": "c"}, "data": "not a map", "bogus": 1});
        assert!(prune_unknown(&rt("", "ConfigMap"), &mut broken).is_empty());
    }
}
