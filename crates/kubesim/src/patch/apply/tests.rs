use super::*;
use crate::patch::managed::record_update;
use crate::resources::{Origin, builtin_types};
use serde_json::json;

fn rt(kind: &str) -> ResourceType {
    builtin_types().into_iter().find(|t| t.kind == kind && t.group != "events.k8s.io").unwrap()
}

fn config(spec: Value) -> Value {
    json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},"spec":spec})
}

fn containers(list: Value) -> Value {
    json!({"selector":{"matchLabels":{"app":"web"}},
           "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":list}}})
}

fn apply(rt: &ResourceType, live: Option<&Value>, applied: &Value, manager: &str, force: bool) -> ApiResult<Value> {
    server_side_apply(ApplyRequest {
        rt,
        live,
        applied,
        manager,
        force,
        subresource: None,
        now: "2026-12-02T12:00:00Z",
    })
}

/// What the store would do after a successful write: set identity and bump the resourceVersion.
fn stored(mut obj: Value, rv: &str) -> Value {
    obj["metadata"]["uid"] = json!("uid-1");
    obj["metadata"]["resourceVersion"] = json!(rv);
    obj
}

fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"].as_array()?.iter().find(|e| e["manager"] == manager)
}

fn nginx(image: &str) -> Value {
    json!([{"name":"nginx","image":image}])
}

#[test]
fn apply_creates_a_missing_object_and_records_an_apply_entry() {
    let d = rt("Deployment");
    let body = config(json!({"replicas":2,"selector":{"matchLabels":{"app":"web"}},
        "template":{"metadata":{"labels":{"app":"web"},"creationTimestamp":null},
            "spec":{"containers":[{"name":"nginx","image":"nginx:1","ports":[{"containerPort":80}]}]}}}));
    let out = apply(&d, None, &body, "kubectl", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert_eq!(out["metadata"]["name"], "web");
    assert!(out["spec"]["template"]["metadata"].get("creationTimestamp").is_none());
    let e = entry(&out, "kubectl").unwrap();
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], "2026-12-02T12:00:00Z");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{
            "f:metadata":{"f:labels":{"f:app":{}}},
            "f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},
                "f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}})
    );
}

#[test]
fn a_different_value_on_another_appliers_field_conflicts() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(2);
    let live = stored(apply(&d, None, &config(spec), "alpha", false).unwrap(), "10");
    let err = apply(&d, Some(&live), &config(json!({"replicas":3})), "beta", false).unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"alpha\": .spec.replicas");
    let status = err.to_status();
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason":"FieldManagerConflict","message":"conflict with \"alpha\"","field":".spec.replicas"}])
    );
}

#[test]
fn conflict_with_an_update_manager_names_its_api_version() {
    // The checklist's example: rancher edited the image with an update, kubectl applies another one.
    let d = rt("Deployment");
    let mut live = stored(
        json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},
            "spec":containers(json!([{"name":"backend","image":"b:1"}]))}),
        "3",
    );
    // Created by an Update manager: an update of an object nobody manages would not be tracked.
    record_update(&d, None, &mut live, "creator", None, "2026-12-02T10:00:00Z");
    let old = live.clone();
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("b:2");
    record_update(&d, Some(&old), &mut live, "rancher", None, "2026-12-02T11:00:00Z");
    let err = apply(&d, Some(&live), &config(containers(json!([{"name":"backend","image":"b:3"}]))), "kubectl", false)
        .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"rancher\" using apps/v1: .spec.template.spec.containers[name=\"backend\"].image"
    );
    assert_eq!(
        err.to_status()["details"]["causes"],
        json!([{"reason":"FieldManagerConflict","message":"conflict with \"rancher\" using apps/v1",
                "field":".spec.template.spec.containers[name=\"backend\"].image"}])
    );
}

#[test]
fn several_conflicts_use_the_plural_message() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(2);
    let live = stored(apply(&d, None, &config(spec), "alpha", false).unwrap(), "10");
    let mut other = containers(nginx("nginx:2"));
    other["replicas"] = json!(5);
    let err = apply(&d, Some(&live), &config(other), "beta", false).unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
    assert_eq!(err.details.causes.len(), 2);
}

