//! Caches of the children as projections: what reconcile and status need, not whole objects. A cached Deployment
//! is its identity and ownership, the few spec fields status reads (replicas, paused, deadline, the app image, the
//! selector), its status counters and the one condition that matters, and a drift *verdict*: the fields the
//! operator manages that differ from the desired object, judged exactly (`drift::differs` and `drift::extras`) on
//! the whole object when its watch event arrived, against the desired object of the Microservice as it was then,
//! and tagged with that desired object's digest. A reconcile whose desired digest is the same uses the verdict; any
//! other (the Microservice changed since, or was not cached yet) reads the live object once and judges it there.
//!
//! A child the operator has just created is put in the cache from the create's answer (the "created but not yet
//! seen" case): a reconcile that runs before the watch shows it must not create it again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::watch;
use tracing::warn;

use crate::interner::Interner;
use crate::microservices::{Kept, Microservices};
use crate::queue::key;
use crate::uid::Uid;
use crate::watched::{SpecFields, WatchedDeployment};

use microservice_core::contract;
use microservice_core::crd::Microservice;
use microservice_core::desired::{
    CONTAINER_NAME, DESIRED_DIGEST_ANNOTATION, GENERATION_ANNOTATION, HANDOVER_ANNOTATION, LABEL_MANAGED_BY, MANAGER,
    desired_deployment, desired_hpa, desired_service,
};
use microservice_core::drift::{self, Exact};
use microservice_core::ownership::ChildKind;
use microservice_core::profile::PlatformProfile;
use microservice_core::shared_text::SharedText;

/// A desired object's digest as its `desired-digest` annotation writes it (16 hex digits, `desired::with_digest`),
/// kept as the number: a verdict per cached child holds one. None for any other text (and for zero: the numbers a
/// verdict holds are non-zero so that an absent one costs no space), which matches nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digest(Option<NonZeroU64>);

impl Digest {
    pub fn of_text(text: &str) -> Digest {
        Digest(u64::from_str_radix(text, 16).ok().and_then(NonZeroU64::new))
    }

    pub fn matches(self, other: Digest) -> bool {
        self.0.is_some() && self == other
    }
}

/// Which Microservice generation a verdict was judged for: its desired objects follow from the Microservice's uid
/// and generation (and the process's profile), so a verdict judged for the same ones needs no desired object built
/// to be trusted. Unknown matches nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JudgedFor(Option<NonZeroU64>);

impl JudgedFor {
    pub fn of(ms: &Microservice) -> JudgedFor {
        JudgedFor::of_parts(ms.metadata.uid.as_deref().map(Uid::parse).as_ref(), ms.metadata.generation)
    }

    fn of_parts(uid: Option<&Uid>, generation: Option<i64>) -> JudgedFor {
        use std::hash::{Hash, Hasher};
        let (Some(uid), Some(generation)) = (uid, generation) else { return JudgedFor(None) };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (uid, generation).hash(&mut h);
        JudgedFor(NonZeroU64::new(h.finish()))
    }

    pub fn matches(self, other: JudgedFor) -> bool {
        self.0.is_some() && self == other
    }
}

/// The managed fields that differ, judged against the desired object whose digest is `desired_digest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub desired_digest: Digest,
    /// The Microservice generation that desired object was built for.
    pub judged_for: JudgedFor,
    pub changed: Vec<String>,
    /// What the watch judged it on (see [`basis`]); None when judged elsewhere.
    pub basis: Option<NonZeroU64>,
    /// The live object carries the desired digest: the operator wrote this very desired object, so a difference is
    /// someone's edit to repair, not a change of the Microservice still to roll out.
    pub applied: bool,
}

impl Verdict {
    /// Someone edited an object the operator had written as desired: repair it ahead of routine work.
    pub fn repair_due(&self) -> bool {
        self.applied && !self.changed.is_empty()
    }
}

/// The prefix of the annotations kube-controller-manager's Deployment controller writes.
const DEPLOYMENT_CONTROLLER_PREFIX: &str = "deployment.kubernetes.io/";

/// What a watch event's verdict depends on, folded into one number: the Microservice's uid and generation (its
/// desired objects follow from them and the process's profile) and the child's uid, generation and the metadata the
/// operator manages (labels, annotations, ownerReferences). The API server moves a Deployment's generation on every
/// spec change, so an event with the same basis (its status stepping through a rollout) differs from the judged
/// object only where drift never looks, and keeps its verdict: no desired object is built, nothing serialised.
/// The Deployment controller's own annotations (the revision it stamps as a rollout starts) are left out: the
/// desired objects set none of them, and drift reads only the annotations they set.
/// None for a child without a generation (a Service): it is judged on every event, which is rare for it.
pub(crate) fn basis(ms: &Microservice, child: &ObjectMeta) -> Option<NonZeroU64> {
    basis_of(ms.metadata.uid.as_deref().map(Uid::parse).as_ref(), ms.metadata.generation, child)
}

