//! OpenAPI v3 documents: `/openapi/v3` (the index of group-versions) and one document per group-version.
//!
//! kubectl reads them for three things: whether a kind's PATCH accepts `fieldValidation` (else it validates
//! client-side and fails without `--validate=false`), `kubectl explain`, and the strategic-merge metadata
//! (`x-kubernetes-patch-merge-key`/`-strategy`) of client-side apply. Built-in schemas come from k8s-openapi's
//! schemars support with upstream's patch extensions added; CRD schemas are their `openAPIV3Schema` with
//! apiVersion, kind and metadata added, as the apiextensions server publishes them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::resources::{Origin, ResourceRef, ResourceType};

const SCHEMA_PREFIX: &str = "#/components/schemas/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

/// `/openapi/v3`: every served group-version with a URL whose hash changes when that group-version's types do.
pub fn root(types: &[ResourceRef]) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(types) {
        let key = gv_key(&group, &version);
        let hash = fingerprint(&in_gv(types, &group, &version));
        paths.insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash:016X}")}));
    }
    json!({"paths": paths})
}

/// The document for `gv_path` (`api/v1`, `apis/apps/v1`, `apis/platform.example.com/v1alpha1`; a leading `/`
/// or `/openapi/v3/` is accepted); None when nothing is served there.
pub fn group_version_doc(types: &[ResourceRef], gv_path: &str) -> Option<Value> {
    let path = gv_path.trim_start_matches('/');
    let path = path.strip_prefix("openapi/v3/").unwrap_or(path);
    let (group, version) = match path.split('/').collect::<Vec<_>>()[..] {
        ["api", version] => (String::new(), version.to_string()),
        ["apis", group, version] if !group.is_empty() => (group.to_string(), version.to_string()),
        _ => return None,
    };
    let served = in_gv(types, &group, &version);
    if served.is_empty() {
        return None;
    }
    // Built-in documents are large and never change: build each once.
    if served.iter().all(|t| !t.is_crd()) {
        static CACHE: OnceLock<Mutex<HashMap<u64, Arc<Value>>>> = OnceLock::new();
        let key = fingerprint(&served);
        let cache = CACHE.get_or_init(Mutex::default);
        if let Some(doc) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Some(doc.as_ref().clone());
        }
        let doc = Arc::new(build_doc(&served));
        if let Ok(mut c) = cache.lock() {
            c.insert(key, doc.clone());
        }
        return Some(doc.as_ref().clone());
    }
    Some(build_doc(&served))
}

fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

fn group_versions(types: &[ResourceRef]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for t in types {
        let gv = (t.group.clone(), t.version.clone());
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

fn in_gv<'a>(types: &'a [ResourceRef], group: &str, version: &str) -> Vec<&'a ResourceType> {
    types.iter().map(|t| t.as_ref()).filter(|t| t.group == group && t.version == version).collect()
}

/// A stable digest of everything a document is built from (the types' descriptors include CRD schemas).
fn fingerprint(types: &[&ResourceType]) -> u64 {
    let mut h = DefaultHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut h);
    for t in types {
        format!("{t:?}").hash(&mut h);
    }
    h.finish()
}

fn build_doc(types: &[&ResourceType]) -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    for name in [OBJECT_META, LIST_META, DELETE_OPTIONS, STATUS, PATCH] {
        meta_schema(&mut generator, name);
    }
    let mut kind_schemas: Vec<(String, Value)> = Vec::new();
    let mut has_scale = false;
    for t in types {
        has_scale |= t.subresources.scale.is_some();
        let name = match &t.origin {
            Origin::BuiltIn => builtin_schema(&mut generator, t).unwrap_or_else(|| {
                let name = crd_schema_name(t);
                kind_schemas.push((name.clone(), fallback_schema()));
                name
            }),
            Origin::Crd { schema, .. } => {
                let name = crd_schema_name(t);
                kind_schemas.push((name.clone(), crd_kind_schema(schema)));
                name
            }
        };
        kind_schemas.push((list_schema_name(&name, t), list_schema(&name, t)));
    }
    if has_scale {
        generator.subschema_for::<k8s_openapi::api::autoscaling::v1::Scale>();
    }
    let mut schemas = generator.take_definitions(true);
    for (name, schema) in kind_schemas {
        schemas.insert(name, schema);
    }
    add_patch_extensions(&mut schemas);
    for t in types {
        let name = schema_name_for(&schemas, t);
        tag_gvk(&mut schemas, &name, &t.group, &t.version, &t.kind);
        tag_gvk(&mut schemas, &list_schema_name(&name, t), &t.group, &t.version, &t.list_kind);
    }
    if has_scale {
        tag_gvk(&mut schemas, SCALE, "autoscaling", "v1", "Scale");
    }
    let mut paths = Map::new();
    for t in types {
        let name = schema_name_for(&schemas, t);
        add_paths(&mut paths, t, &name);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}},
        },
    })
}

