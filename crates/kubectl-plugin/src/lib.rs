//! `kubectl microservice`: the commands for people who run Microservices, as a kubectl plugin. `status` and `wait`
//! ask a cluster; `demo` starts kubesim and the operator in-process and walks through what the operator does. The
//! only crate (outside tests) that links kubesim, so the operator binary and image stay free of it.

pub mod demo;
pub mod status;
pub mod view;
pub mod wait;
pub mod watchers;
