//! Does the live object still carry everything the operator wants? A semantic-subset comparison: every field the
//! desired object sets must be present and equal in the live one; fields only the live object has (server
//! defaults, other managers' fields, status) are ignored. An empty answer means "converged: send no write".
//!
//! Lists of objects that Kubernetes merges by key are compared item by item under that key (containers, env and
//! volumes by name, container ports by containerPort and protocol, Service ports by port and protocol, owner
//! references by uid); all other lists are compared position by position, so their length and order count.
//! Known limit: a field the operator used to set and no longer desires is not reported (server-side apply
//! removes it on the next apply caused by any other change).

use std::fmt::Write;

use serde_json::Value;

/// Paths (like `spec.template.spec.containers[name=app].env[name=OTEL_SERVICE_NAME].value`) of managed fields
/// whose live value differs from the desired one.
pub fn differs(desired: &Value, live: &Value) -> Vec<String> {
    let mut out = Vec::new();
    compare(&mut String::new(), desired, live, &mut out);
    out
}

/// `path` is one buffer for the whole walk, each level appending its segment and cutting it off again: a judge
/// visits every field the operator sets, and a string per field was most of what a converged comparison cost.
fn compare(path: &mut String, desired: &Value, live: &Value, out: &mut Vec<String>) {
    match (desired, live) {
        // An explicit null sets nothing.
        (Value::Null, _) => {}
        (Value::Object(want), Value::Object(have)) => {
            for (key, value) in want {
                let field = |p: &mut String| {
                    if !p.is_empty() {
                        p.push('.');
                    }
                    p.push_str(key);
                };
                under(path, field, |path| match have.get(key) {
                    Some(found) => compare(path, value, found, out),
                    None if value.is_null() => {}
                    None => out.push(path.clone()),
                });
            }
        }
        (Value::Array(want), Value::Array(have)) => match merge_key(path, want) {
            Some(key) => compare_keyed(path, key, want, have, out),
            None if want.len() != have.len() => out.push(path.clone()),
            None => {
                for (index, (w, h)) in want.iter().zip(have).enumerate() {
                    under(
                        path,
                        |p| {
                            let _ = write!(p, "[{index}]");
                        },
                        |path| compare(path, w, h, out),
                    );
                }
            }
        },
        (Value::String(want), Value::String(have)) if is_quantity_path(path) => {
            if !quantities_equal(want, have) {
                out.push(path.clone());
            }
        }
        (Value::Number(want), Value::Number(have)) => {
            if want.as_f64() != have.as_f64() {
                out.push(path.clone());
            }
        }
        (want, have) => {
            if want != have {
                out.push(path.clone());
            }
        }
    }
}

/// Runs `f` with the segment `push` appends to `path`, then cuts the segment off again.
fn under<T>(path: &mut String, push: impl FnOnce(&mut String), f: impl FnOnce(&mut String) -> T) -> T {
    let len = path.len();
    push(path);
    let result = f(path);
    path.truncate(len);
    result
}

/// The fields that identify an item of a list Kubernetes merges by key.
#[derive(Clone, Copy)]
enum MergeKey {
    Name,
    MountPath,
    Uid,
    /// Container ports: containerPort + protocol (TCP when absent).
    ContainerPort,
    /// Service ports: port + protocol (TCP when absent).
    ServicePort,
}

fn merge_key(path: &str, items: &[Value]) -> Option<MergeKey> {
    let field = path.rsplit('.').next().unwrap_or(path);
    let field = field.split('[').next().unwrap_or(field);
    let all_have = |key: &str| items.iter().all(|item| item.get(key).is_some());
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "env" | "volumes" | "imagePullSecrets" => {
            all_have("name").then_some(MergeKey::Name)
        }
        "volumeMounts" => all_have("mountPath").then_some(MergeKey::MountPath),
        "ownerReferences" => all_have("uid").then_some(MergeKey::Uid),
        "ports" if all_have("containerPort") => Some(MergeKey::ContainerPort),
        "ports" if all_have("port") => Some(MergeKey::ServicePort),
        _ => None,
    }
}