/// The schema name a type's kind was published under.
fn schema_name_for(schemas: &Map<String, Value>, t: &ResourceType) -> String {
    if !t.is_crd()
        && let Some(name) = builtin_schema_name(t)
        && schemas.contains_key(&name)
    {
        return name;
    }
    crd_schema_name(t)
}

/// Generates one of the meta types into the generator's definitions.
fn meta_schema(generator: &mut SchemaGenerator, name: &str) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    match name {
        OBJECT_META => drop(generator.subschema_for::<meta::ObjectMeta>()),
        LIST_META => drop(generator.subschema_for::<meta::ListMeta>()),
        DELETE_OPTIONS => drop(generator.subschema_for::<meta::DeleteOptions>()),
        STATUS => drop(generator.subschema_for::<meta::Status>()),
        PATCH => drop(generator.subschema_for::<meta::Patch>()),
        _ => {}
    }
}

macro_rules! builtin_kinds {
    ($( ($group:literal, $kind:literal) => $ty:ty ),* $(,)?) => {
        /// Generates a built-in kind's schema (and everything it references); returns its name.
        fn builtin_schema(generator: &mut SchemaGenerator, t: &ResourceType) -> Option<String> {
            if t.version != "v1" {
                return None;
            }
            match (t.group.as_str(), t.kind.as_str()) {
                $( ($group, $kind) => {
                    let _: Schema = generator.subschema_for::<$ty>();
                    Some(<$ty as JsonSchema>::schema_name().into_owned())
                } )*
                _ => None,
            }
        }

        fn builtin_schema_name(t: &ResourceType) -> Option<String> {
            if t.version != "v1" {
                return None;
            }
            match (t.group.as_str(), t.kind.as_str()) {
                $( ($group, $kind) => Some(<$ty as JsonSchema>::schema_name().into_owned()), )*
                _ => None,
            }
        }
    };
}

crate::builtin::stored_kinds!(builtin_kinds {
    ("apiextensions.k8s.io", "CustomResourceDefinition") =>
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ("autoscaling", "Scale") => k8s_openapi::api::autoscaling::v1::Scale,
});

/// Upstream's name for a CRD kind's schema: the group reversed, then version and kind
/// (`com.example.platform.v1alpha1.Microservice`).
fn crd_schema_name(t: &ResourceType) -> String {
    let mut parts: Vec<&str> = t.group.split('.').filter(|p| !p.is_empty()).collect();
    parts.reverse();
    parts.push(&t.version);
    parts.push(&t.kind);
    parts.join(".")
}

fn list_schema_name(kind_schema: &str, t: &ResourceType) -> String {
    match kind_schema.rsplit_once('.') {
        Some((prefix, _)) => format!("{prefix}.{}", t.list_kind),
        None => t.list_kind.clone(),
    }
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("{SCHEMA_PREFIX}{name}")})
}

/// `{description, allOf: [$ref]}`, the way upstream's v3 documents reference a named schema with siblings.
fn described_ref(name: &str, description: &str) -> Value {
    json!({"description": description, "allOf": [reference(name)]})
}

fn type_meta_properties(props: &mut Map<String, Value>) {
    props.insert(
        "apiVersion".into(),
        json!({"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"}),
    );
    props.insert(
        "kind".into(),
        json!({"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"}),
    );
}

/// A CRD version's openAPIV3Schema as the apiextensions server publishes it: apiVersion and kind declared and
/// metadata replaced by ObjectMeta.
fn crd_kind_schema(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(m) => m.clone(),
        _ => {
            let mut m = Map::new();
            m.insert("type".into(), json!("object"));
            m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
            m
        }
    };
    schema.entry("type").or_insert(json!("object"));
    let props = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(props) = props {
        type_meta_properties(props);
        props.insert("metadata".into(), described_ref(OBJECT_META, "Standard object's metadata."));
    }
    Value::Object(schema)
}

/// For a built-in kind k8s-openapi has no schema for: any fields.
fn fallback_schema() -> Value {
    let mut props = Map::new();
    type_meta_properties(&mut props);
    props.insert("metadata".into(), described_ref(OBJECT_META, "Standard object's metadata."));
    json!({"type": "object", "properties": props, "x-kubernetes-preserve-unknown-fields": true})
}