/// [`basis`] of the Microservice with this uid and generation.
fn basis_of(ms_uid: Option<&Uid>, ms_generation: Option<i64>, child: &ObjectMeta) -> Option<NonZeroU64> {
    use std::hash::{Hash, Hasher};
    let generation = child.generation?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (ms_uid, ms_generation).hash(&mut h);
    (child.uid.as_deref(), generation, &child.labels).hash(&mut h);
    for annotation in child.annotations.iter().flatten().filter(|(k, _)| !k.starts_with(DEPLOYMENT_CONTROLLER_PREFIX)) {
        annotation.hash(&mut h);
    }
    for r in child.owner_references.iter().flatten() {
        (&r.api_version, &r.kind, &r.name, &r.uid, r.controller, r.block_owner_deletion).hash(&mut h);
    }
    NonZeroU64::new(h.finish())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: Uid,
    pub kind: SharedText,
    /// The child's own name text when the same (a Microservice's children are named after it).
    pub name: SharedText,
    pub api_version: SharedText,
}

/// What ownership needs of a child's metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildMeta {
    pub name: SharedText,
    pub namespace: SharedText,
    pub uid: Uid,
    /// resourceVersion as a number (0 when the server's is not one): only to keep a newer cached state.
    pub version: u64,
    pub controller: Option<Owner>,
    pub handover: Option<String>,
    pub managed_by_us: bool,
    pub verdict: Option<Verdict>,
}

/// resourceVersion as a number, 0 when the server's is not one (see [`ChildMeta::version`]).
fn version_of(meta: &ObjectMeta) -> u64 {
    meta.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl ChildMeta {
    fn of(meta: &ObjectMeta, verdict: Option<Verdict>) -> ChildMeta {
        let name = SharedText::from(meta.name.as_deref().unwrap_or_default());
        let controller = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| Owner {
            uid: Uid::parse(&r.uid),
            kind: r.kind.as_str().into(),
            name: if r.name == *name { name.clone() } else { r.name.as_str().into() },
            api_version: r.api_version.as_str().into(),
        });
        ChildMeta {
            name,
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            uid: Uid::parse(meta.uid.as_deref().unwrap_or_default()),
            version: version_of(meta),
            controller,
            handover: meta.annotations.as_ref().and_then(|a| a.get(HANDOVER_ANNOTATION)).cloned(),
            managed_by_us: meta.labels.as_ref().and_then(|l| l.get(LABEL_MANAGED_BY)).is_some_and(|m| m == MANAGER),
            verdict,
        }
    }

    /// Shares the texts every child of the namespace repeats (its namespace, its owner's kind and apiVersion).
    fn share_texts(&mut self, texts: &mut Interner) {
        self.namespace = texts.intern(&self.namespace);
        if let Some(owner) = self.controller.as_mut() {
            owner.kind = texts.intern(&owner.kind);
            owner.api_version = texts.intern(&owner.api_version);
        }
    }

    /// The metadata `ownership::ownership` reads, rebuilt.
    pub fn object_meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.to_string()),
            namespace: Some(self.namespace.to_string()),
            uid: Some(self.uid.to_string()),
            owner_references: self.controller.as_ref().map(|o| {
                vec![OwnerReference {
                    api_version: o.api_version.to_string(),
                    kind: o.kind.to_string(),
                    name: o.name.to_string(),
                    uid: o.uid.to_string(),
                    controller: Some(true),
                    block_owner_deletion: None,
                }]
            }),
            annotations: self.handover.as_ref().map(|h| [(HANDOVER_ANNOTATION.to_string(), h.clone())].into()),
            labels: self.managed_by_us.then(|| [(LABEL_MANAGED_BY.to_string(), MANAGER.to_string())].into()),
            ..ObjectMeta::default()
        }
    }
}

/// A label selector kept compactly: a `LabelSelector`'s matchLabels map costs a B-tree node (about 540 bytes for the
/// two labels a Microservice's Deployment selects by) in every cached Deployment; the pairs themselves are 100.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector {
    labels: Box<[(Box<str>, Box<str>)]>,
    /// Rare (a Deployment someone else made): kept as they are.
    expressions: Option<Box<[LabelSelectorRequirement]>>,
}

impl Selector {
    pub fn of(selector: &LabelSelector) -> Selector {
        let labels =
            selector.match_labels.iter().flatten().map(|(k, v)| (k.as_str().into(), v.as_str().into())).collect();
        let expressions = selector.match_expressions.as_ref().map(|e| e.clone().into_boxed_slice());
        Selector { labels, expressions }
    }

    pub fn to_label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: (!self.labels.is_empty())
                .then(|| self.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            match_expressions: self.expressions.as_ref().map(|e| e.to_vec()),
        }
    }
}

/// A Deployment as status and ownership see it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentView {
    pub meta: ChildMeta,
    pub generation: Option<i64>,
    pub generation_annotation: Option<String>,
    pub selector: Selector,
    pub replicas: Option<i32>,
    pub paused: Option<bool>,
    pub progress_deadline_seconds: Option<i32>,
    pub image: Option<SharedText>,
    /// Counters and the ProgressDeadlineExceeded condition only.
    pub status: Option<DeploymentStatus>,
}

impl DeploymentView {
    pub fn of(d: &Deployment, verdict: Option<Verdict>) -> DeploymentView {
        let spec = d.spec.as_ref().map(SpecFields::of);
        DeploymentView::of_parts(&d.metadata, spec, d.status.as_ref(), verdict)
    }

