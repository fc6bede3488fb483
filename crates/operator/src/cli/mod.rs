//! The binary's subcommands, one module each (`main.rs` only dispatches).

pub mod demo;
pub mod manifests;
pub mod run;
pub mod status;
pub mod view;
pub mod wait;