fn key_of(key: MergeKey, item: &Value) -> Option<String> {
    let text = |field: &str| item.get(field).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
    let protocol = || text("protocol").unwrap_or_else(|| "TCP".to_string());
    match key {
        MergeKey::Name => text("name").map(|n| format!("name={n}")),
        MergeKey::MountPath => text("mountPath").map(|p| format!("mountPath={p}")),
        MergeKey::Uid => text("uid").map(|u| format!("uid={u}")),
        MergeKey::ContainerPort => text("containerPort").map(|p| format!("containerPort={p}/{}", protocol())),
        MergeKey::ServicePort => text("port").map(|p| format!("port={p}/{}", protocol())),
    }
}

fn compare_keyed(path: &mut String, key: MergeKey, want: &[Value], have: &[Value], out: &mut Vec<String>) {
    let live: Vec<(Option<String>, &Value)> = have.iter().map(|item| (key_of(key, item), item)).collect();
    let mut positions = Vec::new();
    for item in want {
        let Some(id) = key_of(key, item) else {
            out.push(path.clone());
            continue;
        };
        let found = live.iter().position(|(k, _)| k.as_deref() == Some(id.as_str()));
        under(
            path,
            |p| {
                let _ = write!(p, "[{id}]");
            },
            |path| match found {
                Some(index) => {
                    positions.push(index);
                    compare(path, item, live[index].1, out);
                }
                None => out.push(path.clone()),
            },
        );
    }
    // Env order matters: `$(VAR)` expands only variables defined earlier in the list.
    if path.ends_with("env") && positions.windows(2).any(|w| w[0] > w[1]) {
        out.push(format!("{path} (order)"));
    }
}

/// Resource quantities the server may rewrite into canonical form (`0.5` → `500m`).
fn is_quantity_path(path: &str) -> bool {
    path.contains("resources.limits.") || path.contains("resources.requests.")
}

fn quantities_equal(a: &str, b: &str) -> bool {
    a == b
        || match (parse_quantity(a), parse_quantity(b)) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            _ => false,
        }
}

/// A Kubernetes quantity as a number: decimal with an optional SI, binary or exponent suffix.
fn parse_quantity(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-'))).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => 10f64.powi(exponent.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(value * factor)
}

/// A field of a part the platform owns exactly that the live object has and the desired one does not: the
/// subset comparison above ignores it, and server-side apply cannot remove it (it belongs to whoever added it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extra {
    /// As in [`differs`]: `spec.template.spec.containers[name=miner]`.
    pub path: String,
    /// JSON pointer into the live object the extra was found in.
    pub pointer: String,
}

/// Which child an [`extras`] comparison is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exact {
    /// The pod spec of a Deployment's template: containers, init and ephemeral containers, volumes, host
    /// namespaces, service account, privilege and added capabilities of the platform's containers.
    Deployment,
    /// A Service's selector and ports.
    Service,
    /// Nothing beyond [`differs`]: an HPA's lists (metrics) have no merge key, so they are compared whole there.
    HorizontalPodAutoscaler,
}

