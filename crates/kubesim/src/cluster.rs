//! The request-level operations of the emulated API server: what a verb does to the store, independent of HTTP.
//! The HTTP layer and the simulated controllers both go through [`Cluster`], so a controller's write gets the same
//! defaulting, validation, generation/resourceVersion rules, managedFields and watch events as a client's.
//!
//! One module per verb, each adding to [`Cluster`]'s `impl`: `read` (get, list, watch), `create`, `update` (PUT,
//! PATCH and the Scale view) and `delete`. The verbs are generic: what differs between kinds (a Namespace's
//! delete, a CRD's status and registration, a Service's clusterIP, a Pod's graceful delete, the events.k8s.io
//! view of core Events) is the kind's strategy in `strategy`, in the shape of the upstream registry's. `meta`
//! holds the metadata helpers the rest of the crate shares; `registry` the served types; `watch` the watchers.

mod create;
mod delete;
pub(crate) mod meta;
mod read;
mod registry;
mod strategy;
mod update;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
pub use watch::WatchItem;

use crate::error::{ApiError, ApiResult, Cause, qualified_resource};
use crate::resources::{Origin, ResourceRef, ResourceType};
use crate::schema::CompiledSchema;
pub use crate::store::{Change, ChangeKind};
use crate::store::{Committed, Mutation, ObjectKey, ResourceKey, State, Store};
use meta::{finalizers, get_path, is_deleting, meta_mut, meta_str, now_rfc3339, resource_version, set_path};
use registry::Registry;
use strategy::{OnDelete, strategy};

use crate::selector::{FieldSelector, LabelSelector};

const STRICT_DECODING: &str = "strict decoding error";

/// The 400 of a body that fieldValidation=Strict refuses; `problems` are upstream's texts
/// (`unknown field "spec.x"`, `duplicate field "data"`).
pub fn strict_decoding_error(rt: &ResourceType, problems: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version \"{}\" cannot be handled as a {}: {STRICT_DECODING}: {}",
        rt.kind,
        rt.version,
        rt.kind,
        problems.join(", ")
    ))
}

/// `fieldValidation` of a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    /// Upstream default: unknown fields are dropped and reported as warnings.
    #[default]
    Warn,
    Strict,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing, consume no resourceVersion.
    pub dry_run: bool,
    /// The field manager recorded in managedFields (required for apply; derived from the user agent otherwise).
    pub field_manager: Option<String>,
    pub field_validation: FieldValidation,
    /// `force=true` on server-side apply.
    pub force: bool,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Subresource {
    #[default]
    Main,
    Status,
    Scale,
}

/// A PATCH body, by its content type.
#[derive(Debug, Clone)]
pub enum PatchBody {
    /// application/merge-patch+json (RFC 7386)
    Merge(Value),
    /// application/json-patch+json (RFC 6902)
    Json(Value),
    /// application/strategic-merge-patch+json (built-ins only; custom resources answer 415)
    Strategic(Value),
    /// application/apply-patch+yaml (server-side apply; the body already decoded to JSON)
    Apply(Value),
}

#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ObjectList {
    pub items: Vec<Value>,
    /// The list's resourceVersion (the global counter when the list was taken).
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining_item_count: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub allow_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
}

/// One event of a watch stream, the object already in its wire form (`{"type":..,"object":..}` is built from it).
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Added(Value),
    Modified(Value),
    Deleted(Value),
    Bookmark(Value),
    /// A metav1.Status; the stream ends after it.
    Error(Value),
}

pub type WatchStream = BoxStream<'static, WatchEvent>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropagationPolicy {
    Background,
    Foreground,
    Orphan,
}

