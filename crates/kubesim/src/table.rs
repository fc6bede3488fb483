//! Server-side printing: `meta.k8s.io/v1` Table responses with upstream's columns for the built-ins
//! (`pkg/printers/internalversion`) and a CRD's `additionalPrinterColumns` (apiextensions' table convertor).
//! Rows carry the object as PartialObjectMetadata (`includeObject=Metadata`, kubectl's default).

use serde_json::{Value, json};

use crate::jsonpath;
use crate::resources::{Origin, ResourceType};
use crate::selector::LabelSelector;

/// `duration.HumanDuration`: the ages kubectl shows ("5s", "3m20s", "5h", "3d").
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: the age of an RFC 3339 timestamp, `<unknown>` when absent or unparsable.
pub fn age(timestamp: Option<&Value>, now: jiff::Timestamp) -> String {
    match timestamp.and_then(Value::as_str).and_then(|s| s.parse::<jiff::Timestamp>().ok()) {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

struct Column {
    name: &'static str,
    ty: &'static str,
    format: &'static str,
    description: &'static str,
    priority: i64,
}

const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column { name, ty, format: "", description, priority: 0 }
}

const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column { name, ty, format: "", description, priority: 1 }
}

const NAME: Column = Column { name: "Name", ty: "string", format: "name", description: NAME_DESC, priority: 0 };
// Upstream's printers describe their columns with the Go types' SwaggerDoc texts (the OpenAPI field
// descriptions), e.g. `metav1.ObjectMeta{}.SwaggerDoc()["name"]`; these are the v1.37 texts.
const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const AGE: Column = col("Age", "string", AGE_DESC);
const CONFIG_MAP_DATA_DESC: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";

