//! PUT and PATCH: the read-modify-write under the store lock, the update rules, and the Scale view.

use super::*;

impl Cluster {
    /// PUT.
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let rt = self.canonical(rt)?;
        let mut obj = obj;
        if sub == Subresource::Scale {
            return self.write_scale(&rt, ns, name, opts, |_| Ok(obj));
        }
        self.check_body(&rt, &mut obj)?;
        self.check_namespace(&rt, ns, &mut obj)?;
        match meta_str(&obj, "name") {
            Some(n) if n == name => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    other.unwrap_or_default()
                )));
            }
        }
        let body_rv = resource_version(&obj).map(String::from);
        if body_rv.is_none() && rt.is_crd() {
            // Upstream's custom resource strategy reports this one about the resource, not the Kind.
            return Err(ApiError::invalid(
                &rt.plural,
                &rt.group,
                name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: 0: must be specified for an update",
                    "metadata.resourceVersion",
                )],
            ));
        }
        self.modify(&rt, ns, name, sub, opts, move |_cur| Ok(obj), body_rv, false)
    }

    /// The read-modify-write core of PUT and PATCH: `f` computes the new object from the current one, under the
    /// store lock, so no other write can interleave.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn modify(
        &self,
        rt: &ResourceRef,
        ns: Option<&str>,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        f: impl FnOnce(&Value) -> ApiResult<Value>,
        precondition_rv: Option<String>,
        managed_done: bool,
    ) -> ApiResult<WriteOutcome> {
        let key = key_of(rt, ns, name);
        let now = now_rfc3339();
        let mut st = self.inner.store.lock();
        let cur = st.get(&ResourceKey::of(rt), &key).ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))?;
        let cur_rv = resource_version(&cur).unwrap_or_default().to_string();
        if precondition_rv.as_deref().is_some_and(|rv| rv != cur_rv) {
            return Err(ApiError::conflict(&rt.plural, &rt.group, name));
        }
        let mut new = f(&view(rt, &cur))?;
        if !new.is_object() {
            return Err(ApiError::bad_request("the resulting object must be a JSON object"));
        }
        // A patch may carry a resourceVersion: it is then a precondition, as upstream treats it.
        if let Some(rv) = resource_version(&new)
            && rv != cur_rv
        {
            return Err(ApiError::conflict(&rt.plural, &rt.group, name));
        }
        self.check_body(rt, &mut new)?;
        let mut warnings = Vec::new();
        let manager = opts.field_manager.clone().unwrap_or_else(|| DEFAULT_MANAGER.to_string());
        let manager = if managed_done { None } else { Some(manager.as_str()) };
        // Compared and carried over in the shape the request sees (Events have two).
        let viewed = strategy(rt).view(&cur).map(|v| stamp(rt, v));
        let cur_seen: &Value = viewed.as_ref().unwrap_or(&cur);
        let mutation = self.prepare_update(rt, cur_seen, new, sub, opts, manager, &now, &mut warnings)?;
        if let Mutation::Put(new) = &mutation {
            let attributes = crate::admission::Attributes {
                rt,
                subresource: match sub {
                    Subresource::Main => "",
                    Subresource::Status => "status",
                    Subresource::Scale => "scale",
                },
                operation: "UPDATE",
                namespace: &key.0,
                name,
                object: new,
                old_object: Some(cur_seen),
                dry_run: opts.dry_run,
            };
            warnings.extend(self.admit(&st, &attributes)?);
        }
        if opts.dry_run {
            let object = match &mutation {
                Mutation::Put(v) | Mutation::Finalize(v) => present(rt, v),
                _ => present(rt, &cur),
            };
            return Ok(WriteOutcome { object, created: false, warnings });
        }
        let finalized = match &mutation {
            Mutation::Finalize(last) => Some(last.clone()),
            _ => None,
        };
        let committed = st.commit(rt, key, mutation);
        if let Committed::Put { object, .. } = &committed {
            strategy(rt).stored(self, object);
        }
        let object = match (committed, finalized) {
            (Committed::Deleted(_), Some(last)) => {
                return Ok(WriteOutcome { object: present(rt, &last), created: false, warnings });
            }
            (Committed::Put { object, .. } | Committed::Deleted(object), _) => object,
            (Committed::Unchanged(Some(o)), _) => o,
            (Committed::Unchanged(None), _) => return Err(ApiError::not_found(&rt.plural, &rt.group, name)),
        };
        Ok(WriteOutcome { object: present(rt, &object), created: false, warnings })
    }

    /// Applies the update rules to a new version of `cur`: status split, preserved system metadata, finalizer
    /// rules, defaulting/validation, generation, managedFields, no-op detection.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare_update(
        &self,
        rt: &ResourceType,
        cur: &Value,
        mut new: Value,
        sub: Subresource,
        opts: &WriteOptions,
        manager: Option<&str>,
        now: &str,
        warnings: &mut Vec<String>,
    ) -> ApiResult<Mutation> {
        let name = meta_str(cur, "name").unwrap_or_default().to_string();
        if rt.subresources.status {
            new = split_status(rt, cur, new, sub);
        }
        let cur_meta = meta::meta(cur).cloned().unwrap_or_default();
        let m = meta_mut(&mut new);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
            "resourceVersion",
        ] {
            match cur_meta.get(f) {
                Some(v) => m.insert(f.into(), v.clone()),
                None => m.remove(f),
            };
        }
        m.remove("selfLink");
        if m.get("finalizers").is_some_and(|f| f.as_array().is_some_and(Vec::is_empty) || f.is_null()) {
            m.remove("finalizers");
        }
        if is_deleting(cur) {
            let old_f: HashSet<String> = finalizers(cur).into_iter().collect();
            let added: Vec<String> = finalizers(&new).into_iter().filter(|f| !old_f.contains(f)).collect();
            if !added.is_empty() {
                let list = added.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join(", ");
                return Err(invalid(
                    rt,
                    &name,
                    vec![Cause::new(
                        "FieldValueForbidden",
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                        ),
                        "metadata.finalizers",
                    )],
                ));
            }
        }
        strategy(rt).prepare_for_update(&mut new, cur, sub);
        crate::builtin::prepare_for_update(rt, &mut new, cur);
        self.default_object(rt, &mut new, opts, warnings)?;
        strategy(rt).canonicalize(&mut new, Some(cur), now);
        self.validate(rt, &new, Some(cur), sub)?;
        if meta::generation_bumps(rt, cur, &new) {
            let g = cur.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let subresource = match sub {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::Scale => Some("scale"),
        };
        if let Some(manager) = manager {
            crate::patch::managed::record_update(rt, Some(cur), &mut new, manager, subresource, now);
        }
        if meta::same_content(cur, &new) {
            return Ok(Mutation::Keep);
        }
        if is_deleting(&new) && finalizers(&new).is_empty() && strategy(rt).removed_when_finalized() {
            return Ok(Mutation::Finalize(new));
        }
        Ok(Mutation::Put(new))
    }

    // Over 80 lines on purpose: the patch types and server-side apply share one read-modify-write, and the order of
    // their checks is upstream's `patchResource`; splitting it would scatter that order.
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        patch: PatchBody,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let rt = self.canonical(rt)?;
        if let PatchBody::Strategic(_) = &patch
            && rt.is_crd()
        {
            return Err(crate::patch::strategic::custom_resource_unsupported());
        }
        if let PatchBody::Apply(body) = &patch {
            let manager = opts.field_manager.clone().filter(|m| !m.is_empty()).ok_or_else(invalid_apply_manager)?;
            self.check_applied_fields(&rt, name, body)?;
            // The applied object must keep the name on the URL (upstream's checkName after the patch).
            if let Some(applied) = meta_str(body, "name").filter(|n| !n.is_empty() && *n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({applied}) does not match the name on the URL ({name})"
                )));
            }
            let exists = {
                let st = self.inner.store.lock();
                st.get(&ResourceKey::of(&rt), &key_of(&rt, ns, name)).is_some()
            };
            let subresource = match sub {
                Subresource::Main => None,
                Subresource::Status => Some("status"),
                Subresource::Scale => Some("scale"),
            };
            if !exists && sub == Subresource::Main {
                let now = now_rfc3339();
                let mut obj = crate::patch::apply::server_side_apply(crate::patch::apply::ApplyRequest {
                    rt: &rt,
                    live: None,
                    applied: body,
                    manager: &manager,
                    force: opts.force,
                    subresource: None,
                    now: &now,
                })?;
                self.check_body(&rt, &mut obj)?;
                meta_mut(&mut obj).insert("name".into(), Value::String(name.to_string()));
                return self.create_inner(&rt, ns, obj, opts, true);
            }
            if sub != Subresource::Scale {
                let rt2 = rt.clone();
                let body = body.clone();
                let force = opts.force;
                let apply = move |cur: &Value| {
                    let now = now_rfc3339();
                    crate::patch::apply::server_side_apply(crate::patch::apply::ApplyRequest {
                        rt: &rt2,
                        live: Some(cur),
                        applied: &body,
                        manager: &manager,
                        force,
                        subresource,
                        now: &now,
                    })
                };
                return self.modify(&rt, ns, name, sub, opts, apply, None, true);
            }
        }
        if sub == Subresource::Scale {
            let patch2 = patch.clone();
            return self.write_scale(&rt, ns, name, opts, move |scale| apply_patch(&rt_scale(), scale, &patch2));
        }
        let rt2 = rt.clone();
        let patched = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = patched.clone();
        let url_name = name.to_string();
        let apply = move |cur: &Value| {
            let result = apply_patch(&rt2, cur, &patch)?;
            // As for an update, the patched object must keep the name on the URL (upstream's checkName).
            let patched_name = meta_str(&result, "name").unwrap_or_default();
            if patched_name != url_name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({patched_name}) does not match the name on the URL ({url_name})"
                )));
            }
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(result.clone());
            Ok(result)
        };
        match self.modify(&rt, ns, name, sub, opts, apply, None, false) {
            // A custom resource's patched object is decoded strictly as a whole: upstream reports the failure as
            // an invalid `patch` field holding the patched object, not as the 400 a create or update gets.
            Err(e) if rt.is_crd() && e.code == 400 && e.message.contains(STRICT_DECODING) => {
                let object = patched.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or(Value::Null);
                let quoted = serde_json::to_string(&object.to_string()).unwrap_or_default();
                let strict = e.message.find(STRICT_DECODING).map_or(e.message.as_str(), |i| &e.message[i..]);
                let cause = Cause::new("FieldValueInvalid", format!("Invalid value: {quoted}: {strict}"), "patch");
                Err(ApiError::invalid("", "", "", vec![cause]))
            }
            other => other,
        }
    }

    /// An applied configuration must fit its type's schema whatever fieldValidation says: upstream builds a typed
    /// object from it first and answers a field outside the schema with a 500 (no pruning). Built-ins are checked
    /// against their typed structs. (Inside lists upstream names an item by its key, `[name="app"]`, where the
    /// path here has its index.)
    pub(super) fn check_applied_fields(&self, rt: &ResourceType, name: &str, body: &Value) -> ApiResult<()> {
        let mut probe = body.clone();
        let unknown = match self.schema_for(rt) {
            Some(schema) if rt.is_crd() => schema.prune(&mut probe),
            _ if rt.origin == Origin::BuiltIn => crate::builtin::prune_unknown(rt, &mut probe),
            _ => Vec::new(),
        };
        let Some(first) = unknown.into_iter().next() else { return Ok(()) };
        let namespace = body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        // Go's GroupVersionKind String(): the core group prints as an empty group before the slash.
        let group_version = format!("{}/{}", rt.group, rt.version);
        Err(ApiError::new(
            500,
            "",
            format!(
                "failed to create typed patch object ({namespace}/{name}; {group_version}, Kind={}): .{first}: field not \
                 declared in schema",
                rt.kind
            ),
        ))
    }

    /// The autoscaling/v1 Scale view of an object with a scale subresource.
    pub fn get_scale(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let obj = self.get(rt, ns, name)?;
        scale_of(rt, &obj)
    }

    pub(super) fn write_scale(
        &self,
        rt: &ResourceRef,
        ns: Option<&str>,
        name: &str,
        opts: &WriteOptions,
        f: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<WriteOutcome> {
        let Some(paths) = rt.subresources.scale.clone() else {
            return Err(ApiError::path_not_found());
        };
        let rt2 = rt.clone();
        let out = self.modify(
            rt,
            ns,
            name,
            Subresource::Scale,
            opts,
            move |cur| {
                let scale = scale_of(&rt2, cur)?;
                let new_scale = f(&scale)?;
                if let Some(rv) = new_scale.pointer("/metadata/resourceVersion").and_then(Value::as_str)
                    && !rv.is_empty()
                    && Some(rv) != resource_version(cur)
                {
                    return Err(ApiError::conflict(&rt2.plural, &rt2.group, meta_str(cur, "name").unwrap_or_default()));
                }
                let replicas = new_scale.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
                if replicas < 0 {
                    return Err(ApiError::invalid(
                        "Scale",
                        "autoscaling",
                        meta_str(cur, "name").unwrap_or_default(),
                        vec![Cause::new(
                            "FieldValueInvalid",
                            format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                            "spec.replicas",
                        )],
                    ));
                }
                let mut new = cur.clone();
                set_path(&mut new, &paths.spec_replicas_path, json!(replicas));
                Ok(new)
            },
            None,
            false,
        )?;
        Ok(WriteOutcome { object: scale_of(rt, &out.object)?, ..out })
    }
}

