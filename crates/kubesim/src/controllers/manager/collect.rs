//! The garbage collector's and the namespace controller's part of the loop: dependents of deleted owners,
//! the orphan and foregroundDeletion finalizers, and emptying a terminating namespace.

use super::*;

impl Manager {
    pub(super) fn collect(&mut self, uid: &str) {
        let cluster = self.cluster.clone();
        let mut lookup = |node: &Node, link: &gc::OwnerLink| lookup_owner(&cluster, node, link);
        let actions = self.graph.decide(uid, &mut lookup);
        for action in actions {
            match action {
                gc::Action::Delete { uid, policy } => {
                    let Some(node) = self.graph.get(&uid).cloned() else { continue };
                    let del = DeleteOptions {
                        propagation_policy: Some(policy),
                        precondition_uid: Some(uid.clone()),
                        ..Default::default()
                    };
                    match self.cluster.delete(&node.rt, node.namespace.as_deref(), &node.name, &del) {
                        Ok(out) => self.deleted(&node.rt, out),
                        Err(e) if e.code == 404 || e.code == 409 => {}
                        Err(_) => {}
                    }
                }
                gc::Action::RemoveOwnerRefs { uid, owners } => {
                    self.edit_metadata(&uid, |meta| {
                        let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else {
                            return false;
                        };
                        let before = refs.len();
                        refs.retain(|r| !owners.iter().any(|o| r.get("uid").and_then(Value::as_str) == Some(o)));
                        let changed = refs.len() != before;
                        if refs.is_empty() {
                            meta.remove("ownerReferences");
                        }
                        changed
                    });
                }
                gc::Action::RemoveFinalizer { uid, finalizer } => {
                    self.edit_metadata(&uid, |meta| {
                        let Some(list) = meta.get_mut("finalizers").and_then(Value::as_array_mut) else {
                            return false;
                        };
                        let before = list.len();
                        list.retain(|f| f.as_str() != Some(finalizer));
                        let changed = list.len() != before;
                        if list.is_empty() {
                            meta.remove("finalizers");
                        }
                        changed
                    });
                }
                gc::Action::Recheck(uids) => self.dirty_gc.extend(uids),
            }
        }
    }

    /// Read-modify-write of an object's metadata with optimistic concurrency, retried on conflicts.
    pub(super) fn edit_metadata(&mut self, uid: &str, edit: impl Fn(&mut serde_json::Map<String, Value>) -> bool) {
        let Some(node) = self.graph.get(uid).cloned() else { return };
        let opts = Self::opts("garbage-collector");
        for _ in 0..5 {
            let Ok(mut obj) = self.cluster.get(&node.rt, node.namespace.as_deref(), &node.name) else { return };
            if meta_str(&obj, "uid") != Some(uid) {
                return;
            }
            let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
            if !edit(meta) {
                return;
            }
            match self.cluster.update(&node.rt, node.namespace.as_deref(), &node.name, obj, Subresource::Main, &opts) {
                Ok(out) => {
                    self.wrote(&node.rt, out.object);
                    return;
                }
                Err(e) if e.code == 409 => continue,
                Err(ApiError { code: 404, .. }) => {
                    // The update removed the last finalizer and with it the object, or it was gone already.
                    return;
                }
                Err(_) => return,
            }
        }
    }

    pub(super) fn finalize_namespace(&mut self, name: &str) {
        let key = (String::new(), name.to_string());
        let Some(ns) = self.namespaces.objects.get(&key).map(|c| c.value.clone()) else { return };
        if meta_str(&ns, "deletionTimestamp").is_none() {
            return;
        }
        let rt = self.types.namespaces.clone();
        let opts = Self::opts("namespace-controller");
        if ns.pointer("/status/phase").and_then(Value::as_str) != Some("Terminating") {
            let mut body = (*ns).clone();
            body["status"] = json!({"phase": "Terminating"});
            if let Ok(out) = self.cluster.update(&rt, None, name, body, Subresource::Status, &opts) {
                self.wrote(&rt, out.object);
            }
        }
        // Delete what is left, type by type; objects held by finalizers are waited for.
        let mut remaining: HashMap<(String, String), (ResourceRef, bool)> = HashMap::new();
        for n in self.graph.nodes().filter(|n| n.namespace.as_deref() == Some(name)) {
            let e = remaining.entry((n.rt.group.clone(), n.rt.plural.clone())).or_insert((n.rt.clone(), false));
            e.1 |= !n.deleting;
        }
        if !remaining.is_empty() {
            for (rt, live) in remaining.into_values() {
                if live {
                    let del =
                        DeleteOptions { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
                    if let Ok(gone) = self.cluster.delete_collection(&rt, Some(name), &ListOptions::default(), &del) {
                        for v in gone {
                            let outcome = if meta_str(&v, "deletionTimestamp").is_some() {
                                DeleteOutcome::Pending(v)
                            } else {
                                DeleteOutcome::Deleted(v)
                            };
                            self.deleted(&rt, outcome);
                        }
                    }
                }
            }
            return;
        }
        // Empty: release the `kubernetes` finalizer, then the namespace goes.
        let has_finalizer = ns
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x == NAMESPACE_FINALIZER));
        if has_finalizer {
            let mut body = (*ns).clone();
            if let Some(list) = body.pointer_mut("/spec/finalizers").and_then(Value::as_array_mut) {
                list.retain(|x| x != NAMESPACE_FINALIZER);
            }
            match self.cluster.update(&rt, None, name, body, Subresource::Main, &opts) {
                Ok(out) => {
                    self.wrote(&rt, out.object);
                }
                Err(_) => return,
            }
        }
        if let Ok(true) = self.cluster.finalize_namespace(name) {
            self.namespaces.remove_key(&key);
        }
    }
}

/// Asks the API server about an owner the graph does not hold.
pub(super) fn lookup_owner(cluster: &Cluster, node: &Node, link: &gc::OwnerLink) -> Lookup {
    let Ok(rt) = cluster.resolve_kind(&link.api_version, &link.kind) else { return Lookup::Unknown };
    let ns = if rt.namespaced { node.namespace.as_deref() } else { None };
    match cluster.get(&rt, ns, &link.name) {
        Ok(owner) if meta_str(&owner, "uid") == Some(link.uid.as_str()) => {
            let deleting = Node::from_object(&rt, &owner).is_some_and(|n| n.deleting_dependents());
            Lookup::Exists { deleting_dependents: deleting }
        }
        Ok(_) => Lookup::Absent,
        Err(e) if e.code == 404 => Lookup::Absent,
        Err(_) => Lookup::Unknown,
    }
}