    /// The view of a Deployment as its watch decoded it (see `watched`).
    pub fn of_watched(d: &WatchedDeployment, verdict: Option<Verdict>) -> DeploymentView {
        DeploymentView::of_parts(&d.metadata, d.spec_fields(), d.status.as_ref(), verdict)
    }

    fn of_parts(
        meta: &ObjectMeta,
        spec: Option<SpecFields>,
        status: Option<&DeploymentStatus>,
        verdict: Option<Verdict>,
    ) -> DeploymentView {
        let status = status.map(|s| DeploymentStatus {
            conditions: s
                .conditions
                .as_ref()
                .map(|cs| {
                    cs.iter()
                        .filter(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
                        .cloned()
                        .map(|mut c| {
                            c.last_transition_time = None;
                            c.last_update_time = None;
                            c
                        })
                        .collect::<Vec<_>>()
                })
                .filter(|cs| !cs.is_empty()),
            ..s.clone()
        });
        // An empty status is no status: the server's answer to a create and the controller's first write (a
        // condition the view drops) then make the same view.
        let status = status.filter(|s| *s != DeploymentStatus::default());
        let spec = spec.unwrap_or_default();
        DeploymentView {
            meta: ChildMeta::of(meta, verdict),
            generation: meta.generation,
            generation_annotation: meta.annotations.as_ref().and_then(|a| a.get(GENERATION_ANNOTATION)).cloned(),
            selector: Selector::of(&spec.selector),
            replicas: spec.replicas,
            paused: spec.paused,
            progress_deadline_seconds: spec.progress_deadline_seconds,
            image: spec.image.map(SharedText::from),
            status,
        }
    }

    /// A Deployment with only what `status::compute_status` and `ownership::selector_conflict` read.
    pub fn to_deployment(&self) -> Deployment {
        let mut metadata = self.meta.object_meta();
        metadata.generation = self.generation;
        if let Some(g) = &self.generation_annotation {
            metadata.annotations.get_or_insert_default().insert(GENERATION_ANNOTATION.to_string(), g.clone());
        }
        Deployment {
            metadata,
            spec: Some(DeploymentSpec {
                replicas: self.replicas,
                paused: self.paused,
                progress_deadline_seconds: self.progress_deadline_seconds,
                selector: self.selector.to_label_selector(),
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: CONTAINER_NAME.to_string(),
                            image: self.image.as_deref().map(str::to_string),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            }),
            status: self.status.clone(),
        }
    }

    /// The rollout of the generation in its annotation is complete, as `kubectl rollout status` judges it: what
    /// makes its Microservice's status urgent (Ready is due).
    pub fn rollout_complete(&self) -> bool {
        let Some(s) = &self.status else { return false };
        let want = self.replicas.unwrap_or(1);
        self.generation_annotation.is_some()
            && s.observed_generation.is_some_and(|o| self.generation.is_some_and(|g| o >= g))
            && s.replicas.unwrap_or(0) == want
            && s.updated_replicas.unwrap_or(0) == want
            && s.available_replicas.unwrap_or(0) == want
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServiceView {
    pub meta: ChildMeta,
}

impl ServiceView {
    pub fn to_service(&self) -> Service {
        Service { metadata: self.meta.object_meta(), spec: None, status: None }
    }
}

/// A HorizontalPodAutoscaler as ownership sees it (its drift verdict included).
#[derive(Clone, Debug, PartialEq)]
pub struct HpaView {
    pub meta: ChildMeta,
}

/// A child kind: how to project it, and its desired object for a Microservice.
pub trait Child:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    type View: Clone + PartialEq + Debug + Send + Sync + 'static;
    /// What the watch decodes: the object, or only what the view and drift need of it (see `watched`).
    type Watched: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static;
    const KIND: ChildKind;
    fn view(obj: &Self, verdict: Option<Verdict>) -> Self::View;
    fn view_watched(obj: &Self::Watched, verdict: Option<Verdict>) -> Self::View;
    /// The watched object as drift judges it: the JSON of the whole object (None if it cannot be had).
    fn judged_value(obj: &Self::Watched) -> Option<Value>;
    fn view_meta(view: &Self::View) -> &ChildMeta;
    fn view_meta_mut(view: &mut Self::View) -> &mut ChildMeta;
    /// Shares the view's texts that many views repeat, as the cache files it.
    fn share_texts(view: &mut Self::View, texts: &mut Interner) {
        Self::view_meta_mut(view).share_texts(texts);
    }
    /// The desired object for `ms` (None when its spec is refused: no verdict then).
    fn desired(ms: &Microservice, profile: &PlatformProfile) -> Option<Self>;
    /// Whether this child's state makes its Microservice's Ready due (a Deployment's completed rollout).
    fn ready_due(_view: &Self::View) -> bool {
        false
    }
}

/// Whether a child's change goes ahead of the Controller's queue (the Ready lane): its deletion or someone's edit
/// (a repair must not wait behind a resync of every Microservice), or a Ready the kind says is due.
pub fn urgent<K: Child>(view: Option<&K::View>) -> bool {
    view.is_none_or(|v| K::view_meta(v).verdict.as_ref().is_some_and(Verdict::repair_due) || K::ready_due(v))
}

impl Child for Deployment {
    type View = DeploymentView;
    type Watched = WatchedDeployment;
    const KIND: ChildKind = ChildKind::Deployment;
    fn view(obj: &Self, verdict: Option<Verdict>) -> DeploymentView {
        DeploymentView::of(obj, verdict)
    }
    fn view_watched(obj: &WatchedDeployment, verdict: Option<Verdict>) -> DeploymentView {
        DeploymentView::of_watched(obj, verdict)
    }
    fn judged_value(obj: &WatchedDeployment) -> Option<Value> {
        obj.judged_value()
    }
    fn view_meta(view: &DeploymentView) -> &ChildMeta {
        &view.meta
    }
    fn view_meta_mut(view: &mut DeploymentView) -> &mut ChildMeta {
        &mut view.meta
    }
    fn desired(ms: &Microservice, profile: &PlatformProfile) -> Option<Self> {
        let contract = contract::validate_object(ms, profile).ok()?;
        desired_deployment(ms, &contract, profile).ok()
    }
    fn ready_due(view: &DeploymentView) -> bool {
        view.rollout_complete()
    }
    fn share_texts(view: &mut DeploymentView, texts: &mut Interner) {
        view.meta.share_texts(texts);
        // Microservices run a handful of the Todo API's images.
        if let Some(image) = view.image.as_mut() {
            *image = texts.intern(image);
        }
    }
}

impl Child for Service {
    type View = ServiceView;
    type Watched = Service;
    const KIND: ChildKind = ChildKind::Service;
    fn view(obj: &Self, verdict: Option<Verdict>) -> ServiceView {
        ServiceView { meta: ChildMeta::of(&obj.metadata, verdict) }
    }
    fn view_watched(obj: &Self, verdict: Option<Verdict>) -> ServiceView {
        Self::view(obj, verdict)
    }
    fn judged_value(obj: &Self) -> Option<Value> {
        serde_json::to_value(obj).ok()
    }
    fn view_meta(view: &ServiceView) -> &ChildMeta {
        &view.meta
    }
    fn view_meta_mut(view: &mut ServiceView) -> &mut ChildMeta {
        &mut view.meta
    }
    fn desired(ms: &Microservice, profile: &PlatformProfile) -> Option<Self> {
        contract::validate_object(ms, profile).ok()?;
        desired_service(ms, profile).ok()
    }
}

impl Child for HorizontalPodAutoscaler {
    type View = HpaView;
    type Watched = HorizontalPodAutoscaler;
    const KIND: ChildKind = ChildKind::HorizontalPodAutoscaler;
    fn view(obj: &Self, verdict: Option<Verdict>) -> HpaView {
        HpaView { meta: ChildMeta::of(&obj.metadata, verdict) }
    }
    fn view_watched(obj: &Self, verdict: Option<Verdict>) -> HpaView {
        Self::view(obj, verdict)
    }
    fn judged_value(obj: &Self) -> Option<Value> {
        serde_json::to_value(obj).ok()
    }
    fn view_meta(view: &HpaView) -> &ChildMeta {
        &view.meta
    }
    fn view_meta_mut(view: &mut HpaView) -> &mut ChildMeta {
        &mut view.meta
    }
    /// None also when the Microservice is not autoscaled: then no HPA is desired.
    fn desired(ms: &Microservice, profile: &PlatformProfile) -> Option<Self> {
        let bounds = contract::validate_object(ms, profile).ok()?.scaling.autoscaling()?;
        desired_hpa(ms, &bounds, profile).ok()
    }
}

pub fn exact(kind: ChildKind) -> Exact {
    match kind {
        ChildKind::Deployment => Exact::Deployment,
        ChildKind::Service => Exact::Service,
        ChildKind::HorizontalPodAutoscaler => Exact::HorizontalPodAutoscaler,
    }
}

pub fn digest_of<K: Resource>(obj: &K) -> Digest {
    Digest::of_text(obj.meta().annotations.as_ref().and_then(|a| a.get(DESIRED_DIGEST_ANNOTATION)).map_or("", |d| d))
}

/// The managed fields of `live` that differ from `desired`, and the extras in the exact parts, exactly as a
/// reconcile judges them. None if either cannot be serialised.
pub fn judge<K: Child>(desired: &K, live: &K) -> Option<Verdict> {
    judge_against::<K>(desired, serde_json::to_value(live).ok()?)
}

/// As [`judge`], for an object as its watch decoded it.
pub fn judge_watched<K: Child>(desired: &K, live: &K::Watched) -> Option<Verdict> {
    judge_against::<K>(desired, K::judged_value(live)?)
}

fn judge_against<K: Child>(desired: &K, have: Value) -> Option<Verdict> {
    let want = serde_json::to_value(desired).ok()?;
    Some(judge_values::<K>(digest_of(desired), &want, &have))
}

pub fn judge_values<K: Child>(digest: Digest, want: &Value, have: &Value) -> Verdict {
    let mut changed = drift::differs(want, have);
    changed.extend(drift::extras(exact(K::KIND), want, have).into_iter().map(|e| e.path));
    let applied = have["metadata"]["annotations"][DESIRED_DIGEST_ANNOTATION].as_str().map(Digest::of_text);
    Verdict {
        desired_digest: digest,
        judged_for: JudgedFor::default(),
        changed,
        basis: None,
        applied: applied.is_some_and(|a| a.matches(digest)),
    }
}

/// Objects per page of a watch's (re-)list, where the server does not serve streaming lists (see `initial_list`). A
/// page is decoded whole, managedFields included, before its objects are projected: with kube's default of 500, one
/// page of Deployments was 13.4 MiB of the operator's 16.9 MiB heap peak (heaptrack, 100 Microservices beside 10,000
/// other Deployments and Services). A fifth of that costs 4 more list requests per 1,000 objects, at start and after
/// a watch expires.
pub const LIST_PAGE: u32 = 100;

/// How many deleted uids are remembered, so a create's answer arriving after its object was already deleted (and
/// the deletion seen) does not bring the object back into the cache.
const TOMBSTONES: usize = 256;

pub struct ChildCache<V> {
    entries: RwLock<Entries<V>>,
    ready: watch::Sender<bool>,
    tombstones: Mutex<VecDeque<Uid>>,
    /// The texts the views share, whether the watch or a write's answer filed them.
    texts: Mutex<Interner>,
}

/// The cached objects of one kind, by `namespace/name`.
struct Entries<V> {
    views: HashMap<String, Arc<V>>,
    /// Objects nothing ties to a Microservice when seen (no Microservice has their name, and they are not labelled
    /// as made by the operator, controlled by a Microservice or handed over to one): only their key is kept, so a
    /// namespace full of other teams' Deployments costs the operator a few dozen bytes per object, not a view.
    foreign: HashSet<String>,
}

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Entries { views: HashMap::new(), foreign: HashSet::new() }
    }
}