#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation_policy: Option<PropagationPolicy>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub grace_period_seconds: Option<i64>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Deleted(Value),
    /// Finalizers hold it: it now carries a deletionTimestamp.
    Pending(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct WriteOutcome {
    pub object: Value,
    /// True when the write created the object (POST, or an apply to a missing object).
    pub created: bool,
    /// `Warning:` header texts (e.g. unknown fields under fieldValidation=Warn).
    pub warnings: Vec<String>,
}

/// The namespaces every cluster starts with.
pub const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The field manager recorded for writes that name none (in-process controllers).
const DEFAULT_MANAGER: &str = "kube-controller-manager";

/// (group, version, plural)
type TypeKey = (String, String, String);

/// JSON watch lines shared by all watchers, by (resourceVersion, version served); bounded.
#[derive(Default)]
struct LineCache {
    lines: HashMap<(u64, String), bytes::Bytes>,
    order: std::collections::VecDeque<(u64, String)>,
}

const LINE_CACHE_SIZE: usize = 16_384;

pub(crate) struct Inner {
    store: Store,
    registry: RwLock<Registry>,
    /// How often idle watches that asked for bookmarks get one.
    bookmark_interval: RwLock<Duration>,
    /// Compiled structural schemas per CRD-defined type, with the schema they were compiled from.
    schemas: RwLock<HashMap<TypeKey, (Value, Arc<CompiledSchema>)>>,
    lines: std::sync::Mutex<LineCache>,
}

/// One line of a JSON watch: `{"type":..,"object":..}` and a newline, `type` first as kube-apiserver writes it
/// (Go's field order), so a client can decode the object straight into its type instead of buffering it whole
/// until it knows which event it is (what serde does for an adjacently tagged enum whose content comes first).
pub fn watch_line(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = format!("{{\"type\":\"{kind}\",\"object\":").into_bytes();
    // A Value always serialises.
    let _ = serde_json::to_writer(&mut line, object);
    line.extend_from_slice(b"}\n");
    line
}

impl Inner {
    /// `{"type":..,"object":..}\n` of a change as watchers of `rt` send it unfiltered.
    fn shared_line(&self, rt: &ResourceType, change: &Change) -> bytes::Bytes {
        // Two groups may serve one storage (Events): the line depends on the group too.
        let key = (change.resource_version, rt.api_version());
        if let Some(b) = self.lines.lock().unwrap_or_else(|p| p.into_inner()).lines.get(&key) {
            return b.clone();
        }
        let kind = match change.kind {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        };
        let line = bytes::Bytes::from(watch_line(kind, &present(rt, &change.object)));
        let mut cache = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if cache.lines.insert(key.clone(), line.clone()).is_none() {
            cache.order.push_back(key);
            while cache.order.len() > LINE_CACHE_SIZE {
                if let Some(old) = cache.order.pop_front() {
                    cache.lines.remove(&old);
                }
            }
        }
        line
    }
}

/// The emulated API server's state and verbs. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

/// The object as served through `rt`: stored objects are shared by all versions of a resource, and encoded as
/// upstream's typed objects print.
pub(crate) fn present(rt: &ResourceType, obj: &Value) -> Value {
    let mut served = view(rt, obj);
    strategy(rt).encode(&mut served);
    served
}

/// The object in the shape of `rt` without the output encoding: what a patch applies to.
fn view(rt: &ResourceType, obj: &Value) -> Value {
    stamp(rt, strategy(rt).view(obj).unwrap_or_else(|| obj.clone()))
}

/// A schema cause as the status validator words it: `status.a.b in body ...` becomes `a.b in body ...`.
fn status_relative(mut cause: Cause) -> Cause {
    if let Some(relative) = cause.field.strip_prefix("status.") {
        cause.message = cause.message.replace(&format!("{} in body", cause.field), &format!("{relative} in body"));
    }
    cause
}

/// `obj` with the apiVersion and kind of `rt`.
fn stamp(rt: &ResourceType, mut out: Value) -> Value {
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(rt.api_version()));
        m.insert("kind".into(), Value::String(rt.kind.clone()));
    }
    out
}

fn invalid(rt: &ResourceType, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::invalid(&rt.kind, &rt.group, name, causes)
}

