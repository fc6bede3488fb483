//! Every reason the operator writes, as one type: the contract's refusal reasons (on Accepted=False), the condition
//! reasons the status computes, the reasons of a permanent reconcile failure, and the Event reasons. The CamelCase
//! names are API (conditions and Events carry them, scripts match on them); a reason read back from a condition is
//! parsed with [`FromStr`], and what a person should do about it is [`Reason::next_step`], so no tool has to read
//! the message text to decide.

use std::fmt;
use std::str::FromStr;

use crate::ownership::{ChildKind, handover_command};

/// One stable, machine-readable cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    // The contract's refusals: why Accepted is False (the first violation's reason).
    InvalidImageReference,
    MissingTag,
    MutableTag,
    ImageNotAllowed,
    PortOutOfRange,
    PortReserved,
    ReplicasOutOfRange,
    InvalidName,
    // Condition reasons of the computed status.
    Accepted,
    InvalidSpec,
    Creating,
    RolloutInProgress,
    RolloutComplete,
    ServiceNotFound,
    ProgressDeadlineExceeded,
    ResourceConflict,
    ImmutableSelector,
    AsExpected,
    /// The Deployment is paused (`kubectl rollout pause`) with the current generation not rolled out.
    DeploymentPaused,
    // A permanent reconcile failure, recorded as Degraded.
    Forbidden,
    ApiRejected,
    InternalError,
    // Event reasons: status changes, and what a reconcile did to a child.
    RolloutFailed,
    RolloutPaused,
    Created,
    Updated,
    Repaired,
    Adopted,
    /// Not written by the operator: what a query tool shows while the operator has not acted on a generation.
    NotObserved,
}

/// A reason string this version does not know (written by a newer operator, or by hand).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason `{0}`")]
pub struct UnknownReason(pub String);

impl Reason {
    /// The contract's refusal reasons.
    pub const CONTRACT: [Reason; 8] = [
        Reason::InvalidImageReference,
        Reason::MissingTag,
        Reason::MutableTag,
        Reason::ImageNotAllowed,
        Reason::PortOutOfRange,
        Reason::PortReserved,
        Reason::ReplicasOutOfRange,
        Reason::InvalidName,
    ];