fn column_json(c: &Column) -> Value {
    json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn i(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
           "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

/// Renders objects of one type as a Table (one row per object, in the given order).
pub fn render_table(rt: &ResourceType, objects: &[Value], resource_version: &str, now: jiff::Timestamp) -> Value {
    let (columns, rows): (Vec<Value>, Vec<Value>) = match &rt.origin {
        Origin::Crd { printer_columns, .. } => crd_table(printer_columns, objects, now),
        Origin::BuiltIn => {
            let (cols, f) = builtin_printer(rt);
            let rows = objects.iter().map(|o| json!({"cells": f(o, now), "object": partial_metadata(o)})).collect();
            (cols.iter().map(column_json).collect(), rows)
        }
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

type Printer = fn(&Value, jiff::Timestamp) -> Vec<Value>;

fn name(o: &Value) -> Value {
    json!(s(o, "/metadata/name"))
}

fn created(o: &Value, now: jiff::Timestamp) -> Value {
    json!(age(o.pointer("/metadata/creationTimestamp"), now))
}

// Over 80 lines on purpose: A table, one arm per built-in kind with its columns and row function as kubectl prints
// them; splitting it would only scatter the table.
fn builtin_printer(rt: &ResourceType) -> (Vec<Column>, Printer) {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => (vec![NAME, col("Status", "string", "The status of the namespace"), AGE], |o, now| {
            vec![name(o), json!(s(o, "/status/phase")), created(o, now)]
        }),
        ("", "Pod") => (
            vec![
                NAME,
                col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
                col("Status", "string", "The aggregate status of the containers in this pod."),
                col(
                    "Restarts",
                    "string",
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                AGE,
                wide(
                    "IP",
                    "string",
                    "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                ),
                wide("Node", "string", "NodeName is a request to schedule this pod onto a specific node."),
                wide(
                    "Nominated Node",
                    "string",
                    "nominatedNodeName is set only when this pod preempts other pods on the node.",
                ),
                wide(
                    "Readiness Gates",
                    "string",
                    "If specified, all readiness gates will be evaluated for pod readiness.",
                ),
            ],
            pod_row,
        ),
        ("", "Service") => (
            vec![
                NAME,
                col("Type", "string", "type determines how the Service is exposed."),
                col("Cluster-IP", "string", "clusterIP is the IP address of the service."),
                col(
                    "External-IP",
                    "string",
                    "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                ),
                col("Port(s)", "string", "The list of ports that are exposed by this service."),
                AGE,
                wide(
                    "Selector",
                    "string",
                    "Route service traffic to pods with label keys and values matching this selector.",
                ),
            ],
            service_row,
        ),
        ("apps", "Deployment") => (
            vec![
                NAME,
                col("Ready", "string", "Number of the pod with ready state"),
                // Typed "string" upstream, though the cells are numbers.
                col(
                    "Up-to-date",
                    "string",
                    "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "string",
                    "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                AGE,
                wide("Containers", "string", "Names of each container in the template."),
                wide("Images", "string", "Images referenced by each container in the template."),
                wide(
                    "Selector",
                    "string",
                    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
                ),
            ],
            |o, now| {
                let mut row = vec![
                    name(o),
                    json!(format!("{}/{}", i(o, "/status/readyReplicas"), i(o, "/spec/replicas"))),
                    json!(i(o, "/status/updatedReplicas")),
                    json!(i(o, "/status/availableReplicas")),
                    created(o, now),
                ];
                row.extend(template_columns(o));
                row
            },
        ),
        ("apps", "ReplicaSet") => (
            vec![
                NAME,
                col("Desired", "integer", "Replicas is the number of desired pods."),
                col("Current", "integer", "Replicas is the most recently observed number of replicas."),
                col("Ready", "integer", "The number of ready replicas for this replica set."),
                AGE,
                wide("Containers", "string", "Names of each container in the template."),
                wide("Images", "string", "Images referenced by each container in the template."),
                wide("Selector", "string", "Selector is a label query over pods that should match the replica count."),
            ],
            |o, now| {
                let mut row = vec![
                    name(o),
                    json!(i(o, "/spec/replicas")),
                    json!(i(o, "/status/replicas")),
                    json!(i(o, "/status/readyReplicas")),
                    created(o, now),
                ];
                row.extend(template_columns(o));
                row
            },
        ),
        ("", "ConfigMap") => (vec![NAME, col("Data", "string", CONFIG_MAP_DATA_DESC), AGE], |o, now| {
            vec![name(o), json!(count(o, "/data") + count(o, "/binaryData")), created(o, now)]
        }),
        ("", "Secret") => (
            vec![
                NAME,
                col("Type", "string", "The type of the secret"),
                col("Data", "string", "Data contains the secret data."),
                AGE,
            ],
            |o, now| vec![name(o), json!(s(o, "/type")), json!(count(o, "/data")), created(o, now)],
        ),
        ("", "ServiceAccount") => (
            vec![
                NAME,
                col(
                    "Secrets",
                    "string",
                    "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                ),
                AGE,
            ],
            |o, now| {
                vec![name(o), json!(o.get("secrets").and_then(Value::as_array).map_or(0, Vec::len)), created(o, now)]
            },
        ),
        (_, "Event") => (
            vec![
                col("Last Seen", "string", "Time when last Event occurred"),
                col("Type", "string", "Type of this event."),
                col("Reason", "string", "Reason why this event was generated."),
                col("Object", "string", "Object this event is about."),
                wide("Subobject", "string", "Field path of the object this event is about."),
                wide("Source", "string", "Component that generated this event."),
                col("Message", "string", "A human-readable description of the status of this operation."),
                wide("First Seen", "string", "Time when first Event occurred"),
                wide("Count", "string", "The number of times this event has occurred."),
                wide("Name", "string", "Name must be unique within a namespace."),
            ],
            event_row,
        ),
        ("coordination.k8s.io", "Lease") => {
            (vec![NAME, col("Holder", "string", "The holder of the lease"), AGE], |o, now| {
                vec![name(o), json!(s(o, "/spec/holderIdentity")), created(o, now)]
            })
        }
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") | ("apiextensions.k8s.io", _) => (
            vec![NAME, Column { name: "Created At", ty: "date", format: "", description: AGE_DESC, priority: 0 }],
            |o, _| vec![name(o), o.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)],
        ),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => (
            vec![
                NAME,
                col("Role", "string", "RoleRef references a Role or ClusterRole."),
                AGE,
                wide("Users", "string", "Users in the binding"),
                wide("Groups", "string", "Groups in the binding"),
                wide("ServiceAccounts", "string", "ServiceAccounts in the binding"),
            ],
            |o, now| {
                let subjects = |kind: &str| {
                    let names: Vec<String> = o
                        .get("subjects")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|sub| s(sub, "/kind") == kind)
                        .map(|sub| {
                            if kind == "ServiceAccount" {
                                format!("{}/{}", s(sub, "/namespace"), s(sub, "/name"))
                            } else {
                                s(sub, "/name").to_string()
                            }
                        })
                        .collect();
                    json!(names.join(", "))
                };
                vec![
                    name(o),
                    json!(format!("{}/{}", s(o, "/roleRef/kind"), s(o, "/roleRef/name"))),
                    created(o, now),
                    subjects("User"),
                    subjects("Group"),
                    subjects("ServiceAccount"),
                ]
            },
        ),
        ("", "Endpoints") => (
            vec![NAME, col("Endpoints", "string", "Endpoints is the list of endpoints in the endpoint."), AGE],
            |o, now| {
                let mut eps = Vec::new();
                for subset in o.get("subsets").and_then(Value::as_array).into_iter().flatten() {
                    let ports: Vec<i64> = subset
                        .get("ports")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|p| i(p, "/port"))
                        .collect();
                    for a in subset.get("addresses").and_then(Value::as_array).into_iter().flatten() {
                        if ports.is_empty() {
                            eps.push(s(a, "/ip").to_string());
                        }
                        eps.extend(ports.iter().map(|p| format!("{}:{p}", s(a, "/ip"))));
                    }
                }
                vec![name(o), json!(or_none(eps.join(","))), created(o, now)]
            },
        ),
        _ => (vec![NAME, AGE], |o, now| vec![name(o), created(o, now)]),
    }
}

fn count(o: &Value, ptr: &str) -> usize {
    o.pointer(ptr).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// Containers, Images, Selector of a Deployment or ReplicaSet.
fn template_columns(o: &Value) -> Vec<Value> {
    let containers: Vec<&Value> =
        o.pointer("/spec/template/spec/containers").and_then(Value::as_array).into_iter().flatten().collect();
    let names: Vec<&str> = containers.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, "/image")).collect();
    let selector = o
        .pointer("/spec/selector")
        .and_then(|sel| LabelSelector::from_label_selector(sel).ok())
        .map(|sel| sel.to_string())
        .unwrap_or_default();
    vec![json!(names.join(",")), json!(images.join(",")), json!(or_none(selector))]
}

// Over 80 lines on purpose: kubectl's Pod row (`printPod`): the STATUS column's rules for init containers, waiting and
// terminated states are one sequence upstream too.
fn pod_row(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let total = o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let mut reason = s(o, "/status/phase").to_string();
    if !s(o, "/status/reason").is_empty() {
        reason = s(o, "/status/reason").to_string();
    }
    let mut restarts = 0;
    let mut ready = 0;
    let mut last_restart: Option<jiff::Timestamp> = None;
    let mut has_running = false;
    let statuses: Vec<&Value> =
        o.pointer("/status/containerStatuses").and_then(Value::as_array).into_iter().flatten().collect();
    for cs in statuses.iter().rev() {
        restarts += i(cs, "/restartCount");
        if let Some(t) =
            cs.pointer("/lastState/terminated/finishedAt").and_then(Value::as_str).and_then(|t| t.parse().ok())
            && last_restart.is_none_or(|l| t > l)
        {
            last_restart = Some(t);
        }
        let waiting = s(cs, "/state/waiting/reason");
        let terminated = cs.pointer("/state/terminated");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if let Some(t) = terminated {
            let r = s(t, "/reason");
            reason = if !r.is_empty() {
                r.to_string()
            } else if i(t, "/signal") != 0 {
                format!("Signal:{}", i(t, "/signal"))
            } else {
                format!("ExitCode:{}", i(t, "/exitCode"))
            };
        } else if cs.get("ready").and_then(Value::as_bool) == Some(true) && cs.pointer("/state/running").is_some() {
            has_running = true;
            ready += 1;
        }
    }
    if reason == "Completed" && has_running {
        let pod_ready = o
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| s(c, "/type") == "Ready" && s(c, "/status") == "True");
        reason = if pod_ready { "Running".into() } else { "NotReady".into() };
    }
    if o.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null()) {
        reason = if s(o, "/status/reason") == "NodeLost" { "Unknown".into() } else { "Terminating".into() };
    }
    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now.as_second() - t.as_second())),
        _ => restarts.to_string(),
    };
    let gates = o.pointer("/spec/readinessGates").and_then(Value::as_array).map_or(0, Vec::len);
    let gates_cell = if gates == 0 {
        "<none>".to_string()
    } else {
        let true_gates = o
            .pointer("/spec/readinessGates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|g| {
                let ty = s(g, "/conditionType");
                o.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|c| s(c, "/type") == ty && s(c, "/status") == "True")
            })
            .count();
        format!("{true_gates}/{gates}")
    };
    vec![
        name(o),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        created(o, now),
        json!(or_none(s(o, "/status/podIP").to_string())),
        json!(or_none(s(o, "/spec/nodeName").to_string())),
        json!(or_none(s(o, "/status/nominatedNodeName").to_string())),
        json!(gates_cell),
    ]
}