impl<V> Entries<V> {
    fn keys(&self) -> impl Iterator<Item = &String> {
        self.views.keys().chain(self.foreign.iter())
    }

    /// An object seen by the watch: as a view, or by name only.
    /// Files what the watch showed of `key`; returns the view it replaced.
    fn file(&mut self, key: String, view: Option<Arc<V>>) -> Option<Arc<V>> {
        match view {
            Some(view) => {
                self.foreign.remove(&key);
                self.views.insert(key, view)
            }
            None => {
                let before = self.views.remove(&key);
                self.foreign.insert(key);
                before
            }
        }
    }

    fn contains(&self, key: &str) -> bool {
        self.views.contains_key(key) || self.foreign.contains(key)
    }
}

/// What the cache knows of a name.
pub enum Cached<V> {
    View(Arc<V>),
    /// An object of that name exists, but only its name was kept (see [`ChildCache`]): read it before deciding.
    NameOnly,
    Absent,
}

impl<V> Default for ChildCache<V> {
    fn default() -> Self {
        ChildCache {
            entries: RwLock::default(),
            ready: watch::Sender::new(false),
            tombstones: Mutex::default(),
            texts: Mutex::default(),
        }
    }
}

impl<V> ChildCache<V> {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries<V>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<V>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, namespace: &str, name: &str) -> Cached<V> {
        let entries = self.read();
        let k = key(namespace, name);
        match entries.views.get(&k) {
            Some(view) => Cached::View(view.clone()),
            None if entries.foreign.contains(&k) => Cached::NameOnly,
            None => Cached::Absent,
        }
    }

    /// Objects cached, with a view or by name only.
    pub fn len(&self) -> usize {
        let entries = self.read();
        entries.views.len() + entries.foreign.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// A re-list's objects replace the whole cache, which is then ready; returns the views (to route) and the keys
    /// the re-list no longer has.
    fn relisted(&self, fresh: Entries<V>) -> (Vec<Arc<V>>, Vec<String>) {
        let (views, gone) = {
            let mut entries = self.write();
            let gone = entries.keys().filter(|k| !fresh.contains(k)).cloned().collect();
            *entries = fresh;
            (entries.views.values().cloned().collect(), gone)
        };
        self.ready.send_replace(true);
        (views, gone)
    }

    /// Forgets the object `uid` (under the `namespace/name` key `k`) that was deleted, and remembers its uid so a
    /// late create's answer stays out.
    fn deleted(&self, k: &str, uid: Option<String>, meta: impl Fn(&V) -> &ChildMeta) {
        {
            let mut entries = self.write();
            // Only the object that was deleted: a newer one of the same name (recreated) stays.
            if entries.views.get(k).is_some_and(|v| uid.as_deref().is_some_and(|u| meta(v).uid.is(u))) {
                entries.views.remove(k);
            }
            entries.foreign.remove(k);
        }
        if let Some(uid) = uid {
            let mut tombstones = self.tombstones.lock().unwrap_or_else(|p| p.into_inner());
            if tombstones.len() >= TOMBSTONES {
                tombstones.pop_front();
            }
            tombstones.push_back(Uid::parse(&uid));
        }
    }
}

