//! Discovery documents: /version, legacy discovery (/api, /api/v1, /apis, /apis/G, /apis/G/V) and aggregated
//! discovery (apidiscovery.k8s.io/v2), built from the served resource types. Pure functions: the HTTP layer
//! picks the document and the content type.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use crate::resources::{Origin, ResourceRef, ResourceType};

/// The reply content type of aggregated discovery; kubectl only accepts the aggregated form under it.
pub const AGGREGATED_CONTENT_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The Kubernetes release the emulator claims to be: the one the conformance corpus is recorded against
/// (k8s-openapi's newest feature is still v1_34; the types used here are unchanged since).
pub const GIT_VERSION: &str = "v1.37.2";

const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// `/version`: a version.Info as a 1.37 server reports it (compatibility is one minor back).
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-11-11T00:00:00Z",
        "goVersion": "go1.24.9",
        "compiler": "gc",
        "platform": format!("{}/{}", go_os(), go_arch()),
    })
}

fn go_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        os => os,
    }
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        arch => arch,
    }
}

/// `/api`: the legacy core group's APIVersions.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `/api/v1`.
pub fn core_resource_list(types: &[ResourceRef]) -> Value {
    resource_list_doc(types, "", "v1")
}

/// `/apis`: every named group with its versions, the preferred one first.
pub fn group_list(types: &[ResourceRef]) -> Value {
    let groups: Vec<Value> = groups(types).iter().map(|(name, versions)| group_doc(name, versions)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`; None when no type of that group is served.
pub fn group(types: &[ResourceRef], group: &str) -> Option<Value> {
    if group.is_empty() {
        return None;
    }
    let (name, versions) = groups(types).into_iter().find(|(name, _)| name == group)?;
    let mut doc = group_doc(&name, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/apis/GROUP/VERSION` (or the core group with `group == ""`); None when nothing is served there.
pub fn resource_list(types: &[ResourceRef], group: &str, version: &str) -> Option<Value> {
    if !types.iter().any(|t| t.group == group && t.version == version) {
        return None;
    }
    let mut doc = resource_list_doc(types, group, version);
    if !group.is_empty() {
        // Upstream's named-group lists carry apiVersion; the core list does not.
        doc["apiVersion"] = json!("v1");
    }
    Some(doc)
}

/// Aggregated discovery (apidiscovery.k8s.io/v2 APIGroupDiscoveryList): `/api` when `legacy_core`, else `/apis`.
pub fn aggregated(types: &[ResourceRef], legacy_core: bool) -> Value {
    let items: Vec<Value> = if legacy_core {
        vec![aggregated_group(types, "", &["v1".to_string()])]
    } else {
        groups(types).iter().map(|(name, versions)| aggregated_group(types, name, versions)).collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

fn aggregated_group(types: &[ResourceRef], group: &str, versions: &[String]) -> Value {
    let mut metadata = Map::new();
    if !group.is_empty() {
        metadata.insert("name".into(), json!(group));
    }
    metadata.insert("creationTimestamp".into(), Value::Null);
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = in_group_version(types, group, v).map(aggregated_resource).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": metadata, "versions": versions})
}

fn aggregated_resource(t: &ResourceType) -> Value {
    let mut r = Map::new();
    r.insert("resource".into(), json!(t.plural));
    r.insert("responseKind".into(), json!({"group": t.group, "version": t.version, "kind": t.kind}));
    r.insert("scope".into(), json!(if t.namespaced { "Namespaced" } else { "Cluster" }));
    r.insert("singularResource".into(), json!(t.singular));
    r.insert("verbs".into(), json!(t.verbs));
    if !t.short_names.is_empty() {
        r.insert("shortNames".into(), json!(t.short_names));
    }
    if !t.categories.is_empty() {
        r.insert("categories".into(), json!(t.categories));
    }
    let subresources: Vec<Value> = subresources(t)
        .into_iter()
        .map(|(name, group, version, kind)| {
            json!({
                "subresource": name,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": SUBRESOURCE_VERBS,
            })
        })
        .collect();
    if !subresources.is_empty() {
        r.insert("subresources".into(), Value::Array(subresources));
    }
    Value::Object(r)
}

/// The subresources a type serves as (name, response group, version, kind), in upstream's (alphabetical) order.
fn subresources(t: &ResourceType) -> Vec<(&'static str, String, String, String)> {
    let mut out = Vec::new();
    if t.subresources.scale.is_some() {
        out.push(("scale", "autoscaling".to_string(), "v1".to_string(), "Scale".to_string()));
    }
    if t.subresources.status {
        out.push(("status", t.group.clone(), t.version.clone(), t.kind.clone()));
    }
    out
}

fn resource_list_doc(types: &[ResourceRef], group: &str, version: &str) -> Value {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for t in in_group_version(types, group, version) {
        let mut r = Map::new();
        r.insert("name".into(), json!(t.plural));
        r.insert("singularName".into(), json!(t.singular));
        r.insert("namespaced".into(), json!(t.namespaced));
        r.insert("kind".into(), json!(t.kind));
        r.insert("verbs".into(), json!(t.verbs));
        if !t.short_names.is_empty() {
            r.insert("shortNames".into(), json!(t.short_names));
        }
        if !t.categories.is_empty() {
            r.insert("categories".into(), json!(t.categories));
        }
        if let Some(hash) = storage_version_hash(types, t) {
            r.insert("storageVersionHash".into(), json!(hash));
        }
        entries.push((t.plural.clone(), Value::Object(r)));
        for (sub, sub_group, sub_version, kind) in subresources(t) {
            let name = format!("{}/{sub}", t.plural);
            let mut s = Map::new();
            s.insert("name".into(), json!(name));
            // Upstream leaves singularName empty on subresources; Kopf reads it as-is.
            s.insert("singularName".into(), json!(""));
            s.insert("namespaced".into(), json!(t.namespaced));
            if sub_group != t.group || sub_version != t.version {
                s.insert("group".into(), json!(sub_group));
                s.insert("version".into(), json!(sub_version));
            }
            s.insert("kind".into(), json!(kind));
            s.insert("verbs".into(), json!(SUBRESOURCE_VERBS));
            entries.push((name, Value::Object(s)));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    json!({
        "kind": "APIResourceList",
        "groupVersion": group_version,
        "resources": entries.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    })
}

/// Upstream's `discovery.StorageVersionHash` of the group/version/kind a type is stored as: the first 8 bytes
/// of its SHA-256, base64. Only stored types have one (not the create-only reviews).
fn storage_version_hash(types: &[ResourceRef], t: &ResourceType) -> Option<String> {
    use base64::Engine as _;
    if !t.verbs.iter().any(|v| v == "list") {
        return None;
    }
    let (group, version) = match &t.origin {
        // events.k8s.io Events are core Events in storage.
        Origin::BuiltIn if t.group == "events.k8s.io" && t.kind == "Event" => ("", "v1"),
        Origin::BuiltIn => (t.group.as_str(), t.version.as_str()),
        // A custom resource is stored in its CRD's storage version, whichever version is served.
        Origin::Crd { .. } => {
            let storage = types.iter().map(|x| x.as_ref()).find(|x| {
                x.group == t.group && x.plural == t.plural && matches!(x.origin, Origin::Crd { storage: true, .. })
            })?;
            (t.group.as_str(), storage.version.as_str())
        }
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{group}/{version}/{}", t.kind).as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
}

fn in_group_version<'a>(
    types: &'a [ResourceRef],
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'a ResourceType> + 'a {
    types.iter().map(|t| t.as_ref()).filter(move |t| t.group == group && t.version == version)
}

/// Named groups in order of first appearance (built-ins first, as the registry lists them), each with its
/// versions sorted by Kubernetes version priority (the preferred version first).
fn groups(types: &[ResourceRef]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) => {
                if !versions.contains(&t.version) {
                    versions.push(t.version.clone());
                }
            }
            None => out.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by(|a, b| compare_kube_versions(a, b));
    }
    out
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    let mut doc = json!({"name": name, "versions": versions.iter().map(gv).collect::<Vec<_>>()});
    if let Some(first) = versions.first() {
        doc["preferredVersion"] = gv(first);
    }
    doc
}

/// A version like `v2beta1` split into (major, stability, minor); stability 2 = GA, 1 = beta, 0 = alpha.
fn parse_kube_version(v: &str) -> Option<(u64, u8, u64)> {
    let rest = v.strip_prefix('v')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let (major, tail) = rest.split_at(digits);
    if major.is_empty() || major.starts_with('0') {
        return None;
    }
    let major: u64 = major.parse().ok()?;
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else {
        return None;
    };
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) || minor.starts_with('0') {
        return None;
    }
    Some((major, stability, minor.parse().ok()?))
}

/// Kubernetes' version priority: GA before beta before alpha, higher numbers first, then any non-Kubernetes-like
/// versions alphabetically.
pub fn compare_kube_versions(a: &str, b: &str) -> Ordering {
    match (parse_kube_version(a), parse_kube_version(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::resources::{Origin, ScalePaths, Subresources, builtin_types};

    fn builtins() -> Vec<ResourceRef> {
        builtin_types().into_iter().map(Arc::new).collect()
    }

    fn crd_type(version: &str) -> ResourceRef {
        Arc::new(ResourceType {
            group: "platform.example.com".into(),
            version: version.into(),
            kind: "Microservice".into(),
            list_kind: "MicroserviceList".into(),
            plural: "microservices".into(),
            singular: "microservice".into(),
            short_names: vec!["ms".into()],
            categories: vec!["all".into()],
            namespaced: true,
            verbs: ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            subresources: Subresources {
                status: true,
                scale: Some(ScalePaths {
                    spec_replicas_path: ".spec.replicas".into(),
                    status_replicas_path: ".status.replicas".into(),
                    label_selector_path: None,
                }),
            },
            origin: Origin::Crd {
                crd_name: "microservices.platform.example.com".into(),
                schema: Value::Null,
                printer_columns: vec![],
                selectable_fields: vec![],
                storage: version == "v1alpha1",
            },
        })
    }

    fn names(list: &Value) -> Vec<&str> {
        list["resources"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect()
    }

    #[test]
    fn version_reports_kubernetes_1_37() {
        let v = version();
        assert_eq!(v["major"], "1");
        assert_eq!(v["minor"], "37");
        assert!(v["gitVersion"].as_str().is_some_and(|s| s.starts_with("v1.37.")));
        assert!(v["platform"].as_str().is_some_and(|s| s.contains('/')));
    }

    #[test]
    fn storage_version_hashes_are_upstreams() {
        let core = core_resource_list(&builtins());
        let cm = core["resources"].as_array().into_iter().flatten().find(|r| r["name"] == "configmaps");
        assert_eq!(cm.map(|r| &r["storageVersionHash"]), Some(&json!("qFsyl6wFWjQ=")));
    }

    #[test]
    fn core_list_has_entries_and_status_subresources() {
        let list = core_resource_list(&builtins());
        assert_eq!(list["kind"], "APIResourceList");
        assert_eq!(list["groupVersion"], "v1");
        let n = names(&list);
        assert!(n.contains(&"pods") && n.contains(&"pods/status") && n.contains(&"configmaps"));
        assert!(!n.contains(&"configmaps/status"));
        let mut sorted = n.clone();
        sorted.sort();
        assert_eq!(n, sorted, "upstream lists resources alphabetically");
        let pods = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["singularName"], "pod");
        assert_eq!(pods["namespaced"], true);
        assert_eq!(pods["kind"], "Pod");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        let ns = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "namespaces").unwrap();
        assert_eq!(ns["namespaced"], false);
        // Deployments are not core.
        assert!(!n.contains(&"deployments"));
    }

    #[test]
    fn apps_list_has_scale_as_autoscaling_v1() {
        let list = resource_list(&builtins(), "apps", "v1").unwrap();
        assert_eq!(list["groupVersion"], "apps/v1");
        let scale = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "deployments/scale").unwrap();
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["version"], "v1");
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["singularName"], "");
        assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
        let status = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "deployments/status").unwrap();
        assert_eq!(status["kind"], "Deployment");
        assert!(status.get("group").is_none());
    }

    #[test]
    fn unknown_group_version_is_none() {
        assert!(resource_list(&builtins(), "apps", "v2").is_none());
        assert!(resource_list(&builtins(), "nope.example.com", "v1").is_none());
        assert!(group(&builtins(), "nope.example.com").is_none());
        assert!(group(&builtins(), "").is_none());
    }

    #[test]
    fn group_list_prefers_ga_over_beta_and_alpha() {
        let mut types = builtins();
        types.push(crd_type("v1alpha1"));
        types.push(crd_type("v1"));
        types.push(crd_type("v1beta1"));
        let list = group_list(&types);
        assert_eq!(list["kind"], "APIGroupList");
        let groups = list["groups"].as_array().unwrap();
        assert!(groups.iter().all(|g| g["name"] != ""), "the core group is not in /apis");
        let apps = groups.iter().find(|g| g["name"] == "apps").unwrap();
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
        let ours = groups.iter().find(|g| g["name"] == "platform.example.com").unwrap();
        let versions: Vec<&str> =
            ours["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
        assert_eq!(versions, ["v1", "v1beta1", "v1alpha1"]);
        assert_eq!(ours["preferredVersion"]["version"], "v1");
        let g = group(&types, "platform.example.com").unwrap();
        assert_eq!(g["kind"], "APIGroup");
        assert_eq!(g["preferredVersion"]["groupVersion"], "platform.example.com/v1");
    }

    #[test]
    fn crd_types_show_up_in_their_group_version() {
        let mut types = builtins();
        types.push(crd_type("v1alpha1"));
        let list = resource_list(&types, "platform.example.com", "v1alpha1").unwrap();
        assert_eq!(names(&list), ["microservices", "microservices/scale", "microservices/status"]);
        let ms = &list["resources"][0];
        assert_eq!(ms["shortNames"], json!(["ms"]));
        assert_eq!(ms["kind"], "Microservice");
    }

    #[test]
    fn aggregated_core_and_groups() {
        let mut types = builtins();
        types.push(crd_type("v1alpha1"));
        let core = aggregated(&types, true);
        assert_eq!(core["kind"], "APIGroupDiscoveryList");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let items = core["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        let v1 = &items[0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        let pods = v1["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "pods").unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["responseKind"], json!({"group": "", "version": "v1", "kind": "Pod"}));
        assert_eq!(pods["subresources"][0]["subresource"], "status");

        let apis = aggregated(&types, false);
        let groups = apis["items"].as_array().unwrap();
        assert!(groups.iter().all(|g| g["metadata"]["name"].is_string()));
        let ours = groups.iter().find(|g| g["metadata"]["name"] == "platform.example.com").unwrap();
        let ms = &ours["versions"][0]["resources"][0];
        assert_eq!(ms["resource"], "microservices");
        assert_eq!(ms["shortNames"], json!(["ms"]));
        assert_eq!(ms["categories"], json!(["all"]));
        let subs: Vec<&str> =
            ms["subresources"].as_array().unwrap().iter().map(|s| s["subresource"].as_str().unwrap()).collect();
        assert_eq!(subs, ["scale", "status"]);
        assert_eq!(ms["subresources"][0]["responseKind"]["group"], "autoscaling");
        let crds = groups.iter().find(|g| g["metadata"]["name"] == "apiextensions.k8s.io").unwrap();
        assert_eq!(crds["versions"][0]["resources"][0]["scope"], "Cluster");
    }

    #[test]
    fn version_priority_matches_kubernetes() {
        let mut v = vec!["v1alpha1", "foo", "v2", "v1", "v11alpha2", "v10beta3", "v1beta2", "v12alpha1", "bar"];
        v.sort_by(|a, b| compare_kube_versions(a, b));
        assert_eq!(v, ["v2", "v1", "v10beta3", "v1beta2", "v12alpha1", "v11alpha2", "v1alpha1", "bar", "foo"]);
    }

    #[test]
    fn api_versions_carries_the_server_address() {
        let a = api_versions("127.0.0.1:1234");
        assert_eq!(a["kind"], "APIVersions");
        assert_eq!(a["versions"], json!(["v1"]));
        assert_eq!(a["serverAddressByClientCIDRs"][0]["serverAddress"], "127.0.0.1:1234");
    }
}