pub(super) fn invalid_apply_manager() -> ApiError {
    ApiError::invalid(
        "PatchOptions",
        "meta.k8s.io",
        "",
        vec![Cause::new("FieldValueRequired", "Required value: is required for apply patch", "fieldManager")],
    )
}

/// The type the Scale view is patched as (merge semantics for every patch type).
pub(super) fn rt_scale() -> ResourceType {
    ResourceType {
        group: "autoscaling".into(),
        version: "v1".into(),
        kind: "Scale".into(),
        list_kind: "ScaleList".into(),
        plural: "scales".into(),
        singular: "scale".into(),
        short_names: Vec::new(),
        categories: Vec::new(),
        namespaced: true,
        verbs: Vec::new(),
        subresources: Default::default(),
        origin: crate::resources::Origin::BuiltIn,
    }
}

pub(super) fn scale_of(rt: &ResourceType, obj: &Value) -> ApiResult<Value> {
    let Some(paths) = &rt.subresources.scale else {
        return Err(ApiError::path_not_found());
    };
    let m = meta::meta(obj).cloned().unwrap_or_default();
    let mut metadata = Map::new();
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = m.get(f) {
            metadata.insert(f.into(), v.clone());
        }
    }
    let spec_replicas = get_path(obj, &paths.spec_replicas_path).and_then(Value::as_i64).unwrap_or(0);
    let status_replicas = get_path(obj, &paths.status_replicas_path).and_then(Value::as_i64).unwrap_or(0);
    let selector = if rt.is_crd() {
        paths.label_selector_path.as_deref().and_then(|p| get_path(obj, p)).and_then(Value::as_str).map(String::from)
    } else {
        obj.pointer("/spec/selector/matchLabels").and_then(Value::as_object).map(|ml| {
            ml.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect::<Vec<_>>().join(",")
        })
    };
    let mut status = json!({"replicas": status_replicas});
    if let Some(s) = selector {
        status["selector"] = json!(s);
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": spec_replicas},
        "status": status,
    }))
}

