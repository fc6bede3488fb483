//! The ValidatingAdmissionPolicy status controller (upstream `pkg/controller/validatingadmissionpolicystatus`, run
//! by kube-controller-manager): once per generation it server-side applies `status.observedGeneration` and
//! `status.typeChecking` to the policy's /status under its own field manager. Clients that wait for a policy to be
//! checked wait for that write; server-side appliers see its managedFields entry. kubesim does not type-check the
//! expressions against the matched schemas, so its `typeChecking` carries no warnings.

use serde_json::{Value, json};

pub const FIELD_MANAGER: &str = "validatingadmissionpolicy-status";

/// The status apply `policy` needs, or None when its status already describes its generation.
pub fn sync(policy: &Value) -> Option<Value> {
    let generation = policy.pointer("/metadata/generation").and_then(Value::as_i64)?;
    let observed = policy.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
    if generation <= observed {
        return None;
    }
    let name = policy.pointer("/metadata/name").and_then(Value::as_str)?;
    Some(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "status": {"observedGeneration": generation, "typeChecking": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(generation: i64, status: Value) -> Value {
        json!({"metadata": {"name": "p", "generation": generation}, "spec": {}, "status": status})
    }

    #[test]
    fn a_new_policy_gets_its_generation_observed_and_no_warnings() {
        let apply = sync(&json!({"metadata": {"name": "p", "generation": 1}, "spec": {}})).unwrap();
        assert_eq!(apply["metadata"], json!({"name": "p"}));
        assert_eq!(apply["status"], json!({"observedGeneration": 1, "typeChecking": {}}));
    }

    #[test]
    fn a_checked_generation_is_left_alone_and_a_spec_change_is_checked_again() {
        assert_eq!(sync(&policy(2, json!({"observedGeneration": 2, "typeChecking": {}}))), None);
        let again = sync(&policy(3, json!({"observedGeneration": 2, "typeChecking": {}}))).unwrap();
        assert_eq!(again["status"]["observedGeneration"], 3);
    }

    #[test]
    fn an_object_without_a_generation_or_name_is_not_written() {
        assert_eq!(sync(&json!({"metadata": {"name": "p"}})), None);
        assert_eq!(sync(&json!({"metadata": {"generation": 1}})), None);
    }
}
