//! DELETE and deletecollection: preconditions, finalizers, propagation policy, and what the kind's strategy
//! makes of a delete.

use std::sync::MutexGuard;

use super::*;

impl Cluster {
    // Over 80 lines on purpose: the steps of upstream's `Store.Delete` (preconditions, graceful deletion, finalizers by
    // propagation policy) in its order, which is what checking it against upstream needs.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<DeleteOutcome> {
        let rt = self.canonical(rt)?;
        let key = key_of(&rt, ns, name);
        let mut st = self.inner.store.lock();
        let cur =
            st.get(&ResourceKey::of(&rt), &key).ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
        check_preconditions(&rt, name, &cur, opts)?;
        if strategy(&rt).on_delete() == OnDelete::Terminate {
            return self.terminate(st, &rt, key, &cur, opts);
        }
        let policy = opts.propagation_policy.unwrap_or(PropagationPolicy::Background);
        let mut fins = finalizers(&cur);
        let extra = match policy {
            PropagationPolicy::Foreground => Some("foregroundDeletion"),
            PropagationPolicy::Orphan => Some("orphan"),
            PropagationPolicy::Background => None,
        };
        if is_deleting(&cur) {
            // Already being deleted: upstream only updates the GC finalizers the new policy asks for.
            if let Some(f) = extra
                && !fins.iter().any(|x| x == f)
            {
                fins.retain(|x| x != "orphan" && x != "foregroundDeletion");
                fins.push(f.to_string());
                let mut new = (*cur).clone();
                meta_mut(&mut new).insert("finalizers".into(), json!(fins));
                if opts.dry_run {
                    return Ok(DeleteOutcome::Pending(present(&rt, &new)));
                }
                if let Committed::Put { object, .. } = st.commit(&rt, key, Mutation::Put(new)) {
                    return Ok(DeleteOutcome::Pending(present(&rt, &object)));
                }
            }
            return Ok(DeleteOutcome::Pending(present(&rt, &cur)));
        }
        if let Some(f) = extra
            && !fins.iter().any(|x| x == f)
        {
            fins.push(f.to_string());
        }
        if fins.is_empty() {
            // Pods are deleted gracefully upstream: the object is first updated with deletionTimestamp and the
            // grace period, then removed once it is over. kubesim runs no containers to wait for, so the grace
            // period is 0, as upstream gives an unscheduled Pod, and the removal follows at once.
            let graceful = strategy(&rt).on_delete() == OnDelete::Graceful;
            let mut last = (*cur).clone();
            if graceful {
                let m = meta_mut(&mut last);
                m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Deleted(present(&rt, &last)));
            }
            if graceful {
                st.commit(&rt, key.clone(), Mutation::Put(last));
            }
            let committed = st.commit(&rt, key, Mutation::Delete);
            drop(st);
            strategy(&rt).removed(self, name);
            return match committed {
                Committed::Deleted(o) => Ok(DeleteOutcome::Deleted(present(&rt, &o))),
                _ => Err(ApiError::not_found(&rt.plural, &rt.group, name)),
            };
        }
        let mut new = (*cur).clone();
        let m = meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        m.insert("finalizers".into(), json!(fins));
        if meta::tracks_generation(&rt)
            && let Some(g) = m.get("generation").and_then(Value::as_i64)
        {
            m.insert("generation".into(), json!(g + 1));
        }
        if opts.dry_run {
            return Ok(DeleteOutcome::Pending(present(&rt, &new)));
        }
        match st.commit(&rt, key, Mutation::Put(new)) {
            Committed::Put { object, .. } => Ok(DeleteOutcome::Pending(present(&rt, &object))),
            _ => Err(ApiError::internal("deletion was not stored")),
        }
    }

    /// A Namespace's delete: it turns Terminating and the namespace controller removes it once it is empty.
    fn terminate(
        &self,
        mut st: MutexGuard<'_, State>,
        rt: &ResourceRef,
        key: ObjectKey,
        cur: &Value,
        opts: &DeleteOptions,
    ) -> ApiResult<DeleteOutcome> {
        let name = key.1.clone();
        if INITIAL_NAMESPACES[..3].contains(&name.as_str()) {
            let mut e =
                ApiError::forbidden(format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"));
            e.details.name = Some(name.clone());
            e.details.kind = Some("namespaces".into());
            return Err(e);
        }
        if is_deleting(cur) {
            // Asked again once emptied (the namespace controller does): finish it.
            drop(st);
            self.finalize_namespace(&name)?;
            return self
                .get(rt, None, &name)
                .map(DeleteOutcome::Pending)
                .or_else(|_| Ok(DeleteOutcome::Deleted(present(rt, cur))));
        }
        let mut new = cur.clone();
        let m = meta_mut(&mut new);
        m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        new["status"]["phase"] = json!("Terminating");
        if opts.dry_run {
            return Ok(DeleteOutcome::Pending(present(rt, &new)));
        }
        match st.commit(rt, key, Mutation::Put(new)) {
            Committed::Put { object, .. } => Ok(DeleteOutcome::Pending(present(rt, &object))),
            _ => Err(ApiError::internal("namespace deletion was not stored")),
        }
    }

    /// A deleted CRD takes its endpoints and objects with it.
    pub(super) fn remove_crd_types(&self, crd_name: &str) {
        let gone = self.registry_mut().unregister_crd(crd_name);
        let mut st = self.inner.store.lock();
        if let Some(rt) = gone.first() {
            st.remove_resource(rt);
        }
    }

    /// Removes a terminating namespace once nothing lives in it and no finalizer holds it (the namespace
    /// controller's last step). Returns whether it is gone.
    pub fn finalize_namespace(&self, name: &str) -> ApiResult<bool> {
        let rt = self.resolve("", "v1", "namespaces")?;
        let mut st = self.inner.store.lock();
        let key = (String::new(), name.to_string());
        let cur = st.get(&ResourceKey::of(&rt), &key).ok_or_else(|| ApiError::not_found("namespaces", "", name))?;
        if !is_deleting(&cur) || !finalizers(&cur).is_empty() || st.namespace_has_objects(name) {
            return Ok(false);
        }
        st.commit(&rt, key, Mutation::Delete);
        Ok(true)
    }

    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> ApiResult<Vec<Value>> {
        let mut list = list.clone();
        list.limit = None;
        list.continue_token = None;
        let items = self.list(rt, ns, &list)?.items;
        let mut out = Vec::new();
        for item in items {
            let name = meta_str(&item, "name").unwrap_or_default().to_string();
            let item_ns = meta_str(&item, "namespace").map(String::from);
            match self.delete(rt, item_ns.as_deref(), &name, opts) {
                Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => out.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// A failed delete precondition: upstream's `rest.BeforeDelete` names the object by its Kind (qualified by
/// group), not its resource, in the message and in details.kind.
pub(super) fn delete_precondition_failed(rt: &ResourceType, name: &str, why: &str) -> ApiError {
    let mut e = ApiError::conflict(&rt.kind, &rt.group, name);
    e.message =
        format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified_resource(&rt.kind, &rt.group));
    e
}

/// DELETE's preconditions: the uid and resourceVersion the client expects.
fn check_preconditions(rt: &ResourceType, name: &str, cur: &Value, opts: &DeleteOptions) -> ApiResult<()> {
    let uid = meta_str(cur, "uid").unwrap_or_default().to_string();
    if let Some(p) = opts.precondition_uid.as_deref().filter(|s| !s.is_empty())
        && p != uid
    {
        return Err(delete_precondition_failed(
            rt,
            name,
            &format!(
                "the UID in the precondition ({p}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            ),
        ));
    }
    let cur_rv = resource_version(cur).unwrap_or_default().to_string();
    if let Some(p) = opts.precondition_resource_version.as_deref().filter(|s| !s.is_empty())
        && p != cur_rv
    {
        return Err(delete_precondition_failed(
            rt,
            name,
            &format!(
                "the ResourceVersion in the precondition ({p}) does not match the ResourceVersion in record ({cur_rv}). The object might have been modified"
            ),
        ));
    }
    Ok(())
}
