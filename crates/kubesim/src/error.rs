//! API errors in the shape a real kube-apiserver returns them: a `metav1.Status` body with code, reason,
//! message and details. Every module of the emulator reports failures with [`ApiError`], so the HTTP layer
//! only has to serialise it.

use serde_json::{Value, json};

/// One entry of `details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueTypeInvalid`,
    /// `FieldManagerConflict`, `FieldValueDuplicate`.
    pub reason: String,
    pub message: String,
    /// Dotted field path, e.g. `spec.port` or `.spec.template.spec.containers[name="app"].image`.
    pub field: String,
}

impl Cause {
    pub fn new(reason: impl Into<String>, message: impl Into<String>, field: impl Into<String>) -> Self {
        Cause { reason: reason.into(), message: message.into(), field: field.into() }
    }
}

/// Which object an error is about (`details` of the Status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    pub name: Option<String>,
    pub group: Option<String>,
    /// The resource's plural (as upstream puts it in `details.kind`) or kind, as the upstream error uses.
    pub kind: Option<String>,
    pub uid: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after_seconds: Option<u32>,
    /// Upstream's `NewGenericServerResponse` always sets details, so those errors carry `details: {}` even when
    /// empty; errors built otherwise (e.g. `NewBadRequest`) have none.
    pub generic: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// Boxed: errors travel in every `Result` of the request path and should stay small.
    pub details: Box<Details>,
}

/// Names a resource the way upstream messages do: `deployments.apps`, `services`, `microservices.platform.example.com`.
pub fn qualified_resource(plural: &str, group: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError { code, reason: reason.to_string(), message: message.into(), details: Box::default() }
    }

    /// An error upstream builds with `NewGenericServerResponse` (see [`Details::generic`]).
    pub fn generic(code: u16, reason: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(code, reason, message);
        e.details.generic = true;
        e
    }

    fn with_object(mut self, plural: &str, group: &str, name: &str) -> Self {
        self.details.name = Some(name.to_string());
        self.details.group = Some(group.to_string());
        self.details.kind = Some(plural.to_string());
        self
    }

    pub fn not_found(plural: &str, group: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified_resource(plural, group)))
            .with_object(plural, group, name)
    }

    /// An unknown path or resource type.
    pub fn path_not_found() -> Self {
        Self::generic(404, "NotFound", "the server could not find the requested resource")
    }

    pub fn already_exists(plural: &str, group: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified_resource(plural, group)))
            .with_object(plural, group, name)
    }

    pub fn conflict(plural: &str, group: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified_resource(plural, group)
            ),
        )
        .with_object(plural, group, name)
    }

    /// 422 Invalid. `kind` is the object's Kind qualified by group, as upstream prints it
    /// (`Microservice.platform.example.com "x" is invalid: spec.port: Invalid value: 80: ...`).
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let summary: Vec<String> = causes
            .iter()
            .map(|c| if c.field.is_empty() { c.message.clone() } else { format!("{}: {}", c.field, c.message) })
            .collect();
        let message = match summary.len() {
            0 => format!("{qualified} \"{name}\" is invalid"),
            1 => format!("{qualified} \"{name}\" is invalid: {}", summary[0]),
            _ => format!("{qualified} \"{name}\" is invalid: [{}]", summary.join(", ")),
        };
        let mut e = Self::new(422, "Invalid", message);
        e.details = Box::new(Details {
            name: Some(name.to_string()),
            group: Some(group.to_string()),
            kind: Some(kind.to_string()),
            causes,
            ..Details::default()
        });
        e
    }

    /// 422 for a bad query option, as upstream's option validation reports it
    /// (`CreateOptions.meta.k8s.io "" is invalid: dryRun: ...`).
    pub fn invalid_options(options_kind: &str, causes: Vec<Cause>) -> Self {
        Self::invalid(options_kind, "meta.k8s.io", "", causes)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// `deployments.apps "web" is forbidden: why` (`deployments.apps is forbidden: why` for no name).
    pub fn forbidden_object(plural: &str, group: &str, name: &str, why: &str) -> Self {
        let qualified = qualified_resource(plural, group);
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {why}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {why}")
        };
        let mut e = Self::new(403, "Forbidden", message);
        // Upstream's details omit an empty name or group.
        e.details.name = Some(name.to_string()).filter(|n| !n.is_empty());
        e.details.group = Some(group.to_string()).filter(|g| !g.is_empty());
        e.details.kind = Some(plural.to_string());
        e
    }

    pub fn method_not_allowed() -> Self {
        Self::generic(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
            ),
        )
    }

    /// A PATCH with a content type that is no patch type.
    pub fn unsupported_patch_type() -> Self {
        Self::generic(415, "UnsupportedMediaType", "415: Unsupported Media Type")
    }

    pub fn too_large() -> Self {
        Self::new(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")
    }

    pub fn too_many_requests(retry_after_seconds: u32) -> Self {
        let mut e = Self::new(429, "TooManyRequests", "Too many requests, please try again later.");
        e.details.retry_after_seconds = Some(retry_after_seconds);
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::new(500, "InternalError", format!("Internal error occurred: {message}"));
        e.details.causes.push(Cause::new("", message, ""));
        e
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `metav1.Status` body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        // metav1.Status.reason is omitempty: a plain Go error answered as a 500 has none.
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        let d = &self.details;
        let mut details = serde_json::Map::new();
        // metav1.StatusDetails.name is omitempty too.
        if let Some(n) = d.name.as_ref().filter(|n| !n.is_empty()) {
            details.insert("name".into(), json!(n));
        }
        // metav1.StatusDetails.group is omitempty: the core group is left out.
        if let Some(g) = d.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &d.kind {
            details.insert("kind".into(), json!(k));
        }
        if let Some(u) = &d.uid {
            details.insert("uid".into(), json!(u));
        }
        if !d.causes.is_empty() {
            let causes: Vec<Value> = d
                .causes
                .iter()
                .map(|c| {
                    let mut m = serde_json::Map::new();
                    if !c.reason.is_empty() {
                        m.insert("reason".into(), json!(c.reason));
                    }
                    m.insert("message".into(), json!(c.message));
                    if !c.field.is_empty() {
                        m.insert("field".into(), json!(c.field));
                    }
                    Value::Object(m)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = d.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() || d.generic {
            status["details"] = Value::Object(details);
        }
        status
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_upstream_wording() {
        let s = ApiError::not_found("deployments", "apps", "x").to_status();
        assert_eq!(s["message"], "deployments.apps \"x\" not found");
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let e = ApiError::invalid(
            "Microservice",
            "platform.example.com",
            "x",
            vec![
                Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: 80: should be greater than or equal to 1024",
                    "spec.port",
                ),
                Cause::new("FieldValueRequired", "Required value", "spec.image"),
            ],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"].as_array().map(Vec::len), Some(2));
        assert!(
            s["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Microservice.platform.example.com \"x\" is invalid: [")
        );
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let s = ApiError::too_many_requests(2).to_status();
        assert_eq!(s["details"]["retryAfterSeconds"], 2);
    }
}
