use super::*;
use crate::resources::builtin_types;

fn rt(group: &str, kind: &str) -> ResourceType {
    builtin_types().into_iter().find(|t| t.group == group && t.kind == kind).unwrap()
}

fn now() -> jiff::Timestamp {
    "2026-12-02T12:00:00Z".parse().unwrap()
}

fn names(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap().to_uppercase())
        .collect()
}

#[test]
fn human_durations_match_kubectl() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (300, "5m"),
        (700, "11m"),
        (5 * 3600, "5h"),
        (5 * 3600 + 600, "5h10m"),
        (20 * 3600, "20h"),
        (3 * 86400, "3d"),
        (3 * 86400 + 7200, "3d2h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 86400 * 5, "3y5d"),
        (10 * 365 * 86400, "10y"),
    ];
    for (secs, want) in cases {
        assert_eq!(human_duration(secs), want, "{secs}");
    }
}

#[test]
fn table_shape() {
    let ns = json!({"metadata": {"name": "todo", "creationTimestamp": "2026-12-02T11:55:00Z", "uid": "u"}, "status": {"phase": "Active"}});
    let t = render_table(&rt("", "Namespace"), &[ns], "42", now());
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"]["resourceVersion"], "42");
    assert_eq!(names(&t), ["NAME", "STATUS", "AGE"]);
    assert_eq!(t["rows"][0]["cells"], json!(["todo", "Active", "5m"]));
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["uid"], "u");
    let c = &t["columnDefinitions"][0];
    for key in ["name", "type", "format", "description", "priority"] {
        assert!(c.get(key).is_some(), "{key}");
    }
}

#[test]
fn builtin_columns() {
    let cases: [(&str, &str, &[&str]); 8] = [
        ("", "Pod", &["NAME", "READY", "STATUS", "RESTARTS", "AGE"]),
        ("", "Service", &["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]),
        ("apps", "Deployment", &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]),
        ("apps", "ReplicaSet", &["NAME", "DESIRED", "CURRENT", "READY", "AGE"]),
        ("", "ConfigMap", &["NAME", "DATA", "AGE"]),
        ("", "Event", &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]),
        ("apiextensions.k8s.io", "CustomResourceDefinition", &["NAME", "CREATED AT"]),
        ("coordination.k8s.io", "Lease", &["NAME", "HOLDER", "AGE"]),
    ];
    for (g, k, want) in cases {
        let t = render_table(&rt(g, k), &[json!({"metadata": {"name": "x"}})], "1", now());
        assert_eq!(names(&t), want, "{k}");
        let width = t["columnDefinitions"].as_array().unwrap().len();
        assert_eq!(t["rows"][0]["cells"].as_array().unwrap().len(), width, "{k}: one cell per column");
    }
    let sa = render_table(&rt("", "ServiceAccount"), &[], "1", now());
    assert_eq!(names(&sa), ["NAME", "SECRETS", "AGE"]);
}

#[test]
fn deployment_and_service_rows() {
    let d = json!({"metadata": {"name": "web", "creationTimestamp": "2026-12-02T11:59:50Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    let t = render_table(&rt("apps", "Deployment"), &[d], "1", now());
    assert_eq!(t["rows"][0]["cells"], json!(["web", "2/3", 3, 2, "10s", "app", "nginx:1", "app=web"]));

    let s = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.7",
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        "selector": {"b": "2", "a": "1"}}});
    let t = render_table(&rt("", "Service"), &[s], "1", now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["web", "NodePort", "10.96.0.7", "<none>", "80:30080/TCP,53/UDP", "<unknown>", "a=1,b=2"])
    );
}

#[test]
fn pod_rows() {
    let p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2026-12-02T11:00:00Z"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
    let t = render_table(&rt("", "Pod"), &[p], "1", now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["p", "1/2", "CrashLoopBackOff", "2 (60m ago)", "<unknown>", "10.0.0.5", "n1", "<none>", "<none>"])
    );
    let deleting = json!({"metadata": {"name": "p", "deletionTimestamp": "2026-12-02T11:00:00Z"}, "spec": {"containers": []}, "status": {"phase": "Running"}});
    assert_eq!(render_table(&rt("", "Pod"), &[deleting], "1", now())["rows"][0]["cells"][2], "Terminating");
}

#[test]
fn event_rows_from_both_apis() {
    let core = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Scaled",
        "involvedObject": {"kind": "Deployment", "name": "web"}, "message": " scaled up ",
        "firstTimestamp": "2026-12-02T11:00:00Z", "lastTimestamp": "2026-12-02T11:58:00Z", "count": 3,
        "source": {"component": "deployment-controller"}});
    let new = json!({"metadata": {"name": "e2"}, "type": "Warning", "reason": "Failed",
        "regarding": {"kind": "Microservice", "name": "todo"}, "note": "boom",
        "eventTime": "2026-12-02T11:59:00.000000Z", "reportingController": "operator"});
    let t = render_table(&rt("events.k8s.io", "Event"), &[core, new], "1", now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["2m", "Normal", "Scaled", "deployment/web", "", "deployment-controller", "scaled up", "60m", 3, "e1"])
    );
    assert_eq!(
        t["rows"][1]["cells"],
        json!(["60s", "Warning", "Failed", "microservice/todo", "", "operator", "boom", "60s", 1, "e2"])
    );
}

fn crd_type(columns: Vec<Value>) -> ResourceType {
    let mut t = rt("apps", "Deployment");
    t.origin = Origin::Crd {
        crd_name: "microservices.platform.example.com".into(),
        schema: Value::Null,
        printer_columns: columns,
        selectable_fields: vec![],
        storage: true,
    };
    t
}

#[test]
fn crd_printer_columns() {
    let t = crd_type(vec![
        json!({"name": "Image", "type": "string", "jsonPath": ".spec.image"}),
        json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}),
        json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}),
        json!({"name": "Debug", "type": "boolean", "jsonPath": ".spec.debug", "priority": 1}),
        json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
    ]);
    let o = json!({"metadata": {"name": "todo", "creationTimestamp": "2026-12-02T09:00:00Z"},
        "spec": {"image": "todo:1", "replicas": 2.0},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let table = render_table(&t, &[o], "7", now());
    assert_eq!(names(&table), ["NAME", "IMAGE", "REPLICAS", "READY", "AGE"]);
    assert_eq!(table["columnDefinitions"][5]["type"], "date");
    assert_eq!(table["columnDefinitions"][4]["priority"], 1);
    assert_eq!(table["rows"][0]["cells"], json!(["todo", "todo:1", 2, "True", null, "3h"]));
}

#[test]
fn crd_without_columns_shows_age() {
    let table = render_table(
        &crd_type(vec![]),
        &[json!({"metadata": {"name": "a", "creationTimestamp": "2026-12-02T11:59:57Z"}})],
        "1",
        now(),
    );
    assert_eq!(names(&table), ["NAME", "AGE"]);
    assert_eq!(table["rows"][0]["cells"], json!(["a", "3s"]));
}
