//! Who may write an existing same-name child: the operator never overwrites what another party controls, and
//! takes over an object only when a user hands it over explicitly.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, LabelSelector, ManagedFieldsEntry, ObjectMeta};
use serde_json::{Value, json};

use crate::crd::Microservice;
use crate::desired::{HANDOVER_ANNOTATION, LABEL_MANAGED_BY, MANAGER, selector_labels};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChildKind {
    Deployment,
    Service,
    /// Only while the Microservice is autoscaled.
    HorizontalPodAutoscaler,
}

impl ChildKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildKind::Deployment => "Deployment",
            ChildKind::Service => "Service",
            ChildKind::HorizontalPodAutoscaler => "HorizontalPodAutoscaler",
        }
    }

    /// The plural resource name, as in API paths, RBAC rules and kubectl arguments.
    pub fn resource(self) -> &'static str {
        match self {
            ChildKind::Deployment => "deployments",
            ChildKind::Service => "services",
            ChildKind::HorizontalPodAutoscaler => "horizontalpodautoscalers",
        }
    }
}

impl fmt::Display for ChildKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The relation between a Microservice and the object that has (or would have) its child's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Nothing has that name: the operator creates it.
    Absent,
    /// Its controller ownerReference points at this Microservice (by uid).
    Owned,
    /// No controller, and the handover annotation names this Microservice: the operator adopts it.
    HandedOver,
    /// Another object is its controller.
    ControlledByOther { kind: String, name: String },
    /// No controller and not handed over: someone created it by hand or with another tool.
    Unowned,
    /// No controller, not handed over, but labelled as made by this operator: a child left behind by an earlier
    /// Microservice of the same name (deleted with `--cascade=orphan`, or its ownerReference removed).
    Orphaned,
}

impl Ownership {
    /// Whether the operator may write the object (create, update, or adopt it).
    pub fn writable(&self) -> bool {
        matches!(self, Ownership::Absent | Ownership::Owned | Ownership::HandedOver)
    }
}

pub fn ownership(ms: &Microservice, existing: Option<&ObjectMeta>) -> Ownership {
    let Some(meta) = existing else {
        return Ownership::Absent;
    };
    let controller = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    match controller {
        Some(owner) if ms.metadata.uid.as_deref() == Some(owner.uid.as_str()) => Ownership::Owned,
        Some(owner) => Ownership::ControlledByOther { kind: owner.kind.clone(), name: owner.name.clone() },
        None => {
            let handed_to = meta.annotations.as_ref().and_then(|a| a.get(HANDOVER_ANNOTATION));
            let made_by_us = meta.labels.as_ref().and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str);
            if handed_to.is_some() && handed_to == ms.metadata.name.as_ref() {
                Ownership::HandedOver
            } else if made_by_us == Some(MANAGER) {
                Ownership::Orphaned
            } else {
                Ownership::Unowned
            }
        }
    }
}

/// JSON merge patch that removes the handover annotation after adoption. Server-side apply cannot remove it:
/// the field belongs to whoever annotated the object, not to the operator's field manager.
pub fn handover_cleanup_patch() -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": { HANDOVER_ANNOTATION: null } } })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConflictReason {
    /// Exists without a controller and was not handed over.
    NotHandedOver,
    /// Another object controls it.
    ControlledByOther,
    /// Its selector differs from the one the Microservice needs, and a Deployment selector is immutable.
    ImmutableSelector,
}

/// A child the operator must not (or cannot) write, with the message a user needs to resolve it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub kind: ChildKind,
    pub name: String,
    pub reason: ConflictReason,
    pub message: String,
}

impl Conflict {
    /// Permanent conflicts cannot resolve by handing over; only deleting or renaming something helps.
    pub fn permanent(&self) -> bool {
        self.reason == ConflictReason::ImmutableSelector
    }
}

/// The command that hands the `kind` named `name` in `namespace` over to the Microservice of the same name.
pub fn handover_command(kind: ChildKind, namespace: &str, name: &str) -> String {
    // --overwrite: the annotation may already name another Microservice, and kubectl refuses to replace it without.
    format!("kubectl annotate {} {name} -n {namespace} {HANDOVER_ANNOTATION}={name} --overwrite", kind.resource())
}