/// Extra fields in the parts the platform owns exactly (see docs/design.md, "exact and merged"), in an order that is
/// safe to apply as one JSON patch of `remove` operations: fields inside items before items, later items first.
/// Metadata (labels, annotations, e.g. `kubectl rollout restart`'s) is merged, never exact.
pub fn extras(which: Exact, desired: &Value, live: &Value) -> Vec<Extra> {
    let mut out = Vec::new();
    match which {
        Exact::Deployment => {
            let (want, have) = (&desired["spec"]["template"]["spec"], &live["spec"]["template"]["spec"]);
            let base = ("spec.template.spec", "/spec/template/spec");
            // Inside the containers the platform defines: no privilege, no added capability, no foreign mount.
            for (index, container) in have["containers"].as_array().into_iter().flatten().enumerate() {
                let Some(wanted) = find_named(&want["containers"], container) else { continue };
                let name = container["name"].as_str().unwrap_or_default();
                let (path, pointer) =
                    (format!("{}.containers[name={name}]", base.0), format!("{}/containers/{index}", base.1));
                for field in [["securityContext", "privileged"], ["securityContext", "capabilities"]] {
                    let (a, b) = (field[0], field[1]);
                    let found = if b == "capabilities" { &container[a][b]["add"] } else { &container[a][b] };
                    let wanted_value = if b == "capabilities" { &wanted[a][b]["add"] } else { &wanted[a][b] };
                    if is_set(found) && wanted_value.is_null() {
                        let (p, q) = if b == "capabilities" {
                            (format!("{path}.{a}.{b}.add"), format!("{pointer}/{a}/{b}/add"))
                        } else {
                            (format!("{path}.{a}.{b}"), format!("{pointer}/{a}/{b}"))
                        };
                        out.push(Extra { path: p, pointer: q });
                    }
                }
                extra_items(
                    &format!("{path}.volumeMounts"),
                    &format!("{pointer}/volumeMounts"),
                    &wanted["volumeMounts"],
                    &container["volumeMounts"],
                    "mountPath",
                    &mut out,
                );
            }
            for field in ["hostNetwork", "hostPID", "hostIPC", "serviceAccountName", "serviceAccount"] {
                if is_set(&have[field]) && want[field].is_null() {
                    out.push(Extra { path: format!("{}.{field}", base.0), pointer: format!("{}/{field}", base.1) });
                }
            }
            for list in ["volumes", "ephemeralContainers", "initContainers", "containers"] {
                extra_items(
                    &format!("{}.{list}", base.0),
                    &format!("{}/{list}", base.1),
                    &want[list],
                    &have[list],
                    "name",
                    &mut out,
                );
            }
        }
        Exact::HorizontalPodAutoscaler => {}
        Exact::Service => {
            let want = &desired["spec"]["selector"];
            for key in live["spec"]["selector"].as_object().into_iter().flat_map(|m| m.keys()) {
                if want.get(key).is_none() {
                    out.push(Extra {
                        path: format!("spec.selector.{key}"),
                        pointer: format!("/spec/selector/{}", key.replace('~', "~0").replace('/', "~1")),
                    });
                }
            }
            let wanted: Vec<Option<String>> = desired["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| key_of(MergeKey::ServicePort, p))
                .collect();
            let have = live["spec"]["ports"].as_array().map(Vec::as_slice).unwrap_or_default();
            for (index, port) in have.iter().enumerate().rev() {
                let id = key_of(MergeKey::ServicePort, port);
                if !wanted.contains(&id) {
                    let id = id.unwrap_or_else(|| index.to_string());
                    out.push(Extra { path: format!("spec.ports[{id}]"), pointer: format!("/spec/ports/{index}") });
                }
            }
        }
    }
    out
}

/// The desired item with the same `name` as `item`.
fn find_named<'a>(desired: &'a Value, item: &Value) -> Option<&'a Value> {
    desired.as_array()?.iter().find(|d| d["name"] == item["name"])
}

/// A value that means something: not absent, false, empty or zero-length.
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Number(_) | Value::Bool(true) => true,
    }
}

/// Items of `have` whose `key` field no desired item has, later items first (so the pointers stay valid).
fn extra_items(path: &str, pointer: &str, want: &Value, have: &Value, key: &str, out: &mut Vec<Extra>) {
    let Some(items) = have.as_array() else { return };
    let wanted: Vec<&Value> = want.as_array().into_iter().flatten().map(|w| &w[key]).collect();
    for (index, item) in items.iter().enumerate().rev() {
        if !wanted.contains(&&item[key]) {
            let id = item[key].as_str().map_or_else(|| index.to_string(), |v| format!("{key}={v}"));
            out.push(Extra { path: format!("{path}[{id}]"), pointer: format!("{pointer}/{index}") });
        }
    }
}

/// The `remove` operations of a JSON patch for `extras`; the caller guards them with a `test` of the
/// resourceVersion the pointers were computed from.
pub fn removal_ops(extras: &[Extra]) -> Vec<Value> {
    extras.iter().map(|e| serde_json::json!({"op": "remove", "path": e.pointer})).collect()
}

