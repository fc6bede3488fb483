//! Authentication and RBAC enforced over HTTPS through kube-rs: a ServiceAccount bound by a Role can do exactly
//! what the Role says, denials are worded as kube-apiserver words them and counted, and the review endpoints
//! answer from the same authorizer.

use crate::support::{api_only, start};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SelfSubjectRulesReview,
    SelfSubjectRulesReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubesim::Sim;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), &serde_json::from_value(value).unwrap()).await.unwrap()
}

/// An emulator enforcing RBAC with namespace `todo`, ServiceAccount `todo/op`, a Role `op` (deployments: get,
/// list, watch, patch; configmaps: create; the configmap `lock`: get, update) bound to it, a Deployment `web`;
/// returns the admin's client and the ServiceAccount's.
async fn bound_service_account() -> (Sim, Client, Client) {
    let sim = start(Sim::builder().rbac(true).without_controllers()).await;
    let admin = sim.client();
    create(&Api::<Namespace>::all(admin.clone()), json!({"metadata": {"name": "todo"}})).await;
    create(&Api::<ServiceAccount>::namespaced(admin.clone(), "todo"), json!({"metadata": {"name": "op"}})).await;
    create(
        &Api::<Role>::namespaced(admin.clone(), "todo"),
        json!({"metadata": {"name": "op"}, "rules": [
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"], "verbs": ["get", "update"]}
        ]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), "todo"),
        json!({"metadata": {"name": "op"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "op"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "todo"}]}),
    )
    .await;
    create(
        &Api::<Deployment>::namespaced(admin.clone(), "todo"),
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}),
    )
    .await;
    let token = sim.service_account_token("todo", "op");
    let op = sim.client_with_token(&token).await.unwrap();
    (sim, admin, op)
}

/// The Status of a failed call: (code, reason, message).
fn status<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone(), s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

const OP: &str = "User \"system:serviceaccount:todo:op\"";

#[tokio::test]
async fn a_bound_service_account_can_do_exactly_what_its_role_says() {
    let (sim, _admin, op) = bound_service_account().await;
    let deployments: Api<Deployment> = Api::namespaced(op.clone(), "todo");
    let before = sim.requests();

    // Granted.
    assert_eq!(deployments.list(&ListParams::default()).await.unwrap().items.len(), 1);
    deployments.get("web").await.unwrap();
    let patch = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
    deployments.patch("web", &PatchParams::default(), &patch).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(op.clone(), "todo");
    create(&cms, json!({"metadata": {"name": "lock"}})).await;
    cms.get("lock").await.unwrap();
    // Discovery is every authenticated user's.
    op.list_api_groups().await.unwrap();
    op.apiserver_version().await.unwrap();
    let granted = sim.requests().since(&before);
    assert_eq!(granted.code(403), 0);

    // Denied, worded as kube-apiserver words it.
    let (code, reason, message) = status(deployments.delete("web", &Default::default()).await);
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        format!(
            "deployments.apps \"web\" is forbidden: {OP} cannot delete resource \"deployments\" in API group \"apps\" in the namespace \"todo\""
        )
    );
    let (_, _, message) =
        status(deployments.patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"status": {}}))).await);
    assert_eq!(
        message,
        format!(
            "deployments.apps \"web\" is forbidden: {OP} cannot patch resource \"deployments/status\" in API group \"apps\" in the namespace \"todo\""
        )
    );
    let (_, _, message) = status(Api::<Deployment>::namespaced(op.clone(), "default").list(&Default::default()).await);
    assert_eq!(
        message,
        format!(
            "deployments.apps is forbidden: {OP} cannot list resource \"deployments\" in API group \"apps\" in the namespace \"default\""
        )
    );
    let (_, _, message) = status(Api::<Deployment>::all(op.clone()).list(&Default::default()).await);
    assert_eq!(
        message,
        format!(
            "deployments.apps is forbidden: {OP} cannot list resource \"deployments\" in API group \"apps\" at the cluster scope"
        )
    );
    // resourceNames: `lock` only, and never a plain list.
    create(&Api::<ConfigMap>::namespaced(sim.client(), "todo"), json!({"metadata": {"name": "other"}})).await;
    let (_, _, message) = status(cms.get("other").await);
    assert!(message.starts_with("configmaps \"other\" is forbidden: "), "{message}");
    assert_eq!(status(cms.list(&Default::default()).await).0, 403);
    // A list narrowed to the one granted name by field selector is that name's.
    let one = cms.list(&ListParams::default().fields("metadata.name=lock")).await.unwrap_err();
    assert!(matches!(one, kube::Error::Api(ref s) if s.code == 403), "list is not granted on lock: {one:?}");
    // Secrets were never granted.
    assert_eq!(
        status(Api::<k8s_openapi::api::core::v1::Secret>::namespaced(op, "todo").list(&Default::default()).await).0,
        403
    );

    let denied = sim.requests().since(&before);
    assert_eq!(denied.code(403), 8, "every denial is counted");
    assert_eq!(denied.count("delete", "deployments"), 1);
}

#[tokio::test]
async fn watches_are_authorized_as_watch() {
    let (sim, _admin, op) = bound_service_account().await;
    // The Role grants watch on deployments, not on configmaps.
    use futures::TryStreamExt;
    let deployments: Api<Deployment> = Api::namespaced(op.clone(), "todo");
    let stream = deployments.watch(&Default::default(), "0").await.unwrap();
    drop(stream);
    let cms: Api<ConfigMap> = Api::namespaced(op, "todo");
    let err = match cms.watch(&Default::default(), "0").await {
        Ok(s) => s.try_collect::<Vec<_>>().await.map(|_| ()).unwrap_err(),
        Err(e) => e,
    };
    let (code, _, message) = status::<()>(Err(err));
    assert_eq!(code, 403);
    assert!(message.ends_with("cannot watch resource \"configmaps\" in API group \"\" in the namespace \"todo\""));
    assert_eq!(sim.requests().count("watch", "configmaps"), 1);
}

