//! RBAC authorization as kube-apiserver's RBAC authorizer decides it: ClusterRoleBindings grant their
//! ClusterRole everywhere, RoleBindings grant their Role or ClusterRole inside their namespace; rules match on
//! verbs, apiGroups, resources (with `resource/subresource`, `*/subresource`, `*`), resourceNames and
//! nonResourceURLs (exact or `prefix*`). `system:masters` is allowed everything before RBAC is asked.
//!
//! The bootstrap policy a real cluster is born with (system:discovery, system:public-info-viewer,
//! system:basic-user, cluster-admin and their bindings) is part of every [`Policy`] without being stored, so
//! `kubectl get clusterroles` lists only what users created.

use serde_json::{Value, json};

use crate::auth::{MASTERS_GROUP, UserInfo};
use crate::cluster::{Cluster, ListOptions};
use crate::error::ApiError;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks to do (upstream's authorizer.Attributes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    Resource {
        verb: String,
        group: String,
        resource: String,
        /// "" when none.
        subresource: String,
        /// "" for cluster scope (and for all-namespaces lists).
        namespace: String,
        /// "" when the request names no object.
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl Attributes {
    pub fn verb(&self) -> &str {
        match self {
            Attributes::Resource { verb, .. } | Attributes::NonResource { verb, .. } => verb,
        }
    }

    fn namespace(&self) -> &str {
        match self {
            Attributes::Resource { namespace, .. } => namespace,
            Attributes::NonResource { .. } => "",
        }
    }
}

/// The authorizer's answer. `reason` is what upstream puts in a SubjectAccessReview's status.reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// One PolicyRule of a role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

impl Rule {
    pub fn from_value(v: &Value) -> Rule {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == "*" || v == verb)
    }

    fn group_matches(&self, group: &str) -> bool {
        self.api_groups.iter().any(|g| g == "*" || g == group)
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        let combined = if subresource.is_empty() { resource.to_string() } else { format!("{resource}/{subresource}") };
        self.resources.iter().any(|r| {
            r == "*"
                || *r == combined
                || (!subresource.is_empty() && r.strip_prefix("*/").is_some_and(|s| s == subresource))
        })
    }

    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || (!name.is_empty() && self.resource_names.iter().any(|n| n == name))
    }

    fn url_matches(&self, path: &str) -> bool {
        self.non_resource_urls
            .iter()
            .any(|u| u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
    }

    pub fn allows(&self, attrs: &Attributes) -> bool {
        match attrs {
            Attributes::Resource { verb, group, resource, subresource, name, .. } => {
                self.verb_matches(verb)
                    && self.group_matches(group)
                    && self.resource_matches(resource, subresource)
                    && self.name_matches(name)
            }
            Attributes::NonResource { verb, path } => self.verb_matches(verb) && self.url_matches(path),
        }
    }
}

/// The RBAC objects that can bear on one namespace, plus the bootstrap policy.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub cluster_roles: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
    /// Roles and RoleBindings of the namespace asked about (all of them for a cluster-scoped question is
    /// unnecessary: RoleBindings never grant at cluster scope).
    pub roles: Vec<Value>,
    pub role_bindings: Vec<Value>,
}

/// The rules a user holds in a namespace (a SelfSubjectRulesReview's status).
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// Why the set may be incomplete (bindings to roles that do not exist).
    pub errors: Vec<String>,
}

fn bootstrap_cluster_roles() -> Vec<Value> {
    let role = |name: &str, rules: Value| json!({"metadata": {"name": name}, "rules": rules});
    vec![
        role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
            ]),
        ),
    ]
}

fn bootstrap_cluster_role_bindings() -> Vec<Value> {
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> =
            groups.iter().map(|g| json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": g})).collect();
        json!({"metadata": {"name": name}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}, "subjects": subjects})
    };
    vec![
        binding("cluster-admin", &[MASTERS_GROUP]),
        binding("system:discovery", &["system:authenticated"]),
        binding("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
        binding("system:basic-user", &["system:authenticated"]),
    ]
}

