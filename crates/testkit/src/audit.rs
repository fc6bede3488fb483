//! What kube-apiserver's audit log says each client sent: the real server's answer to "how many writes did the
//! operator make?", by user, verb, resource and response code.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The audit policy the control plane runs with: one line per finished request of anyone but the control plane's
/// own components and kwok, metadata only.
pub const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  users: ["system:kube-controller-manager", "system:kube-scheduler", "system:apiserver", "kwok"]
- level: None
  userGroups: ["system:serviceaccounts:kube-system", "system:nodes"]
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*"]
- level: Metadata
"#;

/// One request as the audit log tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub user: String,
    /// The API verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// `deployments`, or `microservices/status` for a subresource.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
}

/// The audit log of a running control plane; read it as often as needed.
#[derive(Clone, Debug)]
pub struct AuditLog {
    path: PathBuf,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    verb: String,
    user: EventUser,
    object_ref: Option<ObjectRef>,
    response_status: Option<ResponseStatus>,
}

#[derive(Deserialize)]
struct EventUser {
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    code: Option<u16>,
}

impl AuditLog {
    pub fn new(path: impl AsRef<Path>) -> AuditLog {
        AuditLog { path: path.as_ref().to_path_buf() }
    }

    /// Every resource request logged so far (a line being written is skipped).
    pub fn requests(&self) -> Vec<Request> {
        self.requests_from(0).0
    }

    /// The resource requests logged from byte `offset` on, and the offset after the last complete line: a reader
    /// that keeps up with a long run reads each line once. A line being written is left for the next call.
    pub fn requests_from(&self, offset: u64) -> (Vec<Request>, u64) {
        // Only the part not read yet: a long run's log grows to many megabytes and is polled often.
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&self.path).and_then(|mut file| {
            file.seek(SeekFrom::Start(offset))?;
            file.read_to_end(&mut bytes)
        });
        if read.is_err() {
            return (Vec::new(), offset);
        }
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n').map(|i| i + 1) else {
            return (Vec::new(), offset);
        };
        let requests = bytes[..end]
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Event>(line).ok())
            .filter_map(Request::from_event)
            .collect();
        (requests, offset + end as u64)
    }

    /// Requests from `user` with this verb on this resource that the server accepted (below 300).
    pub fn succeeded(&self, user: &str, verb: &str, resource: &str) -> u64 {
        self.requests()
            .iter()
            .filter(|r| r.user == user && r.verb == verb && r.resource == resource && r.code < 300)
            .count() as u64
    }
}

impl Request {
    fn from_event(event: Event) -> Option<Request> {
        let object = event.object_ref?;
        let resource = match (object.resource?, object.subresource) {
            (resource, Some(sub)) => format!("{resource}/{sub}"),
            (resource, None) => resource,
        };
        Some(Request {
            user: event.user.username,
            verb: event.verb,
            resource,
            namespace: object.namespace,
            name: object.name,
            code: event.response_status.and_then(|s| s.code).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_is_counted_under_its_subresource_and_a_refused_create_is_not_a_success() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let lines = [
            r#"{"kind":"Event","verb":"patch","user":{"username":"op"},"objectRef":{"resource":"microservices","subresource":"status","namespace":"todo","name":"a"},"responseStatus":{"code":200}}"#,
            r#"{"kind":"Event","verb":"create","user":{"username":"op"},"objectRef":{"resource":"services","namespace":"todo"},"responseStatus":{"code":409}}"#,
            r#"{"kind":"Event","verb":"get","user":{"username":"op"},"requestURI":"/version","responseStatus":{"code":200}}"#,
            r#"{"kind":"Event","verb":"create","user":{"username":"op"},"objectRef":{"reso"#,
        ];
        std::fs::write(&path, lines.join("\n")).expect("write");
        let log = AuditLog::new(&path);
        assert_eq!(log.requests().len(), 2);
        assert_eq!(log.succeeded("op", "patch", "microservices/status"), 1);
        assert_eq!(log.succeeded("op", "create", "services"), 0);
    }

    #[test]
    fn a_reader_from_an_offset_sees_each_complete_line_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let line = |name: &str| {
            format!(
                r#"{{"verb":"get","user":{{"username":"op"}},"objectRef":{{"resource":"pods","name":"{name}"}},"responseStatus":{{"code":200}}}}"#
            )
        };
        let log = AuditLog::new(&path);
        std::fs::write(&path, format!("{}\n{}", line("a"), &line("b")[..20])).expect("write");
        let (first, offset) = log.requests_from(0);
        assert_eq!(first.iter().map(|r| r.name.as_deref()).collect::<Vec<_>>(), [Some("a")]);
        std::fs::write(&path, format!("{}\n{}\n", line("a"), line("b"))).expect("write");
        let (second, end) = log.requests_from(offset);
        assert_eq!(second.iter().map(|r| r.name.as_deref()).collect::<Vec<_>>(), [Some("b")]);
        assert_eq!(log.requests_from(end), (Vec::new(), end));
    }
}
