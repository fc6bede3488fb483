//! Normalisation: what legitimately differs between two correct servers is replaced by stable placeholders,
//! so that two answers compare equal exactly when they mean the same. One [`Normalizer`] serves a whole
//! scenario, so placeholders keep their identity across steps (the uid a create returned is the uid a later
//! ownerReference names). The rules (also in the crate README):
//!
//! 1. UUIDs anywhere in a string (uids, ownerReferences, messages, managedFields keys) → `<uid-N>`, N by order
//!    of first appearance in the scenario.
//! 2. `metadata.resourceVersion` of an object (and `resourceVersion` of references such as `involvedObject`)
//!    → `<rv-N>` by order of first appearance: equal RVs stay equal, a changed RV stays changed; the numbers
//!    themselves (etcd revisions vs a counter) never matter.
//! 3. The resourceVersion of a list, a Table, a BOOKMARK: `<list-rv>` / `<bookmark-rv>` (other writes on a real
//!    cluster, e.g. leases, move it); `metadata.continue` → `<continue>` (an opaque token).
//! 4. Timestamps (RFC 3339 strings) → `<time>`, or `<microtime-D>` with D fractional digits (the format is
//!    part of the contract, the instant is not).
//! 5. A name generated from `metadata.generateName` → `<generateName><gen-N>`, also where it appears in other
//!    strings (messages, Status details).
//! 6. IP addresses in `clusterIP(s)`, `podIP(s)`, `hostIP(s)` → `<ip>` (allocation order is the allocator's).
//! 7. Issued bearer tokens (`status.token` of a TokenRequest) → `<token>`.
//! 8. The numbers in `too old resource version: N (M)` → `<n>`.
//! 9. The numbers in `the ResourceVersion in the precondition (N) does not match the ResourceVersion in record (M)`
//!    → `<n>` (resourceVersions, as in 2 and 8).
//! 10. Response headers other than Content-Type and Warning are not compared (Audit-Id, Date, priority-and-
//!     fairness ids); the media type is compared without its parameters' spacing.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .unwrap_or_else(|e| panic!("UUID regex: {e}"))
});
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.(\d+))?(?:Z|[+-]\d{2}:\d{2})$")
        .unwrap_or_else(|e| panic!("time regex: {e}"))
});
static TOO_OLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"too old resource version: \d+ \(\d+\)").unwrap_or_else(|e| panic!("too-old regex: {e}"))
});

static PRECONDITION_RV: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"the ResourceVersion in the precondition \(\d+\) does not match the ResourceVersion in record \(\d+\)")
        .unwrap_or_else(|e| panic!("precondition regex: {e}"))
});

const IP_KEYS: &[&str] = &["clusterIP", "clusterIPs", "podIP", "podIPs", "hostIP", "hostIPs", "ip"];

/// Placeholders for one scenario run.
#[derive(Debug, Default)]
pub struct Normalizer {
    uids: HashMap<String, String>,
    rvs: HashMap<String, String>,
    generated: Vec<(String, String)>,
}