#[test]
fn force_takes_ownership_from_the_other_manager() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(2);
    let live = stored(apply(&d, None, &config(spec), "alpha", false).unwrap(), "10");
    let out = apply(&d, Some(&live), &config(json!({"replicas":3})), "beta", true).unwrap();
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(entry(&out, "beta").unwrap()["fieldsV1"], json!({"f:spec":{"f:replicas":{}}}));
    let alpha = &entry(&out, "alpha").unwrap()["fieldsV1"];
    assert!(alpha["f:spec"].get("f:replicas").is_none());
    assert!(alpha["f:spec"].get("f:template").is_some());
    // alpha re-applying its old value now conflicts with beta.
    let live = stored(out, "11");
    let mut again = containers(nginx("nginx:1"));
    again["replicas"] = json!(2);
    let err = apply(&d, Some(&live), &config(again), "alpha", false).unwrap_err();
    assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"beta\": .spec.replicas");
}

#[test]
fn equal_values_are_shared_and_survive_one_manager_leaving() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(2);
    let live = stored(apply(&d, None, &config(spec), "alpha", false).unwrap(), "10");
    let out = apply(&d, Some(&live), &config(json!({"replicas":2})), "beta", false).unwrap();
    assert!(entry(&out, "alpha").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    assert!(entry(&out, "beta").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_some());
    // alpha stops applying replicas: beta still owns it, so it stays.
    let live = stored(out, "11");
    let out = apply(&d, Some(&live), &config(containers(nginx("nginx:1"))), "alpha", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert!(entry(&out, "alpha").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_none());
}

#[test]
fn fields_a_manager_stops_applying_are_removed() {
    let d = rt("Deployment");
    let mut spec = containers(json!([{"name":"nginx","image":"nginx:1",
        "env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}]));
    spec["replicas"] = json!(2);
    spec["paused"] = json!(true);
    let live = stored(apply(&d, None, &config(spec), "alpha", false).unwrap(), "10");
    let mut next = containers(json!([{"name":"nginx","image":"nginx:1","env":[{"name":"A","value":"1"}]}]));
    next["replicas"] = json!(2);
    let out = apply(&d, Some(&live), &config(next), "alpha", false).unwrap();
    assert!(out["spec"].get("paused").is_none());
    assert_eq!(out["spec"]["template"]["spec"]["containers"][0]["env"], json!([{"name":"A","value":"1"}]));
}

#[test]
fn stopping_to_apply_a_container_removes_it_but_keeps_unowned_siblings() {
    let d = rt("Deployment");
    let live = stored(
        apply(
            &d,
            None,
            &config(containers(json!([{"name":"a","image":"a"},{"name":"b","image":"b"}]))),
            "alpha",
            false,
        )
        .unwrap(),
        "10",
    );
    let out = apply(&d, Some(&live), &config(containers(json!([{"name":"a","image":"a"}]))), "alpha", false).unwrap();
    assert_eq!(out["spec"]["template"]["spec"]["containers"], json!([{"name":"a","image":"a"}]));
}

#[test]
fn two_managers_merge_containers_and_env_by_name() {
    let d = rt("Deployment");
    let live = stored(
        apply(
            &d,
            None,
            &config(containers(json!([{"name":"app","image":"app:1",
            "env":[{"name":"A","value":"1"}]}]))),
            "alpha",
            false,
        )
        .unwrap(),
        "10",
    );
    let out = apply(
        &d,
        Some(&live),
        &config(json!({"template":{"spec":{"containers":[
            {"name":"app","env":[{"name":"B","value":"2"}]},
            {"name":"sidecar","image":"proxy:1"}]}}})),
        "beta",
        false,
    )
    .unwrap();
    let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0]["name"], "app");
    assert_eq!(cs[0]["image"], "app:1");
    assert_eq!(cs[0]["env"], json!([{"name":"A","value":"1"},{"name":"B","value":"2"}]));
    assert_eq!(cs[1], json!({"name":"sidecar","image":"proxy:1"}));
    let beta = &entry(&out, "beta").unwrap()["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"];
    assert!(beta["k:{\"name\":\"app\"}"]["f:env"]["k:{\"name\":\"B\"}"].is_object());
    assert!(beta["k:{\"name\":\"app\"}"].get("f:image").is_none());
    // alpha drops env A: it goes, beta's B stays, and the shared container stays.
    let live = stored(out, "11");
    let out =
        apply(&d, Some(&live), &config(containers(json!([{"name":"app","image":"app:1"}]))), "alpha", false).unwrap();
    let cs = out["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(cs[0]["env"], json!([{"name":"B","value":"2"}]));
    assert_eq!(cs.len(), 2);
}

#[test]
fn resource_version_in_the_body_is_a_precondition_even_with_force() {
    let d = rt("Deployment");
    let live = stored(apply(&d, None, &config(json!({"replicas":1})), "alpha", false).unwrap(), "10");
    let mut body = config(json!({"replicas":1}));
    body["metadata"]["resourceVersion"] = json!("9");
    let err = apply(&d, Some(&live), &body, "alpha", true).unwrap_err();
    assert_eq!(err.code, 409);
    assert!(err.message.contains("the object has been modified"), "{}", err.message);
    body["metadata"]["resourceVersion"] = json!("10");
    assert_eq!(apply(&d, Some(&live), &body, "alpha", false).unwrap()["spec"]["replicas"], 1);
}

#[test]
fn requests_upstream_rejects() {
    let d = rt("Deployment");
    let err = apply(&d, None, &config(json!({})), "", false).unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let mut body = config(json!({}));
    body["metadata"]["managedFields"] = json!([{"manager":"x"}]);
    let err = apply(&d, None, &body, "m", false).unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (400, "metadata.managedFields must be nil"));
    let mut body = config(json!({}));
    body["apiVersion"] = json!("apps/v2");
    assert_eq!(apply(&d, None, &body, "m", false).unwrap_err().code, 400);
    assert_eq!(apply(&d, None, &json!([1]), "m", false).unwrap_err().code, 400);
    let err = apply(&d, None, &json!({"kind":"Deployment","metadata":{"name":"web"}}), "m", false).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "Incorrect version specified in apply patch. Specified patch version: , expected: apps/v1")
    );
    let status_apply = ApplyRequest {
        rt: &d,
        live: None,
        applied: &config(json!({})),
        manager: "m",
        force: false,
        subresource: Some("status"),
        now: "t",
    };
    assert_eq!(server_side_apply(status_apply).unwrap_err().code, 404);
}

#[test]
fn a_repeated_apply_returns_the_live_object_unchanged() {
    let d = rt("Deployment");
    let body = config(containers(nginx("nginx:1")));
    let live = stored(apply(&d, None, &body, "alpha", false).unwrap(), "10");
    let again = server_side_apply(ApplyRequest {
        rt: &d,
        live: Some(&live),
        applied: &body,
        manager: "alpha",
        force: false,
        subresource: None,
        now: "2026-12-02T13:00:00Z",
    })
    .unwrap();
    assert_eq!(again, live);
}

#[test]
fn main_resource_apply_ignores_status_and_status_apply_touches_only_status() {
    let d = rt("Deployment");
    let mut body = config(json!({"replicas":1}));
    body["status"] = json!({"replicas":99});
    let live = stored(apply(&d, None, &body, "alpha", false).unwrap(), "10");
    assert!(live.get("status").is_none());
    assert!(entry(&live, "alpha").unwrap()["fieldsV1"].get("f:status").is_none());

    let status_body = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},
        "spec":{"replicas":50},"status":{"replicas":1,"conditions":[{"type":"Available","status":"True"}]}});
    let out = server_side_apply(ApplyRequest {
        rt: &d,
        live: Some(&live),
        applied: &status_body,
        manager: "ctrl",
        force: false,
        subresource: Some("status"),
        now: "t",
    })
    .unwrap();
    assert_eq!(out["spec"]["replicas"], 1);
    assert_eq!(out["status"]["replicas"], 1);
    let e = entry(&out, "ctrl").unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status":{"f:conditions":{"k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}},"f:replicas":{}}})
    );
}

