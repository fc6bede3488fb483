//! The Microservice operator's pure core: the custom resource, the platform contract and the desired state.

pub mod contract;
pub mod crd;
pub mod desired;
pub mod drift;
pub mod image;
pub mod ownership;
pub mod profile;
pub mod status;