/// The conflict an ownership verdict amounts to, if any.
pub fn conflict(ms: &Microservice, kind: ChildKind, ownership: &Ownership) -> Option<Conflict> {
    if ownership.writable() {
        return None;
    }
    let name = ms.metadata.name.clone().unwrap_or_default();
    let namespace = ms.metadata.namespace.clone().unwrap_or_default();
    let handover = handover_command(kind, &namespace, &name);
    let (reason, message) = match ownership {
        Ownership::Absent | Ownership::Owned | Ownership::HandedOver => return None,
        Ownership::Unowned => (
            ConflictReason::NotHandedOver,
            format!(
                "{kind} {namespace}/{name} already exists and is not managed by Microservice {name}, so it is left \
                 untouched; to hand it over, run: {handover}"
            ),
        ),
        Ownership::Orphaned => (
            ConflictReason::NotHandedOver,
            format!(
                "{kind} {namespace}/{name} was made by {MANAGER} for an earlier Microservice named {name} and has \
                 no owner any more (that Microservice was deleted with --cascade=orphan, or the ownerReference was \
                 removed), so it is left untouched; to re-attach it to this Microservice, run: {handover}"
            ),
        ),
        Ownership::ControlledByOther { kind: owner_kind, name: owner_name } => (
            ConflictReason::ControlledByOther,
            format!(
                "{kind} {namespace}/{name} is controlled by {owner_kind} {owner_name}, so it is left untouched; to \
                 hand it over, remove that controller ownerReference (or delete {owner_kind} {owner_name} with \
                 --cascade=orphan), then run: {handover}"
            ),
        ),
    };
    Some(Conflict { kind, name, reason, message })
}

/// A live Deployment whose selector differs from the desired one can never be turned into the desired one.
pub fn selector_conflict(ms: &Microservice, desired: &Deployment, live: &Deployment) -> Option<Conflict> {
    let selector = |d: &Deployment| d.spec.as_ref().map(|s| normalize(&s.selector)).unwrap_or_default();
    let (wanted, found) = (selector(desired), selector(live));
    if wanted == found {
        return None;
    }
    let name = ms.metadata.name.clone().unwrap_or_default();
    let namespace = ms.metadata.namespace.clone().unwrap_or_default();
    Some(Conflict {
        kind: ChildKind::Deployment,
        name: name.clone(),
        reason: ConflictReason::ImmutableSelector,
        message: format!(
            "Deployment {namespace}/{name} selects pods by {} but Microservice {name} needs {}, and a Deployment's \
             selector cannot be changed; delete it (kubectl delete deployment {name} -n {namespace}) so the \
             operator can create its own, or give the Microservice another name",
            describe(&found),
            describe(&wanted)
        ),
    })
}

/// Whether a live Deployment's selector is exactly the one this Microservice's desired Deployment has (its
/// [`selector_labels`]), so [`selector_conflict`] finds nothing; decided without building the desired Deployment.
pub fn selects_own_pods(ms: &Microservice, live: &LabelSelector) -> bool {
    selector_labels(ms).is_ok_and(|labels| normalize(live) == (labels, Vec::new()))
}

/// The JSON patch that moves the fields the operator's *Update* entry owns (its POST create, or a write of an
/// older operator) into its *Apply* entry, as client-go's `csaupgrade` does: server-side apply can only remove a
/// field its own Apply entry owns, so without this a field the desired state later drops (an old container port,
/// an env var, a probe) would stay for ever, or clash with its replacement. None when there is nothing to move.
/// The patch is guarded by the resourceVersion it was computed from: a concurrent write makes it fail (and the
/// reconcile retry) instead of overwriting managedFields someone else just changed.
pub fn ownership_upgrade_patch(meta: &ObjectMeta) -> Option<Value> {
    let entries = meta.managed_fields.as_deref()?;
    let is_main = |e: &ManagedFieldsEntry| e.subresource.as_deref().unwrap_or_default().is_empty();
    let ours = |e: &ManagedFieldsEntry, op: &str| {
        e.manager.as_deref() == Some(MANAGER) && e.operation.as_deref() == Some(op) && is_main(e)
    };
    let update = entries.iter().position(|e| ours(e, "Update"))?;
    let resource_version = meta.resource_version.as_deref()?;
    let mut upgraded: Vec<ManagedFieldsEntry> = entries.to_vec();
    let moved = upgraded.remove(update);
    let fields = |e: &ManagedFieldsEntry| e.fields_v1.as_ref().map(|f| f.0.clone()).unwrap_or_else(|| json!({}));
    match upgraded.iter_mut().find(|e| ours(e, "Apply") && e.api_version == moved.api_version) {
        Some(apply) => {
            let mut merged = fields(apply);
            union_fields(&mut merged, &fields(&moved));
            apply.fields_v1 = Some(FieldsV1(merged));
        }
        None => upgraded.push(ManagedFieldsEntry { operation: Some("Apply".to_string()), ..moved }),
    }
    Some(json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": resource_version },
        { "op": "replace", "path": "/metadata/managedFields", "value": upgraded },
    ]))
}