#[tokio::test]
async fn the_admin_may_do_everything_and_strangers_nothing() {
    let (sim, admin, _op) = bound_service_account().await;
    Api::<Deployment>::namespaced(admin.clone(), "todo").delete("web", &Default::default()).await.unwrap();
    Api::<Namespace>::all(admin).list(&Default::default()).await.unwrap();
    // Raw requests over the plain-http face of the same port: no token is system:anonymous, a wrong one 401.
    let (code, body) = raw_get(&sim, "/api", None).await;
    assert_eq!(code, 403);
    assert!(body.contains(r#""message":"forbidden: User \"system:anonymous\" cannot get path \"/api\"""#), "{body}");
    assert_eq!(raw_get(&sim, "/healthz", None).await.0, 200);
    assert_eq!(raw_get(&sim, "/version", None).await.0, 200);
    assert_eq!(raw_get(&sim, "/api", Some("not-a-token")).await.0, 401);
    assert_eq!(raw_get(&sim, "/metrics", Some(sim.token())).await.0, 200);
    let op = sim.service_account_token("todo", "op");
    assert_eq!(raw_get(&sim, "/metrics", Some(&op)).await.0, 403, "/metrics needs a nonResourceURLs grant");
}

#[tokio::test]
async fn deleting_the_service_account_revokes_its_token() {
    let (_sim, admin, op) = bound_service_account().await;
    Api::<Deployment>::namespaced(op.clone(), "todo").get("web").await.unwrap();
    Api::<ServiceAccount>::namespaced(admin, "todo").delete("op", &Default::default()).await.unwrap();
    assert_eq!(status(Api::<Deployment>::namespaced(op, "todo").get("web").await).0, 401);
}

async fn raw_get(sim: &Sim, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n", sim.addr());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    (text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), text)
}

fn access_review(verb: &str, group: &str, resource: &str, namespace: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn access_and_rules_reviews_answer_from_the_same_authorizer() {
    let (_sim, admin, op) = bound_service_account().await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(op.clone());
    let ask = |verb: &'static str, group: &'static str, resource: &'static str, ns: &'static str| {
        let reviews = reviews.clone();
        async move {
            let r = reviews.create(&PostParams::default(), &access_review(verb, group, resource, ns)).await.unwrap();
            r.status.unwrap()
        }
    };
    let yes = ask("patch", "apps", "deployments", "todo").await;
    assert!(yes.allowed);
    assert_eq!(
        yes.reason.as_deref(),
        Some("RBAC: allowed by RoleBinding \"op/todo\" of Role \"op\" to ServiceAccount \"op/todo\"")
    );
    assert!(!ask("delete", "apps", "deployments", "todo").await.allowed);
    assert!(!ask("get", "", "secrets", "todo").await.allowed);
    let admin_says = Api::<SelfSubjectAccessReview>::all(admin)
        .create(&PostParams::default(), &access_review("delete", "", "nodes", ""))
        .await
        .unwrap();
    assert!(admin_says.status.unwrap().allowed);

    let rules = Api::<SelfSubjectRulesReview>::all(op)
        .create(
            &PostParams::default(),
            &SelfSubjectRulesReview {
                spec: SelfSubjectRulesReviewSpec { namespace: Some("todo".into()) },
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!rules.incomplete);
    let deployments =
        rules.resource_rules.iter().find(|r| r.resources.as_deref() == Some(&["deployments".to_string()][..])).unwrap();
    assert_eq!(deployments.verbs, ["get", "list", "watch", "patch"]);
    assert!(rules.non_resource_rules.iter().any(|r| r.non_resource_urls.as_ref().unwrap().contains(&"/api".into())));
}

#[tokio::test]
async fn token_requests_issue_working_service_account_tokens() {
    let (sim, admin, op) = bound_service_account().await;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "todo");
    let req = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(600), ..Default::default() },
        ..Default::default()
    };
    let issued = sas.create_token_request("op", &PostParams::default(), &req).await.unwrap();
    assert_eq!(issued.spec.audiences, ["https://kubernetes.default.svc.cluster.local"]);
    let token = issued.status.unwrap().token;
    let client = sim.client_with_token(&token).await.unwrap();
    Api::<Deployment>::namespaced(client, "todo").get("web").await.unwrap();
    // The ServiceAccount itself may not mint tokens: serviceaccounts/token was never granted.
    let (code, _, message) = status(
        Api::<ServiceAccount>::namespaced(op, "todo").create_token_request("op", &PostParams::default(), &req).await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        format!(
            "serviceaccounts \"op\" is forbidden: {OP} cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"todo\""
        )
    );
    assert_eq!(status(sas.create_token_request("nobody", &PostParams::default(), &req).await).0, 404);
}

#[tokio::test]
async fn without_rbac_every_authenticated_user_is_allowed() {
    let sim = api_only().await;
    let admin = sim.client();
    create(&Api::<ServiceAccount>::namespaced(admin, "default"), json!({"metadata": {"name": "any"}})).await;
    let any = sim.client_with_token(&sim.service_account_token("default", "any")).await.unwrap();
    Api::<ConfigMap>::all(any.clone()).list(&Default::default()).await.unwrap();
    let r = Api::<SelfSubjectAccessReview>::all(any)
        .create(&PostParams::default(), &access_review("delete", "", "nodes", ""))
        .await
        .unwrap();
    assert!(r.status.unwrap().allowed);
}
