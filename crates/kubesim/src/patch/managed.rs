//! managedFields entries and the bookkeeping of Update operations (POST, PUT and the merge, JSON and
//! strategic patches): the fields a write changed become owned by its manager and are taken from the others,
//! removed fields are owned by nobody, and a write that changes nothing leaves managedFields byte-equal.

use serde_json::{Map, Value, json};

use super::fields::{FieldSet, changes};
use super::schema_info::Node;
use crate::resources::ResourceType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// Whether two entries are the same manager as upstream identifies them: by name, operation and
    /// subresource, and for updates also the API version.
    pub fn same_manager(&self, manager: &str, operation: Operation, api_version: &str, sub: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == sub
            && (operation == Operation::Apply || self.api_version == api_version)
    }

    /// How conflict messages name the manager: `"kubectl"`, `"rancher" using apps/v1`,
    /// `"x" with subresource "status" using v1`.
    pub fn describe(&self) -> String {
        let mut s = json!(self.manager).to_string();
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {}", json!(sub)));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let operation = match v.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        Some(Entry {
            manager: v.get("manager")?.as_str()?.to_string(),
            operation,
            api_version: v.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string(),
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: v.get("subresource").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string),
            fields: FieldSet::from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation.as_str()));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }
}

/// The managedFields of an object, as stored (malformed entries skipped).
pub fn decode(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// Sorts entries as upstream serialises them (Apply before Update, then oldest first, then by manager) and
/// stores them in `metadata.managedFields`, dropping entries that own nothing.
pub fn store(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    cap_update_managers(&mut entries);
    entries.sort_by(|p, q| {
        (p.operation, &p.time, &p.manager, &p.api_version, &p.subresource).cmp(&(
            q.operation,
            &q.time,
            &q.manager,
            &q.api_version,
            &q.subresource,
        ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries.iter().map(Entry::to_json).collect()));
    }
}

/// Upstream keeps at most this many Update entries; older ones are merged into one bucket per API version.
const MAX_UPDATE_MANAGERS: usize = 10;
const OLD_UPDATES_MANAGER: &str = "ancient-changes";

fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updates: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].operation == Operation::Update).collect();
    if updates.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updates.sort_by(|&a, &b| (&entries[a].time, &entries[a].manager).cmp(&(&entries[b].time, &entries[b].manager)));
    let mut length = updates.len();
    let mut first_of_version: Vec<(String, usize)> = Vec::new();
    let mut gone: Vec<usize> = Vec::new();
    for &i in &updates {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let version = entries[i].api_version.clone();
        match first_of_version.iter().find(|(v, _)| *v == version).map(|(_, f)| *f) {
            Some(bucket) => {
                // The oldest entry of this version became the bucket; fold this one in and take its (newer) time.
                entries[bucket].manager = OLD_UPDATES_MANAGER.to_string();
                entries[bucket].subresource = None;
                let fields = entries[i].fields.clone();
                entries[bucket].fields.union(&fields);
                entries[bucket].time = entries[i].time.clone();
                gone.push(i);
                length -= 1;
            }
            None => first_of_version.push((version, i)),
        }
    }
    let mut index = 0;
    entries.retain(|_| {
        let keep = !gone.contains(&index);
        index += 1;
        keep
    });
}

/// metadata fields that identify the object or that the server sets; nobody owns them.
const UNOWNED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The part of an object whose fields a write through this endpoint can own: without identity metadata,
/// without `status` on the main resource of a type with a status subresource, and on /status without `spec`.
pub fn owned_view(rt: &ResourceType, subresource: Option<&str>, obj: &Value) -> Value {
    let Value::Object(m) = obj else {
        return Value::Object(Map::new());
    };
    let mut out = m.clone();
    out.remove("apiVersion");
    out.remove("kind");
    if let Some(Value::Object(meta)) = out.get_mut("metadata") {
        for f in UNOWNED_METADATA {
            meta.remove(*f);
        }
        if meta.is_empty() {
            out.remove("metadata");
        }
    }
    match subresource {
        None if rt.subresources.status => {
            out.remove("status");
        }
        Some("status") => {
            out.remove("spec");
        }
        _ => {}
    }
    Value::Object(out)
}

