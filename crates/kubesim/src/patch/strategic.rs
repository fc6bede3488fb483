//! Strategic merge patch, as kube-apiserver applies it to built-in types: lists with a patch merge key merge
//! item by item, lists of scalars with the merge strategy (finalizers) merge as sets, other lists are
//! replaced; `null` deletes a key; the directives `$patch: replace|delete|merge`, `$retainKeys`,
//! `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>` work as upstream. Custom resources have
//! no patch metadata and answer 415, like a real server.

use serde_json::{Map, Value};

use super::schema_info::{Node, SmpList};
use crate::error::{ApiError, ApiResult};
use crate::resources::ResourceType;

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// The 415 of a strategic merge patch to a custom resource: its patch endpoint lists the types it accepts.
pub fn custom_resource_unsupported() -> ApiError {
    let mut err = ApiError::unsupported_media_type("application/strategic-merge-patch+json");
    err.message = "the body of the request was in an unknown format - accepted media types include: \
                   application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        .to_string();
    err
}

/// Applies a strategic merge patch to a built-in object.
pub fn strategic_merge_patch(rt: &ResourceType, target: &Value, patch: &Value) -> ApiResult<Value> {
    if rt.is_crd() {
        return Err(custom_resource_unsupported());
    }
    let Value::Object(patch) = patch else {
        return Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            if patch.is_array() { "array" } else { "non-object" }
        )));
    };
    let original = target.as_object().cloned().unwrap_or_default();
    Ok(merge_map(original, patch, &Node::root(rt))?.map(Value::Object).unwrap_or_else(|| Value::Object(Map::new())))
}

/// A decoded JSON value as Go's `%v` prints it: maps with sorted keys as `map[k:v]`, lists as `[a b]`, null as
/// `<nil>` (upstream decodes whole numbers to int64, so they print as integers).
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_format).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let body: Vec<String> = entries.iter().map(|(k, v)| format!("{k}:{}", go_format(v))).collect();
            format!("map[{}]", body.join(" "))
        }
    }
}

fn bad_format(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

// Over 80 lines on purpose: Upstream's `mergeMap`: the directives ($patch, $retainKeys, $deleteFromPrimitiveList,
// $setElementOrder) and then every key, in its order; the directives change how the keys merge.
/// Merges `patch` into `original`; `None` when the patch deletes the whole map (`$patch: delete`).
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    node: &Node,
) -> ApiResult<Option<Map<String, Value>>> {
    match patch.get(PATCH) {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "delete" => return Ok(None),
        Some(Value::String(d)) if d == "replace" => {
            let mut content = patch.clone();
            content.remove(PATCH);
            return merge_map(Map::new(), &content, node);
        }
        // Upstream's `mergepatch.ErrBadPatchType` is a plain Go error, which the handler answers as a 500; its
        // text prints the directive with %s and the patch map with %v.
        Some(other) => {
            let directive = match other {
                Value::String(s) => s.clone(),
                other => format!("%!s({})", go_format(other)),
            };
            let map = go_format(&Value::Object(patch.clone()));
            return Err(ApiError::new(500, "", format!("unknown patch type: {directive} in map: {map}")));
        }
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let retain: Vec<&str> = retain
            .as_array()
            .and_then(|r| r.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
            .ok_or_else(|| bad_format("invalid patch: $retainKeys must be a list of strings"))?;
        // Deletions (null) need not be retained.
        for (key, _) in patch.iter().filter(|(k, v)| !is_directive(k) && !v.is_null()) {
            if !retain.contains(&key.as_str()) {
                return Err(ApiError::generic(
                    422,
                    "Invalid",
                    "the server rejected our request due to an error in our request",
                ));
            }
        }
        original.retain(|k, _| retain.contains(&k.as_str()));
    }

    // Deletions from primitive lists first, then orders, then the fields themselves.
    for (key, values) in patch {
        let Some(list) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else { continue };
        let values = values.as_array().ok_or_else(|| bad_format(format!("invalid patch: {key} must be a list")))?;
        if let Some(Value::Array(items)) = original.get_mut(list) {
            items.retain(|v| !values.contains(v));
        }
    }

    for (key, value) in patch {
        if is_directive(key) {
            continue;
        }
        let child = node.field(key);
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let order = patch.get(&format!("{SET_ELEMENT_ORDER}{key}")).map(as_order).transpose()?;
        let merged = match (original.remove(key), value) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(o, p, &child)?.map(Value::Object),
            (Some(Value::Array(o)), Value::Array(p)) => Some(Value::Array(merge_list(o, p, &child, order)?)),
            (_, value) => clean(value, &child)?,
        };
        if let Some(merged) = merged {
            original.insert(key.clone(), merged);
        }
    }

    // An order for a list the patch does not otherwise touch reorders the live list.
    for (key, order) in patch {
        let Some(list) = key.strip_prefix(SET_ELEMENT_ORDER) else { continue };
        if patch.contains_key(list) {
            continue;
        }
        let order = as_order(order)?;
        if let Some(Value::Array(items)) = original.get_mut(list) {
            let merge_key = merge_key(&node.field(list));
            let server_order = items.clone();
            let (from_order, rest): (Vec<Value>, Vec<Value>) =
                items.drain(..).partition(|i| index_of(order, i, merge_key.as_deref()).is_some());
            let from_order = sort_by_order(from_order, order, merge_key.as_deref());
            *items = merge_sorted(rest, from_order, &server_order, merge_key.as_deref());
        }
    }
    Ok(Some(original))
}