/// Union of two `fieldsV1` sets: a tree of objects whose leaves are `{}`.
fn union_fields(into: &mut Value, other: &Value) {
    let (Value::Object(into), Value::Object(other)) = (into, other) else { return };
    for (key, value) in other {
        match into.get_mut(key) {
            Some(existing) => union_fields(existing, value),
            None => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// matchLabels plus matchExpressions, with empty collections and absent ones treated alike.
type NormalizedSelector = (BTreeMap<String, String>, Vec<(String, String, Vec<String>)>);

fn normalize(selector: &LabelSelector) -> NormalizedSelector {
    let labels = selector.match_labels.clone().unwrap_or_default();
    let mut expressions: Vec<_> = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            (e.key.clone(), e.operator.clone(), values)
        })
        .collect();
    expressions.sort();
    (labels, expressions)
}

fn describe(selector: &NormalizedSelector) -> String {
    let mut parts: Vec<String> = selector.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.extend(selector.1.iter().map(|(k, op, values)| format!("{k} {op} ({})", values.join(","))));
    if parts.is_empty() { "{}".to_string() } else { format!("{{{}}}", parts.join(",")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::MicroserviceSpec;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, OwnerReference};

    const UID: &str = "11111111-2222-4333-8444-555555555555";

    fn ms() -> Microservice {
        let spec = MicroserviceSpec {
            image: "ghcr.io/example/todo-api:1".into(),
            port: 8080,
            replicas: None,
            autoscaling: None,
        };
        let mut ms = Microservice::new("todo-api", spec);
        ms.metadata.namespace = Some("todo".into());
        ms.metadata.uid = Some(UID.into());
        ms
    }

    fn owner(kind: &str, name: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    fn meta(owners: Vec<OwnerReference>, handover: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("todo-api".into()),
            owner_references: (!owners.is_empty()).then_some(owners),
            annotations: handover.map(|h| BTreeMap::from([(HANDOVER_ANNOTATION.to_string(), h.to_string())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn verdicts() {
        let ms = ms();
        let other = "99999999-2222-4333-8444-555555555555";
        let cases = [
            (None, Ownership::Absent),
            (Some(meta(vec![owner("Microservice", "todo-api", UID, Some(true))], None)), Ownership::Owned),
            // Handover annotation left behind after adoption: still ours.
            (Some(meta(vec![owner("Microservice", "todo-api", UID, Some(true))], Some("todo-api"))), Ownership::Owned),
            (Some(meta(vec![], Some("todo-api"))), Ownership::HandedOver),
            // A non-controller owner does not block a handover.
            (Some(meta(vec![owner("ConfigMap", "x", other, None)], Some("todo-api"))), Ownership::HandedOver),
            (Some(meta(vec![], Some("other-api"))), Ownership::Unowned),
            (Some(meta(vec![], None)), Ownership::Unowned),
            (
                Some(meta(vec![owner("Microservice", "todo-api", other, Some(true))], None)),
                Ownership::ControlledByOther { kind: "Microservice".into(), name: "todo-api".into() },
            ),
            (
                Some(meta(vec![owner("HelmRelease", "todo", other, Some(true))], Some("todo-api"))),
                Ownership::ControlledByOther { kind: "HelmRelease".into(), name: "todo".into() },
            ),
            // Our uid as a mere (non-controller) owner is not control.
            (Some(meta(vec![owner("Microservice", "todo-api", UID, Some(false))], None)), Ownership::Unowned),
        ];
        for (existing, expected) in cases {
            assert_eq!(ownership(&ms, existing.as_ref()), expected, "{existing:?}");
        }
    }

    #[test]
    fn the_cleanup_patch_removes_only_the_handover_annotation() {
        let patch = handover_cleanup_patch();
        assert_eq!(patch["metadata"]["annotations"].as_object().unwrap().len(), 1);
        assert!(patch["metadata"]["annotations"][HANDOVER_ANNOTATION].is_null());
    }

    #[test]
    fn a_microservice_without_uid_owns_nothing() {
        let mut ms = ms();
        ms.metadata.uid = None;
        let existing = meta(vec![owner("Microservice", "todo-api", "", Some(true))], None);
        assert!(matches!(ownership(&ms, Some(&existing)), Ownership::ControlledByOther { .. }));
    }

    #[test]
    fn conflicts_say_exactly_how_to_hand_over() {
        let ms = ms();
        // --overwrite, or kubectl refuses when the annotation already names another Microservice.
        let command =
            "kubectl annotate deployments todo-api -n todo platform.example.com/handover=todo-api --overwrite";
        let unowned = conflict(&ms, ChildKind::Deployment, &Ownership::Unowned).unwrap();
        assert_eq!(unowned.reason, ConflictReason::NotHandedOver);
        assert!(unowned.message.contains(command), "{}", unowned.message);
        assert!(!unowned.permanent());
        let other = Ownership::ControlledByOther { kind: "HelmRelease".into(), name: "todo".into() };
        let controlled = conflict(&ms, ChildKind::Service, &other).unwrap();
        assert!(controlled.message.contains("HelmRelease todo"), "{}", controlled.message);
        assert!(
            controlled.message.contains(
                "kubectl annotate services todo-api -n todo platform.example.com/handover=todo-api --overwrite"
            ),
            "{}",
            controlled.message
        );
        for fine in [Ownership::Absent, Ownership::Owned, Ownership::HandedOver] {
            assert!(fine.writable());
            assert_eq!(conflict(&ms, ChildKind::Deployment, &fine), None);
        }
        assert!(!Ownership::Unowned.writable() && !other.writable());
    }

    fn deployment(labels: &[(&str, &str)], expressions: Vec<LabelSelectorRequirement>) -> Deployment {
        let match_labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
        Deployment {
            spec: Some(DeploymentSpec {
                selector: LabelSelector {
                    match_labels: (!match_labels.is_empty()).then_some(match_labels),
                    match_expressions: (!expressions.is_empty()).then_some(expressions),
                },
                ..DeploymentSpec::default()
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn a_different_selector_makes_adoption_impossible() {
        let ms = ms();
        let wanted = [("app.kubernetes.io/instance", "todo-api"), ("app.kubernetes.io/name", "todo-api")];
        let desired = deployment(&wanted, vec![]);
        assert_eq!(selector_conflict(&ms, &desired, &deployment(&wanted, vec![])), None);
        let expression = || LabelSelectorRequirement {
            key: "tier".into(),
            operator: "In".into(),
            values: Some(vec!["b".into(), "a".into()]),
        };
        let with_expression = deployment(&wanted, vec![expression()]);
        let mut reordered = expression();
        reordered.values = Some(vec!["a".into(), "b".into()]);
        let same = selector_conflict(&ms, &with_expression, &deployment(&wanted, vec![reordered]));
        assert_eq!(same, None, "value order does not change what a selector selects");
        let found = selector_conflict(&ms, &desired, &deployment(&[("app", "todo")], vec![])).unwrap();
        assert_eq!(found.reason, ConflictReason::ImmutableSelector);
        assert!(found.permanent());
        assert!(found.message.contains("{app=todo}"), "{}", found.message);
        assert!(found.message.contains("kubectl delete deployment todo-api -n todo"), "{}", found.message);
        assert!(selector_conflict(&ms, &desired, &with_expression).is_some(), "extra expressions select other pods");
    }

    fn entry(manager: &str, operation: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("apps/v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: subresource.map(str::to_string),
            time: None,
        }
    }

    fn with_entries(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta { resource_version: Some("42".into()), managed_fields: Some(entries), ..ObjectMeta::default() }
    }

    /// The managedFields the patch installs, as (manager, operation, subresource, fieldsV1).
    fn installed(patch: &Value) -> Vec<(String, String, Option<String>, Value)> {
        assert_eq!(patch[0], json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"}));
        assert_eq!(
            (patch[1]["op"].as_str(), patch[1]["path"].as_str()),
            (Some("replace"), Some("/metadata/managedFields"))
        );
        patch[1]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_string(),
                    e["operation"].as_str().unwrap().to_string(),
                    e["subresource"].as_str().map(str::to_string),
                    e["fieldsV1"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn the_create_s_update_entry_moves_to_the_apply_manager() {
        let created = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}}}});
        let applied = json!({"f:spec": {"f:replicas": {}, "f:paused": {}}});
        let status = json!({"f:status": {"f:replicas": {}}});
        let kubectl = json!({"f:metadata": {"f:labels": {"f:team": {}}}});
        type Case = (&'static str, Vec<ManagedFieldsEntry>, Option<Vec<(&'static str, &'static str, Value)>>);
        let cases: Vec<Case> = vec![
            (
                "created by POST, never applied: the Update entry becomes the Apply entry",
                vec![
                    entry(MANAGER, "Update", None, created.clone()),
                    entry("kubectl", "Update", None, kubectl.clone()),
                ],
                Some(vec![("kubectl", "Update", kubectl.clone()), (MANAGER, "Apply", created.clone())]),
            ),
            (
                "created by POST, then applied: the fields are merged into the Apply entry",
                vec![
                    entry(MANAGER, "Update", None, created.clone()),
                    entry(MANAGER, "Apply", None, applied.clone()),
                    entry("kube-controller-manager", "Update", Some("status"), status.clone()),
                ],
                Some(vec![
                    (
                        MANAGER,
                        "Apply",
                        json!({"f:spec": {"f:replicas": {}, "f:paused": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}}}}),
                    ),
                    ("kube-controller-manager", "Update", status.clone()),
                ]),
            ),
            ("already upgraded: nothing to send", vec![entry(MANAGER, "Apply", None, applied.clone())], None),
            (
                "the operator's status writes are another subresource, left alone",
                vec![entry(MANAGER, "Update", Some("status"), status.clone())],
                None,
            ),
            ("someone else's Update entry is theirs", vec![entry("kubectl", "Update", None, kubectl.clone())], None),
        ];
        for (name, entries, expected) in cases {
            let patch = ownership_upgrade_patch(&with_entries(entries));
            match expected {
                None => assert_eq!(patch, None, "{name}"),
                Some(expected) => {
                    let got = installed(&patch.unwrap_or_else(|| panic!("{name}: no patch")));
                    let want: Vec<_> = expected
                        .into_iter()
                        .map(|(m, o, f)| {
                            let sub = if m == "kube-controller-manager" { Some("status".to_string()) } else { None };
                            (m.to_string(), o.to_string(), sub, f)
                        })
                        .collect();
                    assert_eq!(got, want, "{name}");
                }
            }
        }
        assert_eq!(ownership_upgrade_patch(&ObjectMeta::default()), None, "no managedFields (a trimmed cache copy)");
    }

    #[test]
    fn a_child_orphaned_from_an_earlier_microservice_says_how_to_reattach_it() {
        let ms = ms();
        let mut orphan = meta(vec![], None);
        orphan.labels = Some(BTreeMap::from([(LABEL_MANAGED_BY.to_string(), MANAGER.to_string())]));
        assert_eq!(ownership(&ms, Some(&orphan)), Ownership::Orphaned);
        let found = conflict(&ms, ChildKind::Deployment, &Ownership::Orphaned).unwrap();
        assert_eq!(found.reason, ConflictReason::NotHandedOver);
        assert!(found.message.contains("earlier Microservice named todo-api"), "{}", found.message);
        assert!(
            found.message.contains(
                "kubectl annotate deployments todo-api -n todo platform.example.com/handover=todo-api --overwrite"
            ),
            "{}",
            found.message
        );
        // A hand-made object carrying another tool's managed-by label is merely unowned.
        orphan.labels = Some(BTreeMap::from([(LABEL_MANAGED_BY.to_string(), "Helm".to_string())]));
        assert_eq!(ownership(&ms, Some(&orphan)), Ownership::Unowned);
    }
}