fn list_schema(kind_schema: &str, t: &ResourceType) -> Value {
    let mut props = Map::new();
    type_meta_properties(&mut props);
    props.insert(
        "items".into(),
        json!({"description": format!("List of {}.", t.plural), "type": "array", "items": reference(kind_schema)}),
    );
    props.insert("metadata".into(), described_ref(LIST_META, "Standard list metadata."));
    json!({
        "description": format!("{} is a list of {}", t.list_kind, t.kind),
        "type": "object",
        "required": ["items"],
        "properties": props,
    })
}

fn tag_gvk(schemas: &mut Map<String, Value>, name: &str, group: &str, version: &str, kind: &str) {
    if let Some(Value::Object(s)) = schemas.get_mut(name) {
        s.insert("x-kubernetes-group-version-kind".into(), json!([{"group": group, "kind": kind, "version": version}]));
    }
}

/// Upstream's strategic-merge metadata (`patchStrategy`/`patchMergeKey` struct tags) for the schemas the
/// built-ins reference: kubectl's client-side apply computes its patch from these once a schema is published.
const PATCH_EXTENSIONS: &[(&str, &str, &str, Option<&str>)] = &[
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers", "merge", None),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "ownerReferences", "merge", Some("uid")),
    ("io.k8s.api.core.v1.PodSpec", "containers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "ephemeralContainers", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "volumes", "merge,retainKeys", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "imagePullSecrets", "merge", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", "merge", Some("ip")),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", "merge", Some("topologyKey")),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", "merge,retainKeys", Some("name")),
    ("io.k8s.api.core.v1.PodSpec", "schedulingGates", "merge", Some("name")),
    ("io.k8s.api.core.v1.Container", "ports", "merge", Some("containerPort")),
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    ("io.k8s.api.core.v1.Container", "volumeMounts", "merge", Some("mountPath")),
    ("io.k8s.api.core.v1.Container", "volumeDevices", "merge", Some("devicePath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", "merge", Some("containerPort")),
    ("io.k8s.api.core.v1.EphemeralContainer", "env", "merge", Some("name")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeMounts", "merge", Some("mountPath")),
    ("io.k8s.api.core.v1.EphemeralContainer", "volumeDevices", "merge", Some("devicePath")),
    ("io.k8s.api.core.v1.PodStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.PodStatus", "podIPs", "merge", Some("ip")),
    ("io.k8s.api.core.v1.PodStatus", "hostIPs", "merge", Some("ip")),
    ("io.k8s.api.core.v1.PodStatus", "resourceClaimStatuses", "merge,retainKeys", Some("name")),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", "merge", Some("port")),
    ("io.k8s.api.core.v1.ServiceStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.core.v1.ServiceAccount", "secrets", "merge", Some("name")),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", "retainKeys", None),
    ("io.k8s.api.apps.v1.DeploymentStatus", "conditions", "merge", Some("type")),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", "conditions", "merge", Some("type")),
];

fn add_patch_extensions(schemas: &mut Map<String, Value>) {
    for (schema, property, strategy, key) in PATCH_EXTENSIONS {
        let Some(Value::Object(prop)) =
            schemas.get_mut(*schema).and_then(|s| s.pointer_mut(&format!("/properties/{property}")))
        else {
            continue;
        };
        prop.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = key {
            prop.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
}

/// `apps` → `AppsV1`, `""` → `CoreV1`, `rbac.authorization.k8s.io` → `RbacAuthorizationV1`: upstream's
/// operationId infix.
fn operation_infix(group: &str, version: &str) -> String {
    fn capitalize(s: &str) -> String {
        let mut c = s.chars();
        match c.next() {
            Some(f) => f.to_uppercase().chain(c).collect(),
            None => String::new(),
        }
    }
    let group = if group.is_empty() { "core" } else { group.strip_suffix(".k8s.io").unwrap_or(group) };
    let mut out: String = group.split(['.', '-']).map(capitalize).collect();
    out.push_str(&capitalize(version));
    out
}

fn query_param(name: &str, description: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "description": description, "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut p = vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed",
            "string",
        ),
        query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
            "string",
        ),
        query_param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: - Ignore - Warn (the default) - Strict",
            "string",
        ),
    ];
    if patch {
        p.push(query_param(
            "force",
            "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
            "boolean",
        ));
    }
    p
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".", "boolean"),
        ("continue", "The continue option should be set when retrieving more results from the server.", "string"),
        ("fieldSelector", "A selector to restrict the list of returned objects by their fields.", "string"),
        ("labelSelector", "A selector to restrict the list of returned objects by their labels.", "string"),
        ("limit", "limit is a maximum number of responses to return for a list call.", "integer"),
        ("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from.", "string"),
        ("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls.", "string"),
        ("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`.", "boolean"),
        ("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
        ("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.", "boolean"),
    ]
    .iter()
    .map(|(n, d, t)| query_param(n, d, t))
    .collect()
}

