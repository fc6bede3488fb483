use super::*;
use crate::resources::builtin_types;
use serde_json::json;

fn rt(group: &str, kind: &str) -> ResourceType {
    builtin_types().into_iter().find(|t| t.group == group && t.kind == kind).unwrap()
}

fn fields(causes: &[Cause]) -> Vec<&str> {
    causes.iter().map(|c| c.field.as_str()).collect()
}

#[test]
fn object_meta_rules() {
    let cm = rt("", "ConfigMap");
    let ok = json!({"metadata": {"name": "a.b-c", "namespace": "default", "labels": {"app": "x"}}});
    assert!(validate(&cm, &ok, None).is_empty());
    let bad = json!({"metadata": {"name": "Bad_Name", "namespace": "default",
        "labels": {"-x": "y", "ok": "bad value"}, "annotations": {"a/b/c": ""}}});
    let causes = validate(&cm, &bad, None);
    assert_eq!(fields(&causes), vec!["metadata.name", "metadata.labels", "metadata.labels", "metadata.annotations"]);
    assert!(causes[0].message.starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    assert_eq!(causes[0].reason, "FieldValueInvalid");
    let missing = validate(&cm, &json!({"metadata": {"namespace": "default"}}), None);
    assert_eq!(missing[0].message, "Required value: name or generateName is required");
    let ns = rt("", "Namespace");
    assert_eq!(fields(&validate(&ns, &json!({"metadata": {"name": "a.b"}}), None)), vec!["metadata.name"]);
    let svc = rt("", "Service");
    let c =
        validate(&svc, &json!({"metadata": {"name": "1abc", "namespace": "d"}, "spec": {"clusterIP": "None"}}), None);
    assert!(c[0].message.contains("DNS-1035"), "{c:?}");
    let role = rt("rbac.authorization.k8s.io", "ClusterRole");
    assert!(validate(&role, &json!({"metadata": {"name": "system:controller:x"}}), None).is_empty());
    let c = validate(&role, &json!({"metadata": {"name": "x", "namespace": "d"}}), None);
    assert_eq!(c[0].message, "Forbidden: not allowed on this type");
}

#[test]
fn identity_is_immutable() {
    let cm = rt("", "ConfigMap");
    let old = json!({"metadata": {"name": "a", "namespace": "d", "uid": "1"}});
    let new = json!({"metadata": {"name": "a", "namespace": "d", "uid": "2"}});
    let c = validate(&cm, &new, Some(&old));
    assert_eq!(fields(&c), vec!["metadata.uid"]);
    assert_eq!(c[0].message, "Invalid value: \"2\": field is immutable");
}

#[test]
fn service_update_keeps_allocations() {
    let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
        "ports": [{"port": 80, "nodePort": 30080}]}});
    let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
    carry_service_allocations(&mut new, &old);
    assert_eq!(new["spec"]["clusterIP"], "10.96.0.5");
    assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.5"]));
    assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
}

fn deploy() -> Value {
    let mut d = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "app", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}]}]}}}});
    crate::builtin::default_object(&rt("apps", "Deployment"), &mut d);
    d
}

#[test]
fn a_defaulted_deployment_is_valid() {
    assert_eq!(validate(&rt("apps", "Deployment"), &deploy(), None), vec![]);
}