/// Upstream's describeSubject: `ServiceAccount "name/namespace"`, `User "name"`.
fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let (kind, name) = (str_at(subject, "/kind"), str_at(subject, "/name"));
    if kind == "ServiceAccount" {
        let ns = match str_at(subject, "/namespace") {
            "" => binding_namespace,
            ns => ns,
        };
        format!("{kind} \"{name}/{ns}\"")
    } else {
        format!("{kind} \"{name}\"")
    }
}

impl Policy {
    /// The policy as stored in `cluster` now, for a question about `namespace` ("" = cluster scope).
    pub fn load(cluster: &Cluster, namespace: &str) -> Policy {
        let list = |plural: &str, ns: Option<&str>| -> Vec<Value> {
            cluster
                .resolve(RBAC_GROUP, "v1", plural)
                .and_then(|rt| cluster.list(&rt, ns, &ListOptions::default()))
                .map(|l| l.items)
                .unwrap_or_default()
        };
        let mut policy = Policy {
            cluster_roles: list("clusterroles", None),
            cluster_role_bindings: list("clusterrolebindings", None),
            ..Policy::default()
        };
        if !namespace.is_empty() {
            policy.roles = list("roles", Some(namespace));
            policy.role_bindings = list("rolebindings", Some(namespace));
        }
        policy
    }

    fn cluster_role(&self, name: &str) -> Option<Value> {
        let named = |r: &&Value| str_at(r, "/metadata/name") == name;
        if let Some(stored) = self.cluster_roles.iter().find(named) {
            return Some(self.aggregated(stored));
        }
        bootstrap_cluster_roles().into_iter().find(|r| named(&r))
    }

    /// A ClusterRole with an aggregationRule holds the rules of every ClusterRole its selectors match (what
    /// the clusterrole-aggregation controller writes back into it).
    fn aggregated(&self, role: &Value) -> Value {
        let Some(selectors) = role.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array) else {
            return role.clone();
        };
        let own = str_at(role, "/metadata/name");
        let mut rules: Vec<Value> = role.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
        for other in &self.cluster_roles {
            if str_at(other, "/metadata/name") == own {
                continue;
            }
            let labels = other.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
            let selected = selectors.iter().any(|sel| {
                sel.get("matchLabels")
                    .and_then(Value::as_object)
                    .is_some_and(|want| !want.is_empty() && want.iter().all(|(k, v)| labels.get(k) == Some(v)))
            });
            if selected {
                rules.extend(other.get("rules").and_then(Value::as_array).cloned().unwrap_or_default());
            }
        }
        let mut out = role.clone();
        out["rules"] = Value::Array(rules);
        out
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&Value> {
        self.roles.iter().find(|r| str_at(r, "/metadata/name") == name && str_at(r, "/metadata/namespace") == namespace)
    }

