//! What a real kube-apiserver knows about each built-in type beyond its schema: selectable fields, defaults,
//! validation and the update-time carry-over of allocated values.
//!
//! Call order on a write (as upstream): [`prepare_for_update`] (updates only), [`default_object`],
//! [`validate_object`]. Custom resources get only ObjectMeta validation here; their schema is in
//! [`crate::schema`].

/// Every stored built-in kind with its k8s-openapi type, handed to `$callback` (a macro taking
/// `(group, kind) => Type` entries, plus `$extra` ones) so pruning and OpenAPI share one table.
macro_rules! stored_kinds {
    ($callback:ident { $($extra:tt)* }) => {
        $callback! {
            ("", "Namespace") => k8s_openapi::api::core::v1::Namespace,
            ("", "Service") => k8s_openapi::api::core::v1::Service,
            ("", "Pod") => k8s_openapi::api::core::v1::Pod,
            ("", "ConfigMap") => k8s_openapi::api::core::v1::ConfigMap,
            ("", "Secret") => k8s_openapi::api::core::v1::Secret,
            ("", "ServiceAccount") => k8s_openapi::api::core::v1::ServiceAccount,
            ("", "Event") => k8s_openapi::api::core::v1::Event,
            ("", "Endpoints") => k8s_openapi::api::core::v1::Endpoints,
            ("apps", "Deployment") => k8s_openapi::api::apps::v1::Deployment,
            ("apps", "ReplicaSet") => k8s_openapi::api::apps::v1::ReplicaSet,
            ("autoscaling", "HorizontalPodAutoscaler") => k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
            ("events.k8s.io", "Event") => k8s_openapi::api::events::v1::Event,
            ("coordination.k8s.io", "Lease") => k8s_openapi::api::coordination::v1::Lease,
            ("rbac.authorization.k8s.io", "Role") => k8s_openapi::api::rbac::v1::Role,
            ("rbac.authorization.k8s.io", "RoleBinding") => k8s_openapi::api::rbac::v1::RoleBinding,
            ("rbac.authorization.k8s.io", "ClusterRole") => k8s_openapi::api::rbac::v1::ClusterRole,
            ("rbac.authorization.k8s.io", "ClusterRoleBinding") => k8s_openapi::api::rbac::v1::ClusterRoleBinding,
            ("discovery.k8s.io", "EndpointSlice") => k8s_openapi::api::discovery::v1::EndpointSlice,
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") =>
                k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") =>
                k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
            $($extra)*
        }
    };
}
pub(crate) use stored_kinds;

mod defaults;
pub mod encoding;
pub mod events;
mod hpa;
mod prune;
mod validate;

use base64::Engine as _;
use serde_json::Value;

pub use defaults::{namespace_finalizer, service_ip_families};
pub use prune::prune_unknown;

use crate::error::{ApiResult, Cause};
use crate::resources::{Origin, ResourceType};
use crate::selector::FieldSelector;

/// The field selector labels a type supports (upstream's field-label conversion functions), for the
/// `field label not supported` check.
pub fn selectable_fields(rt: &ResourceType) -> Vec<String> {
    let meta = ["metadata.name", "metadata.namespace"];
    let extra: &[&str] = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => return ["metadata.name", "name", "status.phase"].map(String::from).to_vec(),
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        ("", "Event") => &[
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
        ("events.k8s.io", "Event") => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        ("", "Secret") => &["type"],
        ("", "Service") => &["spec.clusterIP", "spec.type"],
        ("apps", "ReplicaSet") => &["status.replicas"],
        _ => &[],
    };
    let mut out: Vec<String> = meta.iter().chain(extra).map(|s| s.to_string()).collect();
    if let Origin::Crd { selectable_fields, .. } = &rt.origin {
        out.extend(selectable_fields.iter().map(|f| f.trim_start_matches('.').to_string()));
    }
    out
}

