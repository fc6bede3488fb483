//! kubesim: an in-memory Kubernetes API server emulator, faithful where kube-rs, kubectl and Kopf depend on it.
//!
//! Layout (one idea per module):
//! - [`error`]: metav1.Status errors.
//! - [`resources`]: the registry of served resource types (built-ins and CRD-defined).
//! - [`store`]: objects, the global resourceVersion, watch history.
//! - [`cluster`]: the request-level operations (create/get/list/update/patch/delete/watch) shared by the
//!   HTTP layer and the simulated controllers.
//! - [`http`]: the axum server: routing, content negotiation, counting, faults.
//! - [`discovery`], [`openapi`], [`protobuf`]: discovery documents, OpenAPI v3 documents, protobuf request bodies.
//! - [`selector`], [`jsonpath`], [`schema`], [`builtin`], [`table`]: pure helpers (selectors, JSONPath,
//!   structural schemas, built-in defaulting/validation, server-side printing).
//! - [`patch`]: merge, JSON, strategic merge patches and server-side apply with managedFields.
//! - [`controllers`]: the simulated controller-manager (Deployments, ReplicaSets, Pods, garbage collection).
//! - [`faults`]: seeded fault injection.
//! - [`gojson`]: the text of Go `encoding/json` syntax errors, which upstream quotes in some 400s.
//! - [`admission`]: ValidatingAdmissionPolicies and their bindings, evaluated on every create and update.
//! - [`auth`], [`rbac`]: bearer-token authentication and the RBAC authorizer (enforced when asked).

pub mod admission;
pub mod auth;
pub mod builtin;
pub mod cluster;
pub mod controllers;
pub mod discovery;
pub mod error;
pub mod faults;
pub mod gojson;
pub mod http;
pub mod jsonpath;
pub mod names;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod schema;
pub mod selector;
pub mod store;
pub mod table;

mod sim;

pub use http::{RequestCounts, RequestKey};
pub use sim::{Sim, SimBuilder, SimError};
