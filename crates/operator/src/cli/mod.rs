//! The binary's subcommands, one module each (`main.rs` only dispatches). The commands for people (status, wait,
//! demo) live in the `kubectl-microservice` plugin crate.

pub mod manifests;
pub mod run;
