//! The benchmark's errors: each names what failed, so a broken run says where.

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the emulator: {0}")]
    Sim(#[from] kubesim::SimError),
    #[error("cannot start the control plane: {0}")]
    ControlPlane(#[from] microservice_testkit::Error),
    #[error("{what}: {message}")]
    Failed { what: String, message: String },
    #[error("the emulator refused {what}: {message}")]
    Emulator { what: String, message: String },
    #[error("{what}: {source}")]
    Kube { what: String, source: kube::Error },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error("cannot encode {what}: {source}")]
    Json { what: String, source: serde_json::Error },
    #[error("the operator process {0}")]
    Child(String),
}

pub type Result<T> = std::result::Result<T, BenchError>;

impl BenchError {
    pub fn emulator(what: impl Into<String>, err: impl std::fmt::Display) -> Self {
        BenchError::Emulator { what: what.into(), message: err.to_string() }
    }

    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| BenchError::Kube { what, source }
    }

    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| BenchError::Io { what, source }
    }

    pub fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> Self {
        let what = what.into();
        move |source| BenchError::Json { what, source }
    }
}