impl Normalizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Normalises a response body (or a watch event's object) in place.
    pub fn body(&mut self, value: &mut Value) {
        self.collect_generated(value);
        self.walk(value, None, Context::Top);
    }

    /// Normalises a bare string (a Warning header).
    pub fn text(&mut self, s: &str) -> String {
        self.string(s)
    }

    fn collect_generated(&mut self, value: &Value) {
        match value {
            Value::Object(m) => {
                if let Some(meta) = m.get("metadata").and_then(Value::as_object)
                    && let (Some(prefix), Some(name)) =
                        (meta.get("generateName").and_then(Value::as_str), meta.get("name").and_then(Value::as_str))
                    && name.starts_with(prefix)
                    && name.len() > prefix.len()
                    && !self.generated.iter().any(|(n, _)| n == name)
                {
                    let n = self.generated.len() + 1;
                    self.generated.push((name.to_string(), format!("{prefix}<gen-{n}>")));
                    // Longest first, so that a name containing another is replaced whole.
                    self.generated.sort_by_key(|g| std::cmp::Reverse(g.0.len()));
                }
                m.values().for_each(|v| self.collect_generated(v));
            }
            Value::Array(a) => a.iter().for_each(|v| self.collect_generated(v)),
            _ => {}
        }
    }

    fn string(&mut self, s: &str) -> String {
        if let Some(c) = TIME.captures(s) {
            return match c.get(1) {
                Some(frac) => format!("<microtime-{}>", frac.as_str().len()),
                None => "<time>".into(),
            };
        }
        let mut out = s.to_string();
        if UUID.is_match(&out) {
            let found: Vec<String> = UUID.find_iter(&out).map(|m| m.as_str().to_string()).collect();
            for u in found {
                let next = self.uids.len() + 1;
                let placeholder = self.uids.entry(u.clone()).or_insert_with(|| format!("<uid-{next}>")).clone();
                out = out.replace(&u, &placeholder);
            }
        }
        for (name, placeholder) in &self.generated {
            if out.contains(name.as_str()) {
                out = out.replace(name.as_str(), placeholder);
            }
        }
        if TOO_OLD.is_match(&out) {
            out = TOO_OLD.replace_all(&out, "too old resource version: <n> (<n>)").into_owned();
        }
        if PRECONDITION_RV.is_match(&out) {
            out = PRECONDITION_RV
                .replace_all(
                    &out,
                    "the ResourceVersion in the precondition (<n>) does not match the ResourceVersion in record (<n>)",
                )
                .into_owned();
        }
        out
    }

    fn rv(&mut self, s: &str) -> String {
        if s.is_empty() {
            return String::new();
        }
        let next = self.rvs.len() + 1;
        self.rvs.entry(s.to_string()).or_insert_with(|| format!("<rv-{next}>")).clone()
    }

    fn walk(&mut self, value: &mut Value, key: Option<&str>, ctx: Context) {
        match value {
            Value::String(s) => {
                let replaced = match key {
                    Some(k) if IP_KEYS.contains(&k) && looks_like_ip(s) => "<ip>".to_string(),
                    Some("resourceVersion") => match ctx {
                        Context::ListMeta => "<list-rv>".into(),
                        Context::BookmarkMeta => "<bookmark-rv>".into(),
                        _ => self.rv(s),
                    },
                    Some("continue") if matches!(ctx, Context::ListMeta) && !s.is_empty() => "<continue>".into(),
                    Some("token") if matches!(ctx, Context::Status) => "<token>".into(),
                    _ => self.string(s),
                };
                *s = replaced;
            }
            Value::Array(a) => {
                for v in a.iter_mut() {
                    self.walk(v, key, ctx);
                }
            }
            Value::Object(m) => self.walk_object(m, ctx),
            _ => {}
        }
    }

    fn walk_object(&mut self, m: &mut Map<String, Value>, ctx: Context) {
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
        let is_list = m.contains_key("items") || kind.ends_with("List") || kind == "Table";
        let is_bookmark = matches!(ctx, Context::Bookmark);
        let is_token_review = kind == "TokenRequest";
        // Keys may be placeholders too (managedFields `k:{"uid":...}`): rebuild the map when one changes.
        let keys: Vec<String> = m.keys().cloned().collect();
        for k in keys {
            let Some(mut v) = m.remove(&k) else { continue };
            let child_ctx = match k.as_str() {
                "metadata" if is_list => Context::ListMeta,
                "metadata" if is_bookmark => Context::BookmarkMeta,
                "status" if is_token_review => Context::Status,
                // List, bookmark and token contexts hold for the keys directly inside them.
                _ => match ctx {
                    Context::ListMeta | Context::BookmarkMeta | Context::Status => ctx,
                    _ => Context::Inner,
                },
            };
            self.walk(&mut v, Some(&k), child_ctx);
            let nk = if k.contains('-') || k.contains(':') { self.string(&k) } else { k };
            m.insert(nk, v);
        }
    }

    /// Normalises one watch event `{type, object}`.
    pub fn event(&mut self, event: &mut Value) {
        let bookmark = event.get("type").and_then(Value::as_str) == Some("BOOKMARK");
        if let Some(obj) = event.get_mut("object") {
            self.collect_generated(obj);
            self.walk(obj, None, if bookmark { Context::Bookmark } else { Context::Top });
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Context {
    Top,
    Inner,
    ListMeta,
    Bookmark,
    BookmarkMeta,
    Status,
}

fn looks_like_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// A media type without parameter spacing differences: `application/json;charset=utf-8` style, lowercase.
pub fn content_type(raw: &str) -> String {
    raw.split(';').map(|p| p.trim().to_ascii_lowercase()).collect::<Vec<_>>().join(";")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_keep_identity_across_answers() {
        // The continue token and list RV sit one level below the list.
        let mut n = Normalizer::new();
        let mut a = json!({"kind": "ConfigMap", "metadata": {"name": "x", "uid": "0b9e6f7c-1111-4222-8333-444455556666",
            "resourceVersion": "812", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        let mut b = json!({"kind": "ConfigMapList", "metadata": {"resourceVersion": "900", "continue": "abc"},
            "items": [{"metadata": {"uid": "0b9e6f7c-1111-4222-8333-444455556666", "resourceVersion": "812"}}]});
        n.body(&mut a);
        n.body(&mut b);
        assert_eq!(a["metadata"]["uid"], "<uid-1>");
        assert_eq!(a["metadata"]["resourceVersion"], "<rv-1>");
        assert_eq!(a["metadata"]["creationTimestamp"], "<time>");
        assert_eq!(b["metadata"]["resourceVersion"], "<list-rv>");
        assert_eq!(b["metadata"]["continue"], "<continue>");
        assert_eq!(b["items"][0]["metadata"]["resourceVersion"], "<rv-1>");
    }

    #[test]
    fn generated_names_and_microtime() {
        let mut n = Normalizer::new();
        let mut a = json!({"metadata": {"generateName": "web-", "name": "web-x7k2p"},
            "message": "pods \"web-x7k2p\" not found", "renewTime": "2026-01-01T00:00:00.123456Z",
            "spec": {"clusterIP": "10.96.0.17", "clusterIPs": ["10.96.0.17"]}});
        n.body(&mut a);
        assert_eq!(a["metadata"]["name"], "web-<gen-1>");
        assert_eq!(a["message"], "pods \"web-<gen-1>\" not found");
        assert_eq!(a["renewTime"], "<microtime-6>");
        assert_eq!(a["spec"]["clusterIP"], "<ip>");
        assert_eq!(a["spec"]["clusterIPs"][0], "<ip>");
    }

    #[test]
    fn managed_fields_keys_with_uids() {
        let mut n = Normalizer::new();
        let mut a = json!({"f:ownerReferences": {"k:{\"uid\":\"0b9e6f7c-1111-4222-8333-444455556666\"}": {}}});
        n.body(&mut a);
        assert!(a["f:ownerReferences"].get("k:{\"uid\":\"<uid-1>\"}").is_some());
    }
}
