//! The garbage collector's graph and decisions (upstream `pkg/controller/garbagecollector`): an owner→dependents
//! index by uid across all kinds, and for one object what to do — delete it because every owner is gone, prune
//! references to owners that are gone or deleting, orphan an owner's dependents, or release an owner whose
//! foreground deletion has no blocking dependents left.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::cluster::PropagationPolicy;
use crate::resources::ResourceRef;

pub const FOREGROUND: &str = "foregroundDeletion";
pub const ORPHAN: &str = "orphan";

/// One ownerReference, as the collector needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerLink {
    pub uid: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub block_owner_deletion: bool,
}

/// What the collector knows about one object.
#[derive(Debug, Clone)]
pub struct Node {
    pub uid: String,
    pub rt: ResourceRef,
    pub namespace: Option<String>,
    pub name: String,
    pub owners: Vec<OwnerLink>,
    pub finalizers: Vec<String>,
    pub deleting: bool,
}

impl Node {
    /// Reads the metadata the collector needs; None for objects without a uid.
    pub fn from_object(rt: &ResourceRef, obj: &Value) -> Option<Node> {
        let meta = obj.get("metadata")?;
        let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
        let owners = meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| {
                        let f = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
                        Some(OwnerLink {
                            uid: f("uid")?,
                            api_version: f("apiVersion").unwrap_or_default(),
                            kind: f("kind").unwrap_or_default(),
                            name: f("name").unwrap_or_default(),
                            block_owner_deletion: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let finalizers = meta
            .get("finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        Some(Node {
            uid: s("uid")?,
            rt: rt.clone(),
            namespace: s("namespace"),
            name: s("name").unwrap_or_default(),
            owners,
            finalizers,
            deleting: meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
        })
    }

    fn has(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Deleting in foreground: waits for its blocking dependents.
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has(FOREGROUND)
    }
}

/// What an owner turned out to be, for owners the graph does not hold (asked of the API server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// An object with this uid exists.
    Exists { deleting_dependents: bool },
    /// No object with this uid (404, or the name now belongs to another uid).
    Absent,
    /// Could not tell (unknown kind, an error): never collect on a guess.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Delete {
        uid: String,
        policy: PropagationPolicy,
    },
    /// Strip the ownerReferences to these owner uids.
    RemoveOwnerRefs {
        uid: String,
        owners: Vec<String>,
    },
    RemoveFinalizer {
        uid: String,
        finalizer: &'static str,
    },
    /// Decide for these objects next (an owner's foreground deletion moves on to its dependents).
    Recheck(Vec<String>),
}