/// 400 when the selector uses a field the type does not offer. A built-in kind with a conversion function of its
/// own (it offers more than the metadata fields) says `field label not supported: X`; the others fall back to
/// `runtime.DefaultMetaV1FieldSelectorConversion`, which names the two fields it knows.
pub fn check_field_selector(rt: &ResourceType, sel: &FieldSelector) -> ApiResult<()> {
    let supported = selectable_fields(rt);
    let only_metadata = supported.iter().all(|f| f == "metadata.name" || f == "metadata.namespace");
    match sel.check_supported(&supported) {
        Err(mut e) if rt.origin == Origin::BuiltIn && only_metadata => {
            if let Some(field) = sel.fields().into_iter().find(|f| !supported.contains(f)) {
                e.message =
                    format!("{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");
            }
            Err(e)
        }
        other => other,
    }
}

/// The value a field selector sees for `field`: upstream's per-type field sets, including their computed and
/// aliased entries (`spec.host`, Events' `source`, ReplicaSets' numeric `status.replicas`, booleans).
/// Events are read in either API form (core/v1 `involvedObject`, events.k8s.io/v1 `regarding`).
pub fn field_value(rt: &ResourceType, obj: &Value, field: &str) -> String {
    use crate::selector::field_value as at;
    let first = |paths: &[&str]| {
        paths
            .iter()
            .find(|p| obj.pointer(&format!("/{}", p.replace('.', "/"))).is_some())
            .map_or(String::new(), |p| at(obj, p))
    };
    match (rt.group.as_str(), rt.kind.as_str(), field) {
        ("", "Namespace", "name") => at(obj, "metadata.name"),
        ("", "Pod", "spec.host") => at(obj, "spec.nodeName"),
        ("", "Pod", "spec.hostNetwork") => {
            obj.pointer("/spec/hostNetwork").and_then(Value::as_bool).unwrap_or(false).to_string()
        }
        ("", "Pod", "status.podIPs") => obj
            .pointer("/status/podIPs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|p| p.get("ip").and_then(Value::as_str)).collect::<Vec<_>>().join(","))
            .unwrap_or_default(),
        ("apps", "ReplicaSet", "status.replicas") => {
            obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0).to_string()
        }
        (_, "Event", _) if rt.origin == Origin::BuiltIn => match field {
            "source" => first(&["source.component", "deprecatedSource.component"]),
            "reportingComponent" | "reportingController" => first(&["reportingComponent", "reportingController"]),
            f => {
                if let Some(rest) = f.strip_prefix("involvedObject.").or_else(|| f.strip_prefix("regarding.")) {
                    first(&[&format!("involvedObject.{rest}"), &format!("regarding.{rest}")])
                } else {
                    at(obj, f)
                }
            }
        },
        _ => at(obj, field),
    }
}

/// Whether `obj` (of type `rt`) satisfies a field selector.
pub fn field_selector_matches(rt: &ResourceType, sel: &FieldSelector, obj: &Value) -> bool {
    sel.requirements.iter().all(|r| (field_value(rt, obj, &r.field) == r.value) == r.equal)
}