fn is_directive(key: &str) -> bool {
    key == PATCH
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

fn as_order(v: &Value) -> ApiResult<&[Value]> {
    v.as_array().map(Vec::as_slice).ok_or_else(|| bad_format("invalid patch: $setElementOrder must be a list"))
}

fn merge_key(node: &Node) -> Option<String> {
    match node.smp_list() {
        SmpList::MergeByKey(k) => Some(k),
        _ => None,
    }
}

/// A patch value placed where the original has nothing (or something of another type): its directives are
/// applied against emptiness.
fn clean(value: &Value, node: &Node) -> ApiResult<Option<Value>> {
    Ok(match value {
        Value::Object(p) => merge_map(Map::new(), p, node)?.map(Value::Object),
        Value::Array(p) => Some(Value::Array(merge_list(Vec::new(), p, node, None)?)),
        other => Some(other.clone()),
    })
}

fn merge_list(original: Vec<Value>, patch: &[Value], node: &Node, order: Option<&[Value]>) -> ApiResult<Vec<Value>> {
    let strategy = node.smp_list();
    if strategy == SmpList::Replace {
        let item = node.item();
        return patch.iter().map(|v| clean(v, &item)).filter_map(Result::transpose).collect();
    }
    // `{"$patch": "replace"}` among the items replaces the list with the other items.
    let is_replace = |v: &Value| v.get(PATCH).and_then(Value::as_str) == Some("replace");
    if patch.iter().any(is_replace) {
        let item = node.item();
        return patch
            .iter()
            .filter(|v| !is_replace(v))
            .map(|v| clean(v, &item))
            .filter_map(Result::transpose)
            .collect();
    }
    let key = merge_key(node);
    let item_node = node.item();
    let server_order = original.clone();
    let mut merged = original;
    let mut in_patch: Vec<Value> = Vec::new();
    match &key {
        None => {
            for v in patch {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
                in_patch.push(v.clone());
            }
        }
        Some(key) => {
            for p in patch {
                let Value::Object(p_map) = p else {
                    return Err(bad_format(format!("invalid patch: list items must be maps with merge key {key:?}")));
                };
                let Some(k) = p_map.get(key) else {
                    return Err(bad_format(format!("map: {p} does not contain declared merge key: {key}")));
                };
                let pos = merged.iter().position(|o| o.get(key) == Some(k));
                if p_map.get(PATCH).and_then(Value::as_str) == Some("delete") {
                    if let Some(pos) = pos {
                        merged.remove(pos);
                    }
                    continue;
                }
                let result = match pos.map(|pos| merged.remove(pos)) {
                    Some(Value::Object(o)) => merge_map(o, p_map, &item_node)?,
                    _ => merge_map(Map::new(), p_map, &item_node)?,
                };
                if let Some(result) = result {
                    in_patch.push(Value::Object(result.clone()));
                    merged.push(Value::Object(result));
                }
            }
        }
    }
    // Upstream's order: items the patch names follow the patch's (or $setElementOrder's) order, items only
    // the server has keep theirs, and the two are interleaved by the server's order.
    let key = key.as_deref();
    // With $setElementOrder, the items it names count as the patch's.
    let named = order.unwrap_or(&in_patch);
    let (patch_items, server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|m| index_of(named, m, key).is_some());
    let patch_items = sort_by_order(patch_items, order.unwrap_or(patch), key);
    Ok(merge_sorted(server_only, patch_items, &server_order, key))
}

/// Where `item` sits in `list`, matching maps by merge key and scalars by value.
fn index_of(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(k) => {
            let id = item.get(k)?;
            list.iter().position(|l| l.get(k) == Some(id))
        }
        None => list.iter().position(|l| l == item),
    }
}