/// Convenience for typed objects.
pub fn differs_typed<T: serde::Serialize>(desired: &T, live: &T) -> Result<Vec<String>, serde_json::Error> {
    Ok(differs(&serde_json::to_value(desired)?, &serde_json::to_value(live)?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::validate;
    use crate::crd::{Microservice, MicroserviceSpec};
    use crate::desired::{desired_deployment, desired_service};
    use crate::profile::PlatformProfile;

    fn desired() -> (Value, Value) {
        let spec = MicroserviceSpec {
            image: "ghcr.io/example/todo-api:1.4.2".into(),
            port: 8080,
            replicas: Some(2),
            autoscaling: None,
        };
        let mut ms = Microservice::new("todo-api", spec);
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.uid = Some("u-1".into());
        ms.metadata.generation = Some(1);
        let profile = PlatformProfile::default();
        let contract = validate(&ms.spec, &profile).unwrap();
        (
            serde_json::to_value(desired_deployment(&ms, &contract, &profile).unwrap()).unwrap(),
            serde_json::to_value(desired_service(&ms, &profile).unwrap()).unwrap(),
        )
    }

    /// What a kube-apiserver stores for the desired Deployment: defaults, server metadata, other owners, status.
    fn server_defaulted_deployment(desired: &Value) -> Value {
        let mut live = desired.clone();
        let meta = live["metadata"].as_object_mut().unwrap();
        meta.insert("uid".into(), json!("d-1"));
        meta.insert("resourceVersion".into(), json!("42"));
        meta.insert("generation".into(), json!(1));
        meta.insert("creationTimestamp".into(), json!("2026-12-02T16:00:00Z"));
        meta.insert("managedFields".into(), json!([{"manager": "microservice-operator", "operation": "Apply"}]));
        meta["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
        meta["ownerReferences"]
            .as_array_mut()
            .unwrap()
            .insert(0, json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "other"}));
        let pod = live["spec"]["template"]["spec"].as_object_mut().unwrap();
        pod.insert("restartPolicy".into(), json!("Always"));
        pod.insert("dnsPolicy".into(), json!("ClusterFirst"));
        pod.insert("schedulerName".into(), json!("default-scheduler"));
        pod.insert("terminationGracePeriodSeconds".into(), json!(30));
        let container = &mut live["spec"]["template"]["spec"]["containers"][0];
        container["terminationMessagePath"] = json!("/dev/termination-log");
        container["terminationMessagePolicy"] = json!("File");
        // The server may list map-keyed items in another order and canonicalize quantities.
        container["resources"]["limits"]["cpu"] = json!("0.5");
        container["resources"]["requests"]["memory"] = json!("134217728");
        live["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
        live["status"] = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2});
        live
    }

    #[test]
    fn a_server_defaulted_copy_has_converged() {
        let (deployment, service) = desired();
        assert_eq!(differs(&deployment, &server_defaulted_deployment(&deployment)), Vec::<String>::new());
        let mut live_service = service.clone();
        live_service["spec"]["clusterIP"] = json!("10.96.0.12");
        live_service["spec"]["clusterIPs"] = json!(["10.96.0.12"]);
        live_service["spec"]["sessionAffinity"] = json!("None");
        live_service["spec"]["ipFamilies"] = json!(["IPv4"]);
        live_service["spec"]["ports"][0].as_object_mut().unwrap().remove("protocol");
        live_service["metadata"]["labels"]["team"] = json!("x");
        let diff = differs(&service, &live_service);
        assert_eq!(diff, ["spec.ports[port=80/TCP].protocol"], "a dropped managed field is reported");
        live_service["spec"]["ports"][0]["protocol"] = json!("TCP");
        assert!(differs(&service, &live_service).is_empty());
    }

    #[test]
    fn autoscaled_replicas_are_not_drift_but_hpa_edits_are() {
        let mut ms = Microservice::new(
            "todo-api",
            MicroserviceSpec {
                image: "ghcr.io/example/todo-api:1.4.2".into(),
                port: 8080,
                replicas: None,
                autoscaling: Some(crate::crd::Autoscaling {
                    min_replicas: None,
                    max_replicas: 4,
                    target_cpu_utilization_percentage: None,
                }),
            },
        );
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.uid = Some("u-1".into());
        ms.metadata.generation = Some(1);
        let profile = PlatformProfile::default();
        let contract = validate(&ms.spec, &profile).unwrap();
        let deployment = serde_json::to_value(desired_deployment(&ms, &contract, &profile).unwrap()).unwrap();
        let mut live = server_defaulted_deployment(&deployment);
        live["spec"]["replicas"] = json!(3);
        assert!(differs(&deployment, &live).is_empty(), "a scaled autoscaled Deployment has no drift");
        let Some(bounds) = contract.scaling.autoscaling() else { panic!("not autoscaled") };
        let hpa = serde_json::to_value(crate::desired::desired_hpa(&ms, &bounds, &profile).unwrap()).unwrap();
        let mut live_hpa = hpa.clone();
        live_hpa["status"] = json!({"currentReplicas": 3, "desiredReplicas": 3});
        assert!(differs(&hpa, &live_hpa).is_empty());
        live_hpa["spec"]["maxReplicas"] = json!(10);
        live_hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = json!(50);
        assert_eq!(
            differs(&hpa, &live_hpa),
            ["spec.maxReplicas", "spec.metrics[0].resource.target.averageUtilization"]
        );
    }

    // Over 80 lines on purpose: a table, one row per kind of managed field a hand edit can change.
    #[test]
    fn hand_edits_of_managed_fields_are_reported_by_path() {
        let (deployment, _) = desired();
        let base = server_defaulted_deployment(&deployment);
        type Edit = fn(&mut Value);
        let cases: Vec<(&str, Edit, &str)> = vec![
            ("replicas", |l| l["spec"]["replicas"] = json!(5), "spec.replicas"),
            (
                "env value",
                |l| l["spec"]["template"]["spec"]["containers"][0]["env"][2]["value"] = json!("other"),
                "spec.template.spec.containers[name=app].env[name=OTEL_SERVICE_NAME].value",
            ),
            (
                "env removed",
                |l| {
                    l["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut().unwrap().remove(3);
                },
                "spec.template.spec.containers[name=app].env[name=OTEL_EXPORTER_OTLP_ENDPOINT]",
            ),
            (
                "probe path",
                |l| l["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"] = json!("/"),
                "spec.template.spec.containers[name=app].readinessProbe.httpGet.path",
            ),
            (
                "probe removed",
                |l| {
                    l["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap().remove("livenessProbe");
                },
                "spec.template.spec.containers[name=app].livenessProbe",
            ),
            (
                "port changed",
                |l| l["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(9999),
                "spec.template.spec.containers[name=app].ports[containerPort=8080/TCP]",
            ),
            (
                "capability list",
                |l| {
                    l["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"] =
                        json!(["ALL", "NET_RAW"])
                },
                "spec.template.spec.containers[name=app].securityContext.capabilities.drop",
            ),
            (
                "label",
                |l| l["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/version"] = json!("9"),
                "spec.template.metadata.labels.app.kubernetes.io/version",
            ),
            (
                "cpu limit",
                |l| l["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("1"),
                "spec.template.spec.containers[name=app].resources.limits.cpu",
            ),
            (
                "owner gone",
                |l| {
                    l["metadata"]["ownerReferences"].as_array_mut().unwrap().remove(1);
                },
                "metadata.ownerReferences[uid=u-1]",
            ),
            (
                "generation annotation",
                |l| l["metadata"]["annotations"]["platform.example.com/generation"] = json!("0"),
                "metadata.annotations.platform.example.com/generation",
            ),
            (
                "env reordered",
                |l| {
                    let env = l["spec"]["template"]["spec"]["containers"][0]["env"].as_array_mut().unwrap();
                    let first = env.remove(0);
                    env.push(first);
                },
                "spec.template.spec.containers[name=app].env (order)",
            ),
            (
                "type changed",
                |l| l["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] = json!("0"),
                "spec.strategy.rollingUpdate.maxUnavailable",
            ),
        ];
        for (name, edit, path) in cases {
            let mut live = base.clone();
            edit(&mut live);
            assert_eq!(differs(&deployment, &live), [path], "{name}");
        }
    }

    #[test]
    fn extra_live_items_in_keyed_lists_are_not_drift() {
        let (deployment, _) = desired();
        let mut live = server_defaulted_deployment(&deployment);
        let container = &mut live["spec"]["template"]["spec"]["containers"][0];
        container["env"].as_array_mut().unwrap().push(json!({"name": "DEBUG", "value": "1"}));
        live["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().insert(0, json!({"name": "sidecar"}));
        assert!(differs(&deployment, &live).is_empty());
    }

    #[test]
    fn a_missing_object_or_wrong_shape_differs_at_the_top() {
        assert_eq!(differs(&json!({"spec": {"a": 1}}), &json!({})), ["spec"]);
        assert_eq!(
            differs(&json!({"spec": {"a": [1, 2]}}), &json!({"spec": {"a": [2, 1]}})),
            ["spec.a[0]", "spec.a[1]"]
        );
        assert_eq!(differs(&json!({"spec": {"a": [1]}}), &json!({"spec": {"a": [1, 2]}})), ["spec.a"]);
        assert_eq!(differs(&json!({"a": {"b": 1}}), &json!({"a": "x"})), ["a"]);
        assert!(differs(&json!({"a": null}), &json!({})).is_empty());
        assert!(differs(&json!({"a": 1}), &json!({"a": 1.0})).is_empty());
    }

    #[test]
    fn quantities_compare_by_value() {
        for (a, b) in [("500m", "0.5"), ("128Mi", "134217728"), ("1", "1000m"), ("1k", "1e3"), ("1Gi", "1024Mi")] {
            assert!(quantities_equal(a, b), "{a} = {b}");
        }
        for (a, b) in [("500m", "5"), ("128Mi", "128M"), ("1", "x")] {
            assert!(!quantities_equal(a, b), "{a} != {b}");
        }
    }

    /// The extras found in `live`, as (path, JSON pointer) pairs.
    fn found_extras(exact: Exact, desired: &Value, live: &Value) -> Vec<(String, String)> {
        extras(exact, desired, live).into_iter().map(|e| (e.path, e.pointer)).collect()
    }

    /// Edits a server-defaulted copy of the desired Deployment and checks the extras found in it, in their order.
    fn assert_deployment_extras(edit: impl FnOnce(&mut Value), expected: &[(&str, &str)]) {
        let (deployment, _) = desired();
        let mut live = server_defaulted_deployment(&deployment);
        edit(&mut live);
        let expected: Vec<(String, String)> = expected.iter().map(|(p, q)| (p.to_string(), q.to_string())).collect();
        assert_eq!(found_extras(Exact::Deployment, &deployment, &live), expected);
    }

    #[test]
    fn a_sidecar_and_host_network_are_extras() {
        assert_deployment_extras(
            |l| {
                let pod = &mut l["spec"]["template"]["spec"];
                pod["containers"].as_array_mut().unwrap().push(json!({"name": "miner", "image": "evil/miner"}));
                pod["hostNetwork"] = json!(true);
            },
            &[
                ("spec.template.spec.hostNetwork", "/spec/template/spec/hostNetwork"),
                ("spec.template.spec.containers[name=miner]", "/spec/template/spec/containers/1"),
            ],
        );
    }

    #[test]
    fn a_sidecar_before_the_app_container_and_a_privileged_app_are_extras() {
        assert_deployment_extras(
            |l| {
                let pod = &mut l["spec"]["template"]["spec"];
                pod["containers"].as_array_mut().unwrap().insert(0, json!({"name": "miner"}));
                pod["containers"][1]["securityContext"]["privileged"] = json!(true);
                pod["containers"][1]["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"]);
            },
            &[
                (
                    "spec.template.spec.containers[name=app].securityContext.privileged",
                    "/spec/template/spec/containers/1/securityContext/privileged",
                ),
                (
                    "spec.template.spec.containers[name=app].securityContext.capabilities.add",
                    "/spec/template/spec/containers/1/securityContext/capabilities/add",
                ),
                ("spec.template.spec.containers[name=miner]", "/spec/template/spec/containers/0"),
            ],
        );
    }

    #[test]
    fn init_containers_host_pid_and_ipc_and_a_service_account_are_extras() {
        assert_deployment_extras(
            |l| {
                let pod = &mut l["spec"]["template"]["spec"];
                pod["initContainers"] = json!([{"name": "a"}, {"name": "b"}]);
                pod["hostPID"] = json!(true);
                pod["hostIPC"] = json!(true);
                pod["serviceAccountName"] = json!("admin");
                pod["serviceAccount"] = json!("admin");
            },
            &[
                ("spec.template.spec.hostPID", "/spec/template/spec/hostPID"),
                ("spec.template.spec.hostIPC", "/spec/template/spec/hostIPC"),
                ("spec.template.spec.serviceAccountName", "/spec/template/spec/serviceAccountName"),
                ("spec.template.spec.serviceAccount", "/spec/template/spec/serviceAccount"),
                ("spec.template.spec.initContainers[name=b]", "/spec/template/spec/initContainers/1"),
                ("spec.template.spec.initContainers[name=a]", "/spec/template/spec/initContainers/0"),
            ],
        );
    }

    #[test]
    fn a_host_path_volume_mounted_into_the_app_is_an_extra() {
        assert_deployment_extras(
            |l| {
                let pod = &mut l["spec"]["template"]["spec"];
                pod["volumes"].as_array_mut().unwrap().push(json!({"name": "root", "hostPath": {"path": "/"}}));
                pod["containers"][0]["volumeMounts"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "root", "mountPath": "/host"}));
            },
            &[
                (
                    "spec.template.spec.containers[name=app].volumeMounts[mountPath=/host]",
                    "/spec/template/spec/containers/0/volumeMounts/1",
                ),
                ("spec.template.spec.volumes[name=root]", "/spec/template/spec/volumes/1"),
            ],
        );
    }

    #[test]
    fn labels_and_annotations_others_add_and_false_or_empty_values_are_not_extras() {
        assert_deployment_extras(
            |l| {
                l["metadata"]["labels"]["team"] = json!("a");
                l["spec"]["template"]["metadata"]["annotations"] =
                    json!({"kubectl.kubernetes.io/restartedAt": "2026-12-02T10:00:00Z"});
                l["spec"]["template"]["spec"]["hostNetwork"] = json!(false);
                l["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = json!(false);
            },
            &[],
        );
    }

    #[test]
    fn a_server_defaulted_deployment_has_no_extras() {
        let (deployment, _) = desired();
        let base = server_defaulted_deployment(&deployment);
        assert!(extras(Exact::Deployment, &deployment, &base).is_empty(), "a server-defaulted copy has no extras");
    }

    #[test]
    fn extras_in_a_service_are_found_and_removed_by_pointer() {
        let (_, service) = desired();
        let mut live = service.clone();
        live["spec"]["selector"]["tier/x"] = json!("web");
        live["spec"]["ports"].as_array_mut().unwrap().push(json!({"name": "debug", "port": 9000, "protocol": "TCP"}));
        live["metadata"]["labels"]["team"] = json!("a");
        assert_eq!(
            found_extras(Exact::Service, &service, &live),
            [
                ("spec.selector.tier/x".to_string(), "/spec/selector/tier~1x".to_string()),
                ("spec.ports[port=9000/TCP]".to_string(), "/spec/ports/1".to_string()),
            ]
        );
        assert_eq!(
            removal_ops(&extras(Exact::Service, &service, &live))[0],
            json!({"op": "remove", "path": "/spec/selector/tier~1x"})
        );
    }
}
