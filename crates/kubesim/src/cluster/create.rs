//! POST: a new object through naming, defaulting, the kind's strategy, validation and admission.

use super::*;

impl Cluster {
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        self.create_inner(rt, ns, obj, opts, false)
    }

    /// `managed_done`: managedFields were already computed (an apply that creates).
    pub(super) fn create_inner(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
        managed_done: bool,
    ) -> ApiResult<WriteOutcome> {
        let rt = self.canonical(rt)?;
        let mut obj = obj;
        self.check_body(&rt, &mut obj)?;
        let ns = self.check_namespace(&rt, ns, &mut obj)?;
        let now = now_rfc3339();
        let name = object_name(&rt, &mut obj)?;
        if resource_version(&obj).is_some() {
            return Err(ApiError::internal("resourceVersion should not be set on objects to be created"));
        }
        let m = meta_mut(&mut obj);
        m.insert("uid".into(), Value::String(meta::new_uid()));
        m.insert("creationTimestamp".into(), Value::String(now.clone()));
        for f in ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation"] {
            m.remove(f);
        }
        if meta::tracks_generation(&rt) {
            m.insert("generation".into(), json!(1));
        }
        if rt.subresources.status
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        let mut warnings = Vec::new();
        self.default_object(&rt, &mut obj, opts, &mut warnings)?;
        strategy(&rt).canonicalize(&mut obj, None, &now);
        if !managed_done {
            let manager = opts.field_manager.clone().unwrap_or_else(|| DEFAULT_MANAGER.to_string());
            crate::patch::managed::record_update(&rt, None, &mut obj, &manager, None, &now);
        }
        strategy(&rt).prepare_for_create(&mut obj);

        let key = (ns.clone(), name.clone());
        let mut st = self.inner.store.lock();
        self.check_namespace_live(&st, &rt, &ns, &name)?;
        if st.get(&ResourceKey::of(&rt), &key).is_some() {
            return Err(ApiError::already_exists(&rt.plural, &rt.group, &name));
        }
        strategy(&rt).allocate(&st, &rt, &mut obj)?;
        self.validate(&rt, &obj, None, Subresource::Main)?;
        let attributes = crate::admission::Attributes {
            rt: &rt,
            subresource: "",
            operation: "CREATE",
            namespace: &ns,
            name: &name,
            object: &obj,
            old_object: None,
            dry_run: opts.dry_run,
        };
        warnings.extend(self.admit(&st, &attributes)?);
        if opts.dry_run {
            return Ok(WriteOutcome { object: present(&rt, &obj), created: true, warnings });
        }
        let committed = st.commit(&rt, key, Mutation::Put(obj));
        if let Committed::Put { object, .. } = &committed {
            strategy(&rt).stored(self, object);
        }
        drop(st);
        match committed {
            Committed::Put { object, .. } => {
                Ok(WriteOutcome { object: present(&rt, &object), created: true, warnings })
            }
            _ => Err(ApiError::internal("create did not store the object")),
        }
    }
}

/// The name of an object to create: its own, or one made from generateName.
fn object_name(rt: &ResourceType, obj: &mut Value) -> ApiResult<String> {
    let m = meta_mut(obj);
    let name = match m.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(n) => n.to_string(),
        None => match m.get("generateName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(prefix) => {
                let n = format!("{prefix}{}", meta::name_suffix());
                m.insert("name".into(), Value::String(n.clone()));
                n
            }
            None => {
                return Err(invalid(
                    rt,
                    "",
                    vec![Cause::new(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )],
                ));
            }
        },
    };
    Ok(name)
}
