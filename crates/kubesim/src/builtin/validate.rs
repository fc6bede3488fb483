//! Validation of built-in objects as `pkg/apis/*/validation` does it: ObjectMeta first, then the type's
//! spec, then the immutable fields of an update. Field paths, reasons and messages follow upstream.

use serde_json::{Map, Value};

use super::names::{self, err, go_repr};
use crate::error::Cause;
use crate::resources::ResourceType;

pub fn validate(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    object_meta(rt, obj, &mut out);
    if let Some(old) = old {
        object_meta_update(obj, old, &mut out);
    }
    if rt.is_crd() {
        return out;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => {
            pod_spec(obj.get("spec").unwrap_or(&Value::Null), "spec", &mut out);
            if let Some(old) = old {
                pod_update(obj, old, &mut out);
            }
        }
        ("", "Service") => {
            service(obj, &mut out);
            if let Some(old) = old {
                service_update(obj, old, &mut out);
            }
        }
        ("", "ConfigMap") => config_map(obj, old, &mut out),
        ("", "Secret") => secret(obj, old, &mut out),
        ("", "Namespace") => namespace(obj, &mut out),
        ("apps", "Deployment") => {
            deployment(obj, &mut out);
            selector_update(obj, old, &mut out);
        }
        ("apps", "ReplicaSet") => {
            replica_set(obj, &mut out);
            selector_update(obj, old, &mut out);
        }
        ("coordination.k8s.io", "Lease") => lease(obj, &mut out),
        ("events.k8s.io", "Event") => event_v1(obj, &mut out),
        ("", "Event") => event_core(obj, &mut out),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            out.extend(crate::schema::validate_crd(obj));
            if let Some(old) = old {
                crd_update(obj, old, &mut out);
            }
        }
        _ => {}
    }
    out
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn name_errors(rt: &ResourceType, name: &str) -> Vec<String> {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => names::dns1123_label_errors(name),
        ("", "Service") => names::dns1035_label_errors(name),
        ("rbac.authorization.k8s.io", _) => names::path_segment_errors(name),
        _ => names::dns1123_subdomain_errors(name),
    }
}

/// `ValidateObjectMeta`.
fn object_meta(rt: &ResourceType, obj: &Value, out: &mut Vec<Cause>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    let name = str_at(meta, "/name");
    if name.is_empty() {
        if str_at(meta, "/generateName").is_empty() {
            out.push(err::required("metadata.name", "name or generateName is required"));
        }
    } else {
        for msg in name_errors(rt, name) {
            out.push(err::invalid_str("metadata.name", name, &msg));
        }
    }
    let namespace = str_at(meta, "/namespace");
    if rt.namespaced {
        if namespace.is_empty() {
            out.push(err::required("metadata.namespace", ""));
        } else {
            for msg in names::dns1123_label_errors(namespace) {
                out.push(err::invalid_str("metadata.namespace", namespace, &msg));
            }
        }
    } else if !namespace.is_empty() {
        out.push(err::forbidden("metadata.namespace", "not allowed on this type"));
    }
    if let Some(labels) = meta.get("labels") {
        validate_labels(labels, "metadata.labels", out);
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            for msg in names::qualified_name_errors(&k.to_lowercase()) {
                out.push(err::invalid_str("metadata.annotations", k, &msg));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            out.push(err::too_long("metadata.annotations", 256 * 1024));
        }
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in finalizers.iter().enumerate() {
            let f = f.as_str().unwrap_or_default();
            for msg in names::qualified_name_errors(f) {
                out.push(err::invalid_str(&format!("metadata.finalizers[{i}]"), f, &msg));
            }
        }
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        let mut controllers = 0;
        for (i, r) in refs.iter().enumerate() {
            let path = format!("metadata.ownerReferences[{i}]");
            for field in ["apiVersion", "kind", "name", "uid"] {
                if str_at(r, &format!("/{field}")).is_empty() {
                    let detail = if field == "uid" { "uid must not be empty" } else { "" };
                    if field == "uid" {
                        out.push(err::invalid_str(&format!("{path}.uid"), "", detail));
                    } else {
                        out.push(err::required(&format!("{path}.{field}"), detail));
                    }
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            out.push(err::invalid(
                "metadata.ownerReferences",
                &go_repr(&Value::Array(refs.clone())),
                "Only one reference can have Controller set to true",
            ));
        }
    }
}

/// `ValidateLabels` on a `map[string]string`.
pub(crate) fn validate_labels(labels: &Value, path: &str, out: &mut Vec<Cause>) {
    let Some(labels) = labels.as_object() else { return };
    for (k, v) in labels {
        for msg in names::qualified_name_errors(k) {
            out.push(err::invalid_str(path, k, &msg));
        }
        let v = v.as_str().unwrap_or_default();
        for msg in names::label_value_errors(v) {
            out.push(err::invalid_str(path, v, &msg));
        }
    }
}

/// `ValidateObjectMetaUpdate`: identity fields cannot change.
fn object_meta_update(obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        let new = obj.pointer(&format!("/metadata/{field}"));
        let was = old.pointer(&format!("/metadata/{field}"));
        // A PUT that omits uid or creationTimestamp keeps the stored ones (the caller fills them in).
        if was.is_some() && new.is_some() && new != was {
            out.push(err::immutable(&format!("metadata.{field}"), new.unwrap_or(&Value::Null)));
        }
    }
}

fn deployment(_obj: &Value, _out: &mut [Cause]) {}
fn replica_set(_obj: &Value, _out: &mut [Cause]) {}
fn pod_spec(_spec: &Value, _path: &str, _out: &mut [Cause]) {}
fn pod_update(_obj: &Value, _old: &Value, _out: &mut [Cause]) {}
fn service(_obj: &Value, _out: &mut [Cause]) {}
fn service_update(_obj: &Value, _old: &Value, _out: &mut [Cause]) {}
fn config_map(_obj: &Value, _old: Option<&Value>, _out: &mut [Cause]) {}
fn secret(_obj: &Value, _old: Option<&Value>, _out: &mut [Cause]) {}
fn namespace(_obj: &Value, _out: &mut [Cause]) {}
fn lease(_obj: &Value, _out: &mut [Cause]) {}
fn event_v1(_obj: &Value, _out: &mut [Cause]) {}
fn event_core(_obj: &Value, _out: &mut [Cause]) {}
fn crd_update(_obj: &Value, _old: &Value, _out: &mut [Cause]) {}

fn selector_update(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let Some(old) = old else { return };
    let new = obj.pointer("/spec/selector");
    if new != old.pointer("/spec/selector") {
        out.push(err::invalid("spec.selector", &selector_repr(new), "field is immutable"));
    }
}

/// How upstream prints a `*metav1.LabelSelector` in a field error.
fn selector_repr(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else { return "null".into() };
    let labels = sel.get("matchLabels").and_then(Value::as_object).map(|m| {
        let parts: Vec<String> = m.iter().map(|(k, v)| format!("{}:{}", names::quote(k), go_repr(v))).collect();
        format!("map[string]string{{{}}}", parts.join(", "))
    });
    let exprs = sel.get("matchExpressions").and_then(Value::as_array).map_or(0, Vec::len);
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:[]v1.LabelSelectorRequirement({})}}",
        labels.unwrap_or_else(|| "map[string]string(nil)".into()),
        if exprs == 0 { "nil".to_string() } else { format!("len={exprs}") }
    )
}