    /// The subject of `binding` that is `user`, if any. `namespace`: the binding's, the default for
    /// ServiceAccount subjects without one ("" for ClusterRoleBindings).
    fn matching_subject<'a>(binding: &'a Value, user: &UserInfo, namespace: &str) -> Option<&'a Value> {
        binding.get("subjects").and_then(Value::as_array)?.iter().find(|s| {
            let name = str_at(s, "/name");
            match str_at(s, "/kind") {
                "User" => name == user.name,
                "Group" => user.in_group(name),
                "ServiceAccount" => {
                    let ns = match str_at(s, "/namespace") {
                        "" => namespace,
                        ns => ns,
                    };
                    !ns.is_empty() && crate::auth::service_account_username(ns, name) == user.name
                }
                _ => false,
            }
        })
    }

    /// Visits every (binding description, rules) pair that applies to `user` in `namespace`, as upstream's
    /// VisitRulesFor; stops when `visit` returns true. Returns the errors met (missing roles).
    fn visit(&self, user: &UserInfo, namespace: &str, mut visit: impl FnMut(&str, &[Rule]) -> bool) -> Vec<String> {
        let mut errors = Vec::new();
        let bootstrap = bootstrap_cluster_role_bindings();
        for binding in self.cluster_role_bindings.iter().chain(bootstrap.iter()) {
            let Some(subject) = Self::matching_subject(binding, user, "") else { continue };
            let role_name = str_at(binding, "/roleRef/name");
            let Some(role) = self.cluster_role(role_name) else {
                errors.push(format!("clusterrole.rbac.authorization.k8s.io \"{role_name}\" not found"));
                continue;
            };
            let rules = rules_of(&role);
            let source = format!(
                "ClusterRoleBinding \"{}\" of ClusterRole \"{role_name}\" to {}",
                str_at(binding, "/metadata/name"),
                describe_subject(subject, "")
            );
            if visit(&source, &rules) {
                return errors;
            }
        }
        if namespace.is_empty() {
            return errors;
        }
        for binding in self.role_bindings.iter().filter(|b| str_at(b, "/metadata/namespace") == namespace) {
            let Some(subject) = Self::matching_subject(binding, user, namespace) else { continue };
            let role_name = str_at(binding, "/roleRef/name");
            let (role, kind) = match str_at(binding, "/roleRef/kind") {
                "ClusterRole" => (self.cluster_role(role_name), "ClusterRole"),
                _ => (self.role(namespace, role_name).cloned(), "Role"),
            };
            let Some(role) = role else {
                errors.push(format!("{}.rbac.authorization.k8s.io \"{role_name}\" not found", kind.to_lowercase()));
                continue;
            };
            let rules = rules_of(&role);
            let source = format!(
                "RoleBinding \"{}/{namespace}\" of {kind} \"{role_name}\" to {}",
                str_at(binding, "/metadata/name"),
                describe_subject(subject, namespace)
            );
            if visit(&source, &rules) {
                return errors;
            }
        }
        errors
    }

    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        if user.in_group(MASTERS_GROUP) {
            return Decision { allowed: true, reason: String::new() };
        }
        let mut allowed_by = None;
        let errors = self.visit(user, attrs.namespace(), |source, rules| {
            if rules.iter().any(|r| r.allows(attrs)) {
                allowed_by = Some(source.to_string());
                true
            } else {
                false
            }
        });
        match allowed_by {
            Some(source) => Decision { allowed: true, reason: format!("RBAC: allowed by {source}") },
            None => Decision { allowed: false, reason: rbac_errors(&errors) },
        }
    }

    /// Every rule `user` holds in `namespace` (SelfSubjectRulesReview).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RuleSet {
        let mut rules = Vec::new();
        let errors = self.visit(user, namespace, |_, r| {
            rules.extend_from_slice(r);
            false
        });
        RuleSet { rules, errors }
    }
}

fn rules_of(role: &Value) -> Vec<Rule> {
    role.get("rules").and_then(Value::as_array).map(|a| a.iter().map(Rule::from_value).collect()).unwrap_or_default()
}

/// Upstream's wording of evaluation errors: `RBAC: e` or `RBAC: [e1, e2]` (an aggregate), "" for none.
fn rbac_errors(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => format!("RBAC: {one}"),
        many => format!("RBAC: [{}]", many.join(", ")),
    }
}