    /// Every reason, e.g. to check that the names are distinct.
    pub const ALL: [Reason; 29] = [
        Reason::InvalidImageReference,
        Reason::MissingTag,
        Reason::MutableTag,
        Reason::ImageNotAllowed,
        Reason::PortOutOfRange,
        Reason::PortReserved,
        Reason::ReplicasOutOfRange,
        Reason::InvalidName,
        Reason::Accepted,
        Reason::InvalidSpec,
        Reason::Creating,
        Reason::RolloutInProgress,
        Reason::RolloutComplete,
        Reason::ServiceNotFound,
        Reason::ProgressDeadlineExceeded,
        Reason::ResourceConflict,
        Reason::ImmutableSelector,
        Reason::AsExpected,
        Reason::DeploymentPaused,
        Reason::Forbidden,
        Reason::ApiRejected,
        Reason::InternalError,
        Reason::RolloutFailed,
        Reason::RolloutPaused,
        Reason::Created,
        Reason::Updated,
        Reason::Repaired,
        Reason::Adopted,
        Reason::NotObserved,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidImageReference => "InvalidImageReference",
            Reason::MissingTag => "MissingTag",
            Reason::MutableTag => "MutableTag",
            Reason::ImageNotAllowed => "ImageNotAllowed",
            Reason::PortOutOfRange => "PortOutOfRange",
            Reason::PortReserved => "PortReserved",
            Reason::ReplicasOutOfRange => "ReplicasOutOfRange",
            Reason::InvalidName => "InvalidName",
            Reason::Accepted => "Accepted",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::Creating => "Creating",
            Reason::RolloutInProgress => "RolloutInProgress",
            Reason::RolloutComplete => "RolloutComplete",
            Reason::ServiceNotFound => "ServiceNotFound",
            Reason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            Reason::ResourceConflict => "ResourceConflict",
            Reason::ImmutableSelector => "ImmutableSelector",
            Reason::AsExpected => "AsExpected",
            Reason::DeploymentPaused => "DeploymentPaused",
            Reason::Forbidden => "Forbidden",
            Reason::ApiRejected => "ApiRejected",
            Reason::InternalError => "InternalError",
            Reason::RolloutFailed => "RolloutFailed",
            Reason::RolloutPaused => "RolloutPaused",
            Reason::Created => "Created",
            Reason::Updated => "Updated",
            Reason::Repaired => "Repaired",
            Reason::Adopted => "Adopted",
            Reason::NotObserved => "NotObserved",
        }
    }

    /// Whether this is one of the contract's refusals.
    pub fn is_refusal(self) -> bool {
        Reason::CONTRACT.contains(&self)
    }

    /// What the service team should do about this reason on Microservice `namespace/name`; None when there is
    /// nothing to do. Chosen from the reason alone: the condition's message says the particulars.
    pub fn next_step(self, namespace: &str, name: &str) -> Option<String> {
        let step = match self {
            Reason::Accepted | Reason::RolloutComplete | Reason::AsExpected => return None,
            Reason::InvalidImageReference | Reason::MissingTag | Reason::MutableTag => {
                "pin spec.image to a released version (REPOSITORY:TAG such as ghcr.io/example/todo-api:1.4.2, or \
                 REPOSITORY@sha256:DIGEST) and apply the Microservice again"
                    .to_string()
            }
            Reason::ImageNotAllowed => "use an image from a repository the platform allows (the message lists them), \
                 or ask the platform team to allow yours; then apply again; what runs now keeps running"
                .to_string(),
            Reason::PortOutOfRange | Reason::PortReserved => {
                "set spec.port to the unprivileged port your app listens on (e.g. 8080), not a reserved one, and \
                 apply again"
                    .to_string()
            }
            Reason::ReplicasOutOfRange => {
                "set spec.replicas between 1 and 20, or leave it out for the platform default, and apply again"
                    .to_string()
            }
            Reason::InvalidName => format!(
                "names cannot change: delete Microservice {name} and create it again under a name like `todo-api` \
                 (lowercase letters, digits and `-`, starting with a letter, at most 63)"
            ),
            Reason::InvalidSpec => "fix the spec as the message says and apply the Microservice again".to_string(),
            Reason::Creating | Reason::RolloutInProgress => format!(
                "nothing to do yet: the rollout is running; follow it with `kubectl microservice wait {name} -n \
                 {namespace} --for ready`"
            ),
            Reason::ServiceNotFound => "nothing to do: the operator is recreating the Service".to_string(),
            Reason::ProgressDeadlineExceeded => format!(
                "pods are not becoming ready: check `kubectl -n {namespace} describe deploy {name}` and `kubectl -n \
                 {namespace} get pods -l app.kubernetes.io/instance={name}` (does the image exist, does it answer its \
                 readiness probe?); then push a fixed image and update spec.image"
            ),
            Reason::ResourceConflict => format!(
                "an object named {name} already exists and is not this Microservice's: hand over each object the \
                 message names with the command it gives (for the Deployment: `{}`; for the Service: `{}`), or \
                 delete it if nothing needs it",
                handover_command(ChildKind::Deployment, namespace, name),
                handover_command(ChildKind::Service, namespace, name)
            ),
            Reason::ImmutableSelector => format!(
                "the existing Deployment {name} selects other pods and a selector cannot change: delete it (`kubectl \
                 -n {namespace} delete deploy {name}`) and the operator creates its own"
            ),
            Reason::NotObserved => "the operator has not acted on this change yet: if this lasts, check that the \
                 operator is running (`kubectl get pods -A -l app.kubernetes.io/name=microservice-operator`)"
                .to_string(),
            Reason::DeploymentPaused
            | Reason::Forbidden
            | Reason::ApiRejected
            | Reason::InternalError
            | Reason::RolloutFailed
            | Reason::RolloutPaused
            | Reason::Created
            | Reason::Updated
            | Reason::Repaired
            | Reason::Adopted => return Some(Reason::describe_step(namespace, name)),
        };
        Some(step)
    }

    /// The next step for a reason with no particular advice (or one this version does not know).
    pub fn describe_step(namespace: &str, name: &str) -> String {
        format!("see `kubectl -n {namespace} describe microservice {name}` for the conditions and events")
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(s: &str) -> Result<Reason, UnknownReason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s).ok_or_else(|| UnknownReason(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_camel_case_distinct_and_parse_back() {
        let names: std::collections::BTreeSet<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
        for reason in Reason::ALL {
            let name = reason.as_str();
            assert!(name.starts_with(|c: char| c.is_ascii_uppercase()), "{name}");
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{name}");
            assert_eq!(name.parse::<Reason>(), Ok(reason));
        }
        assert!("SomethingNew".parse::<Reason>().is_err());
    }

    #[test]
    fn every_reason_that_blocks_ready_has_a_next_step_and_the_others_none() {
        for reason in Reason::ALL {
            let step = reason.next_step("todo", "todo-api");
            let done = matches!(reason, Reason::Accepted | Reason::RolloutComplete | Reason::AsExpected);
            assert_eq!(step.is_none(), done, "{reason}: {step:?}");
        }
        assert!(Reason::CONTRACT.iter().all(|r| r.is_refusal()));
        assert!(!Reason::ResourceConflict.is_refusal());
    }

    #[test]
    fn a_conflict_names_the_handover_command() {
        let step = Reason::ResourceConflict.next_step("todo", "billing").unwrap();
        let command = "kubectl annotate deployments billing -n todo platform.example.com/handover=billing --overwrite";
        assert!(step.contains(command), "{step}");
    }
}