fn widget_type() -> ResourceType {
    let mut t = rt("Deployment");
    t.group = "example.com".into();
    t.kind = "Widget".into();
    t.plural = "widgets".into();
    t.origin = Origin::Crd {
        crd_name: "widgets.example.com".into(),
        schema: json!({"type":"object","properties":{"spec":{"type":"object","properties":{
            "ports":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
                "items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer"}}}},
            "tags":{"type":"array","items":{"type":"string"}}}}}}),
        printer_columns: vec![],
        selectable_fields: vec![],
        storage: true,
    };
    t
}

fn widget(spec: Value) -> Value {
    json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":spec})
}

#[test]
fn crd_list_map_keys_merge_and_default_lists_are_atomic() {
    let w = widget_type();
    let live = stored(
        apply(&w, None, &widget(json!({"ports":[{"name":"http","port":80}],"tags":["a"]})), "alpha", false).unwrap(),
        "10",
    );
    let out =
        apply(&w, Some(&live), &widget(json!({"ports":[{"name":"metrics","port":9090}]})), "beta", false).unwrap();
    assert_eq!(out["spec"]["ports"], json!([{"name":"http","port":80},{"name":"metrics","port":9090}]));
    assert!(entry(&out, "beta").unwrap()["fieldsV1"]["f:spec"]["f:ports"]["k:{\"name\":\"metrics\"}"].is_object());
    let live = stored(out, "11");
    let err = apply(&w, Some(&live), &widget(json!({"tags":["b"]})), "beta", false).unwrap_err();
    assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"alpha\": .spec.tags");
    let out = apply(&w, Some(&live), &widget(json!({"tags":["b"]})), "beta", true).unwrap();
    assert_eq!(out["spec"]["tags"], json!(["b"]));
}

