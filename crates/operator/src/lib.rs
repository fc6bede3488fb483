//! The Microservice operator: the custom resource, the platform contract, the desired state (pure), and the
//! reconcile loop around them.

pub mod admission_policy;
pub mod backoff;
pub mod cli;
pub mod contract;
pub mod controller;
pub mod crd;
pub mod desired;
pub mod drift;
pub mod error;
pub mod health;
pub mod http;
pub mod image;
pub mod leader;
pub mod metrics;
pub mod ownership;
pub mod profile;
pub mod reconcile;
pub mod settings;
pub mod status;
pub mod telemetry;
pub mod wording;
pub mod written;
