//! Every reason the operator writes, as one type: the contract's refusal reasons (on Accepted=False), the condition
//! reasons the status computes, the reasons of a permanent reconcile failure, and the Event reasons. The CamelCase
//! names are API (conditions and Events carry them, scripts match on them); a reason read back from a condition is
//! parsed with [`FromStr`], and what a person should do about it is [`Reason::next_step`] (in `next_step`), so no
//! tool has to read the message text to decide.

use std::fmt;
use std::str::FromStr;

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
    /// `spec.autoscaling` set with `spec.replicas`, or its bounds out of order or range.
    InvalidAutoscaling,
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
    /// The contract's refusal reasons: the first nine of [`Reason::ALL`].
    pub const CONTRACT: &'static [Reason] = Reason::ALL.split_at(9).0;

    /// Every reason, the contract's refusals first, e.g. to check that the names are distinct.
    pub const ALL: [Reason; 30] = [
        Reason::InvalidImageReference,
        Reason::MissingTag,
        Reason::MutableTag,
        Reason::ImageNotAllowed,
        Reason::PortOutOfRange,
        Reason::PortReserved,
        Reason::ReplicasOutOfRange,
        Reason::InvalidName,
        Reason::InvalidAutoscaling,
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
            Reason::InvalidAutoscaling => "InvalidAutoscaling",
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
}