/// What upstream's conversion from the v1 wire form to the internal type does to a built-in object, before
/// anything else (field managers included) sees it: a Secret's write-only `stringData` is folded into `data`
/// (base64, overriding keys of the same name) and never stored.
pub fn convert_from_wire(rt: &ResourceType, obj: &mut Value) {
    if rt.is_crd() || !rt.group.is_empty() || rt.kind != "Secret" {
        return;
    }
    let Some(m) = obj.as_object_mut() else { return };
    let Some(string_data) = m.remove("stringData") else { return };
    let Value::Object(string_data) = string_data else { return };
    if string_data.is_empty() {
        return;
    }
    let data = m.entry("data").or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !data.is_object() {
        *data = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(data) = data {
        for (k, v) in string_data {
            let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            data.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

/// Applies the defaults a real server sets on write (see the `defaults` module). Idempotent. CRs: none here.
pub fn default_object(rt: &ResourceType, obj: &mut Value) {
    defaults::apply(rt, obj)
}

/// Validates an object about to be stored (after defaulting). `old` is the stored object on updates, for
/// immutability rules. Causes carry upstream field paths, reasons and messages.
pub fn validate_object(rt: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    validate::validate(rt, obj, old)
}

/// Carries over what the server allocated when an update omits it, as upstream's update strategies do:
/// a Service PUT without `clusterIP`/`clusterIPs`/`nodePort`/`healthCheckNodePort` keeps the old values
/// (otherwise every operator that PUTs a Service would hit "field is immutable").
pub fn prepare_for_update(rt: &ResourceType, new: &mut Value, old: &Value) {
    if rt.group.is_empty() && rt.kind == "Service" {
        validate::carry_service_allocations(new, old);
        // The allocator's IP family fields, kept from the stored object (or given anew to a type that has none).
        service_ip_families(new);
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

    #[test]
    fn secret_string_data_is_folded_into_data() {
        let mut s = json!({"data": {"a": "eA==", "b": "eA=="}, "stringData": {"b": "admin", "c": "v"}});
        convert_from_wire(&rt("", "Secret"), &mut s);
        assert_eq!(s, json!({"data": {"a": "eA==", "b": "YWRtaW4=", "c": "dg=="}}));
        let mut cm = json!({"stringData": {"k": "v"}});
        convert_from_wire(&rt("", "ConfigMap"), &mut cm);
        assert_eq!(cm, json!({"stringData": {"k": "v"}}), "only Secrets have stringData");
    }

    #[test]
    fn selectable_fields_per_type() {
        let pods = selectable_fields(&rt("", "Pod"));
        assert!(pods.contains(&"spec.nodeName".to_string()) && pods.contains(&"status.phase".to_string()));
        assert!(selectable_fields(&rt("", "Secret")).contains(&"type".to_string()));
        assert!(selectable_fields(&rt("apps", "ReplicaSet")).contains(&"status.replicas".to_string()));
        let cm = selectable_fields(&rt("", "ConfigMap"));
        assert_eq!(cm, vec!["metadata.name", "metadata.namespace"]);
        let ev = selectable_fields(&rt("", "Event"));
        for f in ["involvedObject.name", "involvedObject.kind", "involvedObject.uid", "reason", "type", "source"] {
            assert!(ev.contains(&f.to_string()), "{f}");
        }
        let mut crd = rt("apps", "Deployment");
        crd.origin = Origin::Crd {
            crd_name: "x.example.com".into(),
            schema: Value::Null,
            printer_columns: vec![],
            selectable_fields: vec![".spec.color".into()],
            storage: true,
        };
        assert!(selectable_fields(&crd).contains(&"spec.color".to_string()));
    }

    #[test]
    fn unsupported_field_selector_is_400() {
        let sel = FieldSelector::parse("spec.nodeName=n1").unwrap();
        assert!(check_field_selector(&rt("", "Pod"), &sel).is_ok());
        let e = check_field_selector(&rt("", "ConfigMap"), &sel).unwrap_err();
        let default = r#""spec.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace""#;
        assert_eq!((e.code, e.message.as_str()), (400, default));
        let sel = FieldSelector::parse("spec.bogus=n1").unwrap();
        let e = check_field_selector(&rt("", "Pod"), &sel).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (400, "field label not supported: spec.bogus"));
    }

    #[test]
    fn field_values_follow_upstream_field_sets() {
        let ev = rt("", "Event");
        let core = json!({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "kubelet"}});
        let new = json!({"regarding": {"kind": "Pod", "name": "p"}, "reportingController": "ctl"});
        let sel = FieldSelector::parse("involvedObject.kind=Pod,involvedObject.name=p").unwrap();
        assert!(field_selector_matches(&ev, &sel, &core));
        assert!(field_selector_matches(&ev, &sel, &new), "events.k8s.io form is read too");
        assert_eq!(field_value(&ev, &core, "source"), "kubelet");
        assert_eq!(field_value(&ev, &new, "reportingComponent"), "ctl");
        let rs = rt("apps", "ReplicaSet");
        assert_eq!(field_value(&rs, &json!({}), "status.replicas"), "0");
        let pod = rt("", "Pod");
        assert_eq!(field_value(&pod, &json!({"spec": {"nodeName": "n"}}), "spec.host"), "n");
        assert_eq!(field_value(&pod, &json!({}), "spec.hostNetwork"), "false");
        let ns = rt("", "Namespace");
        assert_eq!(field_value(&ns, &json!({"metadata": {"name": "x"}}), "name"), "x");
    }
}
