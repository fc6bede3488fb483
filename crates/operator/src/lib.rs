//! The Microservice operator: the reconcile loop around the pure core (`microservice-core`), with its controller,
//! leader election, HTTP endpoints, metrics and telemetry, and the `microservice-operator` binary's subcommands.

pub mod answer;
pub mod backoff;
pub mod children;
pub mod cli;
pub mod connection;
pub mod context;
pub mod controller;
pub mod error;
pub mod events;
pub mod health;
pub mod http;
pub mod identity;
pub mod initial_list;
pub mod interner;
pub mod keylock;
pub mod leader;
pub mod metrics;
pub mod microservices;
pub mod queue;
pub mod reconcile;
pub mod settings;
pub mod telemetry;
pub mod uid;
pub mod watched;
pub mod written;
