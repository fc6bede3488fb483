//! Object metadata rules shared by the verbs: timestamps, uids, generateName, generation and no-op detection.

use rand::Rng;
use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// RFC3339 UTC to the second, as metav1.Time is serialised.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Upstream's generateName suffix: 5 characters from an alphabet without vowels and look-alikes.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just set to an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
}

/// Whether upstream maintains metadata.generation for this type (ConfigMaps, Services... have none).
pub fn tracks_generation(rt: &ResourceType) -> bool {
    rt.is_crd()
        || matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("apps", _)
                | ("batch", _)
                | ("policy", _)
                | ("networking.k8s.io", _)
                | ("autoscaling", _)
                | ("admissionregistration.k8s.io", _)
                | ("", "pods")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

/// Whether a write from `old` to `new` bumps the generation: custom resources on any change outside metadata
/// (and status, when it is a subresource); built-ins on a spec change.
pub fn generation_bumps(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    if !tracks_generation(rt) {
        return false;
    }
    if rt.is_crd() {
        let skip =
            |k: &str| k == "metadata" || k == "apiVersion" || k == "kind" || (rt.subresources.status && k == "status");
        let keys = |v: &Value| -> Vec<String> {
            v.as_object().map(|m| m.keys().filter(|k| !skip(k)).cloned().collect()).unwrap_or_default()
        };
        let mut all = keys(old);
        all.extend(keys(new));
        all.iter().any(|k| old.get(k) != new.get(k))
    } else {
        old.get("spec") != new.get("spec")
    }
}

/// Equality that ignores what a no-op write may still touch: the resourceVersion and managedFields timestamps
/// (upstream restores old timestamps when only they changed).
pub fn same_content(a: &Value, b: &Value) -> bool {
    fn normalised(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            if let Some(Value::Array(mf)) = m.get_mut("managedFields") {
                for e in mf.iter_mut() {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    }
    normalised(a) == normalised(b)
}

/// Reads a dotted path such as `.spec.replicas`.
pub fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').filter(|p| !p.is_empty()).try_fold(obj, |cur, p| cur.get(p))
}

/// Writes a dotted path, creating objects on the way.
pub fn set_path(obj: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    let mut cur = obj;
    for (i, p) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(m) = cur else { return };
        if i + 1 == parts.len() {
            m.insert(p.to_string(), value);
            return;
        }
        cur = m.entry(p.to_string()).or_insert_with(|| Value::Object(Map::new()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generate_name_suffix_has_five_safe_chars() {
        let s = name_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }

    #[test]
    fn same_content_ignores_rv_and_managed_field_times() {
        let a =
            json!({"metadata":{"resourceVersion":"1","managedFields":[{"manager":"m","time":"t1"}]},"data":{"a":"1"}});
        let b =
            json!({"metadata":{"resourceVersion":"2","managedFields":[{"manager":"m","time":"t2"}]},"data":{"a":"1"}});
        assert!(same_content(&a, &b));
        let c = json!({"metadata":{"resourceVersion":"2"},"data":{"a":"2"}});
        assert!(!same_content(&a, &c));
    }

    #[test]
    fn paths_round_trip() {
        let mut v = json!({});
        set_path(&mut v, ".spec.replicas", json!(3));
        assert_eq!(get_path(&v, ".spec.replicas"), Some(&json!(3)));
    }
}