#[test]
fn applied_list_order_wins_for_shared_items() {
    let w = widget_type();
    let live = stored(
        apply(&w, None, &widget(json!({"ports":[{"name":"a","port":1},{"name":"b","port":2}]})), "alpha", false)
            .unwrap(),
        "10",
    );
    let out =
        apply(&w, Some(&live), &widget(json!({"ports":[{"name":"b","port":2},{"name":"a","port":1}]})), "alpha", false)
            .unwrap();
    let names: Vec<&str> =
        out["spec"]["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "a"]);
}

#[test]
fn finalizers_merge_as_a_set_between_appliers() {
    let c = rt("ConfigMap");
    let cm = |fins: Value| json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","finalizers":fins}});
    let live = stored(apply(&c, None, &cm(json!(["a"])), "alpha", false).unwrap(), "1");
    let out = apply(&c, Some(&live), &cm(json!(["b"])), "beta", false).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
    assert!(entry(&out, "beta").unwrap()["fieldsV1"]["f:metadata"]["f:finalizers"]["v:\"b\""].is_object());
}

#[test]
fn kubectl_client_side_then_server_side_apply() {
    // kubectl apply (client side) creates with POST, then updates with a strategic merge patch; a later
    // `kubectl apply --server-side` of the same values shares the fields, a new image conflicts.
    let d = rt("Deployment");
    let mut created = stored(config(containers(nginx("nginx:1"))), "1");
    record_update(&d, None, &mut created, "kubectl-client-side-apply", None, "2026-12-02T10:00:00Z");
    let patch = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"nginx"}],
        "containers":[{"image":"nginx:2","name":"nginx"}]}}}});
    let mut updated = crate::patch::strategic::strategic_merge_patch(&d, &created, &patch).unwrap();
    record_update(&d, Some(&created), &mut updated, "kubectl-client-side-apply", None, "2026-12-02T10:05:00Z");
    let live = stored(updated, "2");
    assert_eq!(live["metadata"]["managedFields"].as_array().unwrap().len(), 1);

    let same = apply(&d, Some(&live), &config(containers(nginx("nginx:2"))), "kubectl", false).unwrap();
    assert!(entry(&same, "kubectl").is_some());
    assert!(entry(&same, "kubectl-client-side-apply").is_some());

    let err = apply(&d, Some(&live), &config(containers(nginx("nginx:3"))), "kubectl", false).unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.template.spec.containers[name=\"nginx\"].image"
    );
}