/// The 403 a denied request gets, worded as kube-apiserver's (responsewriters.Forbidden).
pub fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let mut message = match attrs {
        Attributes::NonResource { verb, path } => format!("User \"{}\" cannot {verb} path \"{path}\"", user.name),
        Attributes::Resource { verb, group, resource, subresource, namespace, .. } => {
            let resource = if subresource.is_empty() { resource.clone() } else { format!("{resource}/{subresource}") };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{namespace}\"")
            };
            format!("User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}", user.name)
        }
    };
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    match attrs {
        Attributes::NonResource { .. } => ApiError::forbidden(format!("forbidden: {message}")),
        Attributes::Resource { group, resource, name, .. } => {
            ApiError::forbidden_object(resource, group, name, &message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn sa() -> UserInfo {
        UserInfo::service_account("todo", "op")
    }

    fn role(name: &str, ns: &str, rules: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn binding(name: &str, ns: &str, kind: &str, role: &str, subjects: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": ns}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role}, "subjects": subjects})
    }

    fn sa_subject() -> Value {
        json!([{"kind": "ServiceAccount", "name": "op", "namespace": "todo"}])
    }

    fn namespaced_policy(rules: Value) -> Policy {
        Policy {
            roles: vec![role("op", "todo", rules)],
            role_bindings: vec![binding("op", "todo", "Role", "op", sa_subject())],
            ..Policy::default()
        }
    }

    #[test]
    fn a_role_grants_exactly_its_verbs_groups_and_resources() {
        let p = namespaced_policy(json!([
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["*"]}
        ]));
        let u = sa();
        let allowed = |a: Attributes| p.authorize(&u, &a).allowed;
        assert!(allowed(res("patch", "apps", "deployments", "", "todo", "web")));
        assert!(allowed(res("watch", "apps", "deployments", "", "todo", "")));
        assert!(allowed(res("delete", "", "services", "", "todo", "web")));
        assert!(!allowed(res("delete", "apps", "deployments", "", "todo", "web")), "verb not granted");
        assert!(!allowed(res("get", "", "deployments", "", "todo", "web")), "wrong group");
        assert!(!allowed(res("get", "apps", "replicasets", "", "todo", "x")), "resource not granted");
        assert!(!allowed(res("get", "apps", "deployments", "", "other", "web")), "another namespace");
        assert!(!allowed(res("list", "apps", "deployments", "", "", "")), "cluster-wide");
        assert!(!allowed(res("patch", "apps", "deployments", "status", "todo", "web")), "subresource not granted");
        let reason = p.authorize(&u, &res("get", "apps", "deployments", "", "todo", "web")).reason;
        assert_eq!(reason, "RBAC: allowed by RoleBinding \"op/todo\" of Role \"op\" to ServiceAccount \"op/todo\"");
    }

    #[test]
    fn subresources_and_resource_names() {
        let p = namespaced_policy(json!([
            {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]},
            {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"], "verbs": ["get", "update"]}
        ]));
        let u = sa();
        let allowed = |a: Attributes| p.authorize(&u, &a).allowed;
        assert!(allowed(res("patch", "apps", "deployments", "status", "todo", "web")));
        assert!(!allowed(res("patch", "apps", "deployments", "", "todo", "web")), "status is not the object");
        assert!(allowed(res("update", "apps", "replicasets", "scale", "todo", "x")));
        assert!(allowed(res("get", "", "configmaps", "", "todo", "lock")));
        assert!(!allowed(res("get", "", "configmaps", "", "todo", "other")));
        assert!(!allowed(res("list", "", "configmaps", "", "todo", "")), "resourceNames never grant unnamed lists");
    }

    #[test]
    fn cluster_role_bindings_grant_everywhere_and_role_bindings_scope_cluster_roles() {
        let reader = role("reader", "", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]));
        let writer = role("writer", "", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]));
        let p = Policy {
            cluster_roles: vec![reader, writer],
            cluster_role_bindings: vec![binding("r", "", "ClusterRole", "reader", sa_subject())],
            role_bindings: vec![binding(
                "w",
                "todo",
                "ClusterRole",
                "writer",
                json!([{"kind": "ServiceAccount", "name": "op"}]),
            )],
            ..Policy::default()
        };
        let u = sa();
        assert!(p.authorize(&u, &res("list", "", "pods", "", "", "")).allowed);
        assert!(p.authorize(&u, &res("list", "", "pods", "", "kube-system", "")).allowed);
        assert!(
            p.authorize(&u, &res("create", "", "pods", "", "todo", "")).allowed,
            "SA subject defaults to the binding's namespace"
        );
        assert!(!p.authorize(&u, &res("create", "", "pods", "", "", "")).allowed);
    }

    #[test]
    fn groups_users_masters_and_missing_roles() {
        let p = Policy {
            role_bindings: vec![
                binding(
                    "g",
                    "todo",
                    "ClusterRole",
                    "cluster-admin",
                    json!([{"kind": "Group", "name": "system:serviceaccounts:todo"}]),
                ),
                binding("gone", "other", "Role", "missing", sa_subject()),
            ],
            ..Policy::default()
        };
        assert!(
            p.authorize(&sa(), &res("delete", "x", "y", "", "todo", "z")).allowed,
            "bootstrap cluster-admin via group"
        );
        let mut q = p.clone();
        q.role_bindings = vec![binding("gone", "todo", "Role", "missing", sa_subject())];
        let d = q.authorize(&sa(), &res("get", "", "pods", "", "todo", "p"));
        assert_eq!(
            d,
            Decision { allowed: false, reason: "RBAC: role.rbac.authorization.k8s.io \"missing\" not found".into() }
        );
        let admin = UserInfo::admin();
        assert!(Policy::default().authorize(&admin, &res("delete", "", "nodes", "", "", "n")).allowed);
        let alice = UserInfo { name: "alice".into(), groups: vec!["system:authenticated".into()] };
        let p = Policy {
            roles: vec![role("r", "todo", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]))],
            role_bindings: vec![binding("b", "todo", "Role", "r", json!([{"kind": "User", "name": "alice"}]))],
            ..Policy::default()
        };
        assert!(p.authorize(&alice, &res("get", "", "pods", "", "todo", "p")).allowed);
        assert!(!p.authorize(&sa(), &res("get", "", "pods", "", "todo", "p")).allowed);
    }

    #[test]
    fn discovery_is_open_to_the_authenticated_and_health_to_everyone() {
        let p = Policy::default();
        let get = |path: &str| Attributes::NonResource { verb: "get".into(), path: path.into() };
        for path in ["/api", "/api/v1", "/apis/apps/v1", "/openapi/v3", "/version", "/healthz"] {
            assert!(p.authorize(&sa(), &get(path)).allowed, "{path}");
        }
        assert!(!p.authorize(&sa(), &get("/metrics")).allowed);
        let anon = UserInfo::anonymous();
        assert!(p.authorize(&anon, &get("/healthz")).allowed);
        assert!(p.authorize(&anon, &get("/version")).allowed);
        assert!(!p.authorize(&anon, &get("/api")).allowed);
        assert!(!p.authorize(&sa(), &Attributes::NonResource { verb: "post".into(), path: "/api".into() }).allowed);
        let metrics = Policy {
            cluster_roles: vec![role("m", "", json!([{"nonResourceURLs": ["/metr*"], "verbs": ["get"]}]))],
            cluster_role_bindings: vec![binding("m", "", "ClusterRole", "m", sa_subject())],
            ..Policy::default()
        };
        assert!(metrics.authorize(&sa(), &get("/metrics")).allowed);
    }

    #[test]
    fn aggregated_cluster_roles_collect_the_rules_they_select() {
        let mut agg = role("agg", "", json!([]));
        agg["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]});
        let mut part = role("part", "", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
        part["metadata"]["labels"] = json!({"agg": "true"});
        let p = Policy {
            cluster_roles: vec![agg, part],
            cluster_role_bindings: vec![binding("a", "", "ClusterRole", "agg", sa_subject())],
            ..Policy::default()
        };
        assert!(p.authorize(&sa(), &res("get", "", "pods", "", "todo", "p")).allowed);
    }

    #[test]
    fn forbidden_is_worded_as_upstream() {
        let u = sa();
        let e = forbidden(&u, &res("patch", "apps", "deployments", "", "todo", "web"), "");
        assert_eq!(
            e.message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:todo:op\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"todo\""
        );
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
        let status = e.to_status();
        assert_eq!(status["details"], json!({"name": "web", "group": "apps", "kind": "deployments"}));
        let e = forbidden(&u, &res("list", "", "pods", "", "", ""), "");
        assert_eq!(
            e.message,
            "pods is forbidden: User \"system:serviceaccount:todo:op\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
        );
        let e = forbidden(&u, &res("patch", "apps", "deployments", "status", "todo", "web"), "RBAC: x");
        assert!(e.message.starts_with("deployments.apps \"web\" is forbidden: User"), "{}", e.message);
        assert!(e.message.ends_with(
            "cannot patch resource \"deployments/status\" in API group \"apps\" in the namespace \"todo\": RBAC: x"
        ));
        let e =
            forbidden(&UserInfo::anonymous(), &Attributes::NonResource { verb: "get".into(), path: "/api".into() }, "");
        assert_eq!(e.message, "forbidden: User \"system:anonymous\" cannot get path \"/api\"");
    }
}