#[test]
fn deployment_spec_rules() {
    let t = rt("apps", "Deployment");
    let mut d = deploy();
    d["spec"].as_object_mut().unwrap().remove("selector");
    assert_eq!(fields(&validate(&t, &d, None)), vec!["spec.selector"]);
    assert_eq!(validate(&t, &d, None)[0].message, "Required value");

    let mut d = deploy();
    d["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let c = validate(&t, &d, None);
    assert_eq!(fields(&c), vec!["spec.template.metadata.labels"]);
    assert_eq!(c[0].message, "Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`");

    let mut d = deploy();
    d["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap().remove("image");
    d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(70000);
    d["spec"]["replicas"] = json!(-1);
    let c = validate(&t, &d, None);
    assert_eq!(
        fields(&c),
        vec![
            "spec.replicas",
            "spec.template.spec.containers[0].image",
            "spec.template.spec.containers[0].ports[0].containerPort"
        ]
    );
    assert_eq!(c[2].message, "Invalid value: 70000: must be between 1 and 65535, inclusive");

    let mut d = deploy();
    d["spec"]["template"]["spec"]["containers"] = json!([]);
    d["spec"]["strategy"]["type"] = json!("Sideways");
    let c = validate(&t, &d, None);
    assert!(fields(&c).contains(&"spec.template.spec.containers"));
    let st = c.iter().find(|c| c.field == "spec.strategy.type").unwrap();
    assert_eq!(st.message, "Unsupported value: \"Sideways\": supported values: \"Recreate\", \"RollingUpdate\"");
}

#[test]
fn deployment_selector_is_immutable() {
    let t = rt("apps", "Deployment");
    let old = deploy();
    let mut new = deploy();
    new["spec"]["selector"]["matchLabels"]["tier"] = json!("x");
    new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
    let c = validate(&t, &new, Some(&old));
    assert_eq!(fields(&c), vec!["spec.selector"]);
    assert!(c[0].message.ends_with("field is immutable"));
    let mut scaled = deploy();
    scaled["spec"]["replicas"] = json!(5);
    assert!(validate(&t, &scaled, Some(&old)).is_empty());
}

#[test]
fn pod_rules() {
    let t = rt("", "Pod");
    let mut p = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [
        {"name": "a", "image": "x"}, {"name": "a", "image": "y", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}});
    crate::builtin::default_object(&t, &mut p);
    let c = validate(&t, &p, None);
    assert_eq!(fields(&c), vec!["spec.containers[1].name", "spec.containers[1].volumeMounts[0].name"]);
    assert_eq!(c[0].message, "Duplicate value: \"a\"");
    assert_eq!(c[1].message, "Not found: \"data\"");

    let mut old =
        json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": [{"name": "a", "image": "x"}]}});
    crate::builtin::default_object(&t, &mut old);
    let mut image = old.clone();
    image["spec"]["containers"][0]["image"] = json!("x:2");
    image["spec"]["nodeName"] = json!("node-1");
    assert!(validate(&t, &image, Some(&old)).is_empty(), "image changes and binding are allowed");
    let mut env = old.clone();
    env["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "1"}]);
    assert_eq!(fields(&validate(&t, &env, Some(&old))), vec!["spec"]);
}

#[test]
fn service_rules() {
    let t = rt("", "Service");
    let svc = |spec: Value| {
        let mut s = json!({"metadata": {"name": "web", "namespace": "d"}, "spec": spec});
        crate::builtin::default_object(&t, &mut s);
        s
    };
    assert!(validate(&t, &svc(json!({"ports": [{"port": 80}]})), None).is_empty());
    assert_eq!(fields(&validate(&t, &svc(json!({"selector": {"a": "b"}})), None)), vec!["spec.ports"]);
    let c = validate(&t, &svc(json!({"ports": [{"port": 80}, {"port": 0, "name": "b"}]})), None);
    assert_eq!(fields(&c), vec!["spec.ports[0].name", "spec.ports[1].port", "spec.ports[1].targetPort"]);
    let c = validate(&t, &svc(json!({"ports": [{"port": 80, "nodePort": 30001}]})), None);
    assert_eq!(c[0].message, "Forbidden: may not be used when `type` is 'ClusterIP'");
    assert!(validate(&t, &svc(json!({"clusterIP": "None"})), None).is_empty(), "headless needs no ports");

    let old = svc(json!({"clusterIP": "10.96.0.9", "ports": [{"port": 80}]}));
    let new = svc(json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}));
    let c = validate(&t, &new, Some(&old));
    assert_eq!(fields(&c), vec!["spec.clusterIPs[0]"]);
    assert_eq!(c[0].message, "Invalid value: [\"10.96.0.10\"]: may not change once set");
    let mut omitted = svc(json!({"ports": [{"port": 81}]}));
    crate::builtin::prepare_for_update(&t, &mut omitted, &old);
    assert!(validate(&t, &omitted, Some(&old)).is_empty(), "an update without clusterIP keeps it");
}

#[test]
fn config_map_and_secret_rules() {
    let cm = rt("", "ConfigMap");
    let obj = json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"bad key": "v", "ok": "v"}, "binaryData": {"ok": ""}});
    let c = validate(&cm, &obj, None);
    assert_eq!(fields(&c), vec!["data[bad key]", "binaryData[ok]"]);
    let old = json!({"metadata": {"name": "c", "namespace": "d"}, "immutable": true, "data": {"a": "1"}});
    let new = json!({"metadata": {"name": "c", "namespace": "d"}, "immutable": true, "data": {"a": "2"}});
    assert_eq!(fields(&validate(&cm, &new, Some(&old))), vec!["data"]);

    let sec = rt("", "Secret");
    let tls =
        json!({"metadata": {"name": "s", "namespace": "d"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}});
    assert_eq!(fields(&validate(&sec, &tls, None)), vec!["data[tls.key]"]);
    let old = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque"});
    let new = json!({"metadata": {"name": "s", "namespace": "d"}, "type": "other"});
    assert_eq!(fields(&validate(&sec, &new, Some(&old))), vec!["type"]);
}

#[test]
fn lease_event_and_crd_rules() {
    let lease = rt("coordination.k8s.io", "Lease");
    let l = json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"leaseDurationSeconds": 0}});
    assert_eq!(fields(&validate(&lease, &l, None)), vec!["spec.leaseDurationSeconds"]);
    let ev = rt("events.k8s.io", "Event");
    let e = json!({"metadata": {"name": "e", "namespace": "d"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "c", "reportingInstance": "i", "action": "Reconcile", "reason": "Ok", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": "cm", "namespace": "d"}});
    assert!(validate(&ev, &e, None).is_empty());
    // Without the regarding object's namespace, upstream's legacy check reports it under the core name first.
    let mut elsewhere = e.clone();
    elsewhere["regarding"].as_object_mut().unwrap().remove("namespace");
    elsewhere.as_object_mut().unwrap().remove("reportingController");
    let causes = validate(&ev, &elsewhere, None);
    assert_eq!(
        fields(&causes),
        vec!["involvedObject.namespace", "reportingController", "reportingController", "reportingController"]
    );
    let mut bad = e.clone();
    bad.as_object_mut().unwrap().remove("action");
    assert_eq!(fields(&validate(&ev, &bad, None)), vec!["action"]);
    let crd = rt("apiextensions.k8s.io", "CustomResourceDefinition");
    let old =
        json!({"metadata": {"name": "xs.example.com"}, "spec": {"group": "example.com", "names": {"plural": "xs"}}});
    let new =
        json!({"metadata": {"name": "xs.example.com"}, "spec": {"group": "other.com", "names": {"plural": "xs"}}});
    let c = validate(&crd, &new, Some(&old));
    assert!(fields(&c).contains(&"spec.group"), "{c:?}");
}
