//! Authentication: bearer tokens → users, as kube-apiserver's token authenticators do it.
//!
//! - The admin token (the kubeconfig's) is `system:admin` in `system:masters`.
//! - ServiceAccount tokens (issued by [`Tokens::issue`], the TokenRequest subresource or
//!   `Sim::service_account_token`) are `system:serviceaccount:NS:NAME`; like upstream's bound tokens they stop
//!   working when the ServiceAccount is deleted (or recreated: the uid is checked).
//! - No token at all is `system:anonymous` in `system:unauthenticated` (anonymous auth, upstream's default).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::cluster::Cluster;

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

pub const MASTERS_GROUP: &str = "system:masters";
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

impl UserInfo {
    pub fn admin() -> UserInfo {
        UserInfo { name: "system:admin".into(), groups: vec![MASTERS_GROUP.into(), AUTHENTICATED_GROUP.into()] }
    }

    pub fn anonymous() -> UserInfo {
        UserInfo { name: "system:anonymous".into(), groups: vec![UNAUTHENTICATED_GROUP.into()] }
    }

    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        UserInfo {
            name: service_account_username(namespace, name),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED_GROUP.into(),
            ],
        }
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    pub fn is_anonymous(&self) -> bool {
        self.in_group(UNAUTHENTICATED_GROUP)
    }
}

pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    /// The ServiceAccount's uid when the token was issued (None: it did not exist yet).
    uid: Option<String>,
}

/// The tokens the server accepts; cheap to clone (shared by the server and the `Sim` handle).
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    admin: Option<Arc<str>>,
    issued: Arc<RwLock<HashMap<String, Issued>>>,
}

/// What a request's credentials say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authn {
    User(UserInfo),
    /// No credentials at all.
    Anonymous,
    /// Credentials that name nobody: 401.
    Invalid,
}

impl Tokens {
    /// `admin`: the token of `system:admin` (None: every request is the admin, no authentication).
    pub fn new(admin: Option<String>) -> Tokens {
        Tokens { admin: admin.map(Arc::from), issued: Arc::default() }
    }

    pub fn admin_token(&self) -> Option<&str> {
        self.admin.as_deref()
    }

    /// A new token for the ServiceAccount NS/NAME. It authenticates while that ServiceAccount exists (one
    /// created later counts when none existed at issue time).
    pub fn issue(&self, cluster: &Cluster, namespace: &str, name: &str) -> String {
        let token = format!("kubesim-sa.{}", uuid::Uuid::new_v4().simple());
        let uid = service_account_uid(cluster, namespace, name);
        let issued = Issued { namespace: namespace.into(), name: name.into(), uid };
        self.issued.write().unwrap_or_else(|p| p.into_inner()).insert(token.clone(), issued);
        token
    }

    /// The user behind an `Authorization` header value (None: no header).
    pub fn authenticate(&self, cluster: &Cluster, authorization: Option<&str>) -> Authn {
        let Some(admin) = &self.admin else { return Authn::User(UserInfo::admin()) };
        let Some(header) = authorization else { return Authn::Anonymous };
        let Some(token) = header.strip_prefix("Bearer ").map(str::trim) else { return Authn::Invalid };
        if token == admin.as_ref() {
            return Authn::User(UserInfo::admin());
        }
        let issued = self.issued.read().unwrap_or_else(|p| p.into_inner()).get(token).cloned();
        let Some(sa) = issued else { return Authn::Invalid };
        match (service_account_uid(cluster, &sa.namespace, &sa.name), &sa.uid) {
            (None, _) => Authn::Invalid,
            (Some(now), Some(then)) if &now != then => Authn::Invalid,
            _ => Authn::User(UserInfo::service_account(&sa.namespace, &sa.name)),
        }
    }
}

fn service_account_uid(cluster: &Cluster, namespace: &str, name: &str) -> Option<String> {
    let rt = cluster.resolve("", "v1", "serviceaccounts").ok()?;
    let sa = cluster.get(&rt, Some(namespace), name).ok()?;
    sa.pointer("/metadata/uid").and_then(Value::as_str).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::WriteOptions;
    use serde_json::json;

    fn create_sa(cluster: &Cluster, ns: &str, name: &str) {
        let rt = cluster.resolve("", "v1", "serviceaccounts").unwrap();
        cluster.create(&rt, Some(ns), json!({"metadata": {"name": name}}), &WriteOptions::default()).unwrap();
    }

    #[test]
    fn tokens_name_their_users() {
        let cluster = Cluster::new();
        let tokens = Tokens::new(Some("admin-token".into()));
        assert_eq!(tokens.authenticate(&cluster, Some("Bearer admin-token")), Authn::User(UserInfo::admin()));
        assert_eq!(tokens.authenticate(&cluster, None), Authn::Anonymous);
        assert_eq!(tokens.authenticate(&cluster, Some("Bearer nope")), Authn::Invalid);
        assert_eq!(tokens.authenticate(&cluster, Some("Basic YTpi")), Authn::Invalid);

        create_sa(&cluster, "default", "op");
        let t = tokens.issue(&cluster, "default", "op");
        let Authn::User(u) = tokens.authenticate(&cluster, Some(&format!("Bearer {t}"))) else { panic!() };
        assert_eq!(u.name, "system:serviceaccount:default:op");
        assert_eq!(
            u.groups,
            ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"].map(String::from)
        );
    }

    #[test]
    fn service_account_tokens_die_with_their_account() {
        let cluster = Cluster::new();
        let tokens = Tokens::new(Some("admin".into()));
        // Issued before the account exists: valid once it does.
        let early = format!("Bearer {}", tokens.issue(&cluster, "default", "op"));
        assert_eq!(tokens.authenticate(&cluster, Some(&early)), Authn::Invalid);
        create_sa(&cluster, "default", "op");
        assert!(matches!(tokens.authenticate(&cluster, Some(&early)), Authn::User(_)));
        let bound = format!("Bearer {}", tokens.issue(&cluster, "default", "op"));
        let rt = cluster.resolve("", "v1", "serviceaccounts").unwrap();
        cluster.delete(&rt, Some("default"), "op", &Default::default()).unwrap();
        create_sa(&cluster, "default", "op");
        assert_eq!(tokens.authenticate(&cluster, Some(&bound)), Authn::Invalid, "bound to the old uid");
    }
}