/// Applies a merge, JSON or strategic patch to the current object (the Scale view is merged for any type).
pub(super) fn apply_patch(rt: &ResourceType, cur: &Value, patch: &PatchBody) -> ApiResult<Value> {
    match patch {
        PatchBody::Merge(p) => {
            if !p.is_object() {
                return Err(ApiError::bad_request("the patch must be a JSON object"));
            }
            Ok(crate::patch::merge::merge_patch(cur, p))
        }
        PatchBody::Strategic(p) if rt.kind == "Scale" => Ok(crate::patch::merge::merge_patch(cur, p)),
        PatchBody::Strategic(p) => crate::patch::strategic::strategic_merge_patch(rt, cur, p),
        PatchBody::Json(p) => crate::patch::json::json_patch(cur, p),
        // Apply to the Scale view: take replicas as a merge would.
        PatchBody::Apply(p) => Ok(crate::patch::merge::merge_patch(cur, p)),
    }
}

/// With a status subresource, a write to the main resource keeps the stored status and a write to /status
/// changes only the status (and managedFields), or for some kinds the status and the metadata but the labels.
fn split_status(rt: &ResourceType, cur: &Value, mut new: Value, sub: Subresource) -> Value {
    match sub {
        Subresource::Status if strategy(rt).status_keeps_metadata() => {
            set_or_remove(&mut new, "spec", cur.get("spec").cloned());
            let labels = cur.pointer("/metadata/labels").cloned();
            set_or_remove_in(meta_mut(&mut new), "labels", labels);
        }
        Subresource::Status => {
            let status = new.get("status").cloned();
            let mf = new.pointer("/metadata/managedFields").cloned();
            new = view(rt, cur);
            set_or_remove(&mut new, "status", status);
            set_or_remove_in(meta_mut(&mut new), "managedFields", mf);
        }
        _ => set_or_remove(&mut new, "status", cur.get("status").cloned()),
    }
    new
}

/// `obj[key] = value`, or no `key` at all when `value` is None.
fn set_or_remove(obj: &mut Value, key: &str, value: Option<Value>) {
    if let Some(o) = obj.as_object_mut() {
        set_or_remove_in(o, key, value);
    }
}

fn set_or_remove_in(map: &mut serde_json::Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(v) => map.insert(key.into(), v),
        None => map.remove(key),
    };
}