fn service_row(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ty = s(o, "/spec/type");
    let ty = if ty.is_empty() { "ClusterIP" } else { ty };
    let external_ips: Vec<&str> = o
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let external = match ty {
        "ExternalName" => s(o, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<String> =
                o.pointer("/status/loadBalancer/ingress")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|ing| {
                        if s(ing, "/ip").is_empty() {
                            s(ing, "/hostname").to_string()
                        } else {
                            s(ing, "/ip").to_string()
                        }
                    })
                    .collect();
            ips.extend(external_ips.iter().map(|s| s.to_string()));
            if ips.is_empty() { "<pending>".into() } else { ips.join(",") }
        }
        _ => or_none(external_ips.join(",")),
    };
    let ports: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = if s(p, "/protocol").is_empty() { "TCP" } else { s(p, "/protocol") };
            let np = i(p, "/nodePort");
            if np != 0 { format!("{}:{np}/{proto}", i(p, "/port")) } else { format!("{}/{proto}", i(p, "/port")) }
        })
        .collect();
    let mut selector: Vec<String> = o
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    selector.sort();
    let cluster_ip = s(o, "/spec/clusterIP");
    vec![
        name(o),
        json!(ty),
        json!(if cluster_ip.is_empty() { "<none>" } else { cluster_ip }),
        json!(external),
        json!(or_none(ports.join(","))),
        created(o, now),
        json!(or_none(selector.join(","))),
    ]
}

