//! Validation of built-in objects as `pkg/apis/*/validation` does it: ObjectMeta first, then the type's
//! spec, then the immutable fields of an update. Field paths, reasons and messages follow upstream.

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::names::{self, err, go_repr};
use crate::resources::ResourceType;

mod pod;
use pod::{PROTOCOLS, pod_spec, pod_update, port_number};

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
        ("autoscaling", "HorizontalPodAutoscaler") => super::hpa::validate(obj, &mut out),
        ("events.k8s.io", "Event") => event(obj, true, &mut out),
        ("", "Event") => event(obj, false, &mut out),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => admission_policy(obj, &mut out),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => admission_binding(obj, &mut out),
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

/// The required parts of a ValidatingAdmissionPolicy (the CEL is compiled, and its errors reported, at admission).
fn admission_policy(obj: &Value, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if spec.get("matchConstraints").is_none_or(Value::is_null) {
        out.push(err::required("spec.matchConstraints", ""));
    }
    let validations = spec.get("validations").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let audits = spec.get("auditAnnotations").and_then(Value::as_array).map_or(0, Vec::len);
    if validations.is_empty() && audits == 0 {
        out.push(err::required("spec.validations", "validations or auditAnnotations must contain at least one item"));
    }
    for (i, validation) in validations.iter().enumerate() {
        if str_at(validation, "/expression").is_empty() {
            out.push(err::required(&format!("spec.validations[{i}].expression"), "expression is not specified"));
        }
    }
}

fn admission_binding(obj: &Value, out: &mut Vec<Cause>) {
    if str_at(obj, "/spec/policyName").is_empty() {
        out.push(err::required("spec.policyName", ""));
    }
    if obj.pointer("/spec/validationActions").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        out.push(err::required("spec.validationActions", ""));
    }
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

