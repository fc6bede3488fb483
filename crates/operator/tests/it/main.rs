//! The operator's integration tests, one binary: end to end against kubesim over HTTP (`e2e`), the install bundle,
//! the RBAC suite, the `run` binary and leader election between two operator processes, and the seeded chaos run.
//! `cargo test -p microservice-operator --test it rbac::` runs one module.

mod admission_kubectl;
mod autoscaling;
mod bundle;
mod chaos;
mod e2e;
mod initial_list;
mod leader_election;
mod rbac;
mod run_cli;
mod support;
