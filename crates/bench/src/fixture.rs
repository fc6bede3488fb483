//! What the scenarios are about, named once: the backend, the namespace, the images, the kinds and the names.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::ApiResource;
use microservice_core::crd::Microservice;

pub const NAMESPACE: &str = "bench";
pub const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
pub const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";

/// Where the benchmark runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The in-process emulator.
    Kubesim,
    /// A real control plane with kwok nodes (build it first: `hack/control-plane/build.sh`).
    Real,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Kubesim => "kubesim",
            Backend::Real => "real",
        }
    }
}

/// The kinds the scenarios read and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Microservice,
    Deployment,
    Service,
}

impl Kind {
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::Microservice => ApiResource::erase::<Microservice>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
        }
    }
}

pub fn name(i: usize) -> String {
    format!("ms-{i:05}")
}
