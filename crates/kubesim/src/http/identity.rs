//! The identity endpoints that store nothing: SelfSubjectAccessReview and SelfSubjectRulesReview (`kubectl auth
//! can-i`, answered by the same authorizer as requests), SelfSubjectReview (`kubectl auth whoami`) and the
//! ServiceAccount TokenRequest subresource (`kubectl create token`).

use serde_json::{Map, Value, json};

use super::AppState;
use crate::auth::UserInfo;
use crate::error::{ApiError, ApiResult, Cause};
use crate::rbac::{Attributes, Policy, Rule};
use crate::resources::ResourceType;

/// The audience upstream puts in tokens when the request names none.
const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// The authorizer the server runs: RBAC when enforced, everything allowed otherwise.
pub(crate) fn authorize(state: &AppState, user: &UserInfo, attrs: &Attributes) -> crate::rbac::Decision {
    if !state.rbac {
        return crate::rbac::Decision { allowed: true, reason: String::new() };
    }
    let namespace = match attrs {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    Policy::load(&state.cluster, namespace).authorize(user, attrs)
}

fn review(kind: &str, api_version: &str, spec: Value, status: Value) -> Value {
    json!({"kind": kind, "apiVersion": api_version, "metadata": {}, "spec": spec, "status": status})
}

/// A review's metadata as upstream's create handler leaves it: a review is never stored, but it is created, so
/// the field manager records the request's fields (an Update by the request's manager) before the review is
/// answered with the request's metadata.
pub(crate) fn review_metadata(rt: &ResourceType, body: &Value, manager: &str) -> Value {
    let mut request = body.clone();
    let Some(fields) = request.as_object_mut() else { return json!({}) };
    if !fields.get("metadata").is_some_and(Value::is_object) {
        fields.insert("metadata".into(), json!({}));
    }
    crate::patch::managed::record_update(rt, None, &mut request, manager, None, &crate::cluster::meta::now_rfc3339());
    request.get("metadata").cloned().unwrap_or_else(|| json!({}))
}

pub(crate) fn self_subject_access_review(state: &AppState, user: &UserInfo, body: &Value) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let attrs = match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(r), None) => Attributes::Resource {
            verb: str_field(r, "verb"),
            group: str_field(r, "group"),
            resource: str_field(r, "resource"),
            subresource: str_field(r, "subresource"),
            namespace: str_field(r, "namespace"),
            name: str_field(r, "name"),
        },
        (None, Some(n)) => Attributes::NonResource { verb: str_field(n, "verb"), path: str_field(n, "path") },
        _ => {
            return Err(ApiError::invalid(
                "SelfSubjectAccessReview",
                "authorization.k8s.io",
                "",
                vec![Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    "spec.resourceAttributes",
                )],
            ));
        }
    };
    let decision = authorize(state, user, &attrs);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(review("SelfSubjectAccessReview", "authorization.k8s.io/v1", spec, status))
}

fn rule_json(rule: &Rule) -> (Option<Value>, Option<Value>) {
    let mut resource = Map::new();
    let mut non_resource = Map::new();
    if !rule.resources.is_empty() || !rule.api_groups.is_empty() {
        resource.insert("verbs".into(), json!(rule.verbs));
        resource.insert("apiGroups".into(), json!(rule.api_groups));
        resource.insert("resources".into(), json!(rule.resources));
        if !rule.resource_names.is_empty() {
            resource.insert("resourceNames".into(), json!(rule.resource_names));
        }
    }
    if !rule.non_resource_urls.is_empty() {
        non_resource.insert("verbs".into(), json!(rule.verbs));
        non_resource.insert("nonResourceURLs".into(), json!(rule.non_resource_urls));
    }
    let some = |m: Map<String, Value>| (!m.is_empty()).then_some(Value::Object(m));
    (some(resource), some(non_resource))
}

pub(crate) fn self_subject_rules_review(state: &AppState, user: &UserInfo, body: &Value) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let namespace = str_field(&spec, "namespace");
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let (rules, errors) = if state.rbac {
        let set = Policy::load(&state.cluster, &namespace).rules_for(user, &namespace);
        (set.rules, set.errors)
    } else {
        let all = |v: &str| vec![v.to_string()];
        let everything = Rule { verbs: all("*"), api_groups: all("*"), resources: all("*"), ..Rule::default() };
        let urls = Rule { verbs: all("*"), non_resource_urls: all("*"), ..Rule::default() };
        (vec![everything, urls], Vec::new())
    };
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for rule in &rules {
        let (r, n) = rule_json(rule);
        resource_rules.extend(r);
        non_resource_rules.extend(n);
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": !errors.is_empty()});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    Ok(review("SelfSubjectRulesReview", "authorization.k8s.io/v1", spec, status))
}

pub(crate) fn self_subject_review(user: &UserInfo) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()},
        "status": {"userInfo": {"username": user.name, "groups": user.groups}}
    })
}

/// POST …/serviceaccounts/NAME/token. Expiry is reported but not enforced: tokens live as long as the account.
pub(crate) fn token_request(state: &AppState, namespace: &str, name: &str, body: &Value) -> ApiResult<Value> {
    let rt = state.cluster.resolve("", "v1", "serviceaccounts")?;
    state.cluster.get(&rt, Some(namespace), name)?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let seconds = spec.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            vec![Cause::new(
                "FieldValueInvalid",
                format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
                "spec.expirationSeconds",
            )],
        ));
    }
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([DEFAULT_AUDIENCE]),
    };
    let now = jiff::Timestamp::now();
    let expires = now.checked_add(jiff::SignedDuration::from_secs(seconds)).unwrap_or(now);
    let token = state.tokens.issue(&state.cluster, namespace, name);
    let stamp = |t: jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(now)},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null)},
        "status": {"token": token, "expirationTimestamp": stamp(expires)}
    }))
}