#[test]
fn scale_through_the_subresource_takes_replicas_from_the_applier() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(2);
    let live = stored(apply(&d, None, &config(spec.clone()), "alpha", false).unwrap(), "1");
    let mut scaled = live.clone();
    scaled["spec"]["replicas"] = json!(4);
    record_update(&d, Some(&live), &mut scaled, "kubectl", Some("scale"), "2026-12-02T12:30:00Z");
    let scaled = stored(scaled, "2");
    assert!(entry(&scaled, "alpha").unwrap()["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    let err = apply(&d, Some(&scaled), &config(spec), "alpha", false).unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas"
    );
}

#[test]
fn crd_status_conditions_applied_by_a_controller() {
    let mut w = widget_type();
    w.subresources.status = true;
    if let Origin::Crd { schema, .. } = &mut w.origin {
        schema["properties"]["status"] = json!({"type":"object","properties":{"conditions":{"type":"array",
            "x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],"items":{"type":"object"}}}});
    }
    let live = stored(apply(&w, None, &widget(json!({"tags":["a"]})), "user", false).unwrap(), "1");
    let status = |conds: Value| json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":conds}});
    let status_apply = |live: &Value, body: &Value, manager: &str| {
        server_side_apply(ApplyRequest {
            rt: &w,
            live: Some(live),
            applied: body,
            manager,
            force: false,
            subresource: Some("status"),
            now: "t",
        })
    };
    let out = status_apply(&live, &status(json!([{"type":"Ready","status":"True"}])), "operator").unwrap();
    let live = stored(out, "2");
    let out = status_apply(&live, &status(json!([{"type":"Degraded","status":"False"}])), "auditor").unwrap();
    let types: Vec<&str> =
        out["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Ready", "Degraded"]);
    assert_eq!(out["spec"], json!({"tags":["a"]}));
    let live = stored(out, "3");
    let err = status_apply(&live, &status(json!([{"type":"Ready","status":"False"}])), "auditor").unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"operator\" with subresource \"status\": .status.conditions[type=\"Ready\"].status"
    );
}

#[test]
fn an_unmanaged_object_belongs_to_before_first_apply() {
    let d = rt("Deployment");
    let mut spec = containers(nginx("nginx:1"));
    spec["replicas"] = json!(1);
    let live = stored(config(spec), "4");
    let err = apply(&d, Some(&live), &config(json!({"replicas":2})), "alpha", false).unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using apps/v1: .spec.replicas"
    );
    let out = apply(&d, Some(&live), &config(json!({"replicas":1})), "alpha", false).unwrap();
    assert!(entry(&out, "before-first-apply").is_some());
    assert_eq!(entry(&out, "alpha").unwrap()["fieldsV1"], json!({"f:spec":{"f:replicas":{}}}));
}

#[test]
fn kubectl_server_side_apply_keeps_the_last_applied_annotation_current() {
    let d = rt("Deployment");
    let mut live = stored(config(json!({"replicas":1})), "4");
    live["metadata"]["annotations"] = json!({LAST_APPLIED: "{\"old\":true}\n", "keep": "me"});
    record_update(&d, None, &mut live, "kubectl-client-side-apply", None, "t0");
    let body = config(json!({"replicas":1}));
    let out = apply(&d, Some(&live), &body, "kubectl", false).unwrap();
    let annotation = out["metadata"]["annotations"][LAST_APPLIED].as_str().unwrap();
    assert!(annotation.ends_with('\n'));
    assert_eq!(serde_json::from_str::<Value>(annotation).unwrap(), body);
    assert_eq!(out["metadata"]["annotations"]["keep"], "me");
    // Other managers leave it alone.
    let other = apply(&d, Some(&live), &body, "helm", false).unwrap();
    assert_eq!(other["metadata"]["annotations"][LAST_APPLIED], "{\"old\":true}\n");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Small Deployment configurations: a few labels, a subset of containers with a few env vars.
    fn configs() -> impl Strategy<Value = Value> {
        let labels = proptest::collection::btree_map("[a-c]", "[x-z]", 0..3);
        let env = proptest::collection::btree_map("E[1-3]", "[0-2]", 0..3);
        let container = ("[a-c]", "img:[1-2]", env);
        let containers = proptest::collection::vec(container, 1..4);
        (proptest::option::of(0..4u32), labels, containers).prop_map(|(replicas, labels, cs)| {
            let mut seen = std::collections::BTreeSet::new();
            let containers: Vec<Value> = cs
                .into_iter()
                .filter(|(name, _, _)| seen.insert(name.clone()))
                .map(|(name, image, env)| {
                    let env: Vec<Value> = env.into_iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
                    if env.is_empty() {
                        json!({"name": name, "image": image})
                    } else {
                        json!({"name": name, "image": image, "env": env})
                    }
                })
                .collect();
            let mut spec = json!({"template":{"spec":{"containers":containers}}});
            if let Some(r) = replicas {
                spec["replicas"] = json!(r);
            }
            let mut body = config(spec);
            if !labels.is_empty() {
                body["metadata"]["labels"] = json!(labels);
            }
            body
        })
    }

    fn without_managed(v: &Value) -> Value {
        let mut v = v.clone();
        v["metadata"].as_object_mut().unwrap().remove("managedFields");
        v["metadata"].as_object_mut().unwrap().remove("uid");
        v["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn applying_the_same_configuration_again_changes_nothing(a in configs()) {
            let d = rt("Deployment");
            let live = stored(apply(&d, None, &a, "alpha", false).unwrap(), "1");
            prop_assert_eq!(apply(&d, Some(&live), &a, "alpha", false).unwrap(), live);
        }

        #[test]
        fn a_sole_applier_ends_up_with_exactly_its_latest_configuration(a in configs(), b in configs()) {
            let d = rt("Deployment");
            let live = stored(apply(&d, None, &a, "alpha", false).unwrap(), "1");
            let updated = apply(&d, Some(&live), &b, "alpha", false).unwrap();
            let fresh = apply(&d, None, &b, "alpha", false).unwrap();
            prop_assert_eq!(without_managed(&stored(updated, "1")), without_managed(&stored(fresh, "1")));
        }

        #[test]
        fn a_forced_apply_gets_every_value_it_applied(a in configs(), b in configs()) {
            let d = rt("Deployment");
            let live = stored(apply(&d, None, &a, "alpha", false).unwrap(), "1");
            let out = apply(&d, Some(&live), &b, "beta", true).unwrap();
            // Re-applying beta's configuration on top changes nothing: it already holds all its values.
            let again = apply(&d, Some(&stored(out.clone(), "2")), &b, "beta", false).unwrap();
            prop_assert_eq!(without_managed(&again), without_managed(&stored(out, "2")));
        }

        #[test]
        fn a_no_op_update_keeps_managed_fields(a in configs()) {
            let d = rt("Deployment");
            let live = stored(apply(&d, None, &a, "alpha", false).unwrap(), "1");
            let mut same = live.clone();
            record_update(&d, Some(&live), &mut same, "editor", None, "later");
            prop_assert_eq!(same, live);
        }
    }
}

#[test]
fn an_update_of_an_object_nobody_manages_is_not_tracked() {
    // Upstream's skipNonAppliedManager: only a create or an apply starts tracking.
    let cm = rt("ConfigMap");
    let old = stored(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"d"}}), "1");
    let mut new = old.clone();
    new["data"] = json!({"x": "y"});
    record_update(&cm, Some(&old), &mut new, "editor", None, "2026-12-02T11:00:00Z");
    assert!(new.pointer("/metadata/managedFields").is_none());
}

#[test]
fn an_apply_that_changes_nothing_stamps_no_time() {
    // Upstream's managedFieldsUpdater sets the applier's time only when the object changed.
    let d = rt("Deployment");
    let created = stored(apply(&d, None, &config(containers(nginx("nginx:1"))), "alice", false).unwrap(), "1");
    assert_eq!(entry(&created, "alice").unwrap()["time"], "2026-12-02T12:00:00Z");
    let same = apply(&d, Some(&created), &config(containers(nginx("nginx:1"))), "bob", false).unwrap();
    let bob = entry(&same, "bob").unwrap();
    assert!(bob.get("time").is_none(), "{bob}");
    assert_eq!(same["metadata"]["managedFields"][0]["manager"], "bob", "no time sorts first");
}
