//! The reconcile's errors, each classified as temporary (retry with backoff) or permanent (record in status and
//! wait for the user to change something) where it is made.

use std::time::Duration;

/// What the controller does with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Retry with per-object exponential backoff; never earlier than the server's Retry-After.
    Temporary { retry_after: Option<Duration> },
    /// Retrying cannot help until the Microservice, a child or the operator's permissions change.
    Permanent,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed. `class` is decided from the response when the error is made.
    #[error("{action} failed: {message}")]
    Api {
        action: String,
        message: String,
        class: Class,
        #[source]
        source: Box<kube::Error>,
    },

    /// The object lacks metadata the API server always sets (namespace, name, uid): a broken object.
    #[error("Microservice is missing metadata.{0}")]
    MissingMetadata(&'static str),

    /// The desired children could not be built from the Microservice.
    #[error(transparent)]
    Desired(#[from] microservice_core::desired::DesiredError),

    /// Building a desired object failed to serialise: an operator bug, not a user error.
    #[error("could not serialise {what}: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a kube client error, deciding here whether it is worth retrying.
    pub fn api(action: impl Into<String>, source: kube::Error) -> Self {
        let (class, message) = classify_kube(&source);
        Error::Api { action: action.into(), message, class, source: Box::new(source) }
    }

    /// A write guarded by a JSON patch `test` of the resourceVersion just read: the server answers a failed test
    /// with 422, which here means the object changed since it was read; the next attempt reads it again.
    pub fn guarded(action: impl Into<String>, source: kube::Error) -> Self {
        let (class, message) = classify_kube(&source);
        let class = match &source {
            kube::Error::Api(status) if status.code == 422 => Class::Temporary { retry_after: None },
            _ => class,
        };
        Error::Api { action: action.into(), message, class, source: Box::new(source) }
    }

    pub fn class(&self) -> Class {
        match self {
            Error::Api { class, .. } => *class,
            Error::Desired(_) | Error::MissingMetadata(_) | Error::Serialize { .. } => Class::Permanent,
        }
    }

    pub fn is_temporary(&self) -> bool {
        matches!(self.class(), Class::Temporary { .. })
    }

    /// A bounded label for metrics and logs (never an object name or a message).
    pub fn kind(&self) -> &'static str {
        match (self, self.status_code()) {
            (Error::Api { .. }, Some(403)) => "forbidden",
            (Error::Api { .. }, Some(409)) => "conflict",
            (Error::Api { .. }, Some(404)) => "not_found",
            (Error::Api { .. }, Some(422)) => "invalid",
            (Error::Api { .. }, Some(429)) => "throttled",
            (Error::Api { .. }, Some(500..=599)) => "server_error",
            (Error::Api { .. }, Some(_)) => "api_error",
            (Error::Api { .. }, None) => "transport",
            (Error::Desired(_), _) => "desired_state",
            (Error::MissingMetadata(_), _) => "missing_metadata",
            (Error::Serialize { .. }, _) => "serialize",
        }
    }

    /// The HTTP status of an API error.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }

    /// What happens next, for the log line.
    pub fn next_step(&self) -> &'static str {
        match self.class() {
            Class::Temporary { .. } => "retrying with backoff",
            Class::Permanent => "not retrying until the Microservice or its children change",
        }
    }
}

fn classify_kube(err: &kube::Error) -> (Class, String) {
    match err {
        kube::Error::Api(status) => {
            let retry_after = status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s)));
            let class = match status.code {
                // Throttling, server trouble, optimistic-lock conflicts and stale caches heal by themselves.
                429 | 500..=599 | 409 | 404 | 408 => Class::Temporary { retry_after },
                _ => Class::Permanent,
            };
            let message = if status.code == 403 {
                format!(
                    "{} (the operator's RBAC lacks this permission: grant it in the operator's Role, see deploy/)",
                    status.message
                )
            } else {
                format!("{} {}: {}", status.code, status.reason, status.message)
            };
            (class, message)
        }
        // Connection resets, timeouts and broken streams: the API server may be restarting.
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            (Class::Temporary { retry_after: None }, err.to_string())
        }
        _ => (Class::Permanent, err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16, reason: &str, retry_after: Option<u32>) -> kube::Error {
        let mut status = Status::failure("boom", reason);
        status.code = code;
        if let Some(s) = retry_after {
            status.details = Some(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: s,
            });
        }
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn server_trouble_throttling_and_conflicts_are_temporary() {
        for code in [500, 503, 504, 409, 404] {
            let e = Error::api("apply", api_error(code, "X", None));
            assert_eq!(e.class(), Class::Temporary { retry_after: None }, "{code}");
        }
    }

    #[test]
    fn retry_after_is_kept() {
        let e = Error::api("apply", api_error(429, "TooManyRequests", Some(3)));
        assert_eq!(e.class(), Class::Temporary { retry_after: Some(Duration::from_secs(3)) });
        assert_eq!(e.kind(), "throttled");
    }

    #[test]
    fn forbidden_is_permanent_and_names_rbac() {
        let e = Error::api("apply Deployment", api_error(403, "Forbidden", None));
        assert_eq!(e.class(), Class::Permanent);
        assert!(e.to_string().contains("RBAC"), "{e}");
    }

    #[test]
    fn invalid_is_permanent() {
        assert_eq!(Error::api("apply", api_error(422, "Invalid", None)).class(), Class::Permanent);
        assert_eq!(Error::api("apply", api_error(400, "BadRequest", None)).class(), Class::Permanent);
    }

    #[test]
    fn a_failed_guard_is_retried() {
        let e = Error::guarded("take over", api_error(422, "Invalid", None));
        assert_eq!(e.class(), Class::Temporary { retry_after: None });
        assert_eq!(Error::guarded("take over", api_error(403, "Forbidden", None)).class(), Class::Permanent);
    }

    #[test]
    fn broken_objects_are_permanent() {
        let e = Error::MissingMetadata("uid");
        assert!(!e.is_temporary());
        assert_eq!(e.kind(), "missing_metadata");
    }
}
