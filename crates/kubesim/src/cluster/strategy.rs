//! What differs between kinds, in the shape of the upstream registry's strategies (`rest.RESTCreateStrategy`,
//! `RESTUpdateStrategy`, `RESTDeleteStrategy`): the generic verbs (create, update, delete, the reads) ask the
//! kind's [`Strategy`] and name no kind themselves. Validation and defaulting by kind stay in [`crate::builtin`];
//! what is here needs the verb's context (the store, the registry, the timestamp of the write).

use super::*;

/// What a DELETE does to an object that no finalizer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnDelete {
    /// Removed at once.
    Remove,
    /// First updated with deletionTimestamp and a grace period of 0, then removed (Pods: upstream deletes them
    /// gracefully, and kubesim runs no containers to wait for).
    Graceful,
    /// Marked Terminating and left to the namespace controller, which removes it once it is empty (Namespaces).
    Terminate,
}

/// One kind's rules. Every method has the generic behaviour as its default.
pub(super) trait Strategy: Sync {
    /// PrepareForCreate's part that upstream runs after the field manager, so no manager owns what it sets.
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// PrepareForUpdate, before defaulting: what a write may not change through this path.
    fn prepare_for_update(&self, _new: &mut Value, _cur: &Value, _sub: Subresource) {}

    /// Canonicalize after defaulting, on create (`old` None) and update: fields the server computes.
    fn canonicalize(&self, _obj: &mut Value, _old: Option<&Value>, _now: &str) {}

    /// Create-time work that needs the store (under its lock, before validation): allocations.
    fn allocate(&self, _st: &State, _rt: &ResourceType, _obj: &mut Value) -> ApiResult<()> {
        Ok(())
    }

    /// After an object of this kind was stored (created or updated).
    fn stored(&self, _cluster: &Cluster, _object: &Value) {}

    /// After an object of this kind was removed from the store.
    fn removed(&self, _cluster: &Cluster, _name: &str) {}

    /// What a delete does once nothing holds the object.
    fn on_delete(&self) -> OnDelete {
        OnDelete::Remove
    }

    /// Whether an update that leaves a deleting object without finalizers removes it (a Namespace waits for
    /// the namespace controller instead).
    fn removed_when_finalized(&self) -> bool {
        true
    }

    /// The object as this view serves it, when it differs from the stored form (events.k8s.io Events are core
    /// Events in storage).
    fn view(&self, _stored: &Value) -> Option<Value> {
        None
    }

    /// The served object as Go's encoding of the typed object prints it (unset struct fields as null or `{}`);
    /// applied only on the way out, never to what a write computes with.
    fn encode(&self, _served: &mut Value) {}

    /// Whether a write to /status keeps the request's metadata (labels aside), as upstream's status strategy of
    /// the kind does; by default /status changes only the status, as for custom resources.
    fn status_keeps_metadata(&self) -> bool {
        false
    }

    /// The group a validation error names: the type's, unless its registry serves another group's type.
    fn error_group<'a>(&self, rt: &'a ResourceType) -> &'a str {
        &rt.group
    }
}

/// Every kind without rules of its own.
struct Generic;
impl Strategy for Generic {}

struct Namespaces;
impl Strategy for Namespaces {
    fn prepare_for_create(&self, ns: &mut Value) {
        crate::builtin::namespace_finalizer(ns);
    }

    fn prepare_for_update(&self, new: &mut Value, cur: &Value, sub: Subresource) {
        // spec.finalizers change only through /finalize.
        if sub == Subresource::Main
            && let Some(spec) = cur.get("spec")
        {
            new["spec"] = spec.clone();
        }
    }

    fn on_delete(&self) -> OnDelete {
        OnDelete::Terminate
    }

    fn removed_when_finalized(&self) -> bool {
        false
    }
}

struct CustomResourceDefinitions;
impl Strategy for CustomResourceDefinitions {
    fn canonicalize(&self, crd: &mut Value, old: Option<&Value>, now: &str) {
        crd_status(crd, old, now);
    }

    fn stored(&self, cluster: &Cluster, crd: &Value) {
        cluster.registry_mut().register_crd(crd);
    }

    fn removed(&self, cluster: &Cluster, name: &str) {
        cluster.remove_crd_types(name);
    }
}

struct Services;
impl Strategy for Services {
    fn allocate(&self, st: &State, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
        allocate_cluster_ip(st, rt, obj)?;
        crate::builtin::service_ip_families(obj);
        Ok(())
    }
}

struct Pods;
impl Strategy for Pods {
    fn on_delete(&self) -> OnDelete {
        OnDelete::Graceful
    }
}

