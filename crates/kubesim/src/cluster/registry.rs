//! The served types: the built-ins and, at run time, the versions CRDs define.

use std::sync::Arc;

use serde_json::Value;

use crate::resources::{Origin, ResourceRef, ResourceType, ScalePaths, Subresources, builtin_types};

pub struct Registry {
    types: Vec<ResourceRef>,
}

impl Registry {
    pub fn new() -> Self {
        Registry { types: builtin_types().into_iter().map(Arc::new).collect() }
    }

    pub fn all(&self) -> Vec<ResourceRef> {
        self.types.clone()
    }

    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceRef> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural).cloned()
    }

    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> Option<ResourceRef> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.types.iter().find(|t| t.group == group && t.version == version && t.kind == kind).cloned()
    }

    /// Replaces the types of one CRD with those of its current definition.
    pub fn register_crd(&mut self, crd: &Value) {
        let name = crd_name(crd);
        self.types.retain(|t| !matches!(&t.origin, Origin::Crd { crd_name, .. } if *crd_name == name));
        self.types.extend(crd_types(crd).into_iter().map(Arc::new));
    }

    pub fn unregister_crd(&mut self, name: &str) -> Vec<ResourceRef> {
        let (gone, kept): (Vec<_>, Vec<_>) =
            self.types.drain(..).partition(|t| matches!(&t.origin, Origin::Crd { crd_name, .. } if crd_name == name));
        self.types = kept;
        gone
    }
}

fn crd_name(crd: &Value) -> String {
    crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

/// One ResourceType per served version of a CRD.
pub fn crd_types(crd: &Value) -> Vec<ResourceType> {
    let group = str_at(crd, "/spec/group").unwrap_or_default();
    let kind = str_at(crd, "/spec/names/kind").unwrap_or_default();
    let plural = str_at(crd, "/spec/names/plural").unwrap_or_default();
    let singular = str_at(crd, "/spec/names/singular").map(String::from).unwrap_or_else(|| kind.to_lowercase());
    let list_kind = str_at(crd, "/spec/names/listKind").map(String::from).unwrap_or_else(|| format!("{kind}List"));
    let namespaced = str_at(crd, "/spec/scope") != Some("Cluster");
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .map(|v| {
            let scale = v.pointer("/subresources/scale").map(|s| ScalePaths {
                spec_replicas_path: str_at(s, "/specReplicasPath").unwrap_or(".spec.replicas").to_string(),
                status_replicas_path: str_at(s, "/statusReplicasPath").unwrap_or(".status.replicas").to_string(),
                label_selector_path: str_at(s, "/labelSelectorPath").map(String::from),
            });
            ResourceType {
                group: group.to_string(),
                version: str_at(v, "/name").unwrap_or_default().to_string(),
                kind: kind.to_string(),
                list_kind: list_kind.clone(),
                plural: plural.to_string(),
                singular: singular.clone(),
                short_names: strings_at(crd, "/spec/names/shortNames"),
                categories: strings_at(crd, "/spec/names/categories"),
                namespaced,
                verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                subresources: Subresources { status: v.pointer("/subresources/status").is_some(), scale },
                origin: Origin::Crd {
                    crd_name: crd_name(crd),
                    schema: v.pointer("/schema/openAPIV3Schema").cloned().unwrap_or(Value::Null),
                    printer_columns: v
                        .get("additionalPrinterColumns")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    selectable_fields: v
                        .get("selectableFields")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                                .map(|p| p.trim_start_matches('.').to_string())
                                .collect()
                        })
                        .unwrap_or_default(),
                    storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                },
            }
        })
        .collect()
}
