//! What the merge algorithms need to know about a field's type: how its lists merge (atomic, as a set, or as
//! a map keyed by some of the items' fields), the strategic-merge-patch merge key, and whether an object is
//! atomic. Built-in types answer from a table of the patch merge keys and list-map keys of the Kubernetes API;
//! custom resources from their `openAPIV3Schema` (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`),
//! with lists atomic by default as upstream.

use serde_json::Value;

use crate::resources::{Origin, ResourceType};

/// How server-side apply merges a list and names its items in managedFields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; one owner for the whole list.
    Atomic,
    /// Scalars merged as a set; items named `v:<json>`.
    Set,
    /// Objects identified by these key fields; items named `k:{...}`.
    Map(Vec<String>),
}

/// How a strategic merge patch merges a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmpList {
    Replace,
    /// `patchStrategy: merge` on a list of scalars (finalizers): union.
    MergePrimitives,
    /// `patchStrategy: merge` with `patchMergeKey`.
    MergeByKey(String),
}

/// The position of a value in an object's type, walked field by field alongside the value.
#[derive(Debug, Clone)]
pub enum Node<'a> {
    /// A field of a built-in type (or of any object's `metadata`): the kind and the field names from the
    /// root, with `[]` for each list item level.
    BuiltIn { kind: &'a str, path: Vec<String> },
    /// A CRD schema node; `root` is true for the object itself, whose `metadata` is always ObjectMeta.
    Crd { schema: &'a Value, root: bool, kind: &'a str },
    /// Nothing is known: objects merge field by field, lists are atomic.
    Unknown,
}

/// List item level in a built-in path.
const ITEM: &str = "[]";

impl<'a> Node<'a> {
    pub fn root(rt: &'a ResourceType) -> Node<'a> {
        match &rt.origin {
            Origin::BuiltIn => Node::BuiltIn { kind: &rt.kind, path: Vec::new() },
            Origin::Crd { schema, .. } if schema.is_object() => Node::Crd { schema, root: true, kind: &rt.kind },
            // No schema: still know metadata.
            Origin::Crd { .. } => Node::Crd { schema: &Value::Null, root: true, kind: &rt.kind },
        }
    }

    /// The node of field `name` of this (object) node.
    pub fn field(&self, name: &str) -> Node<'a> {
        match self {
            Node::BuiltIn { kind, path } => {
                let mut path = path.clone();
                path.push(name.to_string());
                Node::BuiltIn { kind, path }
            }
            Node::Crd { root: true, kind, .. } if name == "metadata" => {
                Node::BuiltIn { kind, path: vec!["metadata".to_string()] }
            }
            Node::Crd { schema, kind, .. } => {
                let child = schema
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                match child {
                    Some(schema) => Node::Crd { schema, root: false, kind },
                    None => Node::Unknown,
                }
            }
            Node::Unknown => Node::Unknown,
        }
    }

    /// The node of this (list) node's items.
    pub fn item(&self) -> Node<'a> {
        match self {
            Node::BuiltIn { .. } => self.field(ITEM),
            Node::Crd { schema, kind, .. } => match schema.get("items") {
                Some(schema) => Node::Crd { schema, root: false, kind },
                None => Node::Unknown,
            },
            Node::Unknown => Node::Unknown,
        }
    }

    pub fn list_type(&self) -> ListType {
        match self {
            Node::BuiltIn { kind, path } => builtin_list(kind, path).0,
            Node::Crd { schema, .. } => match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListType::Set,
                Some("map") => {
                    let keys: Vec<String> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|keys| keys.iter().filter_map(Value::as_str).map(str::to_string).collect())
                        .unwrap_or_default();
                    if keys.is_empty() { ListType::Atomic } else { ListType::Map(keys) }
                }
                _ => ListType::Atomic,
            },
            Node::Unknown => ListType::Atomic,
        }
    }

    /// The strategic merge strategy of this list (only built-ins have one).
    pub fn smp_list(&self) -> SmpList {
        match self {
            Node::BuiltIn { kind, path } => builtin_list(kind, path).1,
            _ => SmpList::Replace,
        }
    }

    /// Whether this object is owned and replaced as a whole (`x-kubernetes-map-type: atomic`,
    /// `+structType=atomic`, `+mapType=atomic`).
    pub fn is_atomic_object(&self) -> bool {
        match self {
            Node::BuiltIn { kind, path } => builtin_atomic_object(kind, path),
            Node::Crd { schema, .. } => schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            Node::Unknown => false,
        }
    }

    /// A default value for a list-map key field that items may omit (upstream fills it from the schema
    /// default before naming the item): container and Service ports default to TCP.
    pub fn key_default(&self, key: &str) -> Option<Value> {
        match (self, key) {
            (Node::BuiltIn { .. }, "protocol") => Some(Value::String("TCP".into())),
            (Node::Crd { schema, .. }, key) => {
                schema.get("items").and_then(|i| i.get("properties")).and_then(|p| p.get(key))?.get("default").cloned()
            }
            _ => None,
        }
    }
}