#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    /// owner uid → dependent uids (the owner need not exist).
    dependents: HashMap<String, BTreeSet<String>>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn clear(&mut self) {
        self.nodes.clear();
        self.dependents.clear();
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &Node> {
        self.dependents.get(uid).into_iter().flatten().filter_map(|d| self.nodes.get(d))
    }

    /// Records an added or modified object; returns the objects to decide for now.
    pub fn upsert(&mut self, node: Node) -> Vec<String> {
        let uid = node.uid.clone();
        let old = self.nodes.remove(&uid);
        let mut check = BTreeSet::new();
        if let Some(old) = &old {
            for o in &old.owners {
                self.unlink(&o.uid, &uid);
            }
            // A dependent that dropped or unblocked its reference may release an owner waiting in foreground.
            for o in &old.owners {
                if !node.owners.contains(o) {
                    check.insert(o.uid.clone());
                }
            }
        }
        for o in &node.owners {
            self.dependents.entry(o.uid.clone()).or_default().insert(uid.clone());
        }
        let became_foreground = node.deleting_dependents() && !old.as_ref().is_some_and(Node::deleting_dependents);
        if became_foreground {
            check.extend(self.dependents.get(&uid).into_iter().flatten().cloned());
        }
        if !node.owners.is_empty() || node.deleting {
            check.insert(uid.clone());
        }
        self.nodes.insert(uid, node);
        check.into_iter().collect()
    }

    /// Records a deletion; returns the objects to decide for now (its dependents, and owners waiting for it).
    pub fn remove(&mut self, uid: &str) -> Vec<String> {
        let mut check: BTreeSet<String> = self.dependents.get(uid).into_iter().flatten().cloned().collect();
        if let Some(node) = self.nodes.remove(uid) {
            for o in &node.owners {
                self.unlink(&o.uid, uid);
                check.insert(o.uid.clone());
            }
        }
        check.retain(|u| self.nodes.contains_key(u));
        check.into_iter().collect()
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// What to do about `uid` now. `lookup` answers for owners the graph does not hold.
    pub fn decide(&self, uid: &str, lookup: &mut dyn FnMut(&Node, &OwnerLink) -> Lookup) -> Vec<Action> {
        let Some(node) = self.nodes.get(uid) else { return vec![] };
        if node.deleting {
            return self.decide_deleting(node);
        }
        if node.owners.is_empty() {
            return vec![];
        }
        let (mut solid, mut dangling, mut waiting) = (0, vec![], vec![]);
        for o in &node.owners {
            let state = match self.nodes.get(&o.uid) {
                Some(owner) => Lookup::Exists { deleting_dependents: owner.deleting_dependents() },
                None => lookup(node, o),
            };
            match state {
                Lookup::Exists { deleting_dependents: true } => waiting.push(o.uid.clone()),
                Lookup::Exists { deleting_dependents: false } | Lookup::Unknown => solid += 1,
                Lookup::Absent => dangling.push(o.uid.clone()),
            }
        }
        if solid > 0 {
            if dangling.is_empty() && waiting.is_empty() {
                return vec![];
            }
            dangling.extend(waiting);
            return vec![Action::RemoveOwnerRefs { uid: uid.to_string(), owners: dangling }];
        }
        let has_dependents = self.dependents.get(uid).is_some_and(|d| !d.is_empty());
        let policy = if !waiting.is_empty() && has_dependents {
            // Its owner waits for it, so it must itself wait for its own dependents.
            PropagationPolicy::Foreground
        } else if node.has(ORPHAN) {
            PropagationPolicy::Orphan
        } else if node.has(FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        vec![Action::Delete { uid: uid.to_string(), policy }]
    }

    fn decide_deleting(&self, node: &Node) -> Vec<Action> {
        let uid = node.uid.as_str();
        let deps: Vec<&Node> = self.dependents_of(uid).collect();
        if node.has(ORPHAN) {
            let mut actions: Vec<Action> = deps
                .iter()
                .map(|d| Action::RemoveOwnerRefs { uid: d.uid.clone(), owners: vec![uid.to_string()] })
                .collect();
            actions.push(Action::RemoveFinalizer { uid: uid.to_string(), finalizer: ORPHAN });
            return actions;
        }
        if node.has(FOREGROUND) {
            let blocking = deps.iter().any(|d| d.owners.iter().any(|o| o.uid == uid && o.block_owner_deletion));
            if !blocking {
                return vec![Action::RemoveFinalizer { uid: uid.to_string(), finalizer: FOREGROUND }];
            }
            let pending: Vec<String> = deps.iter().filter(|d| !d.deleting).map(|d| d.uid.clone()).collect();
            if !pending.is_empty() {
                return vec![Action::Recheck(pending)];
            }
        }
        vec![]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;
    use serde_json::json;
    use std::sync::Arc;

    fn rt(kind: &str) -> ResourceRef {
        Arc::new(builtin_types().into_iter().find(|t| t.kind == kind).unwrap())
    }

    fn obj(kind: &str, uid: &str, owners: &[(&str, bool)], finalizers: &[&str], deleting: bool) -> Node {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(u, block)| json!({"apiVersion": "apps/v1", "kind": "X", "name": u, "uid": u, "blockOwnerDeletion": block}))
            .collect();
        let mut meta = json!({"name": uid, "namespace": "default", "uid": uid, "ownerReferences": refs,
                              "finalizers": finalizers});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-12-02T10:00:00Z");
        }
        Node::from_object(&rt(kind), &json!({"metadata": meta})).unwrap()
    }

    fn absent(_: &Node, _: &OwnerLink) -> Lookup {
        Lookup::Absent
    }

    /// Deployment d → ReplicaSet rs → Pods p1, p2 (blocking references, as the controllers set them).
    fn chain() -> Graph {
        let mut g = Graph::default();
        g.upsert(obj("Deployment", "d", &[], &[], false));
        g.upsert(obj("ReplicaSet", "rs", &[("d", true)], &[], false));
        g.upsert(obj("Pod", "p1", &[("rs", true)], &[], false));
        g.upsert(obj("Pod", "p2", &[("rs", true)], &[], false));
        g
    }

    #[test]
    fn background_deletes_dependents_once_the_owner_is_gone() {
        let mut g = chain();
        assert!(g.decide("rs", &mut absent).is_empty(), "an existing owner protects its dependents");
        let check = g.remove("d");
        assert_eq!(check, ["rs"]);
        assert_eq!(
            g.decide("rs", &mut absent),
            [Action::Delete { uid: "rs".into(), policy: PropagationPolicy::Background }]
        );
        assert_eq!(g.remove("rs"), ["p1", "p2"]);
        assert!(matches!(g.decide("p1", &mut absent)[0], Action::Delete { .. }));
    }

    #[test]
    fn a_dependent_is_kept_while_another_owner_lives_and_its_dead_reference_pruned() {
        let mut g = Graph::default();
        g.upsert(obj("ConfigMap", "a", &[], &[], false));
        g.upsert(obj("ConfigMap", "cm", &[("a", false), ("gone", false)], &[], false));
        assert_eq!(
            g.decide("cm", &mut absent),
            [Action::RemoveOwnerRefs { uid: "cm".into(), owners: vec!["gone".into()] }]
        );
    }

    #[test]
    fn an_owner_missing_from_the_graph_is_verified_before_anything_is_collected() {
        let mut g = Graph::default();
        g.upsert(obj("Pod", "p", &[("rs", true)], &[], false));
        let mut asked = 0;
        let actions = g.decide("p", &mut |_, o| {
            asked += 1;
            assert_eq!(o.uid, "rs");
            Lookup::Exists { deleting_dependents: false }
        });
        assert!(actions.is_empty());
        assert!(g.decide("p", &mut |_, _| Lookup::Unknown).is_empty(), "unknown never collects");
        assert_eq!(asked, 1);
    }

    #[test]
    fn foreground_waits_for_blocking_dependents_then_releases_the_owner() {
        let mut g = chain();
        let check = g.upsert(obj("Deployment", "d", &[], &[FOREGROUND], true));
        assert_eq!(check, ["d", "rs"]);
        assert_eq!(g.decide("d", &mut absent), [Action::Recheck(vec!["rs".into()])]);
        // The ReplicaSet has dependents of its own: it is deleted in foreground too.
        assert_eq!(
            g.decide("rs", &mut absent),
            [Action::Delete { uid: "rs".into(), policy: PropagationPolicy::Foreground }]
        );
        g.upsert(obj("ReplicaSet", "rs", &[("d", true)], &[FOREGROUND], true));
        assert!(g.decide("d", &mut absent).is_empty(), "still waiting for the ReplicaSet");
        assert_eq!(g.decide("rs", &mut absent), [Action::Recheck(vec!["p1".into(), "p2".into()])]);
        assert_eq!(
            g.decide("p1", &mut absent),
            [Action::Delete { uid: "p1".into(), policy: PropagationPolicy::Background }]
        );
        g.remove("p1");
        assert_eq!(g.remove("p2"), ["rs"]);
        assert_eq!(g.decide("rs", &mut absent), [Action::RemoveFinalizer { uid: "rs".into(), finalizer: FOREGROUND }]);
        assert_eq!(g.remove("rs"), ["d"]);
        assert_eq!(g.decide("d", &mut absent), [Action::RemoveFinalizer { uid: "d".into(), finalizer: FOREGROUND }]);
    }

    #[test]
    fn foreground_does_not_wait_for_non_blocking_dependents() {
        let mut g = Graph::default();
        g.upsert(obj("Deployment", "d", &[], &[FOREGROUND], true));
        g.upsert(obj("ConfigMap", "cm", &[("d", false)], &[], false));
        assert_eq!(g.decide("d", &mut absent), [Action::RemoveFinalizer { uid: "d".into(), finalizer: FOREGROUND }]);
        // The dependent is still collected: its only owner is going away.
        assert_eq!(
            g.decide("cm", &mut absent),
            [Action::Delete { uid: "cm".into(), policy: PropagationPolicy::Background }]
        );
    }

    #[test]
    fn orphan_strips_references_then_the_finalizer() {
        let mut g = chain();
        g.upsert(obj("ReplicaSet", "rs", &[("d", true)], &[ORPHAN], true));
        assert_eq!(
            g.decide("rs", &mut absent),
            [
                Action::RemoveOwnerRefs { uid: "p1".into(), owners: vec!["rs".into()] },
                Action::RemoveOwnerRefs { uid: "p2".into(), owners: vec!["rs".into()] },
                Action::RemoveFinalizer { uid: "rs".into(), finalizer: ORPHAN },
            ]
        );
        // Orphaned pods have no owner left: nothing collects them.
        g.upsert(obj("Pod", "p1", &[], &[], false));
        assert!(g.decide("p1", &mut absent).is_empty());
    }

    #[test]
    fn a_dependent_already_being_deleted_is_left_to_its_finalizers() {
        let mut g = Graph::default();
        g.upsert(obj("ConfigMap", "cm", &[("gone", true)], &["example.com/cleanup"], true));
        assert!(g.decide("cm", &mut absent).is_empty());
    }
}