/// What upstream compares a created object with: the type's zero value, whose non-optional maps and lists
/// exist already, so they are not recorded as added (`.`) the way optional ones are. Custom resources start
/// from nothing but metadata.
fn zero_object(rt: &ResourceType) -> Value {
    let pod_spec = json!({"containers": []});
    let template = json!({"metadata": {}, "spec": pod_spec});
    let mut zero = match (rt.is_crd(), rt.kind.as_str()) {
        (true, _) => json!({}),
        (false, "Event") if rt.group.is_empty() => json!({"involvedObject": {}, "source": {}}),
        (false, "Event") => json!({"regarding": {}, "deprecatedSource": {}}),
        (false, "Deployment") => json!({"spec": {"template": template, "strategy": {}}, "status": {}}),
        (false, "ReplicaSet") => json!({"spec": {"template": template}, "status": {}}),
        (false, "Pod") => json!({"spec": pod_spec, "status": {}}),
        (false, "Service") => json!({"spec": {}, "status": {"loadBalancer": {}}}),
        (false, "Namespace") => json!({"spec": {}, "status": {}}),
        (false, "CustomResourceDefinition") => json!({"spec": {"names": {}}, "status": {"acceptedNames": {}}}),
        (false, "Lease") => json!({"spec": {}}),
        (false, "HorizontalPodAutoscaler") => json!({"spec": {"scaleTargetRef": {}}, "status": {}}),
        (false, "Role" | "ClusterRole") => json!({"rules": []}),
        (false, "SelfSubjectAccessReview" | "SelfSubjectRulesReview") => json!({"spec": {}, "status": {}}),
        (false, "RoleBinding" | "ClusterRoleBinding") => json!({"roleRef": {}}),
        (false, _) => json!({}),
    };
    zero["metadata"] = json!({});
    zero
}

/// The fields of a whole object, as an Update that created it records them.
pub fn created_fields(rt: &ResourceType, subresource: Option<&str>, obj: &Value) -> FieldSet {
    let zero = owned_view(rt, subresource, &zero_object(rt));
    changes(&zero, &owned_view(rt, subresource, obj), &Node::root(rt)).changed
}

/// Whether a client asked to reset managedFields (`managedFields: [{}]`, as upstream documents it).
fn is_reset(obj: &Value) -> bool {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|entries| !entries.is_empty() && entries.iter().all(|e| e.get("manager").is_none()))
}