fn delete_params() -> Vec<Value> {
    vec![
        query_param("dryRun", "When present, indicates that modifications should not be persisted.", "string"),
        query_param("gracePeriodSeconds", "The duration in seconds before the object should be deleted.", "integer"),
        query_param(
            "propagationPolicy",
            "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
            "string",
        ),
    ]
}

fn json_content(schema: &str) -> Value {
    let s = reference(schema);
    json!({"application/json": {"schema": s}, "application/yaml": {"schema": s}})
}

struct OpSpec<'a> {
    action: &'a str,
    operation_id: String,
    description: String,
    params: Vec<Value>,
    body: Option<Value>,
    /// (code, schema)
    responses: Vec<(&'a str, &'a str)>,
    gvk: (&'a str, &'a str, &'a str),
}

fn operation(op: OpSpec<'_>) -> Value {
    let mut responses = Map::new();
    for (code, schema) in &op.responses {
        let description = match *code {
            "201" => "Created",
            "202" => "Accepted",
            _ => "OK",
        };
        responses.insert(code.to_string(), json!({"description": description, "content": json_content(schema)}));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    let (group, version, kind) = op.gvk;
    let mut o = json!({
        "description": op.description,
        "operationId": op.operation_id,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
    });
    if !op.params.is_empty() {
        o["parameters"] = Value::Array(op.params);
    }
    if let Some(body) = op.body {
        o["requestBody"] = body;
    }
    o
}

fn patch_body(strategic: bool) -> Value {
    let s = reference(PATCH);
    let mut content = Map::new();
    for ct in ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"] {
        content.insert(ct.into(), json!({"schema": s}));
    }
    if strategic {
        content.insert("application/strategic-merge-patch+json".into(), json!({"schema": s}));
    }
    json!({"content": content, "required": true})
}

fn object_body(schema: &str) -> Value {
    json!({"content": {"*/*": {"schema": reference(schema)}}, "required": true})
}