fn parse_rv(s: &str) -> ApiResult<u64> {
    s.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

/// The object key a verb addresses; cluster-scoped objects live under namespace "".
fn key_of(rt: &ResourceType, ns: Option<&str>, name: &str) -> ObjectKey {
    let ns = if rt.namespaced { ns.unwrap_or_default() } else { "" };
    (ns.to_string(), name.to_string())
}

impl Cluster {
    pub fn new() -> Self {
        Self::with_history(crate::store::HistoryLimits::default())
    }

    /// A cluster keeping this much watch history (older resourceVersions get 410 Gone).
    pub fn with_history(limits: crate::store::HistoryLimits) -> Self {
        let cluster = Cluster {
            inner: Arc::new(Inner {
                store: Store::new(limits),
                registry: RwLock::new(Registry::new()),
                bookmark_interval: RwLock::new(Duration::from_secs(60)),
                schemas: RwLock::default(),
                lines: Default::default(),
            }),
        };
        cluster.bootstrap();
        cluster
    }

    fn bootstrap(&self) {
        let opts = WriteOptions { field_manager: Some("kube-apiserver".into()), ..WriteOptions::default() };
        if let Ok(ns_rt) = self.resolve("", "v1", "namespaces") {
            for ns in INITIAL_NAMESPACES {
                let _ = self.create(&ns_rt, None, json!({"metadata": {"name": ns}}), &opts);
            }
        }
        if let Ok(svc_rt) = self.resolve("", "v1", "services") {
            let svc = json!({
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}
            });
            let _ = self.create(&svc_rt, Some("default"), svc, &opts);
        }
    }

    /// How often idle watches with allowWatchBookmarks get a BOOKMARK (60 s, as upstream; shorter in tests).
    pub fn set_bookmark_interval(&self, every: Duration) {
        if let Ok(mut b) = self.inner.bookmark_interval.write() {
            *b = every;
        }
    }

    /// The global resourceVersion now.
    pub fn resource_version(&self) -> u64 {
        self.inner.store.current_rv()
    }

    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.inner.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.inner.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The served type for a URL's group/version/resource (404 when unknown).
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> ApiResult<ResourceRef> {
        self.registry().resolve(group, version, plural).ok_or_else(ApiError::path_not_found)
    }

    /// The served type for an apiVersion/kind (owner references, controllers).
    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> ApiResult<ResourceRef> {
        self.registry().resolve_kind(api_version, kind).ok_or_else(ApiError::path_not_found)
    }

    /// Every type served now, built-ins first, then CRD-defined ones.
    pub fn resource_types(&self) -> Vec<ResourceRef> {
        self.registry().all()
    }

    /// A body of another type than the endpoint's. For a built-in type upstream's decoder reads the body as the
    /// type it names and then fails to convert it (`transformDecodeError` around the scheme's error); the texts
    /// name Go types: `v1.Secret` (the versioned package) and `core.ConfigMap` (the internal one).
    fn undecodable_type(&self, rt: &ResourceType, api_version: &str, kind: &str) -> ApiError {
        if rt.is_crd() {
            return if api_version != rt.api_version() {
                ApiError::bad_request(format!(
                    "the API version in the data ({api_version}) does not match the expected API version ({})",
                    rt.api_version()
                ))
            } else {
                ApiError::bad_request(format!(
                    "the kind in the data ({kind}) does not match the expected kind ({})",
                    rt.kind
                ))
            };
        }
        let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
        let cause = match self.registry().resolve_kind(api_version, kind).filter(|t| !t.is_crd()) {
            Some(_) => {
                // Internal types live in a package named after the group's first label; events.k8s.io's Event is
                // core's.
                let internal = match rt.group.split('.').next().unwrap_or_default() {
                    "" | "events" => "core",
                    first => first,
                };
                format!("converting ({version}.{kind}) to ({internal}.{}): unknown conversion", rt.kind)
            }
            None => format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"pkg/runtime/scheme.go:111\""
            ),
        };
        ApiError::bad_request(format!("{kind} in version \"{version}\" cannot be handled as a {}: {cause}", rt.kind))
    }

    /// Validates apiVersion/kind (absent or right), makes sure the body is an object and fills in type meta.
    fn check_body(&self, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
        let Some(m) = obj.as_object_mut() else {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        };
        let expected = rt.api_version();
        let api_version = match m.get("apiVersion") {
            None | Some(Value::Null) => expected.clone(),
            Some(Value::String(v)) if v.is_empty() => expected.clone(),
            Some(v) => v.as_str().map(String::from).unwrap_or_else(|| v.to_string()),
        };
        let kind = match m.get("kind") {
            None | Some(Value::Null) => rt.kind.clone(),
            Some(Value::String(k)) if k.is_empty() => rt.kind.clone(),
            Some(k) => k.as_str().map(String::from).unwrap_or_else(|| k.to_string()),
        };
        if api_version != expected || kind != rt.kind {
            return Err(self.undecodable_type(rt, &api_version, &kind));
        }
        match m.get("metadata") {
            None | Some(Value::Null) => {
                m.insert("metadata".into(), Value::Object(Map::new()));
            }
            Some(Value::Object(_)) => {}
            Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
        }
        m.insert("apiVersion".into(), Value::String(expected));
        m.insert("kind".into(), Value::String(rt.kind.clone()));
        crate::builtin::convert_from_wire(rt, obj);
        Ok(())
    }

    /// The namespace a write goes to: the URL's, which a body namespace must agree with.
    fn check_namespace(&self, rt: &ResourceType, ns: Option<&str>, obj: &mut Value) -> ApiResult<String> {
        let m = meta_mut(obj);
        if !rt.namespaced {
            m.remove("namespace");
            return Ok(String::new());
        }
        let url_ns = ns.filter(|s| !s.is_empty());
        let body_ns = m.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);
        let ns = match (url_ns, body_ns) {
            (Some(u), Some(b)) if u != b => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (Some(u), _) => u.to_string(),
            (None, Some(b)) => b,
            (None, None) => return Err(ApiError::bad_request("namespace is required for a namespaced resource")),
        };
        m.insert("namespace".into(), Value::String(ns.clone()));
        Ok(ns)
    }

    /// Create-time checks that need the store: the namespace exists and is not terminating.
    fn check_namespace_live(&self, st: &State, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns_key = ResourceKey { group: String::new(), plural: "namespaces".into() };
        match st.get(&ns_key, &(String::new(), ns.to_string())) {
            None => Err(ApiError::not_found("namespaces", "", ns)),
            Some(n) if is_deleting(&n) => {
                let msg = format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    rt.plural
                );
                let mut e = ApiError::forbidden(msg);
                e.details.name = Some(name.to_string());
                e.details.group = Some(rt.group.clone());
                e.details.kind = Some(rt.plural.clone());
                e.details.causes.push(Cause::new(
                    "NamespaceTerminating",
                    format!("namespace {ns} is being terminated"),
                    "metadata.namespace",
                ));
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }

    /// Writes go through the type the registry holds now, so a CRD deleted meanwhile answers 404.
    fn canonical(&self, rt: &ResourceType) -> ApiResult<ResourceRef> {
        self.resolve(&rt.group, &rt.version, &rt.plural)
    }

    /// The compiled schema of a CRD-defined type (compiled once per schema).
    fn schema_for(&self, rt: &ResourceType) -> Option<Arc<CompiledSchema>> {
        let Origin::Crd { schema, .. } = &rt.origin else { return None };
        let key = (rt.group.clone(), rt.version.clone(), rt.plural.clone());
        if let Some((src, compiled)) = self.inner.schemas.read().unwrap_or_else(|p| p.into_inner()).get(&key)
            && src == schema
        {
            return Some(compiled.clone());
        }
        // CRDs are validated before they are served, so a schema that does not compile is one without rules.
        let compiled = Arc::new(if schema.is_null() {
            CompiledSchema::permissive()
        } else {
            CompiledSchema::compile(schema).unwrap_or_else(|_| CompiledSchema::permissive())
        });
        self.inner.schemas.write().unwrap_or_else(|p| p.into_inner()).insert(key, (schema.clone(), compiled.clone()));
        Some(compiled)
    }

    /// Defaulting of a write's result, as the type's strategy does it: unknown fields pruned (custom resources
    /// to their schema, built-ins to their kind; warnings, or 400 under fieldValidation=Strict), custom
    /// resources defaulted from their schema.
    fn default_object(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<()> {
        let pruned = match self.schema_for(rt) {
            Some(schema) => schema.prune(obj),
            None if rt.origin == Origin::BuiltIn => crate::builtin::prune_unknown(rt, obj),
            None => Vec::new(),
        };
        match opts.field_validation {
            FieldValidation::Strict if !pruned.is_empty() => {
                let list: Vec<String> = pruned.iter().map(|p| format!("unknown field \"{p}\"")).collect();
                // Built-ins and custom resources alike fail in the decoder, whose error upstream wraps.
                return Err(strict_decoding_error(rt, &list));
            }
            FieldValidation::Warn => warnings.extend(pruned.iter().map(|p| format!("unknown field \"{p}\""))),
            _ => {}
        }
        if let Some(schema) = self.schema_for(rt) {
            schema.apply_defaults(obj);
            let unsupported = schema.unsupported_rules();
            if !unsupported.is_empty() {
                warnings.push(format!(
                    "kubesim cannot evaluate {} x-kubernetes-validations rule(s): {}",
                    unsupported.len(),
                    unsupported.join("; ")
                ));
            }
        }
        crate::builtin::default_object(rt, obj);
        Ok(())
    }

    /// Validation of an object about to be stored (`old` is the stored object on updates): 422 with every cause.
    fn validate(&self, rt: &ResourceType, obj: &Value, old: Option<&Value>, sub: Subresource) -> ApiResult<()> {
        let mut causes = crate::builtin::validate_object(rt, obj, old);
        if let Some(schema) = self.schema_for(rt) {
            // Transition rules (oldSelf) see the stored object on updates.
            let found = schema.validate_update(obj, old);
            // A /status write is checked by upstream's status validator, whose root is `status`: the field paths
            // keep the prefix, the texts that quote a path ("x in body ...") do not.
            let found = match sub {
                Subresource::Status => found.into_iter().map(status_relative).collect(),
                _ => found,
            };
            causes.extend(found);
        }
        if causes.is_empty() {
            return Ok(());
        }
        let name = meta_str(obj, "name").unwrap_or_default();
        Err(ApiError::invalid(&rt.kind, strategy(rt).error_group(rt), name, causes))
    }

    /// The ValidatingAdmissionPolicies of the store, on a write about to be stored (warnings, or the denial).
    fn admit(&self, st: &State, attributes: &crate::admission::Attributes) -> ApiResult<Vec<String>> {
        let registry = self.registry();
        let resolve = |api_version: &str, kind: &str| registry.resolve_kind(api_version, kind);
        crate::admission::admit(st, attributes, &resolve)
    }
}