// Over 80 lines on purpose: The checks of upstream's `ValidateObjectMeta`, field by field in its order (the order of
// the causes).
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
        // apimachinery's ValidateFinalizers reports name errors at the list (no index)...
        for f in finalizers {
            let f = f.as_str().unwrap_or_default();
            for msg in names::qualified_name_errors(f) {
                out.push(err::invalid_str("metadata.finalizers", f, &msg));
            }
        }
        // ...then core's ValidateObjectMeta (built-ins only) wants a standard or fully qualified name, by index.
        if !rt.is_crd() {
            for (i, f) in finalizers.iter().enumerate() {
                let f = f.as_str().unwrap_or_default();
                if !f.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&f) {
                    out.push(err::invalid_str(
                        &format!("metadata.finalizers[{i}]"),
                        f,
                        "name is neither a standard finalizer name nor is it fully qualified",
                    ));
                }
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

fn int_at(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

fn non_negative(v: &Value, ptr: &str, path: &str, out: &mut Vec<Cause>) {
    if let Some(n) = int_at(v, ptr)
        && n < 0
    {
        out.push(err::invalid(path, &n.to_string(), "must be greater than or equal to 0"));
    }
}

fn one_of(v: &Value, ptr: &str, path: &str, supported: &[&str], out: &mut Vec<Cause>) {
    if let Some(val) = v.pointer(ptr)
        && !val.as_str().is_some_and(|s| supported.contains(&s))
    {
        out.push(err::not_supported(path, val, supported));
    }
}

/// A `metav1.LabelSelector` (`ValidateLabelSelector`).
fn label_selector(sel: &Value, path: &str, out: &mut Vec<Cause>) {
    if let Some(labels) = sel.get("matchLabels") {
        validate_labels(labels, &format!("{path}.matchLabels"), out);
    }
    for (i, e) in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = e.get("operator").cloned().unwrap_or(Value::String(String::new()));
        let n = e.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        match op.as_str().unwrap_or_default() {
            "In" | "NotIn" if n == 0 => {
                out.push(err::required(&format!("{p}.values"), "must be specified when `operator` is 'In' or 'NotIn'"))
            }
            "Exists" | "DoesNotExist" if n > 0 => out.push(err::forbidden(
                &format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => out.push(err::invalid_value(&format!("{p}.operator"), &op, "not a valid selector operator")),
        }
        let key = str_at(e, "/key");
        for msg in names::qualified_name_errors(key) {
            out.push(err::invalid_str(&format!("{p}.key"), key, &msg));
        }
    }
}

/// The spec shared by Deployments and ReplicaSets: selector, template, replicas.
fn workload_spec(obj: &Value, kind: &str, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    non_negative(spec, "/replicas", "spec.replicas", out);
    non_negative(spec, "/minReadySeconds", "spec.minReadySeconds", out);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    match selector {
        None => out.push(err::required("spec.selector", "")),
        Some(sel) => {
            label_selector(sel, "spec.selector", out);
            let empty = sel.get("matchLabels").and_then(Value::as_object).is_none_or(Map::is_empty)
                && sel.get("matchExpressions").and_then(Value::as_array).is_none_or(Vec::is_empty);
            if empty {
                out.push(err::invalid(
                    "spec.selector",
                    &selector_repr(Some(sel)),
                    &format!("empty selector is invalid for {kind}"),
                ));
            }
        }
    }
    let template = spec.get("template").unwrap_or(&Value::Null);
    let labels = template.pointer("/metadata/labels");
    if let Some(sel) = selector
        && let Ok(parsed) = crate::selector::LabelSelector::from_label_selector(sel)
        && !parsed.is_empty()
    {
        let empty = Map::new();
        if !parsed.matches(labels.and_then(Value::as_object).unwrap_or(&empty)) {
            let repr = labels.filter(|l| l.is_object()).map_or("null".to_string(), go_repr);
            out.push(err::invalid(
                "spec.template.metadata.labels",
                &repr,
                "`selector` does not match template `labels`",
            ));
        }
    }
    if let Some(labels) = labels {
        validate_labels(labels, "spec.template.metadata.labels", out);
    }
    let pod = template.get("spec").unwrap_or(&Value::Null);
    pod_spec(pod, "spec.template.spec", out);
    if let Some(policy) = pod.get("restartPolicy")
        && policy.as_str() != Some("Always")
    {
        out.push(err::not_supported("spec.template.spec.restartPolicy", policy, &["Always"]));
    }
}

/// A `maxSurge`/`maxUnavailable` int-or-percent: its value, and whether it is a percentage.
fn int_or_percent(v: &Value, path: &str, out: &mut Vec<Cause>) -> Option<i64> {
    match v {
        Value::Number(n) => {
            let n = n.as_i64().unwrap_or(-1);
            if n < 0 {
                out.push(err::invalid(path, &n.to_string(), "must be greater than or equal to 0"));
            }
            Some(n)
        }
        Value::String(s) => {
            let Some(p) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                out.push(err::invalid_str(path, s, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"));
                return None;
            };
            if p > 100 {
                out.push(err::invalid_str(path, s, "must not be greater than 100%"));
            }
            Some(p)
        }
        _ => None,
    }
}

fn deployment(obj: &Value, out: &mut Vec<Cause>) {
    workload_spec(obj, "deployment", out);
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    non_negative(spec, "/revisionHistoryLimit", "spec.revisionHistoryLimit", out);
    let strategy = spec.get("strategy").unwrap_or(&Value::Null);
    one_of(strategy, "/type", "spec.strategy.type", &["Recreate", "RollingUpdate"], out);
    match (strategy.get("type").and_then(Value::as_str), strategy.get("rollingUpdate").filter(|r| !r.is_null())) {
        (Some("Recreate"), Some(_)) => out.push(err::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )),
        (Some("RollingUpdate"), Some(ru)) => {
            let path = "spec.strategy.rollingUpdate";
            let unavailable =
                ru.get("maxUnavailable").and_then(|v| int_or_percent(v, &format!("{path}.maxUnavailable"), out));
            let surge = ru.get("maxSurge").and_then(|v| int_or_percent(v, &format!("{path}.maxSurge"), out));
            if unavailable == Some(0) && surge == Some(0) {
                out.push(err::invalid(&format!("{path}.maxUnavailable"), "0", "may not be 0 when `maxSurge` is 0"));
            }
        }
        _ => {}
    }
    if let Some(pds) = int_at(spec, "/progressDeadlineSeconds") {
        if pds < 0 {
            out.push(err::invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than or equal to 0",
            ));
        } else if pds <= int_at(spec, "/minReadySeconds").unwrap_or(0) {
            out.push(err::invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

fn replica_set(obj: &Value, out: &mut Vec<Cause>) {
    workload_spec(obj, "replicaset", out);
}

fn service(obj: &Value, out: &mut Vec<Cause>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP");
    one_of(spec, "/type", "spec.type", &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"], out);
    one_of(spec, "/sessionAffinity", "spec.sessionAffinity", &["ClientIP", "None"], out);
    let cluster_ip = str_at(spec, "/clusterIP");
    let headless = cluster_ip == "None";
    if !cluster_ip.is_empty() && !headless && cluster_ip.parse::<std::net::IpAddr>().is_err() {
        out.push(err::invalid_str(
            "spec.clusterIPs[0]",
            cluster_ip,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    if ty == "ExternalName" {
        let name = str_at(spec, "/externalName");
        if name.is_empty() {
            out.push(err::required("spec.externalName", ""));
        } else {
            for msg in names::dns1123_subdomain_errors(name.trim_end_matches('.')) {
                out.push(err::invalid_str("spec.externalName", name, &msg));
            }
        }
    }
    let ports = spec.get("ports").and_then(Value::as_array);
    if ports.is_none_or(Vec::is_empty) && ty != "ExternalName" && !headless {
        out.push(err::required("spec.ports", ""));
    }
    let ports = ports.map(Vec::as_slice).unwrap_or_default();
    let mut port_names: Vec<&str> = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        let name = str_at(p, "/name");
        if ports.len() > 1 && name.is_empty() {
            out.push(err::required(&format!("{pp}.name"), ""));
        } else if !name.is_empty() {
            for msg in names::dns1123_label_errors(name) {
                out.push(err::invalid_str(&format!("{pp}.name"), name, &msg));
            }
            if port_names.contains(&name) {
                out.push(err::duplicate(&format!("{pp}.name"), &Value::String(name.into())));
            }
        }
        port_names.push(name);
        port_number(p.get("port").unwrap_or(&json_zero()), &format!("{pp}.port"), out);
        one_of(p, "/protocol", &format!("{pp}.protocol"), PROTOCOLS, out);
        match p.get("targetPort") {
            Some(Value::String(s)) => {
                for msg in names::port_name_errors(s) {
                    out.push(err::invalid_str(&format!("{pp}.targetPort"), s, &msg));
                }
            }
            Some(v @ Value::Number(_)) => port_number(v, &format!("{pp}.targetPort"), out),
            _ => {}
        }
        if let Some(np) = p.get("nodePort").filter(|n| n.as_i64().unwrap_or(0) != 0) {
            if ty == "ClusterIP" || ty == "ExternalName" {
                out.push(err::forbidden(&format!("{pp}.nodePort"), &format!("may not be used when `type` is '{ty}'")));
            } else {
                port_number(np, &format!("{pp}.nodePort"), out);
            }
        }
    }
    if let Some(sel) = spec.get("selector") {
        validate_labels(sel, "spec.selector", out);
    }
}

fn json_zero() -> Value {
    Value::from(0)
}

/// `clusterIP`/`clusterIPs` may not change once set (except when moving to or from ExternalName).
fn service_update(obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    let ty = |v: &Value| v.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if ty(obj) == "ExternalName" || ty(old) == "ExternalName" {
        return;
    }
    let ips = |v: &Value| {
        let list = v.pointer("/spec/clusterIPs").and_then(Value::as_array).cloned().unwrap_or_default();
        let ip = str_at(v, "/spec/clusterIP");
        if list.is_empty() && !ip.is_empty() { vec![json!(ip)] } else { list }
    };
    let old_ips = ips(old);
    let mut new_ips = ips(obj);
    // Upstream's normalizeClusterIPs runs first: a changed clusterIP with clusterIPs left as they were becomes
    // clusterIPs[0]. Only clusterIPs is then checked (there is no separate clusterIP immutability error).
    let new_ip = str_at(obj, "/spec/clusterIP");
    if new_ip != str_at(old, "/spec/clusterIP") && new_ips == old_ips && !new_ip.is_empty() && !new_ips.is_empty() {
        new_ips[0] = json!(new_ip);
    }
    if !old_ips.is_empty() && new_ips.first() != old_ips.first() {
        out.push(err::invalid_value("spec.clusterIPs[0]", &Value::Array(new_ips), "may not change once set"));
    }
}

/// Keys of `data`/`binaryData` (and `stringData` for Secrets) and the `immutable` flag.
fn data_keys(obj: &Value, fields: &[&str], out: &mut Vec<Cause>) -> usize {
    let mut size = 0;
    let mut seen: Vec<&str> = Vec::new();
    for field in fields {
        for (k, v) in obj.get(*field).and_then(Value::as_object).into_iter().flatten() {
            let path = format!("{field}[{k}]");
            for msg in names::config_map_key_errors(k) {
                out.push(err::invalid_str(&path, k, &msg));
            }
            if *field != "stringData" && seen.contains(&k.as_str()) {
                out.push(err::invalid_str(&path, k, "duplicate of key present in data"));
            }
            seen.push(k);
            size += k.len() + v.as_str().map_or(0, str::len);
        }
    }
    size
}

fn immutable_data(obj: &Value, old: Option<&Value>, fields: &[&str], out: &mut Vec<Cause>) {
    let Some(old) = old else { return };
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        out.push(err::forbidden("immutable", "field is immutable when `immutable` is set"));
    }
    for field in fields {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty));
        let (n, o) = (obj.get(*field), old.get(*field));
        if !(empty(n) && empty(o)) && n != o {
            out.push(err::forbidden(field, "field is immutable when `immutable` is set"));
        }
    }
}

fn config_map(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let size = data_keys(obj, &["data", "binaryData"], out);
    if size > 1024 * 1024 {
        out.push(err::too_long("", 1024 * 1024));
    }
    immutable_data(obj, old, &["data", "binaryData"], out);
}

fn secret(obj: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    data_keys(obj, &["data", "stringData"], out);
    let ty = str_at(obj, "/type");
    let has = |k: &str| {
        ["data", "stringData"].iter().any(|f| obj.get(*f).and_then(Value::as_object).is_some_and(|m| m.contains_key(k)))
    };
    let required: &[&str] = match ty {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        _ => &[],
    };
    for k in required {
        if !has(k) {
            out.push(err::required(&format!("data[{k}]"), ""));
        }
    }
    if ty == "kubernetes.io/service-account-token"
        && str_at(obj, "/metadata/annotations/kubernetes.io~1service-account.name").is_empty()
    {
        out.push(err::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
    }
    if let Some(old) = old {
        let old_ty = str_at(old, "/type");
        if old_ty != ty {
            out.push(err::invalid_str("type", ty, "field is immutable"));
        }
    }
    immutable_data(obj, old, &["data"], out);
}

fn namespace(obj: &Value, out: &mut Vec<Cause>) {
    for (i, f) in obj.pointer("/spec/finalizers").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let f = f.as_str().unwrap_or_default();
        let path = format!("spec.finalizers[{i}]");
        for msg in names::qualified_name_errors(f) {
            out.push(err::invalid_str(&path, f, &msg));
        }
        if !f.contains('/') && f != "kubernetes" {
            out.push(err::invalid_str(&path, f, "name is neither a standard finalizer name nor is it fully qualified"));
        }
    }
}

fn lease(obj: &Value, out: &mut Vec<Cause>) {
    if let Some(n) = int_at(obj, "/spec/leaseDurationSeconds")
        && n <= 0
    {
        out.push(err::invalid("spec.leaseDurationSeconds", &n.to_string(), "must be greater than 0"));
    }
    non_negative(obj, "/spec/leaseTransitions", "spec.leaseTransitions", out);
}

/// An Event, as upstream validates the one internal type both APIs decode to (pkg/apis/core/validation/events.go):
/// `legacyValidateEvent` for both, then the stricter checks of events.k8s.io/v1. Field paths are the internal
/// (core) names whichever API was used; only the reporting controller is named as the request's API names it.
fn event(obj: &Value, events_api: bool, out: &mut Vec<Cause>) {
    let core = if events_api { super::events::to_core(obj) } else { obj.clone() };
    legacy_event(&core, events_api, out);
    if !events_api {
        return;
    }
    if is_unset(&core, "/eventTime") {
        out.push(err::required("eventTime", ""));
    }
    let ty = str_at(&core, "/type");
    if ty != "Normal" && ty != "Warning" {
        out.push(err::invalid_str("type", "", &format!("has invalid value: {ty}")));
    }
    for (ptr, path) in [("/firstTimestamp", "firstTimestamp"), ("/lastTimestamp", "lastTimestamp")] {
        if !is_unset(&core, ptr) {
            out.push(err::invalid_str(path, "", "needs to be unset"));
        }
    }
    if int_at(&core, "/count").is_some_and(|c| c != 0) {
        out.push(err::invalid_str("count", "", "needs to be unset"));
    }
    if !str_at(&core, "/source/component").is_empty() || !str_at(&core, "/source/host").is_empty() {
        out.push(err::invalid_str("source", "", "needs to be unset"));
    }
}

/// `legacyValidateEvent`: an Event without eventTime is an old-style one, whose involvedObject namespace must
/// agree with its own; one with eventTime needs the reporting fields.
fn legacy_event(core: &Value, events_api: bool, out: &mut Vec<Cause>) {
    const LIMIT: usize = 128;
    const NOTE_LIMIT: usize = 1024;
    let ns = str_at(core, "/metadata/namespace");
    let involved = str_at(core, "/involvedObject/namespace");
    let mismatch = || err::invalid_str("involvedObject.namespace", involved, "does not match event.namespace");
    if is_unset(core, "/eventTime") {
        let allowed = if involved.is_empty() { ns.is_empty() || ns == "default" } else { ns == involved };
        if !allowed {
            out.push(mismatch());
        }
        return;
    }
    if involved.is_empty() && ns != "default" && ns != "kube-system" {
        out.push(mismatch());
    }
    let controller_field = if events_api { "reportingController" } else { "reportingComponent" };
    let controller = str_at(core, "/reportingComponent");
    if controller.is_empty() {
        out.push(err::required(controller_field, ""));
    }
    for msg in names::qualified_name_errors(controller) {
        out.push(err::invalid_str(controller_field, controller, &msg));
    }
    // Each required, then its length, in this order.
    for field in ["reportingInstance", "action", "reason"] {
        let value = str_at(core, &format!("/{field}"));
        if value.is_empty() {
            out.push(err::required(field, ""));
        }
        if value.len() > LIMIT {
            out.push(err::invalid_str(field, "", &format!("can have at most {LIMIT} characters")));
        }
    }
    if str_at(core, "/message").len() > NOTE_LIMIT {
        out.push(err::invalid_str("message", "", &format!("can have at most {NOTE_LIMIT} characters")));
    }
}

/// A time field a client left out (absent, null or "").
fn is_unset(obj: &Value, ptr: &str) -> bool {
    obj.pointer(ptr).is_none_or(|v| v.is_null() || v.as_str() == Some(""))
}

fn crd_update(obj: &Value, old: &Value, out: &mut Vec<Cause>) {
    let established = old.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    let mut fields = vec![("/spec/group", "spec.group"), ("/spec/names/plural", "spec.names.plural")];
    if established {
        fields.push(("/spec/scope", "spec.scope"));
        fields.push(("/spec/names/kind", "spec.names.kind"));
    }
    for (ptr, path) in fields {
        let new = obj.pointer(ptr).cloned().unwrap_or(Value::Null);
        if old.pointer(ptr).cloned().unwrap_or(Value::Null) != new {
            out.push(err::immutable(path, &new));
        }
    }
}

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
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
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
mod tests;
