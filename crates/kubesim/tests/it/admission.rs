//! ValidatingAdmissionPolicies as a real kube-apiserver applies them: matching, params, variables, message
//! fallbacks, failurePolicy and validationActions, with upstream's wording.

use kubesim::cluster::{Cluster, WriteOptions};
use kubesim::error::ApiError;
use serde_json::{Value, json};

fn create(cluster: &Cluster, group: &str, plural: &str, ns: Option<&str>, obj: Value) -> Result<Vec<String>, ApiError> {
    let rt = cluster.resolve(group, "v1", plural).expect("a served type");
    cluster.create(&rt, ns, obj, &WriteOptions::default()).map(|o| o.warnings)
}

const AR: &str = "admissionregistration.k8s.io";

/// A cluster with namespace `team` (label `env: prod`) and one policy on ConfigMaps.
fn cluster(policy_spec: Value) -> Cluster {
    let cluster = Cluster::new();
    create(&cluster, "", "namespaces", None, json!({"metadata": {"name": "team", "labels": {"env": "prod"}}})).unwrap();
    let mut spec = json!({"matchConstraints": {"resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}
    ]}});
    for (k, v) in policy_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    create(&cluster, AR, "validatingadmissionpolicies", None, json!({"metadata": {"name": "p"}, "spec": spec}))
        .unwrap();
    cluster
}

fn bind(cluster: &Cluster, name: &str, spec: Value) {
    let mut spec = spec;
    spec["policyName"] = json!("p");
    create(cluster, AR, "validatingadmissionpolicybindings", None, json!({"metadata": {"name": name}, "spec": spec}))
        .unwrap();
}

fn configmap(cluster: &Cluster, name: &str, data: Value) -> Result<Vec<String>, ApiError> {
    create(cluster, "", "configmaps", Some("team"), json!({"metadata": {"name": name}, "data": data}))
}

#[test]
fn a_denial_is_422_with_upstreams_message_and_a_warning_is_a_header() {
    let cluster = cluster(json!({
        "variables": [{"name": "size", "expression": "has(object.data) ? size(object.data) : 0"}],
        "validations": [
            {"expression": "variables.size <= 1", "messageExpression": "'too many keys: ' + string(variables.size)"},
            {"expression": "object.metadata.name != 'forbidden'", "reason": "Forbidden", "message": "not this name"},
            {"expression": "object.metadata.name != 'plain'"},
        ],
    }));
    bind(&cluster, "deny", json!({"validationActions": ["Deny"]}));
    let e = configmap(&cluster, "big", json!({"a": "1", "b": "2"})).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'deny' denied request: too many keys: 2"
    );
    let e = configmap(&cluster, "forbidden", json!({})).unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(e.message.ends_with("denied request: not this name"), "{}", e.message);
    let e = configmap(&cluster, "plain", json!({})).unwrap_err();
    assert!(e.message.ends_with("denied request: failed expression: object.metadata.name != 'plain'"), "{}", e.message);
    assert_eq!(configmap(&cluster, "fine", json!({"a": "1"})).unwrap(), Vec::<String>::new());

    bind(&cluster, "warn", json!({"validationActions": ["Warn", "Audit"]}));
    cluster.resolve(AR, "v1", "validatingadmissionpolicybindings").unwrap();
    let rt = cluster.resolve(AR, "v1", "validatingadmissionpolicybindings").unwrap();
    cluster.delete(&rt, None, "deny", &Default::default()).unwrap();
    let warnings = configmap(&cluster, "big2", json!({"a": "1", "b": "2"})).unwrap();
    assert_eq!(warnings, ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'warn': too many keys: 2"]);
}

#[test]
fn bindings_select_by_namespace_and_object_labels() {
    let cluster = cluster(json!({"validations": [{"expression": "false", "message": "no"}]}));
    bind(
        &cluster,
        "staging-only",
        json!({"validationActions": ["Deny"], "matchResources": {"namespaceSelector": {"matchLabels": {"env": "staging"}}}}),
    );
    assert!(configmap(&cluster, "a", json!({})).is_ok(), "namespace team is prod");
    bind(
        &cluster,
        "labelled",
        json!({"validationActions": ["Deny"], "matchResources": {"objectSelector": {"matchLabels": {"check": "yes"}}}}),
    );
    assert!(configmap(&cluster, "b", json!({})).is_ok());
    let labelled = json!({"metadata": {"name": "c", "labels": {"check": "yes"}}});
    let e = create(&cluster, "", "configmaps", Some("team"), labelled).unwrap_err();
    assert!(e.message.contains("with binding 'labelled' denied request: no"), "{}", e.message);
    // Other resources are not matched at all.
    let secret = json!({"metadata": {"name": "s", "labels": {"check": "yes"}}});
    assert!(create(&cluster, "", "secrets", Some("team"), secret).is_ok());
}

#[test]
fn params_come_from_the_bound_object_and_a_missing_one_follows_parameter_not_found_action() {
    let cluster = cluster(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["secrets"]}
        ]},
        "validations": [{"expression": "object.metadata.name != params.data.banned",
                         "messageExpression": "'banned: ' + params.data.banned"}],
    }));
    bind(
        &cluster,
        "b",
        json!({"validationActions": ["Deny"], "paramRef": {"name": "rules", "parameterNotFoundAction": "Deny"}}),
    );
    let secret = |name: &str| create(&cluster, "", "secrets", Some("team"), json!({"metadata": {"name": name}}));
    let e = secret("x").unwrap_err();
    assert!(
        e.message.ends_with("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{}",
        e.message
    );
    configmap(&cluster, "rules", json!({"banned": "evil"})).unwrap();
    assert!(secret("good").is_ok());
    let e = secret("evil").unwrap_err();
    assert!(e.message.ends_with("denied request: banned: evil"), "{}", e.message);
}

#[test]
fn an_expression_error_denies_under_fail_and_admits_under_ignore() {
    for (policy, admitted) in [("Fail", false), ("Ignore", true)] {
        let cluster = cluster(json!({
            "failurePolicy": policy,
            "validations": [{"expression": "object.data.missing == 'x'"}],
        }));
        bind(&cluster, "b", json!({"validationActions": ["Deny"]}));
        let result = configmap(&cluster, "a", json!({}));
        assert_eq!(result.is_ok(), admitted, "{policy}: {result:?}");
        if let Err(e) = result {
            assert!(e.message.contains("expression 'object.data.missing == 'x'' resulted in error"), "{}", e.message);
        }
    }
}

#[test]
fn match_conditions_skip_what_they_exclude() {
    let cluster = cluster(json!({
        "matchConditions": [{"name": "only-checked", "expression": "has(object.metadata.labels) && 'check' in object.metadata.labels"}],
        "validations": [{"expression": "false", "message": "no"}],
    }));
    bind(&cluster, "b", json!({"validationActions": ["Deny"]}));
    assert!(configmap(&cluster, "a", json!({})).is_ok());
    let labelled = json!({"metadata": {"name": "c", "labels": {"check": "1"}}});
    assert!(create(&cluster, "", "configmaps", Some("team"), labelled).is_err());
}