/// Reads core/v1 and events.k8s.io/v1 events alike.
fn event_row(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let pick =
        |ptrs: &[&str]| ptrs.iter().find_map(|p| o.pointer(p).filter(|v| !v.is_null() && v.as_str() != Some("")));
    let first = pick(&["/firstTimestamp", "/deprecatedFirstTimestamp", "/eventTime"]);
    let first_seen = age(first, now);
    let series_last = pick(&["/series/lastObservedTime"]);
    let last_seen = match series_last {
        Some(t) => age(Some(t), now),
        None => match pick(&["/lastTimestamp", "/deprecatedLastTimestamp"]) {
            Some(t) => age(Some(t), now),
            None => first_seen.clone(),
        },
    };
    let count = match pick(&["/series/count"]) {
        Some(c) => c.as_i64().unwrap_or(1),
        None => pick(&["/count", "/deprecatedCount"]).and_then(Value::as_i64).filter(|c| *c != 0).unwrap_or(1),
    };
    let involved = pick(&["/involvedObject", "/regarding"]).cloned().unwrap_or(Value::Null);
    let object = format!("{}/{}", s(&involved, "/kind").to_lowercase(), s(&involved, "/name"));
    let component =
        pick(&["/source/component", "/deprecatedSource/component", "/reportingComponent", "/reportingController"])
            .and_then(Value::as_str)
            .unwrap_or_default();
    let host = pick(&["/source/host", "/deprecatedSource/host", "/reportingInstance"])
        .and_then(Value::as_str)
        .unwrap_or_default();
    let source =
        if host.is_empty() || host == component { component.to_string() } else { format!("{component}, {host}") };
    let message = pick(&["/message", "/note"]).and_then(Value::as_str).unwrap_or_default().trim().to_string();
    vec![
        json!(last_seen),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(object),
        json!(s(&involved, "/fieldPath")),
        json!(source),
        json!(message),
        json!(first_seen),
        json!(count),
        name(o),
    ]
}

