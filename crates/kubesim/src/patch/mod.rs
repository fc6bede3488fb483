//! The write semantics of a real kube-apiserver over plain JSON values: the three patch formats
//! (merge, JSON, strategic merge), server-side apply and the managedFields bookkeeping of every write.
//!
//! Everything here is a pure function of its inputs (the live object, the request body, the resource type
//! and the clock value the caller passes in); the `cluster` module wires them into the write path.
//!
//! - [`merge`]: RFC 7386 JSON merge patch.
//! - [`json`]: RFC 6902 JSON patch.
//! - [`strategic`]: strategic merge patch (built-in types only).
//! - [`schema_info`]: list types, merge keys and atomic maps, for built-ins and from CRD schemas.
//! - [`fields`]: field sets in the `FieldsV1` format of managedFields.
//! - [`managed`]: managedFields entries and the bookkeeping of Update operations.
//! - [`apply`]: server-side apply.

pub mod apply;
#[cfg(test)]
mod e2e_tests;
pub mod fields;
pub mod json;
pub mod managed;
pub mod merge;
pub mod schema_info;
pub mod strategic;