impl<V: Clone> ChildCache<V> {
    /// Shares the view's repeated texts with the views already cached.
    fn share_texts<K: Child<View = V>>(&self, view: &mut V) {
        K::share_texts(view, &mut self.texts.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// What this replica just wrote or read (a create's or an apply's answer, an object known only by name), unless
    /// the watch already showed that object at this version or later, or showed it deleted.
    pub fn wrote<K: Child<View = V>>(&self, mut view: V) {
        if self.tombstones.lock().unwrap_or_else(|p| p.into_inner()).contains(&K::view_meta(&view).uid) {
            return;
        }
        // The watch skips the echo of this version (`shown_already`): a Service may never send another.
        self.share_texts::<K>(&mut view);
        let m = K::view_meta(&view);
        let k = key(&m.namespace, &m.name);
        let mut entries = self.write();
        let newer = match entries.views.get(&k) {
            None => true,
            Some(old) => {
                let o = K::view_meta(old);
                o.uid == m.uid && o.version != 0 && m.version > o.version
            }
        };
        if newer {
            entries.foreign.remove(&k);
            entries.views.insert(k, Arc::new(view));
        }
    }

    /// Records a verdict judged by a reconcile on the live object it read (when the cache still holds that version).
    pub fn judged(
        &self,
        namespace: &str,
        name: &str,
        uid: &Uid,
        verdict: Verdict,
        meta_mut: impl Fn(&mut V) -> &mut ChildMeta,
    ) {
        let mut entries = self.write();
        if let Some(entry) = entries.views.get_mut(&key(namespace, name)) {
            let mut view = V::clone(entry);
            let m = meta_mut(&mut view);
            if m.uid == *uid {
                m.verdict = Some(verdict);
                *entry = Arc::new(view);
            }
        }
    }
}

/// Whether an object is tied to a Microservice by itself: labelled as made by the operator, controlled by a
/// Microservice, or handed over to one.
fn tied(meta: &ObjectMeta) -> bool {
    let labelled = meta.labels.as_ref().and_then(|l| l.get(LABEL_MANAGED_BY)).is_some_and(|m| m == MANAGER);
    let controlled =
        meta.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.kind == Microservice::kind(&()));
    let handed_over = meta.annotations.as_ref().is_some_and(|a| a.contains_key(HANDOVER_ANNOTATION));
    labelled || controlled || handed_over
}

/// The drift verdict of `obj` against the desired object of its Microservice `ms`; the one `before` carries is kept
/// while its basis (what drift reads) has not moved, so an event that changed only status costs no desired build.
fn verdict_for<K: Child>(
    ms: &Kept,
    profile: &PlatformProfile,
    obj: &K::Watched,
    before: Option<&K::View>,
) -> Option<Verdict> {
    let (namespace, name) = (obj.meta().namespace.as_deref().unwrap_or_default(), obj.name_any());
    let basis = basis_of(ms.uid.as_ref(), ms.generation, obj.meta());
    let kept = before.and_then(|v| K::view_meta(v).verdict.as_ref()).filter(|v| basis.is_some() && v.basis == basis);
    if let Some(verdict) = kept {
        return Some(verdict.clone());
    }
    let desired = K::desired(&ms.expand(namespace, &name), profile)?;
    let judged_for = JudgedFor::of_parts(ms.uid.as_ref(), ms.generation);
    judge_watched::<K>(&desired, obj).map(|verdict| Verdict { basis, judged_for, ..verdict })
}

/// The event shows the version the cache holds, or an older one of the same object: the echo of a write this
/// replica remembered from the server's answer (`ChildCache::wrote`), or a change from before that write which the
/// watch delivers after it. The first would give the same view, which the writing reconcile saw already; the second
/// would put the cache back to what the write replaced, and the next reconcile would "repair" the object to the
/// contract it already has (an update wave did so to 1-3% of its Deployments, each with a `Repaired` Event).
fn shown_already<K: Child>(cache: &ChildCache<K::View>, k: &str, obj: &K::Watched) -> bool {
    let meta = obj.meta();
    let version = version_of(meta);
    let entries = cache.read();
    entries.views.get(k).is_some_and(|v| {
        let m = K::view_meta(v);
        version != 0 && m.version >= version && meta.uid.as_deref().is_some_and(|u| m.uid.is(u))
    })
}

/// A new version that changed nothing a reconcile reads (the revision annotation the Deployment controller adds, a
/// condition the view does not keep): a reconcile would decide exactly what the last one did. A verdict's basis is
/// only what it was judged on, not something a reconcile reads.
fn same_but_version<K: Child>(after: &K::View, before: &K::View) -> bool {
    let mut after = after.clone();
    let (b, a) = (K::view_meta(before), K::view_meta_mut(&mut after));
    a.version = b.version;
    if let (Some(a), Some(b)) = (a.verdict.as_mut(), b.verdict.as_ref()) {
        a.basis = b.basis;
    }
    after == *before
}

/// Where a change of a child sends its Microservice (by its `namespace/name` key).
pub trait Route<V>: Fn(&str, Option<&V>) + Send + Sync + 'static {}
impl<V, F: Fn(&str, Option<&V>) + Send + Sync + 'static> Route<V> for F {}

/// Watches one child kind into `cache`, judging drift against the Microservices in `microservices`, and calls
/// `route` with every change (`None` for a deletion) of a name some Microservice has. Runs until aborted.
pub async fn run<K: Child>(
    api: Api<K::Watched>,
    watch_config: watcher::Config,
    cache: Arc<ChildCache<K::View>>,
    microservices: Microservices,
    profile: PlatformProfile,
    route: impl Route<K::View>,
) {
    let kind = K::kind(&());
    let stream = watcher(api, watch_config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    // A child whose name no Microservice has (someone else's Deployment in a busy namespace) gives nothing to
    // reconcile: a Microservice created later is reconciled by its own event and finds the object in the cache.
    let route_ours = |k: &str, view: Option<&K::View>| {
        if microservices.contains(k) {
            route(k, view);
        }
    };
    // A view for what a Microservice has or may soon ask about (and what had one already); the rest by name only.
    // Also whether a Microservice has the name: the one lookup an event needs.
    let view_of = |k: &str, obj: &K::Watched| -> (Option<Arc<K::View>>, bool) {
        let ms = microservices.kept(k);
        let before = cache.read().views.get(k).cloned();
        let keep = before.is_some() || ms.is_some() || tied(obj.meta());
        let view = keep.then(|| {
            let verdict = ms.as_deref().and_then(|ms| verdict_for::<K>(ms, &profile, obj, before.as_deref()));
            let mut view = K::view_watched(obj, verdict);
            cache.share_texts::<K>(&mut view);
            Arc::new(view)
        });
        (view, ms.is_some())
    };
    let key_of = |obj: &K::Watched| {
        let meta = obj.meta();
        key(meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
    };
    let mut listing: Option<Entries<K::View>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(Entries::default()),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(listing) = listing.as_mut() {
                    let k = key_of(&obj);
                    let (view, _) = view_of(&k, &obj);
                    listing.file(k, view);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let (views, gone) = cache.relisted(listing.take().unwrap_or_default());
                for view in views {
                    let m = K::view_meta(&view);
                    route_ours(&key(&m.namespace, &m.name), Some(&view));
                }
                for k in gone {
                    route_ours(&k, None);
                }
            }
            Ok(watcher::Event::Apply(obj)) => {
                let k = key_of(&obj);
                if shown_already::<K>(&cache, &k, &obj) {
                    continue;
                }
                let (view, ours) = view_of(&k, &obj);
                let routed = ours.then(|| k.clone());
                let before = cache.write().file(k, view.clone());
                let changed = view.filter(|v| before.is_none_or(|b| !same_but_version::<K>(v, &b)));
                if let (Some(k), Some(view)) = (routed, changed) {
                    route(&k, Some(&view));
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let k = key_of(&obj);
                cache.deleted(&k, obj.uid(), K::view_meta);
                route_ours(&k, None);
            }
            Err(err) => warn!(child = %kind, error = %err, "watch failed; retrying with backoff"),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_compact_selector_gives_back_the_label_selector_it_was_made_from() {
        let labels = LabelSelector {
            match_labels: Some(
                [("app.kubernetes.io/instance", "todo-api"), ("app.kubernetes.io/name", "todo-api")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            ),
            match_expressions: None,
        };
        let expressions = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["web".into(), "api".into()]),
            }]),
        };
        for selector in [labels, expressions, LabelSelector::default()] {
            assert_eq!(Selector::of(&selector).to_label_selector(), selector);
        }
    }

