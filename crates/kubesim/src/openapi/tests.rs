use std::sync::Arc;

use super::*;
use crate::resources::{Subresources, builtin_types};

fn builtins() -> Vec<ResourceRef> {
    builtin_types().into_iter().map(Arc::new).collect()
}

fn crd(schema: Value) -> ResourceRef {
    Arc::new(ResourceType {
        group: "platform.example.com".into(),
        version: "v1alpha1".into(),
        kind: "Microservice".into(),
        list_kind: "MicroserviceList".into(),
        plural: "microservices".into(),
        singular: "microservice".into(),
        short_names: vec!["ms".into()],
        categories: vec![],
        namespaced: true,
        verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        subresources: Subresources { status: true, scale: None },
        origin: Origin::Crd {
            crd_name: "microservices.platform.example.com".into(),
            schema,
            printer_columns: vec![],
            selectable_fields: vec![],
            storage: true,
        },
    })
}

fn crd_schema(port_max: i64) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "image": {"type": "string"}, "port": {"type": "integer", "maximum": port_max}}}}})
}

/// What kubectl's query-param verifier looks for: a PATCH operation for the GVK with a fieldValidation
/// query parameter.
fn patch_supports_field_validation(doc: &Value, group: &str, version: &str, kind: &str) -> bool {
    let want = json!({"group": group, "version": version, "kind": kind});
    doc["paths"].as_object().unwrap().values().any(|p| {
        p["patch"]["x-kubernetes-group-version-kind"] == want
            && p["patch"]["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|q| q["name"] == "fieldValidation" && q["in"] == "query"))
    })
}

fn schema_for_gvk<'a>(doc: &'a Value, group: &str, version: &str, kind: &str) -> Option<&'a Value> {
    let want = json!({"group": group, "version": version, "kind": kind});
    doc["components"]["schemas"]
        .as_object()?
        .values()
        .find(|s| s["x-kubernetes-group-version-kind"].as_array().is_some_and(|a| a.contains(&want)))
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let r = schema["allOf"][0]["$ref"].as_str().or(schema["$ref"].as_str()).unwrap();
    &doc["components"]["schemas"][r.strip_prefix(SCHEMA_PREFIX).unwrap()]
}

#[test]
fn root_lists_every_group_version() {
    let mut types = builtins();
    types.push(crd(crd_schema(65535)));
    let root = root(&types);
    let paths = root["paths"].as_object().unwrap();
    for key in ["api/v1", "apis/apps/v1", "apis/apiextensions.k8s.io/v1", "apis/platform.example.com/v1alpha1"] {
        let url = paths[key]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with(&format!("/openapi/v3/{key}?hash=")), "{url}");
    }
}

#[test]
fn hash_changes_only_with_the_group_versions_types() {
    let mut a = builtins();
    a.push(crd(crd_schema(65535)));
    let mut b = builtins();
    b.push(crd(crd_schema(1024)));
    let (ra, rb) = (root(&a), root(&b));
    let key = "apis/platform.example.com/v1alpha1";
    assert_ne!(ra["paths"][key], rb["paths"][key]);
    assert_eq!(ra["paths"]["apis/apps/v1"], rb["paths"]["apis/apps/v1"]);
    assert_eq!(ra, root(&a), "the hash is stable");
}

#[test]
fn builtin_docs_let_kubectl_use_server_side_field_validation() {
    let types = builtins();
    let apps = group_version_doc(&types, "apis/apps/v1").unwrap();
    assert_eq!(apps["openapi"], "3.0.0");
    assert!(patch_supports_field_validation(&apps, "apps", "v1", "Deployment"));
    assert!(patch_supports_field_validation(&apps, "apps", "v1", "ReplicaSet"));
    assert!(patch_supports_field_validation(&apps, "autoscaling", "v1", "Scale"));
    let core = group_version_doc(&types, "/openapi/v3/api/v1").unwrap();
    for kind in ["Namespace", "ConfigMap", "Secret", "Service", "Pod", "ServiceAccount"] {
        assert!(patch_supports_field_validation(&core, "", "v1", kind), "{kind}");
    }
    assert!(group_version_doc(&types, "apis/apps/v2").is_none());
    assert!(group_version_doc(&types, "apis/nope/v1").is_none());
    assert!(group_version_doc(&types, "garbage").is_none());
}

#[test]
fn builtin_schemas_carry_strategic_merge_metadata() {
    let types = builtins();
    let apps = group_version_doc(&types, "apis/apps/v1").unwrap();
    let deploy = schema_for_gvk(&apps, "apps", "v1", "Deployment").unwrap();
    let spec = resolve(&apps, &deploy["properties"]["spec"]);
    let template = resolve(&apps, &spec["properties"]["template"]);
    let pod_spec = resolve(&apps, &template["properties"]["spec"]);
    let containers = &pod_spec["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    let container = resolve(&apps, &containers["items"]);
    assert_eq!(container["properties"]["ports"]["x-kubernetes-patch-merge-key"], "containerPort");
    assert_eq!(container["properties"]["env"]["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(spec["properties"]["strategy"]["x-kubernetes-patch-strategy"], "retainKeys");
    let meta = resolve(&apps, &deploy["properties"]["metadata"]);
    assert_eq!(meta["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"], "uid");
    // Every reference resolves inside the document.
    let text = apps.to_string();
    for r in text.split("\"$ref\":\"").skip(1) {
        let name = r.split('"').next().unwrap().strip_prefix(SCHEMA_PREFIX).unwrap();
        assert!(apps["components"]["schemas"].get(name).is_some(), "dangling $ref {name}");
    }
}

#[test]
fn crd_doc_has_the_schema_with_object_meta() {
    let types = vec![crd(crd_schema(65535))];
    let doc = group_version_doc(&types, "apis/platform.example.com/v1alpha1").unwrap();
    assert!(patch_supports_field_validation(&doc, "platform.example.com", "v1alpha1", "Microservice"));
    let s = schema_for_gvk(&doc, "platform.example.com", "v1alpha1", "Microservice").unwrap();
    assert_eq!(s["properties"]["spec"]["properties"]["port"]["maximum"], 65535);
    assert_eq!(s["properties"]["apiVersion"]["type"], "string");
    assert!(resolve(&doc, &s["properties"]["metadata"])["properties"]["name"].is_object());
    assert!(schema_for_gvk(&doc, "platform.example.com", "v1alpha1", "MicroserviceList").is_some());
    let status =
        &doc["paths"]["/apis/platform.example.com/v1alpha1/namespaces/{namespace}/microservices/{name}/status"];
    assert!(status["patch"].is_object());
    // Custom resources take no strategic merge patch.
    let item = &doc["paths"]["/apis/platform.example.com/v1alpha1/namespaces/{namespace}/microservices/{name}"];
    assert!(item["patch"]["requestBody"]["content"].get("application/strategic-merge-patch+json").is_none());
}

#[test]
fn operation_ids_follow_upstream() {
    assert_eq!(operation_infix("", "v1"), "CoreV1");
    assert_eq!(operation_infix("apps", "v1"), "AppsV1");
    assert_eq!(operation_infix("rbac.authorization.k8s.io", "v1"), "RbacAuthorizationV1");
    assert_eq!(operation_infix("platform.example.com", "v1alpha1"), "PlatformExampleComV1alpha1");
}