fn ends_with(path: &[String], suffix: &[&str]) -> bool {
    path.len() >= suffix.len() && path[path.len() - suffix.len()..].iter().zip(suffix).all(|(a, b)| a == b)
}

fn keys(names: &[&str]) -> ListType {
    ListType::Map(names.iter().map(|s| s.to_string()).collect())
}

fn by(key: &str) -> SmpList {
    SmpList::MergeByKey(key.to_string())
}

/// The lists of the built-in API that are not atomic, by where they sit. A path-suffix table covers every
/// pod template (Deployment, ReplicaSet, Pod) at once.
fn builtin_list(kind: &str, path: &[String]) -> (ListType, SmpList) {
    let Some(last) = path.last().map(String::as_str) else {
        return (ListType::Atomic, SmpList::Replace);
    };
    let parent = path.len().checked_sub(2).and_then(|i| path.get(i)).map(String::as_str);
    let containers = ["containers", "initContainers", "ephemeralContainers"];
    let in_container = path.len() >= 3 && containers.contains(&path[path.len() - 3].as_str());
    match last {
        "finalizers" if parent == Some("metadata") => (ListType::Set, SmpList::MergePrimitives),
        "ownerReferences" if parent == Some("metadata") => (keys(&["uid"]), by("uid")),
        c if containers.contains(&c) && parent == Some("spec") => (keys(&["name"]), by("name")),
        "ports" if in_container => (keys(&["containerPort", "protocol"]), by("containerPort")),
        "ports" if kind == "Service" && path == ["spec", "ports"] => (keys(&["port", "protocol"]), by("port")),
        "env" if in_container => (keys(&["name"]), by("name")),
        "volumeMounts" if in_container => (keys(&["mountPath"]), by("mountPath")),
        "volumeDevices" if in_container => (keys(&["devicePath"]), by("devicePath")),
        "resizePolicy" if in_container => (keys(&["resourceName"]), SmpList::Replace),
        "volumes" if parent == Some("spec") => (keys(&["name"]), by("name")),
        "imagePullSecrets" if parent == Some("spec") => (keys(&["name"]), by("name")),
        "hostAliases" if parent == Some("spec") => (keys(&["ip"]), by("ip")),
        "topologySpreadConstraints" if parent == Some("spec") => {
            (keys(&["topologyKey", "whenUnsatisfiable"]), by("topologyKey"))
        }
        "conditions" if parent == Some("status") => (keys(&["type"]), by("type")),
        _ => (ListType::Atomic, SmpList::Replace),
    }
}