    /// A Microservice as the server serves it: named `todo-api` in `todo`, with this uid and generation.
    pub(crate) fn microservice(uid: &str, generation: i64) -> Microservice {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
            "metadata": {"name": "todo-api", "namespace": "todo", "uid": uid, "generation": generation},
            "spec": {"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080}
        }))
        .expect("a Microservice")
    }

    fn child(generation: Option<i64>) -> ObjectMeta {
        ObjectMeta {
            name: Some("todo-api".into()),
            uid: Some("c1".into()),
            generation,
            labels: Some([("app.kubernetes.io/name".to_string(), "todo-api".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "platform.example.com/v1alpha1".into(),
                kind: "Microservice".into(),
                name: "todo-api".into(),
                uid: "m1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            resource_version: Some("10".into()),
            ..ObjectMeta::default()
        }
    }

    fn service_view(verdict: Option<Verdict>) -> ServiceView {
        ServiceView { meta: ChildMeta::of(&child(None), verdict) }
    }

    fn verdict(digest: &str, changed: &[&str], applied: bool) -> Verdict {
        Verdict {
            desired_digest: Digest::of_text(digest),
            judged_for: JudgedFor::default(),
            changed: changed.iter().map(|c| c.to_string()).collect(),
            basis: None,
            applied,
        }
    }

    #[test]
    fn a_verdict_costs_no_more_than_its_numbers_and_its_list() {
        // Every cached child holds one: the three numbers are non-zero, so an absent one takes no tag.
        assert_eq!(std::mem::size_of::<Verdict>(), 56);
    }

    #[test]
    fn views_filed_by_the_cache_share_their_namespace_owner_kind_and_image() {
        let deployment = |name: &str| Deployment {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("todo".into()), ..child(Some(1)) },
            spec: Some(DeploymentSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: CONTAINER_NAME.into(),
                            image: Some("ghcr.io/example/todo-api:1.4.2".into()),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                },
                ..DeploymentSpec::default()
            }),
            status: None,
        };
        let mut texts = Interner::default();
        let mut filed = |name: &str| {
            let mut view = DeploymentView::of(&deployment(name), None);
            <Deployment as Child>::share_texts(&mut view, &mut texts);
            view
        };
        let (a, b) = (filed("a"), filed("b"));
        assert_eq!(a, DeploymentView::of(&deployment("a"), None), "sharing changes no content");
        assert!(a.meta.namespace.ptr_eq(&b.meta.namespace));
        let (oa, ob) = (a.meta.controller.as_ref().unwrap(), b.meta.controller.as_ref().unwrap());
        assert!(oa.kind.ptr_eq(&ob.kind) && oa.api_version.ptr_eq(&ob.api_version));
        assert!(a.image.as_ref().unwrap().ptr_eq(b.image.as_ref().unwrap()));
    }

    #[test]
    fn the_watch_never_puts_back_what_a_remembered_write_replaced() {
        let service = |uid: &str, version: &str| Service {
            metadata: ObjectMeta {
                namespace: Some("todo".into()),
                uid: Some(uid.into()),
                resource_version: Some(version.into()),
                ..child(None)
            },
            ..Service::default()
        };
        let cache = ChildCache::<ServiceView>::default();
        cache.wrote::<Service>(Service::view(&service("c1", "12"), None));
        let k = key("todo", "todo-api");
        assert!(shown_already::<Service>(&cache, &k, &service("c1", "12")), "the echo of the write");
        assert!(shown_already::<Service>(&cache, &k, &service("c1", "11")), "a change from before the write");
        assert!(!shown_already::<Service>(&cache, &k, &service("c1", "13")), "a change after it");
        assert!(!shown_already::<Service>(&cache, &k, &service("c2", "11")), "another object of that name");
        assert!(!shown_already::<Service>(&cache, &k, &service("c1", "")), "a version that is no number");
        assert!(!shown_already::<Service>(&cache, &key("todo", "other"), &service("c1", "11")), "not cached");
    }

    #[test]
    fn deletions_and_edits_of_what_the_operator_wrote_jump_the_queue_and_pending_updates_do_not() {
        assert!(urgent::<Service>(None), "a deleted child");
        let edited = service_view(Some(verdict("d1", &["spec.ports"], true)));
        assert!(urgent::<Service>(Some(&edited)), "someone edited a child the operator wrote as desired");
        let pending = service_view(Some(verdict("d2", &["spec.ports"], false)));
        assert!(!urgent::<Service>(Some(&pending)), "a changed Microservice whose child is still to be updated");
        let converged = service_view(Some(verdict("d1", &[], true)));
        assert!(!urgent::<Service>(Some(&converged)));
        assert!(!urgent::<Service>(Some(&service_view(None))), "not judged (no Microservice of its name)");
    }

    #[test]
    fn a_verdict_is_applied_when_the_live_object_carries_the_desired_digest() {
        let want =
            serde_json::json!({"metadata": {"annotations": {DESIRED_DIGEST_ANNOTATION: "d1"}}, "spec": {"a": 1}});
        let edited =
            serde_json::json!({"metadata": {"annotations": {DESIRED_DIGEST_ANNOTATION: "d1"}}, "spec": {"a": 2}});
        let judged = judge_values::<Service>(Digest::of_text("d1"), &want, &edited);
        assert!(judged.applied && judged.repair_due());
        let older =
            serde_json::json!({"metadata": {"annotations": {DESIRED_DIGEST_ANNOTATION: "d0"}}, "spec": {"a": 2}});
        assert!(!judge_values::<Service>(Digest::of_text("d1"), &want, &older).applied);
    }

    #[test]
    fn a_digest_is_its_number_and_any_other_text_matches_nothing() {
        assert!(Digest::of_text("00c0ffee00c0ffee").matches(Digest::of_text("00c0ffee00c0ffee")));
        assert!(!Digest::of_text("00c0ffee00c0ffee").matches(Digest::of_text("00c0ffee00c0fffe")));
        assert!(!Digest::of_text("").matches(Digest::of_text("")));
        assert!(!Digest::of_text("not-a-digest").matches(Digest::default()));
    }

    #[test]
    fn a_verdict_is_kept_only_while_nothing_drift_reads_has_moved() {
        let ms = microservice("m1", 1);
        let judged = basis(&ms, &child(Some(1)));
        assert!(judged.is_some());
        // A status step of the rollout: a new resourceVersion, nothing else.
        let status_step = ObjectMeta { resource_version: Some("11".into()), ..child(Some(1)) };
        assert_eq!(basis(&ms, &status_step), judged);
        let revision = [("deployment.kubernetes.io/revision".to_string(), "1".to_string())].into();
        let rollout_start = ObjectMeta { annotations: Some(revision), ..child(Some(1)) };
        assert_eq!(basis(&ms, &rollout_start), judged, "the Deployment controller's revision is not drift's");

        let mut moved = vec![
            ("a spec edit", child(Some(2))),
            ("another object of that name", ObjectMeta { uid: Some("c2".into()), ..child(Some(1)) }),
            ("a label edit", ObjectMeta { labels: Some(Default::default()), ..child(Some(1)) }),
            ("an annotation", ObjectMeta { annotations: Some([("a".into(), "b".into())].into()), ..child(Some(1)) }),
        ];
        let mut released = child(Some(1));
        if let Some(r) = released.owner_references.as_mut().and_then(|r| r.first_mut()) {
            r.controller = Some(false);
        }
        moved.push(("a released controller reference", released));
        for (what, meta) in moved {
            assert_ne!(basis(&ms, &meta), judged, "{what} must be judged again");
        }
        assert_ne!(basis(&microservice("m1", 2), &child(Some(1))), judged, "a new generation of the Microservice");
        assert_ne!(basis(&microservice("m2", 1), &child(Some(1))), judged, "a recreated Microservice");
        assert_eq!(basis(&ms, &child(None)), None, "without a generation, every event is judged");
    }
}
