//! Who may write an existing same-name child: the operator never overwrites what another party controls, and
//! takes over an object only when a user hands it over explicitly.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::crd::Microservice;
use crate::desired::HANDOVER_ANNOTATION;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChildKind {
    Deployment,
    Service,
}

impl ChildKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildKind::Deployment => "Deployment",
            ChildKind::Service => "Service",
        }
    }

    /// The plural resource name, as in API paths, RBAC rules and kubectl arguments.
    pub fn resource(self) -> &'static str {
        match self {
            ChildKind::Deployment => "deployments",
            ChildKind::Service => "services",
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
            if handed_to.is_some() && handed_to == ms.metadata.name.as_ref() {
                Ownership::HandedOver
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

/// The conflict an ownership verdict amounts to, if any.
pub fn conflict(ms: &Microservice, kind: ChildKind, ownership: &Ownership) -> Option<Conflict> {
    let name = ms.metadata.name.clone().unwrap_or_default();
    let namespace = ms.metadata.namespace.clone().unwrap_or_default();
    // --overwrite: the annotation may already name another Microservice (an earlier handover).
    let handover =
        format!("kubectl annotate {} {name} -n {namespace} --overwrite {HANDOVER_ANNOTATION}={name}", kind.resource());
    let (reason, message) = match ownership {
        Ownership::Absent | Ownership::Owned | Ownership::HandedOver => return None,
        Ownership::Unowned => (
            ConflictReason::NotHandedOver,
            format!(
                "{kind} {namespace}/{name} already exists and is not managed by Microservice {name}, so it is left \
                 untouched; to hand it over, run: {handover}"
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
        let spec = MicroserviceSpec { image: "ghcr.io/example/todo-api:1".into(), port: 8080, replicas: None };
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
        let command =
            "kubectl annotate deployments todo-api -n todo --overwrite platform.example.com/handover=todo-api";
        let unowned = conflict(&ms, ChildKind::Deployment, &Ownership::Unowned).unwrap();
        assert_eq!(unowned.reason, ConflictReason::NotHandedOver);
        assert!(unowned.message.contains(command), "{}", unowned.message);
        assert!(!unowned.permanent());
        let other = Ownership::ControlledByOther { kind: "HelmRelease".into(), name: "todo".into() };
        let controlled = conflict(&ms, ChildKind::Service, &other).unwrap();
        assert!(controlled.message.contains("HelmRelease todo"), "{}", controlled.message);
        assert!(
            controlled.message.contains(
                "kubectl annotate services todo-api -n todo --overwrite platform.example.com/handover=todo-api"
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
}