/// events.k8s.io/v1 Events: a view of the core Events.
struct EventsView;
impl Strategy for EventsView {
    fn view(&self, stored: &Value) -> Option<Value> {
        Some(crate::builtin::events::to_events_v1(stored))
    }

    fn encode(&self, served: &mut Value) {
        crate::builtin::encoding::encode_events_v1_event(served);
    }

    /// Both Event APIs are served by core's Event registry, so its errors name the core kind.
    fn error_group<'a>(&self, _rt: &'a ResourceType) -> &'a str {
        ""
    }
}

/// core/v1 Events.
struct Events;
impl Strategy for Events {
    fn encode(&self, served: &mut Value) {
        crate::builtin::encoding::encode_core_event(served);
    }
}

struct Deployments;
impl Strategy for Deployments {
    fn encode(&self, served: &mut Value) {
        crate::builtin::encoding::encode_deployment(served);
    }

    /// Upstream's deploymentStatusStrategy resets only spec and labels: the Deployment controller writes the
    /// revision annotation with the status in one UpdateStatus.
    fn status_keeps_metadata(&self) -> bool {
        true
    }
}

/// The strategy of the kind `rt` serves.
pub(super) fn strategy(rt: &ResourceType) -> &'static dyn Strategy {
    match rt.group.as_str() {
        "" if rt.plural == "namespaces" => &Namespaces,
        "" if rt.plural == "services" => &Services,
        "" if rt.kind == "Pod" => &Pods,
        "" if rt.plural == "events" => &Events,
        "apps" if rt.plural == "deployments" => &Deployments,
        "apiextensions.k8s.io" if rt.plural == "customresourcedefinitions" => &CustomResourceDefinitions,
        _ if crate::builtin::events::is_events_view(rt) => &EventsView,
        _ => &Generic,
    }
}

const SERVICE_NET_SIZE: u32 = 1 << 20;

const SERVICE_NET: u32 = 0x0A60_0000; // 10.96.0.0/12

/// Gives a Service its clusterIP (kept when asked for one that is free) and clusterIPs.
fn allocate_cluster_ip(st: &State, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let svc_type = obj.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if svc_type == "ExternalName" {
        return Ok(());
    }
    let used: HashSet<u32> = st
        .range(&ResourceKey::of(rt), None, None)
        .iter()
        .filter_map(|(_, s)| s.pointer("/spec/clusterIP").and_then(Value::as_str).and_then(ip_to_u32))
        .collect();
    let requested = obj.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);
    let ip = match requested.as_deref() {
        Some("None") => "None".to_string(),
        Some(ip) => {
            let field_err =
                |msg: String| invalid(rt, &name, vec![Cause::new("FieldValueInvalid", msg, "spec.clusterIPs")]);
            let v = ip_to_u32(ip)
                .ok_or_else(|| field_err(format!("Invalid value: []string{{\"{ip}\"}}: must be a valid IP address")))?;
            if !(SERVICE_NET..SERVICE_NET + SERVICE_NET_SIZE).contains(&v) {
                return Err(field_err(format!(
                    "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
                )));
            }
            if used.contains(&v) {
                return Err(field_err(format!(
                    "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
                )));
            }
            ip.to_string()
        }
        None => {
            // Sequential from .10 (upstream is random; any free address is as good to a client).
            let found = (10..SERVICE_NET_SIZE - 1).map(|o| SERVICE_NET + o).find(|v| !used.contains(v));
            let v = found.ok_or_else(|| ApiError::internal("no service IPs left in 10.96.0.0/12"))?;
            u32_to_ip(v)
        }
    };
    obj["spec"]["clusterIP"] = json!(ip);
    obj["spec"]["clusterIPs"] = json!([ip]);
    if ip != "None" {
        let spec = obj["spec"].as_object_mut();
        if let Some(spec) = spec {
            spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
        }
    }
    Ok(())
}

/// The status the apiextensions controllers give a CRD: accepted names, stored versions, NamesAccepted and
/// Established (set at once: there is no discovery delay to model).
fn crd_status(crd: &mut Value, old: Option<&Value>, now: &str) {
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if names.get("singular").is_none() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names.get("listKind").is_none() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    crd["spec"]["names"] = names.clone();
    let storage: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut stored: Vec<String> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    for s in storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    let since = |t: &str| {
        old.and_then(|o| o.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(t)))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now))
    };
    crd["status"] = json!({
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since("Established")},
        ],
    });
}

fn ip_to_u32(s: &str) -> Option<u32> {
    let addr: std::net::Ipv4Addr = s.parse().ok()?;
    Some(u32::from(addr))
}

fn u32_to_ip(v: u32) -> String {
    std::net::Ipv4Addr::from(v).to_string()
}
