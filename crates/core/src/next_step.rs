//! What a person should do about each [`Reason`]: the next step the kubectl plugin prints below a status that is
//! not Ready, chosen from the typed reason alone (the condition's message says the particulars).

use crate::ownership::{ChildKind, handover_command};
use crate::reason::Reason;

impl Reason {
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
            Reason::InvalidAutoscaling => {
                "set either spec.replicas or spec.autoscaling (not both), with 1 <= minReplicas <= maxReplicas <= 20, \
                 and apply again"
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

#[cfg(test)]
mod tests {
    use super::*;

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
