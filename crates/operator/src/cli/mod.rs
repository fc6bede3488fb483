//! The binary's subcommands, one module each (`main.rs` only dispatches).

pub mod manifests;