/// Stable sort by position in `order`; items `order` does not name go first, as upstream's comparator puts
/// them.
fn sort_by_order(items: Vec<Value>, order: &[Value], key: Option<&str>) -> Vec<Value> {
    let (mut known, unknown): (Vec<Value>, Vec<Value>) =
        items.into_iter().partition(|i| index_of(order, i, key).is_some());
    known.sort_by_key(|i| index_of(order, i, key));
    unknown.into_iter().chain(known).collect()
}

/// Interleaves server-only items with patched ones: a server item goes first only when both are in the
/// server's order and it comes earlier there.
fn merge_sorted(left: Vec<Value>, right: Vec<Value>, server_order: &[Value], key: Option<&str>) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (index_of(server_order, l, key), index_of(server_order, r, key)) {
                (Some(li), Some(ri)) => li < ri,
                _ => false,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Origin, builtin_types};
    use serde_json::json;

    fn rt(kind: &str) -> ResourceType {
        builtin_types().into_iter().find(|t| t.kind == kind && t.group != "events.k8s.io").unwrap()
    }

    fn smp(kind: &str, target: Value, patch: Value) -> Value {
        strategic_merge_patch(&rt(kind), &target, &patch).unwrap()
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [
                        {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        {"name": "sidecar", "image": "busybox"}
                    ]}
                }
            }
        })
    }

    fn containers(obj: &Value) -> &Vec<Value> {
        obj["spec"]["template"]["spec"]["containers"].as_array().unwrap()
    }

    #[test]
    fn kubectl_set_image_changes_one_container_and_keeps_the_others() {
        // The body `kubectl set image deploy/web nginx=nginx:2` sends.
        let patch = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"nginx"},{"name":"sidecar"}],
            "containers":[{"image":"nginx:2","name":"nginx"}]}}}});
        let out = smp("Deployment", deployment(), patch);
        let cs = containers(&out);
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0]["name"], "nginx");
        assert_eq!(cs[0]["image"], "nginx:2");
        assert_eq!(cs[0]["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]));
        assert_eq!(cs[1], json!({"name": "sidecar", "image": "busybox"}));
        assert!(!out.to_string().contains('$'), "directives must not leak into the object: {out}");
    }

    #[test]
    fn kubectl_rollout_restart_adds_an_annotation_to_the_template() {
        let patch = json!({"spec":{"template":{"metadata":{"annotations":{
            "kubectl.kubernetes.io/restartedAt":"2026-12-02T12:54:27Z"}}}}});
        let out = smp("Deployment", deployment(), patch);
        assert_eq!(
            out["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
            "2026-12-02T12:54:27Z"
        );
        assert_eq!(out["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(containers(&out).len(), 2);
    }

    #[test]
    fn kubectl_patch_default_type_scales() {
        let out = smp("Deployment", deployment(), json!({"spec":{"replicas":7}}));
        assert_eq!(out["spec"]["replicas"], 7);
        assert_eq!(out["spec"]["template"], deployment()["spec"]["template"]);
    }

    #[test]
    fn client_side_apply_deletes_env_by_key_and_removes_fields_with_null() {
        // What `kubectl apply` (client side) sends after B was dropped from the manifest and A changed.
        let patch = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"nginx"},{"name":"sidecar"}],
            "containers":[{"$setElementOrder/env":[{"name":"A"}],
                           "env":[{"name":"A","value":"9"},{"$patch":"delete","name":"B"}],
                           "name":"nginx","ports":null}]}}}});
        let out = smp("Deployment", deployment(), patch);
        let nginx = &containers(&out)[0];
        assert_eq!(nginx["env"], json!([{"name": "A", "value": "9"}]));
        assert!(nginx.get("ports").is_none());
        assert_eq!(nginx["image"], "nginx:1");
    }

    #[test]
    fn new_list_items_are_merged_in_and_ordered_as_set_element_order_says() {
        let patch = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"init"},{"name":"nginx"},{"name":"sidecar"}],
            "containers":[{"name":"init","image":"alpine"}]}}}});
        let out = smp("Deployment", deployment(), patch);
        let names: Vec<&str> = containers(&out).iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["init", "nginx", "sidecar"]);
    }

    #[test]
    fn container_ports_merge_by_container_port_and_volume_mounts_by_mount_path() {
        let target = json!({"spec":{"containers":[{"name":"c",
            "ports":[{"containerPort":80,"name":"http"}],
            "volumeMounts":[{"mountPath":"/a","name":"va"},{"mountPath":"/b","name":"vb"}]}]}});
        let patch = json!({"spec":{"containers":[{"name":"c",
            "ports":[{"containerPort":80,"name":"web"},{"containerPort":443}],
            "volumeMounts":[{"mountPath":"/b","readOnly":true}]}]}});
        let out = smp("Pod", target, patch);
        let c = &out["spec"]["containers"][0];
        let ports = c["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 2);
        assert!(ports.contains(&json!({"containerPort":80,"name":"web"})));
        assert!(ports.contains(&json!({"containerPort":443})));
        assert_eq!(c["volumeMounts"].as_array().unwrap().len(), 2);
        assert!(c["volumeMounts"].as_array().unwrap().contains(&json!({"mountPath":"/b","name":"vb","readOnly":true})));
    }

    #[test]
    fn service_ports_merge_by_port() {
        let target = json!({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":443,"targetPort":8443}]}});
        let out = smp("Service", target, json!({"spec":{"ports":[{"port":80,"targetPort":9090}]}}));
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
        assert!(out["spec"]["ports"].as_array().unwrap().contains(&json!({"port":80,"targetPort":9090})));
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
        let target = json!({"metadata":{"finalizers":["a","b"]}});
        let out = smp("ConfigMap", target.clone(), json!({"metadata":{"finalizers":["b","c"]}}));
        let fins = out["metadata"]["finalizers"].as_array().unwrap();
        assert_eq!(fins.len(), 3);
        for f in ["a", "b", "c"] {
            assert!(fins.contains(&json!(f)));
        }
        let out = smp("ConfigMap", target, json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}));
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn owner_references_merge_by_uid_and_conditions_by_type() {
        let target = json!({
            "metadata":{"ownerReferences":[{"uid":"1","name":"a"}]},
            "status":{"conditions":[{"type":"Available","status":"False"},{"type":"Progressing","status":"True"}]}});
        let patch = json!({
            "metadata":{"ownerReferences":[{"uid":"2","name":"b"}]},
            "status":{"conditions":[{"type":"Available","status":"True"}]}});
        let out = smp("Deployment", target, patch);
        assert_eq!(out["metadata"]["ownerReferences"].as_array().unwrap().len(), 2);
        let conds = out["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2);
        assert!(conds.contains(&json!({"type":"Available","status":"True"})));
        assert!(conds.contains(&json!({"type":"Progressing","status":"True"})));
    }

    #[test]
    fn lists_without_merge_key_are_replaced() {
        let target = json!({"spec":{"containers":[{"name":"c","args":["a","b"]}],"tolerations":[{"key":"x"}]}});
        let patch = json!({"spec":{"containers":[{"name":"c","args":["z"]}],"tolerations":[{"key":"y"}]}});
        let out = smp("Pod", target, patch);
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key":"y"}]));
    }

    #[test]
    fn patch_replace_directive_on_a_map_and_on_a_list() {
        let out = smp(
            "Deployment",
            deployment(),
            json!({"metadata":{"labels":{"$patch":"replace","only":"this"}},
                   "spec":{"template":{"spec":{"containers":[{"$patch":"replace"},{"name":"solo","image":"x"}]}}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"only":"this"}));
        assert_eq!(containers(&out), &vec![json!({"name":"solo","image":"x"})]);
    }

    #[test]
    fn patch_delete_directive_removes_a_map() {
        let out = smp("Deployment", deployment(), json!({"spec":{"strategy":{"$patch":"delete"}}}));
        assert!(out["spec"].get("strategy").is_none());
    }

    #[test]
    fn retain_keys_drops_the_other_strategy_fields() {
        // kubectl apply switching a Deployment to Recreate.
        let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":null,"type":"Recreate"}}});
        let out = smp("Deployment", deployment(), patch);
        assert_eq!(out["spec"]["strategy"], json!({"type":"Recreate"}));
    }

    #[test]
    fn retain_keys_must_name_every_patched_field() {
        let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{"maxSurge":1}}}});
        let err = strategic_merge_patch(&rt("Deployment"), &deployment(), &patch).unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn new_items_go_before_server_only_items_as_upstream_orders_them() {
        let target = json!({"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"1"}]}]}});
        let out = smp("Pod", target, json!({"spec":{"containers":[{"name":"c","env":[{"name":"NEW","value":"2"}]}]}}));
        assert_eq!(out["spec"]["containers"][0]["env"], json!([{"name":"NEW","value":"2"},{"name":"A","value":"1"}]));
    }

    #[test]
    fn set_element_order_outranks_the_live_order_for_patched_lists() {
        let patch = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}],
            "containers":[{"name":"sidecar","image":"busybox:2"}]}}}});
        let out = smp("Deployment", deployment(), patch);
        let names: Vec<&str> = containers(&out).iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["sidecar", "nginx"]);
        assert_eq!(containers(&out)[0]["image"], "busybox:2");
    }

    #[test]
    fn set_element_order_alone_reorders_the_live_list() {
        let out = smp(
            "Deployment",
            deployment(),
            json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"nginx"}]}}}}),
        );
        let names: Vec<&str> = containers(&out).iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["sidecar", "nginx"]);
    }

    #[test]
    fn directives_inside_new_values_are_applied_not_stored() {
        let target = json!({"metadata":{"name":"p"},"spec":{}});
        let patch = json!({"spec":{"containers":[{"name":"a","env":[{"name":"X","value":"1"},{"$patch":"delete","name":"Y"}]}]}});
        let out = smp("Pod", target, patch);
        assert_eq!(out["spec"]["containers"], json!([{"name":"a","env":[{"name":"X","value":"1"}]}]));
    }

    #[test]
    fn items_without_merge_key_are_rejected() {
        let err = strategic_merge_patch(
            &rt("Pod"),
            &json!({"spec":{"containers":[]}}),
            &json!({"spec":{"containers":[{"image":"x"}]}}),
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn custom_resources_answer_415() {
        let mut cr = rt("Deployment");
        cr.origin = Origin::Crd {
            crd_name: "widgets.example.com".into(),
            schema: Value::Null,
            printer_columns: vec![],
            selectable_fields: vec![],
            storage: true,
        };
        let err = strategic_merge_patch(&cr, &json!({}), &json!({"spec":{}})).unwrap_err();
        assert_eq!(err.code, 415);
        assert_eq!(err.reason, "UnsupportedMediaType");
        assert!(err.message.contains("application/merge-patch+json"));
    }
}
