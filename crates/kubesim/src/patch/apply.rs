//! Server-side apply: the applied configuration is merged into the live object by the type's list and map
//! semantics, the applier owns exactly what it applied, a different value on a field another manager owns is a
//! conflict unless forced, and fields the applier applied last time but no longer does are removed when no
//! other manager owns them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fields::{FieldSet, Path, applied_set, changes, list_elements, path_string};
use super::managed::{Entry, Operation, created_fields, decode, owned_view, store};
use super::schema_info::{ListType, Node};
use crate::error::{ApiError, ApiResult, Cause};
use crate::resources::ResourceType;

/// One apply request (`PATCH` with `application/apply-patch+yaml`, the body decoded to JSON).
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    pub rt: &'a ResourceType,
    /// The stored object; None when the apply creates it.
    pub live: Option<&'a Value>,
    pub applied: &'a Value,
    pub manager: &'a str,
    pub force: bool,
    /// `Some("status")` for an apply to /status.
    pub subresource: Option<&'a str>,
    /// The time recorded in the applier's managedFields entry (RFC 3339).
    pub now: &'a str,
}

// Over 80 lines on purpose: it follows upstream's field manager step by step (merge, conflicts, the applier's entry,
// the other managers' entries), and the order of those steps is the point.
/// Returns the new object with `metadata.managedFields` updated. Identity metadata (uid, resourceVersion,
/// creationTimestamp, generation) is the live object's, or absent on create: the caller sets it.
pub fn server_side_apply(req: ApplyRequest) -> ApiResult<Value> {
    let rt = req.rt;
    check_request(&req)?;

    let node = Node::root(rt);
    let config = scoped_config(rt, req.subresource, &strip_nulls(req.applied));
    let live = req.live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let mut merged = merge(&live, &config, &node);

    let live_view = owned_view(rt, req.subresource, &live);
    let changed = changes(&live_view, &owned_view(rt, req.subresource, &merged), &node).changed;
    let applied_fields = applied_set(&owned_view(rt, req.subresource, &config), &node);

    let api_version = rt.api_version();
    let is_applier = |e: &Entry| e.same_manager(req.manager, Operation::Apply, &api_version, req.subresource);
    let mut entries = req.live.map(decode).unwrap_or_default();
    if entries.is_empty() && req.live.is_some() {
        // Upstream gives the fields of an object nobody manages yet to "before-first-apply", so an applier
        // still conflicts with values it did not set.
        entries.push(Entry {
            manager: BEFORE_FIRST_APPLY.to_string(),
            operation: Operation::Update,
            api_version: api_version.clone(),
            time: Some(req.now.to_string()),
            subresource: req.subresource.map(str::to_string),
            fields: created_fields(rt, req.subresource, &live),
        });
    }

    take_or_refuse(&mut entries, &changed, req.force, is_applier)?;

    let before = entries.clone();
    let last_applied = match entries.iter_mut().find(|e| is_applier(e)) {
        Some(e) => {
            let last = std::mem::replace(&mut e.fields, applied_fields);
            e.api_version = api_version.clone();
            last
        }
        None => {
            entries.push(Entry {
                manager: req.manager.to_string(),
                operation: Operation::Apply,
                api_version: api_version.clone(),
                time: None,
                subresource: req.subresource.map(str::to_string),
                fields: applied_fields,
            });
            FieldSet::default()
        }
    };
    let mut owned = FieldSet::default();
    for e in &entries {
        owned.union(&e.fields);
    }
    prune(&mut merged, &last_applied, Some(&owned), &node, &[]);

    if req.manager == "kubectl" && req.subresource.is_none() {
        sync_last_applied(&mut merged, req.applied);
    }

    let same_object = without_managed_fields(&merged) == without_managed_fields(&live);
    // Upstream's managedFieldsUpdater stamps the applier's time only when the apply changed the object: an
    // applier whose values were there already keeps its previous time, or has none (and then sorts first).
    if (req.live.is_none() || !same_object)
        && let Some(e) = entries.iter_mut().find(|e| is_applier(e))
    {
        e.time = Some(req.now.to_string());
    }
    let only_times_differ = entries.len() == before.len()
        && entries
            .iter()
            .zip(&before)
            .all(|(a, b)| Entry { time: None, ..a.clone() } == Entry { time: None, ..b.clone() });
    if req.live.is_some() && same_object && only_times_differ {
        // A no-op apply keeps the stored managedFields (upstream ignores timestamp-only changes) so the
        // write stays a no-op.
        return Ok(live);
    }
    store(&mut merged, entries);
    Ok(merged)
}

