//! The Microservice resource and the platform contract, pure: the custom resource types, the contract a spec must
//! meet, the desired Deployment and Service, drift, ownership and the status computed from what is observed. No
//! client, no async runtime: the operator crate does the I/O around these functions.

pub mod admission_policy;
pub mod contract;
pub mod crd;
pub mod desired;
pub mod drift;
pub mod image;
pub mod next_step;
pub mod ownership;
pub mod plan;
pub mod profile;
pub mod reason;
pub mod shared_text;
pub mod status;
pub mod wording;
