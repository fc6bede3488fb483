//! Small helpers shared by the controllers: timestamps as the API stores them, label selectors, owner references.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
use serde_json::Value;

use crate::selector::LabelOp;

/// Now, truncated to the second: metav1.Time has second precision on the wire, so in-memory values that are
/// compared with stored ones must have it too.
pub fn now_seconds() -> Timestamp {
    truncate(Timestamp::now())
}

pub fn truncate(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

pub fn time(t: Timestamp) -> Time {
    Time(truncate(t))
}

/// Whether `labels` satisfy a metav1.LabelSelector. An empty selector matches everything (callers that must not
/// select everything check [`selector_is_empty`] first, as upstream does).
pub fn selector_matches(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let value = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let labels_match =
        sel.match_labels.iter().flatten().all(|(k, v)| LabelOp::Equals.admits(value(k), std::slice::from_ref(v)));
    labels_match
        && sel.match_expressions.iter().flatten().all(|e| {
            let op = match e.operator.as_str() {
                "In" => LabelOp::In,
                "NotIn" => LabelOp::NotIn,
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::DoesNotExist,
                _ => return false,
            };
            op.admits(value(&e.key), e.values.as_deref().unwrap_or(&[]))
        })
}

pub fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty())
}

/// The controller ownerReference of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// `metav1.NewControllerRef`: controller and blockOwnerDeletion both true.
pub fn controller_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Key-sorted JSON, independent of whether serde_json preserves insertion order: hashes must be stable.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:", Value::String((*k).clone()));
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// FNV-1a, 32 bits: what upstream's `controller.ComputeHash` uses.
pub fn fnv1a32(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// `rand.SafeEncodeString`: maps each character onto an alphabet without vowels or look-alikes, so generated
/// names never spell words.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        };
        assert!(selector_matches(&sel, Some(&labels(&[("app", "web")]))));
        assert!(!selector_matches(&sel, Some(&labels(&[("app", "web"), ("tier", "db")]))));
        assert!(!selector_matches(&sel, None));
        assert!(selector_is_empty(&LabelSelector::default()));
    }

    #[test]
    fn canonical_json_sorts_keys() {
        assert_eq!(
            canonical_json(&json!({"b": 1, "a": {"d": [1, "x"], "c": null}})),
            r#"{"a":{"c":null,"d":[1,"x"]},"b":1}"#
        );
    }

    #[test]
    fn safe_encoding_avoids_vowels() {
        let s = safe_encode(&fnv1a32(b"template").to_string());
        assert!(!s.is_empty() && s.len() <= 10);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