/// `cellForJSONValue` of apiextensions' table convertor.
fn crd_cell(ty: &str, v: &Value, now: jiff::Timestamp) -> Value {
    match (ty, v) {
        ("integer", Value::Number(n)) => json!(n.as_i64().unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64)),
        ("number", Value::Number(n)) => json!(n.as_f64().unwrap_or(0.0)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("string", Value::Null) => Value::Null,
        ("string", v) => json!(jsonpath::print_value(v)),
        ("date", Value::String(t)) => match t.parse::<jiff::Timestamp>() {
            Ok(ts) => json!(human_duration(now.as_second() - ts.as_second())),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// A printer column's description, or what upstream's CRD printer writes for one without.
fn crd_column_description(c: &Value) -> String {
    match c.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()) {
        Some(d) => d.to_string(),
        None => format!(
            "Custom resource definition column (in JSONPath format): {}",
            c.get("jsonPath").and_then(Value::as_str).unwrap_or_default()
        ),
    }
}

fn crd_table(printer_columns: &[Value], objects: &[Value], now: jiff::Timestamp) -> (Vec<Value>, Vec<Value>) {
    let mut columns = vec![column_json(&NAME)];
    // (type, path) per extra column; a CRD without columns shows Age.
    let mut extra: Vec<(String, Option<jsonpath::JsonPath>)> = Vec::new();
    if printer_columns.is_empty() {
        columns.push(json!({"name": "Age", "type": "date", "format": "", "description": AGE_DESC, "priority": 0}));
        extra.push(("date".into(), jsonpath::parse_relaxed(".metadata.creationTimestamp").ok()));
    }
    for c in printer_columns {
        let ty = c.get("type").and_then(Value::as_str).unwrap_or("string");
        columns.push(json!({
            "name": c.get("name").and_then(Value::as_str).unwrap_or_default(),
            "type": ty,
            "format": c.get("format").and_then(Value::as_str).unwrap_or_default(),
            "description": crd_column_description(c),
            "priority": c.get("priority").and_then(Value::as_i64).unwrap_or(0),
        }));
        let path = c.get("jsonPath").and_then(Value::as_str).and_then(|p| jsonpath::parse_relaxed(p).ok());
        extra.push((ty.to_string(), path));
    }
    let rows = objects
        .iter()
        .map(|o| {
            let mut cells = vec![name(o)];
            for (ty, path) in &extra {
                let found = path.as_ref().and_then(|p| p.find(o).into_iter().next());
                cells.push(found.map_or(Value::Null, |v| crd_cell(ty, v, now)));
            }
            json!({"cells": cells, "object": partial_metadata(o)})
        })
        .collect();
    (columns, rows)
}

#[cfg(test)]
mod tests;