// Over 80 lines on purpose: A table of one type's OpenAPI operations (one block per verb and subresource, in upstream's
// order); splitting it would scatter what is generated for one path.
fn add_paths(paths: &mut Map<String, Value>, t: &ResourceType, kind_schema: &str) {
    let prefix = t.group_version_path();
    let infix = operation_infix(&t.group, &t.version);
    let scope = if t.namespaced { "Namespaced" } else { "" };
    let collection = if t.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
    } else {
        format!("{prefix}/{}", t.plural)
    };
    let list_schema = list_schema_name(kind_schema, t);
    let gvk = (t.group.as_str(), t.version.as_str(), t.kind.as_str());
    let has = |verb: &str| t.verbs.iter().any(|v| v == verb);
    let mut common = vec![query_param("pretty", "If 'true', then the output is pretty printed.", "string")];
    if t.namespaced {
        common.push(path_param("namespace", "object name and auth scope, such as for teams and projects"));
    }

    let mut coll = Map::new();
    if has("list") {
        coll.insert(
            "get".into(),
            operation(OpSpec {
                action: "list",
                operation_id: format!("list{infix}{scope}{}", t.kind),
                description: format!("list or watch objects of kind {}", t.kind),
                params: list_params(),
                body: None,
                responses: vec![("200", &list_schema)],
                gvk,
            }),
        );
    }
    if has("create") {
        coll.insert(
            "post".into(),
            operation(OpSpec {
                action: "post",
                operation_id: format!("create{infix}{scope}{}", t.kind),
                description: format!("create a {}", t.kind),
                params: write_params(false),
                body: Some(object_body(kind_schema)),
                responses: vec![("200", kind_schema), ("201", kind_schema), ("202", kind_schema)],
                gvk,
            }),
        );
    }
    if has("deletecollection") {
        coll.insert(
            "delete".into(),
            operation(OpSpec {
                action: "deletecollection",
                operation_id: format!("deleteCollection{infix}{scope}{}", t.kind),
                description: format!("delete collection of {}", t.kind),
                params: delete_params().into_iter().chain(list_params()).collect(),
                body: Some(object_body(DELETE_OPTIONS)),
                responses: vec![("200", STATUS)],
                gvk,
            }),
        );
    }
    if !coll.is_empty() {
        coll.insert("parameters".into(), Value::Array(common.clone()));
        paths.insert(collection.clone(), Value::Object(coll));
    }

    let mut item_params = common.clone();
    item_params.insert(0, path_param("name", &format!("name of the {}", t.kind)));
    let item = format!("{collection}/{{name}}");
    let mut it = Map::new();
    if has("get") {
        it.insert(
            "get".into(),
            operation(OpSpec {
                action: "get",
                operation_id: format!("read{infix}{scope}{}", t.kind),
                description: format!("read the specified {}", t.kind),
                params: vec![],
                body: None,
                responses: vec![("200", kind_schema)],
                gvk,
            }),
        );
    }
    if has("update") {
        it.insert(
            "put".into(),
            operation(OpSpec {
                action: "put",
                operation_id: format!("replace{infix}{scope}{}", t.kind),
                description: format!("replace the specified {}", t.kind),
                params: write_params(false),
                body: Some(object_body(kind_schema)),
                responses: vec![("200", kind_schema), ("201", kind_schema)],
                gvk,
            }),
        );
    }
    if has("patch") {
        it.insert(
            "patch".into(),
            operation(OpSpec {
                action: "patch",
                operation_id: format!("patch{infix}{scope}{}", t.kind),
                description: format!("partially update the specified {}", t.kind),
                params: write_params(true),
                body: Some(patch_body(!t.is_crd())),
                responses: vec![("200", kind_schema), ("201", kind_schema)],
                gvk,
            }),
        );
    }
    if has("delete") {
        it.insert(
            "delete".into(),
            operation(OpSpec {
                action: "delete",
                operation_id: format!("delete{infix}{scope}{}", t.kind),
                description: format!("delete a {}", t.kind),
                params: delete_params(),
                body: Some(object_body(DELETE_OPTIONS)),
                responses: vec![("200", STATUS), ("202", STATUS)],
                gvk,
            }),
        );
    }
    if !it.is_empty() {
        it.insert("parameters".into(), Value::Array(item_params.clone()));
        paths.insert(item.clone(), Value::Object(it));
    }

    let mut subs: Vec<(&str, &str, (&str, &str, &str))> = Vec::new();
    if t.subresources.status {
        subs.push(("status", kind_schema, gvk));
    }
    if t.subresources.scale.is_some() {
        subs.push(("scale", SCALE, ("autoscaling", "v1", "Scale")));
    }
    for (sub, schema, sub_gvk) in subs {
        let suffix = if sub == "status" { "Status" } else { "Scale" };
        let mut s = Map::new();
        s.insert(
            "get".into(),
            operation(OpSpec {
                action: "get",
                operation_id: format!("read{infix}{scope}{}{suffix}", t.kind),
                description: format!("read {sub} of the specified {}", t.kind),
                params: vec![],
                body: None,
                responses: vec![("200", schema)],
                gvk: sub_gvk,
            }),
        );
        s.insert(
            "put".into(),
            operation(OpSpec {
                action: "put",
                operation_id: format!("replace{infix}{scope}{}{suffix}", t.kind),
                description: format!("replace {sub} of the specified {}", t.kind),
                params: write_params(false),
                body: Some(object_body(schema)),
                responses: vec![("200", schema), ("201", schema)],
                gvk: sub_gvk,
            }),
        );
        s.insert(
            "patch".into(),
            operation(OpSpec {
                action: "patch",
                operation_id: format!("patch{infix}{scope}{}{suffix}", t.kind),
                description: format!("partially update {sub} of the specified {}", t.kind),
                params: write_params(true),
                body: Some(patch_body(!t.is_crd())),
                responses: vec![("200", schema), ("201", schema)],
                gvk: sub_gvk,
            }),
        );
        s.insert("parameters".into(), Value::Array(item_params.clone()));
        paths.insert(format!("{item}/{sub}"), Value::Object(s));
    }

    if t.namespaced && has("list") {
        let all = format!("{prefix}/{}", t.plural);
        let get = operation(OpSpec {
            action: "list",
            operation_id: format!("list{infix}{}ForAllNamespaces", t.kind),
            description: format!("list or watch objects of kind {}", t.kind),
            params: list_params(),
            body: None,
            responses: vec![("200", &list_schema)],
            gvk,
        });
        paths.insert(all, json!({"get": get, "parameters": [query_param("pretty", "If 'true', then the output is pretty printed.", "string")]}));
    }
}

#[cfg(test)]
mod tests;
