//! The request-level operations of the emulated API server: what a verb does to the store, independent of HTTP.
//! The HTTP layer and the simulated controllers both go through [`Cluster`], so a controller's write gets the same
//! defaulting, validation, generation/resourceVersion rules, managedFields and watch events as a client's.

mod meta;
mod registry;
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

use crate::selector::{FieldSelector, LabelSelector};

/// A failed delete precondition: upstream's `rest.BeforeDelete` names the object by its Kind (qualified by
/// group), not its resource, in the message and in details.kind.
fn delete_precondition_failed(rt: &ResourceType, name: &str, why: &str) -> ApiError {
    let mut e = ApiError::conflict(&rt.kind, &rt.group, name);
    e.message =
        format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified_resource(&rt.kind, &rt.group));
    e
}

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
        let mut line =
            serde_json::to_vec(&json!({"type": kind, "object": present(rt, &change.object)})).unwrap_or_default();
        line.push(b'\n');
        let line = bytes::Bytes::from(line);
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

/// The object as served through `rt`: stored objects are shared by all versions of a resource.
pub(crate) fn present(rt: &ResourceType, obj: &Value) -> Value {
    let mut out = if crate::builtin::events::is_events_view(rt) {
        crate::builtin::events::to_events_v1(obj)
    } else {
        obj.clone()
    };
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

fn is_namespaces(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "namespaces"
}

fn is_crds(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

fn is_services(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "services"
}

/// A continue token: the list's resourceVersion and the last key returned. Opaque to clients (hex of JSON).
fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjectKey)> {
    let bad = || ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion");
    if !token.len().is_multiple_of(2) || !token.is_ascii() {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

fn too_large_rv(requested: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(504, "Timeout", format!("Too large resource version: {requested}, current: {current}"));
    e.details.retry_after_seconds = Some(1);
    e
}

const SERVICE_NET: u32 = 0x0A60_0000; // 10.96.0.0/12
const SERVICE_NET_SIZE: u32 = 1 << 20;

fn ip_to_u32(s: &str) -> Option<u32> {
    let addr: std::net::Ipv4Addr = s.parse().ok()?;
    Some(u32::from(addr))
}

fn u32_to_ip(v: u32) -> String {
    std::net::Ipv4Addr::from(v).to_string()
}

struct Selectors {
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
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

    fn selectors(&self, rt: &ResourceType, labels: Option<&str>, fields: Option<&str>) -> ApiResult<Selectors> {
        let labels = labels.filter(|s| !s.is_empty()).map(LabelSelector::parse).transpose()?;
        let fields = match fields.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                let sel = FieldSelector::parse(s)?;
                crate::builtin::check_field_selector(rt, &sel)?;
                Some(sel)
            }
        };
        Ok(Selectors { labels, fields })
    }

    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let st = self.inner.store.lock();
        st.get(&ResourceKey::of(rt), &key_of(rt, ns, name))
            .map(|o| present(rt, &o))
            .ok_or_else(|| ApiError::not_found(&rt.plural, &rt.group, name))
    }

    pub fn list(&self, rt: &ResourceType, ns: Option<&str>, opts: &ListOptions) -> ApiResult<ObjectList> {
        let sel = self.selectors(rt, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let filter = watch::Filter {
            rt: Arc::new(rt.clone()),
            key: ResourceKey::of(rt),
            ns: None,
            labels: sel.labels,
            fields: sel.fields,
        };
        let ns = if rt.namespaced { ns } else { None };
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let rv_match = opts.resource_version_match.as_deref().filter(|s| !s.is_empty());
        if rv_match.is_some() && rv_param.is_none() {
            return Err(ApiError::invalid_options(
                "ListOptions",
                vec![crate::names::err::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        let st = self.inner.store.lock();
        let current = st.current_rv();
        let (at, after) = match opts.continue_token.as_deref().filter(|s| !s.is_empty()) {
            Some(token) => {
                if rv_param.is_some_and(|r| r != "0") {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let (rv, key) = decode_continue(token)?;
                if rv < st.oldest_available() {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    ));
                }
                (rv, Some(key))
            }
            None => match (rv_param, rv_match) {
                (None, _) | (Some("0"), None | Some("NotOlderThan")) => (current, None),
                (Some(r), Some("Exact")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    (rv, None)
                }
                (Some(r), None | Some("NotOlderThan")) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(too_large_rv(rv, current));
                    }
                    (current, None)
                }
                (Some(_), Some(other)) => {
                    // Upstream's ValidateListOptions: an unknown match is an invalid value.
                    return Err(ApiError::invalid_options(
                        "ListOptions",
                        vec![crate::names::err::invalid_str("resourceVersionMatch", other, "unknown value")],
                    ));
                }
            },
        };
        let objects = st.range_at(&filter.key, ns, after.as_ref(), at)?;
        drop(st);
        let unfiltered = filter.labels.is_none() && filter.fields.is_none();
        let limit = opts.limit.filter(|l| *l > 0);
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0u64;
        for (k, obj) in objects {
            if !filter.matches(&obj) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
                if !unfiltered {
                    break;
                }
                continue;
            }
            items.push(present(rt, &obj));
            last_key = Some(k);
        }
        let more = remaining > 0;
        Ok(ObjectList {
            items,
            resource_version: at.to_string(),
            continue_token: if more { last_key.map(|k| encode_continue(at, &k)) } else { None },
            remaining_item_count: if more && unfiltered { Some(remaining) } else { None },
        })
    }

    /// Validates apiVersion/kind (absent or right), makes sure the body is an object and fills in type meta.
    fn check_body(&self, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
        let Some(m) = obj.as_object_mut() else {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        };
        let expected = rt.api_version();
        match m.get("apiVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if v.is_empty() || *v == expected => {}
            Some(v) => {
                let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected})"
                )));
            }
        }
        match m.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(k)) if k.is_empty() || *k == rt.kind => {}
            Some(k) => {
                let k = k.as_str().map(String::from).unwrap_or_else(|| k.to_string());
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    rt.kind
                )));
            }
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
    fn create_inner(
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
        let m = meta_mut(&mut obj);
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
                        &rt,
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
        if is_crds(&rt) {
            crd_status(&mut obj, None, &now);
        }
        if !managed_done {
            let manager = opts.field_manager.clone().unwrap_or_else(|| DEFAULT_MANAGER.to_string());
            crate::patch::managed::record_update(&rt, None, &mut obj, &manager, None, &now);
        }

        let key = (ns.clone(), name.clone());
        let mut st = self.inner.store.lock();
        self.check_namespace_live(&st, &rt, &ns, &name)?;
        if st.get(&ResourceKey::of(&rt), &key).is_some() {
            return Err(ApiError::already_exists(&rt.plural, &rt.group, &name));
        }
        if is_services(&rt) {
            allocate_cluster_ip(&st, &rt, &mut obj)?;
        }
        self.validate(&rt, &obj, None)?;
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
        if is_crds(&rt)
            && let Committed::Put { object, .. } = &committed
        {
            self.registry_mut().register_crd(object);
        }
        drop(st);
        match committed {
            Committed::Put { object, .. } => {
                Ok(WriteOutcome { object: present(&rt, &object), created: true, warnings })
            }
            _ => Err(ApiError::internal("create did not store the object")),
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
    fn validate(&self, rt: &ResourceType, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
        let mut causes = crate::builtin::validate_object(rt, obj, old);
        if let Some(schema) = self.schema_for(rt) {
            // Transition rules (oldSelf) see the stored object on updates.
            causes.extend(schema.validate_update(obj, old));
        }
        if causes.is_empty() {
            return Ok(());
        }
        Err(invalid(rt, meta_str(obj, "name").unwrap_or_default(), causes))
    }

    /// The ValidatingAdmissionPolicies of the store, on a write about to be stored (warnings, or the denial).
    fn admit(&self, st: &State, attributes: &crate::admission::Attributes) -> ApiResult<Vec<String>> {
        let registry = self.registry();
        let resolve = |api_version: &str, kind: &str| registry.resolve_kind(api_version, kind);
        crate::admission::admit(st, attributes, &resolve)
    }

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
    fn modify(
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
        let mut new = f(&present(rt, &cur))?;
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
        let viewed;
        let cur_seen: &Value = if crate::builtin::events::is_events_view(rt) {
            viewed = present(rt, &cur);
            &viewed
        } else {
            &cur
        };
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
                Mutation::Put(v) => present(rt, v),
                _ => present(rt, &cur),
            };
            return Ok(WriteOutcome { object, created: false, warnings });
        }
        let committed = st.commit(rt, key, mutation);
        if is_crds(rt)
            && let Committed::Put { object, .. } = &committed
        {
            self.registry_mut().register_crd(object);
        }
        let object = match committed {
            Committed::Put { object, .. } | Committed::Deleted(object) => object,
            Committed::Unchanged(Some(o)) => o,
            Committed::Unchanged(None) => return Err(ApiError::not_found(&rt.plural, &rt.group, name)),
        };
        Ok(WriteOutcome { object: present(rt, &object), created: false, warnings })
    }

    /// Applies the update rules to a new version of `cur`: status split, preserved system metadata, finalizer
    /// rules, defaulting/validation, generation, managedFields, no-op detection.
    #[allow(clippy::too_many_arguments)]
    fn prepare_update(
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
            match sub {
                Subresource::Status => {
                    let status = new.get("status").cloned();
                    let mf = new.pointer("/metadata/managedFields").cloned();
                    new = present(rt, cur);
                    match status {
                        Some(s) => new["status"] = s,
                        None => {
                            if let Some(o) = new.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                    let m = meta_mut(&mut new);
                    match mf {
                        Some(mf) => m.insert("managedFields".into(), mf),
                        None => m.remove("managedFields"),
                    };
                }
                _ => match cur.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                },
            }
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
        if is_namespaces(rt) && sub == Subresource::Main {
            // spec.finalizers change only through /finalize.
            if let Some(spec) = cur.get("spec") {
                new["spec"] = spec.clone();
            }
        }
        crate::builtin::prepare_for_update(rt, &mut new, cur);
        self.default_object(rt, &mut new, opts, warnings)?;
        if is_crds(rt) {
            crd_status(&mut new, Some(cur), now);
        }
        self.validate(rt, &new, Some(cur))?;
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
        if is_deleting(&new) && finalizers(&new).is_empty() && !is_namespaces(rt) {
            return Ok(Mutation::Delete);
        }
        Ok(Mutation::Put(new))
    }

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

    /// An applied configuration must fit the custom resource's schema whatever fieldValidation says: upstream
    /// builds a typed object from it first and answers a field outside the schema with a 500 (no pruning).
    fn check_applied_fields(&self, rt: &ResourceType, name: &str, body: &Value) -> ApiResult<()> {
        let Some(schema) = self.schema_for(rt).filter(|_| rt.is_crd()) else { return Ok(()) };
        let mut probe = body.clone();
        let Some(first) = schema.prune(&mut probe).into_iter().next() else { return Ok(()) };
        let namespace = body.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        let group_version =
            if rt.group.is_empty() { rt.version.clone() } else { format!("{}/{}", rt.group, rt.version) };
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
        let uid = meta_str(&cur, "uid").unwrap_or_default().to_string();
        if let Some(p) = opts.precondition_uid.as_deref().filter(|s| !s.is_empty())
            && p != uid
        {
            return Err(delete_precondition_failed(
                &rt,
                name,
                &format!(
                    "the UID in the precondition ({p}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
                ),
            ));
        }
        let cur_rv = resource_version(&cur).unwrap_or_default().to_string();
        if let Some(p) = opts.precondition_resource_version.as_deref().filter(|s| !s.is_empty())
            && p != cur_rv
        {
            return Err(delete_precondition_failed(
                &rt,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({p}) does not match the ResourceVersion in record ({cur_rv}). The object might have been modified"
                ),
            ));
        }
        if is_namespaces(&rt) {
            if INITIAL_NAMESPACES[..3].contains(&name) {
                let mut e = ApiError::forbidden(format!(
                    "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                ));
                e.details.name = Some(name.to_string());
                e.details.kind = Some("namespaces".into());
                return Err(e);
            }
            if is_deleting(&cur) {
                // Asked again once emptied (the namespace controller does): finish it.
                drop(st);
                self.finalize_namespace(name)?;
                return self
                    .get(&rt, None, name)
                    .map(DeleteOutcome::Pending)
                    .or_else(|_| Ok(DeleteOutcome::Deleted(present(&rt, &cur))));
            }
            let mut new = (*cur).clone();
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), Value::String(now_rfc3339()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            new["status"]["phase"] = json!("Terminating");
            if opts.dry_run {
                return Ok(DeleteOutcome::Pending(present(&rt, &new)));
            }
            return match st.commit(&rt, key, Mutation::Put(new)) {
                Committed::Put { object, .. } => Ok(DeleteOutcome::Pending(present(&rt, &object))),
                _ => Err(ApiError::internal("namespace deletion was not stored")),
            };
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
            let graceful = rt.group.is_empty() && rt.kind == "Pod";
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
            if is_crds(&rt) {
                self.remove_crd_types(name);
            }
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

    /// A deleted CRD takes its endpoints and objects with it.
    fn remove_crd_types(&self, crd_name: &str) {
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

    /// The autoscaling/v1 Scale view of an object with a scale subresource.
    pub fn get_scale(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let obj = self.get(rt, ns, name)?;
        scale_of(rt, &obj)
    }

    fn write_scale(
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

    pub fn watch(&self, rt: &ResourceType, ns: Option<&str>, opts: WatchOptions) -> ApiResult<WatchStream> {
        Ok(self.watcher(rt, ns, opts, false)?.into_stream())
    }

    /// The HTTP layer's JSON watch: plain events come as JSON lines serialised once for all watchers.
    pub fn watch_json(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
    ) -> ApiResult<BoxStream<'static, WatchItem>> {
        Ok(self.watcher(rt, ns, opts, true)?.into_items())
    }

    fn watcher(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
        lines: bool,
    ) -> ApiResult<watch::Watcher> {
        let rt = self.canonical(rt)?;
        let sel = self.selectors(&rt, opts.label_selector.as_deref(), opts.field_selector.as_deref())?;
        let ns = if rt.namespaced { ns.filter(|s| !s.is_empty()).map(String::from) } else { None };
        let filter = watch::Filter {
            rt: rt.clone(),
            key: ResourceKey::of(&rt),
            ns: ns.clone(),
            labels: sel.labels,
            fields: sel.fields,
        };
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty() && *s != "0").map(parse_rv).transpose()?;
        if opts.send_initial_events && opts.resource_version_match.as_deref() != Some("NotOlderThan") {
            return Err(ApiError::invalid(
                "ListOptions",
                "meta.k8s.io",
                "",
                vec![Cause::new(
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
                    "sendInitialEvents",
                )],
            ));
        }
        let from = if opts.send_initial_events { None } else { rv };
        let start = {
            let st = self.inner.store.lock();
            st.watch_start(&filter.key, ns.as_deref(), from)?
        };
        let mut w = watch::Watcher {
            inner: self.inner.clone(),
            rt: rt.clone(),
            filter,
            rx: start.rx,
            pending: Default::default(),
            last_rv: from.unwrap_or(start.current_rv),
            deadline: tokio::time::Instant::now() + opts.timeout.unwrap_or(Duration::from_secs(1800)),
            bookmarks: if opts.allow_bookmarks {
                Some(*self.inner.bookmark_interval.read().unwrap_or_else(|p| p.into_inner()))
            } else {
                None
            },
            done: false,
            lines,
        };
        for obj in &start.initial {
            if w.filter.matches(obj) {
                w.pending.push_back(watch::WatchItem::Event(WatchEvent::Added(present(&rt, obj))));
            }
        }
        // The end of the initial events is a bookmark: only a watcher that allows bookmarks gets it (upstream
        // accepts sendInitialEvents without allowWatchBookmarks and just never marks the end).
        if opts.send_initial_events && opts.allow_bookmarks {
            w.pending.push_back(watch::WatchItem::Event(WatchEvent::Bookmark(watch::bookmark(
                &rt,
                start.current_rv,
                true,
            ))));
        }
        w.replay(&start.replay);
        Ok(w)
    }

    /// Every committed change, for in-process controllers. A lagging subscriber gets `RecvError::Lagged` and
    /// should re-list.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.store.subscribe()
    }
}

fn invalid_apply_manager() -> ApiError {
    ApiError::invalid(
        "PatchOptions",
        "meta.k8s.io",
        "",
        vec![Cause::new("FieldValueRequired", "Required value: is required for apply patch", "fieldManager")],
    )
}

/// The type the Scale view is patched as (merge semantics for every patch type).
fn rt_scale() -> ResourceType {
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

fn scale_of(rt: &ResourceType, obj: &Value) -> ApiResult<Value> {
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
fn apply_patch(rt: &ResourceType, cur: &Value, patch: &PatchBody) -> ApiResult<Value> {
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

/// Gives a Service its clusterIP (kept when asked for one that is free), clusterIPs and IP family fields.
fn allocate_cluster_ip(st: &State, rt: &ResourceType, obj: &mut Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let svc_type = obj.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if svc_type == "ExternalName" {
        return Ok(());
    }
    let used: HashSet<u32> = st
        .range(&ResourceKey::of(rt), None, None)
        .iter()
        .filter_map(|(_, s)| s.pointer("/spec/clusterIP").and_then(Value::as_str).and_then(ip_to_u32))
        .collect();
    let requested = obj.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);
    let ip = match requested.as_deref() {
        Some("None") => "None".to_string(),
        Some(ip) => {
            let field_err =
                |msg: String| invalid(rt, &name, vec![Cause::new("FieldValueInvalid", msg, "spec.clusterIPs")]);
            let v = ip_to_u32(ip)
                .ok_or_else(|| field_err(format!("Invalid value: []string{{\"{ip}\"}}: must be a valid IP address")))?;
            if !(SERVICE_NET..SERVICE_NET + SERVICE_NET_SIZE).contains(&v) {
                return Err(field_err(format!(
                    "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
                )));
            }
            if used.contains(&v) {
                return Err(field_err(format!(
                    "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
                )));
            }
            ip.to_string()
        }
        None => {
            // Sequential from .10 (upstream is random; any free address is as good to a client).
            let found = (10..SERVICE_NET_SIZE - 1).map(|o| SERVICE_NET + o).find(|v| !used.contains(v));
            let v = found.ok_or_else(|| ApiError::internal("no service IPs left in 10.96.0.0/12"))?;
            u32_to_ip(v)
        }
    };
    obj["spec"]["clusterIP"] = json!(ip);
    obj["spec"]["clusterIPs"] = json!([ip]);
    if ip != "None" {
        let spec = obj["spec"].as_object_mut();
        if let Some(spec) = spec {
            spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
            spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
            spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
        }
    }
    Ok(())
}

/// The status the apiextensions controllers give a CRD: accepted names, stored versions, NamesAccepted and
/// Established (set at once: there is no discovery delay to model).
fn crd_status(crd: &mut Value, old: Option<&Value>, now: &str) {
    let mut names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if names.get("singular").is_none() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names.get("listKind").is_none() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    crd["spec"]["names"] = names.clone();
    let storage: Vec<String> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut stored: Vec<String> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    for s in storage {
        if !stored.contains(&s) {
            stored.push(s);
        }
    }
    let since = |t: &str| {
        old.and_then(|o| o.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(t)))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now))
    };
    crd["status"] = json!({
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": since("Established")},
        ],
    });
}
