//! The request-level operations of the emulated API server: what a verb does to the store, independent of HTTP.
//! The HTTP layer and the simulated controllers both go through [`Cluster`], so a controller's write gets the same
//! defaulting, validation, generation/resourceVersion rules, managedFields and watch events as a client's.
//!
//! (Interface fixed first so several modules can be written in parallel; bodies are being written.)

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::error::{ApiError, ApiResult};
use crate::resources::{ResourceRef, ResourceType};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// A committed change, published to in-process subscribers (the simulated controllers).
#[derive(Debug, Clone)]
pub struct Change {
    pub rt: ResourceRef,
    pub kind: ChangeKind,
    pub object: Arc<Value>,
    /// The previous state for Modified and Deleted.
    pub old: Option<Arc<Value>>,
    pub resource_version: u64,
}

/// The emulated API server's state and verbs. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    _private: Arc<()>,
}

fn unimplemented_verb() -> ApiError {
    ApiError::service_unavailable("kubesim: this verb is not implemented yet")
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Cluster {
    pub fn new() -> Self {
        Cluster { _private: Arc::new(()) }
    }

    /// The served type for a URL's group/version/resource (404 when unknown).
    pub fn resolve(&self, _group: &str, _version: &str, _plural: &str) -> ApiResult<ResourceRef> {
        Err(unimplemented_verb())
    }

    /// The served type for an apiVersion/kind (owner references, controllers).
    pub fn resolve_kind(&self, _api_version: &str, _kind: &str) -> ApiResult<ResourceRef> {
        Err(unimplemented_verb())
    }

    /// Every type served now, built-ins first, then CRD-defined ones.
    pub fn resource_types(&self) -> Vec<ResourceRef> {
        Vec::new()
    }

    pub fn get(&self, _rt: &ResourceType, _ns: Option<&str>, _name: &str) -> ApiResult<Value> {
        Err(unimplemented_verb())
    }

    pub fn list(&self, _rt: &ResourceType, _ns: Option<&str>, _opts: &ListOptions) -> ApiResult<ObjectList> {
        Err(unimplemented_verb())
    }

    pub fn create(
        &self,
        _rt: &ResourceType,
        _ns: Option<&str>,
        _obj: Value,
        _opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        Err(unimplemented_verb())
    }

    /// PUT.
    pub fn update(
        &self,
        _rt: &ResourceType,
        _ns: Option<&str>,
        _name: &str,
        _obj: Value,
        _sub: Subresource,
        _opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        Err(unimplemented_verb())
    }

    pub fn patch(
        &self,
        _rt: &ResourceType,
        _ns: Option<&str>,
        _name: &str,
        _patch: PatchBody,
        _sub: Subresource,
        _opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        Err(unimplemented_verb())
    }

    pub fn delete(
        &self,
        _rt: &ResourceType,
        _ns: Option<&str>,
        _name: &str,
        _opts: &DeleteOptions,
    ) -> ApiResult<DeleteOutcome> {
        Err(unimplemented_verb())
    }

    pub fn delete_collection(
        &self,
        _rt: &ResourceType,
        _ns: Option<&str>,
        _list: &ListOptions,
        _opts: &DeleteOptions,
    ) -> ApiResult<Vec<Value>> {
        Err(unimplemented_verb())
    }

    pub fn watch(&self, _rt: &ResourceType, _ns: Option<&str>, _opts: WatchOptions) -> ApiResult<WatchStream> {
        Err(unimplemented_verb())
    }

    /// Every committed change, for in-process controllers. A lagging subscriber gets `RecvError::Lagged` and
    /// should re-list.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        broadcast::channel(1).1
    }
}