/// Records an Update operation (POST/PUT/merge/JSON/strategic patch) by `manager` in `new`'s managedFields.
/// `old` is the stored object (None on create). The managedFields `new` carries are the starting point when
/// the client sent some (upstream lets clients rewrite them), otherwise `old`'s.
pub fn record_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    // Upstream's skipNonAppliedManager: an Update of an object nobody manages does not start tracking fields
    // (only a create or an apply does).
    if old.is_some_and(|o| decode(o).is_empty()) && decode(new).is_empty() {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        return;
    }
    let sent = new.pointer("/metadata/managedFields").cloned();
    let (base_raw, mut entries) = if is_reset(new) {
        (None, Vec::new())
    } else {
        let from_new = decode(new);
        if from_new.is_empty() {
            let raw = old.and_then(|o| o.pointer("/metadata/managedFields")).cloned();
            (raw, old.map(decode).unwrap_or_default())
        } else {
            (sent, from_new)
        }
    };
    let api_version = rt.api_version();
    let node = Node::root(rt);
    let old_view = owned_view(rt, subresource, old.unwrap_or(&zero_object(rt)));
    let new_view = owned_view(rt, subresource, new);
    let ch = changes(&old_view, &new_view, &node);

    let before = entries.clone();
    for e in &mut entries {
        e.fields.remove_subtrees(&ch.removed);
        if !e.same_manager(manager, Operation::Update, &api_version, subresource) {
            e.fields.remove_members(&ch.changed);
        }
    }
    if !ch.changed.is_empty() {
        match entries.iter_mut().find(|e| e.same_manager(manager, Operation::Update, &api_version, subresource)) {
            Some(e) => {
                e.fields.union(&ch.changed);
                e.time = Some(now.to_string());
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: Operation::Update,
                api_version,
                time: Some(now.to_string()),
                subresource: subresource.map(str::to_string),
                fields: ch.changed,
            }),
        }
    }
    if entries == before && base_raw.is_some() {
        // Nothing changed hands: keep the stored bytes so a no-op write stays a no-op.
        if let (Some(meta), Some(raw)) = (new.get_mut("metadata").and_then(Value::as_object_mut), base_raw) {
            meta.insert("managedFields".into(), raw);
        }
        return;
    }
    store(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;

    fn rt(kind: &str) -> ResourceType {
        builtin_types().into_iter().find(|t| t.kind == kind && t.group != "events.k8s.io").unwrap()
    }

    fn deployment(replicas: u32, image: &str) -> Value {
        json!({"apiVersion":"apps/v1","kind":"Deployment",
            "metadata":{"name":"web","namespace":"default","uid":"u1","resourceVersion":"5",
                "creationTimestamp":"2026-12-02T10:00:00Z","labels":{"app":"web"}},
            "spec":{"replicas":replicas,"selector":{"matchLabels":{"app":"web"}},
                "template":{"metadata":{"labels":{"app":"web"}},
                    "spec":{"containers":[{"name":"nginx","image":image}]}}},
            "status":{"replicas":0}})
    }

    fn fields_of<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
        obj["metadata"]["managedFields"].as_array()?.iter().find(|e| e["manager"] == manager).map(|e| &e["fieldsV1"])
    }

    #[test]
    fn create_records_every_field_except_identity_and_status() {
        let rt = rt("Deployment");
        let mut obj = deployment(1, "nginx:1");
        record_update(&rt, None, &mut obj, "kubectl-create", None, "2026-12-02T10:00:00Z");
        let entries = obj["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        let e = &entries[0];
        assert_eq!(e["manager"], "kubectl-create");
        assert_eq!(e["operation"], "Update");
        assert_eq!(e["apiVersion"], "apps/v1");
        assert_eq!(e["time"], "2026-12-02T10:00:00Z");
        assert_eq!(e["fieldsType"], "FieldsV1");
        assert!(e.get("subresource").is_none());
        let f = &e["fieldsV1"];
        assert_eq!(f["f:metadata"], json!({"f:labels":{".":{},"f:app":{}}}));
        assert_eq!(f["f:spec"]["f:selector"], json!({}));
        assert!(f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"]["f:image"].is_object());
        assert!(f.get("f:status").is_none(), "status belongs to the status subresource");
        assert!(f.get("f:apiVersion").is_none());
    }

    #[test]
    fn create_marks_added_optional_maps_and_lists_as_upstream_does() {
        // The shape `kubectl get deploy -o yaml --show-managed-fields` shows after a client-side apply create.
        let rt = rt("Deployment");
        let mut obj = json!({"apiVersion":"apps/v1","kind":"Deployment",
            "metadata":{"name":"web","annotations":{"a":"1"},"labels":{"app":"web"}},
            "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
                "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}},
                "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx",
                    "image":"nginx","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{}}],
                    "restartPolicy":"Always"}}}});
        record_update(&rt, None, &mut obj, "kubectl-client-side-apply", None, "t");
        assert_eq!(
            fields_of(&obj, "kubectl-client-side-apply").unwrap(),
            &json!({
                "f:metadata":{"f:annotations":{".":{},"f:a":{}},"f:labels":{".":{},"f:app":{}}},
                "f:spec":{"f:replicas":{},"f:selector":{},
                    "f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},
                    "f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{
                        "f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{},
                            "f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},
                                "f:containerPort":{},"f:protocol":{}}},
                            "f:resources":{}}},
                        "f:restartPolicy":{}}}}})
        );
    }

    #[test]
    fn update_takes_changed_fields_from_other_managers() {
        let rt = rt("Deployment");
        let mut v1 = deployment(1, "nginx:1");
        record_update(&rt, None, &mut v1, "creator", None, "2026-12-02T10:00:00Z");
        let mut v2 = v1.clone();
        v2["spec"]["replicas"] = json!(3);
        record_update(&rt, Some(&v1), &mut v2, "kubectl-scale", None, "2026-12-02T10:01:00Z");
        assert_eq!(fields_of(&v2, "kubectl-scale").unwrap(), &json!({"f:spec":{"f:replicas":{}}}));
        let creator = fields_of(&v2, "creator").unwrap();
        assert!(creator["f:spec"].get("f:replicas").is_none());
        assert!(creator["f:spec"].get("f:template").is_some());
        // The creator's time stays: it changed nothing.
        let entries = v2["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries[0]["manager"], "creator");
        assert_eq!(entries[0]["time"], "2026-12-02T10:00:00Z");
    }

    #[test]
    fn no_op_update_leaves_managed_fields_byte_equal() {
        let rt = rt("Deployment");
        let mut v1 = deployment(1, "nginx:1");
        record_update(&rt, None, &mut v1, "creator", None, "2026-12-02T10:00:00Z");
        let mut same = v1.clone();
        record_update(&rt, Some(&v1), &mut same, "someone-else", None, "2026-12-02T11:00:00Z");
        assert_eq!(same, v1);
        // A PUT without managedFields keeps the stored ones too.
        let mut put = v1.clone();
        put["metadata"].as_object_mut().unwrap().remove("managedFields");
        record_update(&rt, Some(&v1), &mut put, "creator", None, "2026-12-02T11:00:00Z");
        assert_eq!(put, v1);
    }

    #[test]
    fn removed_fields_are_owned_by_nobody() {
        let rt = rt("Deployment");
        let mut v1 = deployment(1, "nginx:1");
        record_update(&rt, None, &mut v1, "creator", None, "t0");
        let mut v2 = v1.clone();
        v2["metadata"]["labels"].as_object_mut().unwrap().remove("app");
        record_update(&rt, Some(&v1), &mut v2, "kubectl-label", None, "t1");
        assert!(fields_of(&v2, "kubectl-label").is_none(), "a pure removal owns nothing");
        let creator = fields_of(&v2, "creator").unwrap();
        assert!(creator["f:metadata"]["f:labels"].get("f:app").is_none());
    }

    #[test]
    fn status_writes_are_recorded_with_their_subresource() {
        let rt = rt("Deployment");
        let mut v1 = deployment(1, "nginx:1");
        record_update(&rt, None, &mut v1, "creator", None, "t0");
        let mut v2 = v1.clone();
        v2["status"] = json!({"replicas":1,"readyReplicas":1});
        record_update(&rt, Some(&v1), &mut v2, "kube-controller-manager", Some("status"), "t1");
        let e = v2["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == "kube-controller-manager")
            .unwrap();
        assert_eq!(e["subresource"], "status");
        assert_eq!(e["fieldsV1"], json!({"f:status":{"f:readyReplicas":{},"f:replicas":{}}}));
    }

    #[test]
    fn second_update_by_same_manager_merges_into_its_entry() {
        let rt = rt("ConfigMap");
        let mut v1 = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}});
        record_update(&rt, None, &mut v1, "m", None, "t0");
        let mut v2 = v1.clone();
        v2["data"]["b"] = json!("2");
        record_update(&rt, Some(&v1), &mut v2, "m", None, "t1");
        let entries = v2["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["time"], "t1");
        assert_eq!(entries[0]["fieldsV1"], json!({"f:data":{".":{},"f:a":{},"f:b":{}}}));
    }

    #[test]
    fn more_than_ten_update_managers_fold_the_oldest_into_ancient_changes() {
        let mut obj = json!({"metadata":{}});
        let entries: Vec<Entry> = (0..12)
            .map(|i| Entry {
                manager: format!("m{i:02}"),
                operation: Operation::Update,
                api_version: "v1".into(),
                time: Some(format!("2026-12-02T10:00:{i:02}Z")),
                subresource: None,
                fields: FieldSet::from_fields_v1(&json!({"f:data":{(format!("f:k{i}")):{}}})),
            })
            .collect();
        store(&mut obj, entries);
        let stored = obj["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(stored.len(), 10);
        let bucket = stored.iter().find(|e| e["manager"] == "ancient-changes").unwrap();
        assert_eq!(bucket["fieldsV1"], json!({"f:data":{"f:k0":{},"f:k1":{},"f:k2":{}}}));
        assert_eq!(bucket["time"], "2026-12-02T10:00:02Z");
        assert!(stored.iter().all(|e| e["manager"] != "m00" && e["manager"] != "m02"));
    }

    #[test]
    fn entries_sort_apply_first_then_by_time() {
        let mut obj = json!({"metadata":{}});
        let e = |m: &str, op, t: &str| Entry {
            manager: m.into(),
            operation: op,
            api_version: "v1".into(),
            time: Some(t.into()),
            subresource: None,
            fields: FieldSet::from_fields_v1(&json!({"f:data":{}})),
        };
        store(
            &mut obj,
            vec![e("u2", Operation::Update, "t2"), e("u1", Operation::Update, "t1"), e("a", Operation::Apply, "t3")],
        );
        let names: Vec<&str> = obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "u1", "u2"]);
    }
}