/// Upstream's checks of an apply request before any merge: the options, the body's type and metadata, the
/// resourceVersion precondition, and that a subresource cannot create its object.
fn check_request(req: &ApplyRequest) -> ApiResult<()> {
    let rt = req.rt;
    if req.manager.is_empty() {
        // Upstream validates PatchOptions before anything else, and answers 422.
        return Err(ApiError::invalid(
            "PatchOptions",
            "meta.k8s.io",
            "",
            vec![Cause::new("FieldValueRequired", "Required value: is required for apply patch", "fieldManager")],
        ));
    }
    let Value::Object(applied) = req.applied else {
        return Err(ApiError::bad_request("error decoding YAML: the applied configuration must be an object"));
    };
    check_type(rt, applied)?;
    let meta = applied.get("metadata").and_then(Value::as_object);
    if meta.and_then(|m| m.get("managedFields")).is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    if let Some(rv) = meta.and_then(|m| m.get("resourceVersion")).and_then(Value::as_str).filter(|rv| !rv.is_empty()) {
        let live_rv = req.live.and_then(|l| l.pointer("/metadata/resourceVersion")).and_then(Value::as_str);
        if live_rv != Some(rv) {
            let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default();
            return Err(ApiError::conflict(&rt.plural, &rt.group, name));
        }
    }

    if req.live.is_none() && req.subresource.is_some() {
        // A subresource cannot create its object.
        let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default();
        return Err(ApiError::not_found(&rt.plural, &rt.group, name));
    }

    Ok(())
}

/// Fields the apply changes that other managers own: taken from them when forced, else a conflict naming each.
fn take_or_refuse(
    entries: &mut [Entry],
    changed: &FieldSet,
    force: bool,
    is_applier: impl Fn(&Entry) -> bool,
) -> ApiResult<()> {
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in entries.iter_mut().filter(|e| !is_applier(e)) {
        let paths = e.fields.intersection(changed);
        if paths.is_empty() {
            continue;
        }
        if force {
            let mut taken = FieldSet::default();
            for p in &paths {
                taken.insert(p);
            }
            e.fields.remove_members(&taken);
        } else {
            conflicts.extend(paths.into_iter().map(|p| (e.describe(), p)));
        }
    }
    if conflicts.is_empty() { Ok(()) } else { Err(conflict_error(conflicts)) }
}

const BEFORE_FIRST_APPLY: &str = "before-first-apply";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `kubectl apply --server-side` keeps client-side apply's annotation current when the object has one, as
/// upstream's last-applied updater does: the applied object without the annotation, encoded as JSON.
fn sync_last_applied(merged: &mut Value, applied: &Value) {
    let Some(annotations) = merged.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut) else {
        return;
    };
    if !annotations.contains_key(LAST_APPLIED) {
        return;
    }
    let mut config = applied.clone();
    if let Some(Value::Object(a)) = config.pointer_mut("/metadata/annotations") {
        a.remove(LAST_APPLIED);
    }
    annotations.insert(LAST_APPLIED.to_string(), Value::String(format!("{config}\n")));
}

fn check_type(rt: &ResourceType, applied: &Map<String, Value>) -> ApiResult<()> {
    match applied.get("apiVersion").and_then(Value::as_str).unwrap_or_default() {
        v if v != rt.api_version() => {
            return Err(ApiError::bad_request(format!(
                "Incorrect version specified in apply patch. Specified patch version: {v}, expected: {}",
                rt.api_version()
            )));
        }
        _ => {}
    }
    match applied.get("kind").and_then(Value::as_str) {
        // Upstream finds no type for the applied group/version/kind; the text prints it as Go's GVK String().
        None => {
            let (group, version) = rt
                .api_version()
                .split_once('/')
                .map_or_else(|| (String::new(), rt.api_version()), |(g, v)| (g.to_string(), v.to_string()));
            Err(ApiError::bad_request(format!("invalid object type: {group}/{version}, Kind=")))
        }
        Some(k) if k != rt.kind => Err(ApiError::bad_request(format!(
            "the kind in the applied configuration ({k}) does not match the kind of the resource ({})",
            rt.kind
        ))),
        Some(_) => Ok(()),
    }
}

/// The applied configuration without fields the applier cannot set: nulls (an unset field), server-set
/// metadata, `status` on the main resource of a type with a status subresource, everything but `status`
/// (and the object's identity) on /status.
fn scoped_config(rt: &ResourceType, subresource: Option<&str>, applied: &Value) -> Value {
    let mut config = applied.as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(meta)) = config.get_mut("metadata") {
        for f in ["uid", "resourceVersion", "generation", "creationTimestamp", "selfLink", "managedFields"] {
            meta.remove(f);
        }
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
    }
    match subresource {
        None if rt.subresources.status => {
            config.remove("status");
        }
        Some("status") => {
            config.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(Value::Object(meta)) = config.get_mut("metadata") {
                meta.retain(|k, _| k == "name" || k == "namespace");
            }
        }
        _ => {}
    }
    Value::Object(config)
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), strip_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    obj
}

