//! Minimal stand-ins for helpers other modules provide (selectors, patches, name validation) while those are being
//! written in parallel. Each is small and upstream-compatible for the common cases; the write path switches to the
//! real implementations as they land.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult, Cause};

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut out = match target {
                Value::Object(t) => t.clone(),
                _ => Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[derive(Debug, Clone)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Requirement>);

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

fn bad_selector(s: &str) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: invalid label selector: {s:?}"))
}

fn parse_set(s: &str, whole: &str) -> ApiResult<Vec<String>> {
    let s = s.trim();
    let inner = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or_else(|| bad_selector(whole))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for term in split_top_level(s) {
            let t = term.trim();
            if t.is_empty() {
                return Err(bad_selector(s));
            }
            let req = if let Some(k) = t.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==") {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once('=') {
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once(" notin ") {
                Requirement::NotIn(k.trim().into(), parse_set(v, s)?)
            } else if let Some((k, v)) = t.split_once(" in ") {
                Requirement::In(k.trim().into(), parse_set(v, s)?)
            } else {
                Requirement::Exists(t.to_string())
            };
            let key = match &req {
                Requirement::Eq(k, _)
                | Requirement::NotEq(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k) => k,
            };
            if key.is_empty() || key.contains(|c: char| c.is_whitespace() || c == '(' || c == ')') {
                return Err(bad_selector(s));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// A parsed field selector (`a=b,c!=d`, `==` allowed).
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(terms));
        }
        for t in s.split(',') {
            let (k, eq, v) = if let Some((k, v)) = t.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = t.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = t.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!("invalid selector: '{s}'; can't understand '{t}'")));
            };
            terms.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn fields(&self) -> Vec<String> {
        self.0.iter().map(|(k, _, _)| k.clone()).collect()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let mut cur = obj;
            for part in k.split('.') {
                cur = cur.get(part).unwrap_or(&Value::Null);
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *v) == *eq
        })
    }
}

/// Fields every type can be selected by, plus the per-type ones upstream registers.
pub fn selectable_fields(group: &str, plural: &str) -> Vec<String> {
    let mut f = vec!["metadata.name".to_string(), "metadata.namespace".to_string()];
    let extra: &[&str] = match (group, plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "secrets") => &["type"],
        ("", "namespaces") => &["status.phase"],
        ("apps", "replicasets") => &["status.replicas"],
        _ => &[],
    };
    f.extend(extra.iter().map(|s| s.to_string()));
    f
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Name validation as upstream does it per type: DNS labels for namespaces and services, subdomains otherwise.
pub fn validate_name(group: &str, plural: &str, name: &str) -> Vec<Cause> {
    let label = matches!((group, plural), ("", "namespaces") | ("", "services"));
    let ok = if label { is_dns_label(name) } else { is_dns_subdomain(name) };
    if ok {
        return Vec::new();
    }
    let msg = if label {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    } else {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    };
    vec![Cause::new("FieldValueInvalid", msg, "metadata.name")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_operators() {
        let labels = json!({"app": "web", "tier": "front"});
        let labels = labels.as_object().unwrap();
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(labels), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn merge_patch_removes_nulls() {
        let out = merge_patch(&json!({"a": 1, "b": {"c": 2, "d": 3}}), &json!({"a": null, "b": {"c": 5}}));
        assert_eq!(out, json!({"b": {"c": 5, "d": 3}}));
    }
}