fn builtin_atomic_object(kind: &str, path: &[String]) -> bool {
    let Some(last) = path.last().map(String::as_str) else {
        return false;
    };
    // Label selectors, Service selectors and node selectors are atomic, as are owner references and roleRef.
    // An Event's object references are ObjectReferences, which are `+structType=atomic`.
    matches!(last, "selector" | "labelSelector" | "namespaceSelector" | "nodeSelector" | "roleRef")
        || ends_with(path, &["metadata", "ownerReferences", ITEM])
        || (kind == "Event" && path.len() == 1 && matches!(last, "involvedObject" | "regarding" | "related"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;
    use serde_json::json;

    fn builtin(kind: &str) -> ResourceType {
        builtin_types().into_iter().find(|t| t.kind == kind && t.group != "events.k8s.io").unwrap()
    }

    fn at<'a>(node: Node<'a>, path: &[&str]) -> Node<'a> {
        path.iter().fold(node, |n, p| if *p == "[]" { n.item() } else { n.field(p) })
    }

    #[test]
    fn pod_template_lists_of_a_deployment() {
        let rt = builtin("Deployment");
        let spec = at(Node::root(&rt), &["spec", "template", "spec"]);
        assert_eq!(spec.field("containers").list_type(), ListType::Map(vec!["name".into()]));
        assert_eq!(spec.field("containers").smp_list(), SmpList::MergeByKey("name".into()));
        let c = spec.field("containers").item();
        assert_eq!(c.field("ports").list_type(), ListType::Map(vec!["containerPort".into(), "protocol".into()]));
        assert_eq!(c.field("ports").smp_list(), SmpList::MergeByKey("containerPort".into()));
        assert_eq!(c.field("env").smp_list(), SmpList::MergeByKey("name".into()));
        assert_eq!(c.field("volumeMounts").smp_list(), SmpList::MergeByKey("mountPath".into()));
        assert_eq!(c.field("args").list_type(), ListType::Atomic);
        assert_eq!(spec.field("volumes").smp_list(), SmpList::MergeByKey("name".into()));
        assert_eq!(spec.field("tolerations").smp_list(), SmpList::Replace);
        assert!(at(Node::root(&rt), &["spec", "selector"]).is_atomic_object());
        assert!(!at(Node::root(&rt), &["spec", "template", "metadata", "labels"]).is_atomic_object());
    }

    #[test]
    fn service_ports_and_metadata_lists() {
        let rt = builtin("Service");
        let root = Node::root(&rt);
        assert_eq!(
            at(root.clone(), &["spec", "ports"]).list_type(),
            ListType::Map(vec!["port".into(), "protocol".into()])
        );
        assert_eq!(at(root.clone(), &["spec", "ports"]).smp_list(), SmpList::MergeByKey("port".into()));
        assert_eq!(at(root.clone(), &["metadata", "finalizers"]).list_type(), ListType::Set);
        assert_eq!(at(root.clone(), &["metadata", "ownerReferences"]).smp_list(), SmpList::MergeByKey("uid".into()));
        assert!(at(root.clone(), &["metadata", "ownerReferences", "[]"]).is_atomic_object());
        assert_eq!(at(root, &["status", "conditions"]).list_type(), ListType::Map(vec!["type".into()]));
    }

    #[test]
    fn crd_lists_follow_the_schema_and_default_to_atomic() {
        let mut rt = builtin("Deployment");
        rt.kind = "Microservice".into();
        rt.origin = Origin::Crd {
            crd_name: "microservices.platform.example.com".into(),
            schema: json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "aliases": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "routes": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["host", "port"],
                        "items": {"type": "object", "properties": {
                            "host": {"type": "string"}, "port": {"type": "integer", "default": 80}}}},
                    "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
                    "env": {"type": "object", "additionalProperties": {"type": "object",
                        "x-kubernetes-map-type": "atomic"}}}},
                "status": {"type": "object", "properties": {
                    "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"], "items": {"type": "object"}}}}}}),
            printer_columns: vec![],
            selectable_fields: vec![],
            storage: true,
        };
        let root = Node::root(&rt);
        assert_eq!(at(root.clone(), &["spec", "tags"]).list_type(), ListType::Atomic);
        assert_eq!(at(root.clone(), &["spec", "aliases"]).list_type(), ListType::Set);
        let routes = at(root.clone(), &["spec", "routes"]);
        assert_eq!(routes.list_type(), ListType::Map(vec!["host".into(), "port".into()]));
        assert_eq!(routes.key_default("port"), Some(json!(80)));
        assert_eq!(routes.smp_list(), SmpList::Replace);
        assert!(at(root.clone(), &["spec", "selector"]).is_atomic_object());
        assert!(at(root.clone(), &["spec", "env", "anything"]).is_atomic_object());
        assert_eq!(at(root.clone(), &["status", "conditions"]).list_type(), ListType::Map(vec!["type".into()]));
        // metadata is ObjectMeta even though the CRD schema does not describe it.
        assert_eq!(at(root.clone(), &["metadata", "finalizers"]).list_type(), ListType::Set);
        assert_eq!(at(root, &["spec", "undeclared"]).list_type(), ListType::Atomic);
    }
}