/// Merges the applied configuration into the live object: granular objects field by field, list maps and
/// sets item by item (the applied order wins for the items both have, live-only items keep their place),
/// anything atomic replaced.
fn merge(live: &Value, applied: &Value, node: &Node) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) if !node.is_atomic_object() => {
            let mut out = l.clone();
            for (k, av) in a {
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, av, &node.field(k)),
                    None => av.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => match (list_elements(l, node), list_elements(a, node)) {
            (Some(le), Some(ae)) => Value::Array(merge_list(l, &le, a, &ae, &node.item())),
            _ => applied.clone(),
        },
        _ => applied.clone(),
    }
}

/// Structured-merge-diff's list merge: walk both lists, taking shared items in the applied order.
fn merge_list(l: &[Value], le: &[String], a: &[Value], ae: &[String], item: &Node) -> Vec<Value> {
    let live_at: BTreeMap<&str, usize> = le.iter().enumerate().map(|(i, e)| (e.as_str(), i)).collect();
    let applied_has = |e: &str| ae.iter().any(|x| x == e);
    let mut shared = ae.iter().filter(|e| live_at.contains_key(e.as_str()));
    let mut next_shared = shared.next();
    let mut done: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(l.len().max(a.len()));
    let (mut li, mut ai) = (0, 0);
    let merge_item = |e: &str, av: &Value| match live_at.get(e) {
        Some(&i) => merge(&l[i], av, item),
        None => av.clone(),
    };
    while li < l.len() || ai < a.len() {
        if li < l.len() && ai < a.len() {
            if le[li] == ae[ai] {
                out.push(merge(&l[li], &a[ai], item));
                done.push(&le[li]);
                if next_shared == Some(&le[li]) {
                    next_shared = shared.next();
                }
                li += 1;
                ai += 1;
                continue;
            }
            if applied_has(&le[li]) && next_shared.is_some_and(|n| *n != le[li]) {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            if !applied_has(&le[li]) {
                out.push(l[li].clone());
                li += 1;
                continue;
            }
            if done.contains(&le[li].as_str()) {
                li += 1;
                continue;
            }
        }
        if ai < a.len() {
            if done.contains(&ae[ai].as_str()) {
                ai += 1;
                continue;
            }
            out.push(merge_item(&ae[ai], &a[ai]));
            done.push(&ae[ai]);
            if next_shared == Some(&ae[ai]) {
                next_shared = shared.next();
            }
            ai += 1;
        } else {
            // Only live items the applied list also has remain; they were merged above.
            li += 1;
        }
    }
    out
}

/// Removes what the applier applied last time and nobody owns now. Key fields of a kept list item stay.
fn prune(value: &mut Value, last: &FieldSet, owned: Option<&FieldSet>, node: &Node, keys: &[String]) {
    let owns_any = |element: &str| owned.and_then(|o| o.child(element)).is_some_and(|c| !c.is_empty());
    match value {
        Value::Object(m) if !node.is_atomic_object() => {
            for (element, last_child) in &last.children {
                let Some(name) = element.strip_prefix("f:") else { continue };
                if keys.iter().any(|k| k == name) {
                    continue;
                }
                if last_child.member && !owns_any(element) {
                    m.remove(name);
                } else if let Some(v) = m.get_mut(name) {
                    prune(v, last_child, owned.and_then(|o| o.child(element)), &node.field(name), &[]);
                    // Upstream's removal leaves no empty map or list behind (it becomes null, then absent).
                    if is_empty_container(v) {
                        m.remove(name);
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(elements) = list_elements(items, node) else { return };
            let keys = match node.list_type() {
                ListType::Map(keys) => keys,
                _ => Vec::new(),
            };
            let item = node.item();
            let mut keep = Vec::with_capacity(items.len());
            for (mut v, element) in std::mem::take(items).into_iter().zip(&elements) {
                match last.child(element) {
                    Some(last_child) if last_child.member && !owns_any(element) => continue,
                    Some(last_child) => {
                        prune(&mut v, last_child, owned.and_then(|o| o.child(element)), &item, &keys);
                        if is_empty_container(&v) {
                            continue;
                        }
                    }
                    None => {}
                }
                keep.push(v);
            }
            *items = keep;
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The 409 upstream answers, message and causes worded as `NewConflictError` words them.
fn conflict_error(mut conflicts: Vec<(String, Path)>) -> ApiError {
    conflicts.sort();
    let message = if let [(manager, path)] = conflicts.as_slice() {
        format!("Apply failed with 1 conflict: conflict with {manager}: {}", path_string(path))
    } else {
        let mut lines = Vec::new();
        let mut current: Option<&str> = None;
        for (manager, path) in &conflicts {
            if current != Some(manager.as_str()) {
                lines.push(format!("conflicts with {manager}:"));
                current = Some(manager);
            }
            lines.push(format!("- {}", path_string(path)));
        }
        format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
    };
    let mut err = ApiError::new(409, "Conflict", message);
    err.details.causes = conflicts
        .iter()
        .map(|(manager, path)| {
            Cause::new("FieldManagerConflict", format!("conflict with {manager}"), path_string(path))
        })
        .collect();
    err
}

#[cfg(test)]
mod tests;