/// See [`super::prepare_for_update`].
pub fn carry_service_allocations(new: &mut Value, old: &Value) {
    let old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let ty = |s: &Map<String, Value>| s.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    let new_type = ty(spec);
    let old_type = old_spec.as_object().map(ty).unwrap_or_default();
    if new_type != "ExternalName" && old_type != "ExternalName" {
        for key in ["clusterIP", "clusterIPs"] {
            let missing = match spec.get(key) {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                _ => false,
            };
            if missing && let Some(v) = old_spec.get(key) {
                spec.insert(key.into(), v.clone());
            }
        }
    }
    let needs_node_ports = |t: &str| t == "NodePort" || t == "LoadBalancer";
    if needs_node_ports(&new_type) && needs_node_ports(&old_type) {
        let old_ports = old_spec.get("ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for port in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
            let unset = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0;
            let proto = |p: &Value| p.get("protocol").and_then(Value::as_str).unwrap_or("TCP").to_string();
            if unset
                && let Some(np) = old_ports
                    .iter()
                    .find(|o| o.get("port") == port.get("port") && proto(o) == proto(port))
                    .and_then(|o| o.get("nodePort"))
                    .cloned()
                && let Some(p) = port.as_object_mut()
            {
                p.insert("nodePort".into(), np);
            }
        }
        if spec.get("healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0) == 0
            && let Some(h) = old_spec.get("healthCheckNodePort")
        {
            spec.insert("healthCheckNodePort".into(), h.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;
    use serde_json::json;

    fn rt(group: &str, kind: &str) -> ResourceType {
        builtin_types().into_iter().find(|t| t.group == group && t.kind == kind).unwrap()
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn object_meta_rules() {
        let cm = rt("", "ConfigMap");
        let ok = json!({"metadata": {"name": "a.b-c", "namespace": "default", "labels": {"app": "x"}}});
        assert!(validate(&cm, &ok, None).is_empty());
        let bad = json!({"metadata": {"name": "Bad_Name", "namespace": "default",
            "labels": {"-x": "y", "ok": "bad value"}, "annotations": {"a/b/c": ""}}});
        let causes = validate(&cm, &bad, None);
        assert_eq!(
            fields(&causes),
            vec!["metadata.name", "metadata.labels", "metadata.labels", "metadata.annotations"]
        );
        assert!(causes[0].message.starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        let missing = validate(&cm, &json!({"metadata": {"namespace": "default"}}), None);
        assert_eq!(missing[0].message, "Required value: name or generateName is required");
        let ns = rt("", "Namespace");
        assert_eq!(fields(&validate(&ns, &json!({"metadata": {"name": "a.b"}}), None)), vec!["metadata.name"]);
        let svc = rt("", "Service");
        let c = validate(
            &svc,
            &json!({"metadata": {"name": "1abc", "namespace": "d"}, "spec": {"clusterIP": "None"}}),
            None,
        );
        assert!(c[0].message.contains("DNS-1035"), "{c:?}");
        let role = rt("rbac.authorization.k8s.io", "ClusterRole");
        assert!(validate(&role, &json!({"metadata": {"name": "system:controller:x"}}), None).is_empty());
        let c = validate(&role, &json!({"metadata": {"name": "x", "namespace": "d"}}), None);
        assert_eq!(c[0].message, "Forbidden: not allowed on this type");
    }

    #[test]
    fn identity_is_immutable() {
        let cm = rt("", "ConfigMap");
        let old = json!({"metadata": {"name": "a", "namespace": "d", "uid": "1"}});
        let new = json!({"metadata": {"name": "a", "namespace": "d", "uid": "2"}});
        let c = validate(&cm, &new, Some(&old));
        assert_eq!(fields(&c), vec!["metadata.uid"]);
        assert_eq!(c[0].message, "Invalid value: \"2\": field is immutable");
    }

    #[test]
    fn service_update_keeps_allocations() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
            "ports": [{"port": 80, "nodePort": 30080}]}});
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        carry_service_allocations(&mut new, &old);
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.5");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.5"]));
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
    }
}
