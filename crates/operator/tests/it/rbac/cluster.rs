//! A cluster that enforces RBAC (kubesim with authorization on, or the real kube-apiserver with `TEST_BACKEND=real`),
//! the bundle's namespaces and CRD installed by the admin, and the operator's ServiceAccount bound by the Roles of
//! `deploy/rbac.yaml` (or a variant with one verb removed). The operator runs in-process with a client that
//! authenticates as that ServiceAccount (on the real server, with a token from the TokenRequest API).

use super::scenarios::Scenario;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::{Client, ResourceExt};
use microservice_operator::cli::manifests::bundle_objects;
use microservice_operator::controller::{self, Config, Stopped};
use microservice_operator::health::Health;
use microservice_operator::leader::Leadership;
use microservice_operator::metrics::Metrics;
use microservice_operator::settings::Election;
use microservice_testkit::ClusterOptions;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const WATCHED_NS: &str = "todo";
pub const OPERATOR_NS: &str = "microservice-operator";
pub const SERVICE_ACCOUNT: &str = "microservice-operator";
/// The Lease of `--leader-election-id` (default microservice-operator), in the operator's namespace.
pub const LEASE_NAME: &str = "microservice-operator";
/// This replica's holderIdentity (the pod name, in the cluster).
pub const IDENTITY: &str = "microservice-operator-rbac-suite";
/// Installing the bundle's namespaces and CRD; these never depend on the operator's permissions.
const SETUP_DEADLINE: Duration = Duration::from_secs(60);

/// The shipped objects of one kind, typed.
pub fn shipped<K: DeserializeOwned>(kind: &str) -> Vec<K> {
    let objects = bundle_objects().expect("the bundle parses");
    objects.into_iter().filter(|o| o["kind"] == kind).map(|o| serde_json::from_value(o).expect(kind)).collect()
}

pub struct Cluster {
    pub backend: microservice_testkit::Cluster,
    /// system:admin (system:masters): the test's own view, never limited by RBAC.
    pub admin: Client,
    /// The operator's ServiceAccount.
    pub operator_client: Client,
}

/// One running operator replica; dropping it aborts it.
pub struct Operator {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    /// Why the operator could not run at all (e.g. it could not join the leader election).
    pub failure: Arc<Mutex<Option<String>>>,
}

impl Operator {
    /// Stops gracefully: in-flight reconciles finish and the Lease is released.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(SETUP_DEADLINE, &mut self.task).await;
    }

    pub fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cluster {
    /// Starts the emulator with RBAC enforced and installs the bundle's namespaces, CRD, ServiceAccount and
    /// RoleBindings, with `roles` in place of the shipped Roles.
    pub async fn start(roles: &[Role]) -> Cluster {
        Self::start_on(roles, ClusterOptions { rbac: true, ..ClusterOptions::default() }).await
    }

    /// As [`Cluster::start`], on the server `scenario` needs.
    pub async fn start_for(roles: &[Role], scenario: Scenario) -> Cluster {
        let options = ClusterOptions {
            rbac: true,
            without_streaming_lists: scenario.without_streaming_lists(),
            ..ClusterOptions::default()
        };
        Self::start_on(roles, options).await
    }

    async fn start_on(roles: &[Role], options: ClusterOptions) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let backend = microservice_testkit::Cluster::start(options).await;
        let admin = backend.client();

        // The watched namespace is created apart from the bundle, as the README's install says.
        let watched: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": WATCHED_NS}})).expect("a Namespace");
        create(Api::all(admin.clone()), &watched).await;
        for namespace in shipped::<Namespace>("Namespace") {
            create(Api::all(admin.clone()), &namespace).await;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
        for crd in shipped::<CustomResourceDefinition>("CustomResourceDefinition") {
            create(crds.clone(), &crd).await;
            let name = crd.name_any();
            let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
            tokio::time::timeout(SETUP_DEADLINE, established).await.expect("CRD established in time").expect("watch");
        }
        for sa in shipped::<ServiceAccount>("ServiceAccount") {
            create(Api::namespaced(admin.clone(), &sa.namespace().unwrap_or_default()), &sa).await;
        }
        for role in roles {
            create(Api::namespaced(admin.clone(), &role.namespace().unwrap_or_default()), role).await;
        }
        for binding in shipped::<RoleBinding>("RoleBinding") {
            create(Api::namespaced(admin.clone(), &binding.namespace().unwrap_or_default()), &binding).await;
        }

        let token = backend.service_account_token(OPERATOR_NS, SERVICE_ACCOUNT).await.expect("a ServiceAccount token");
        let operator_client = backend.client_with_token(&token).await.expect("a client for the ServiceAccount");
        Cluster { backend, admin, operator_client }
    }

    /// Runs the operator as the bundle's Deployment runs it (`run --namespace todo`, leader election on the Lease
    /// in its own namespace), in-process, authenticated as its ServiceAccount.
    pub fn operator(&self) -> Operator {
        let client = self.operator_client.clone();
        let config = Config { namespace: Some(WATCHED_NS.to_string()), ..Config::default() };
        let election = Election {
            namespace: Some(OPERATOR_NS.to_string()),
            lease_name: LEASE_NAME.to_string(),
            identity: IDENTITY.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let failure = Arc::new(Mutex::new(None));
        let failed = failure.clone();
        let task = tokio::spawn(async move {
            let metrics = Arc::new(Metrics::new());
            let health = Arc::new(Health::new());
            let leadership = match Leadership::join(client.clone(), &election, metrics.clone(), health.clone()).await {
                Ok(leadership) => leadership,
                Err(e) => {
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    return;
                }
            };
            let shutdown = async move {
                let _ = stopped.await;
            };
            let stopped =
                controller::run_elected(client, config, metrics, health, leadership.subscribe(), shutdown).await;
            if !matches!(stopped, Stopped::Shutdown) {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some("lost the leadership".to_string());
            }
            leadership.release(SETUP_DEADLINE).await;
        });
        Operator { stop: Some(stop), task, failure }
    }

    /// Requests the API server refused with 403 so far.
    pub fn forbidden(&self) -> u64 {
        self.backend.requests().code(403)
    }
}

async fn create<K>(api: Api<K>, object: &K)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let started = Instant::now();
    api.create(&PostParams::default(), object).await.unwrap_or_else(|e| {
        panic!("admin could not create {}: {e} (after {:?})", object.name_any(), started.elapsed())
    });
}

/// The shipped Roles with one verb of one rule removed (the rule goes when it has no verb left).
pub fn without_verb(roles: &[Role], role: usize, rule: usize, verb: &str) -> Vec<Role> {
    let mut roles = roles.to_vec();
    let rules = roles[role].rules.as_mut().expect("rules");
    rules[rule].verbs.retain(|v| v != verb);
    if rules[rule].verbs.is_empty() {
        rules.remove(rule);
    }
    roles
}

/// `resource[/subresource].group` as RBAC names it, for messages.
pub fn describe_rule(rule: &k8s_openapi::api::rbac::v1::PolicyRule) -> String {
    let groups = rule.api_groups.clone().unwrap_or_default();
    let resources = rule.resources.clone().unwrap_or_default();
    let names = rule.resource_names.clone().unwrap_or_default();
    let group = groups.first().map(String::as_str).unwrap_or_default();
    let resource = resources.join(",");
    let mut out = if group.is_empty() { resource } else { format!("{resource}.{group}") };
    if !names.is_empty() {
        out.push_str(&format!(" {names:?}"));
    }
    out
}
