//! `kubectl apply` against the contract's admission policy: with `Deny` each refused sample
//! (`tests/samples_refused/`) is refused at once with the contract's reason and message; with `Warn` it is stored,
//! kubectl prints the warnings, and the operator marks it Invalid with the same words.
//!
//! The cluster is the only thing that changes: kubesim by default, the real control plane with `TEST_BACKEND=real`
//! (driven with its own kubectl). Each test works in its own namespace with its own binding (matched by the
//! namespace's name label), so tests could share one cluster; the policy is the generated one, identical to
//! `deploy/admission-policy.yaml`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::await_condition;
use microservice_core::admission_policy::{POLICY_NAME, binding, policy};
use microservice_core::contract::{self, Violation};
use microservice_core::crd::{ConditionStatus, ConditionType, Microservice};
use microservice_core::profile::PlatformProfile;
use microservice_core::wording::headline;
use microservice_operator::controller::{self, Config};
use microservice_operator::metrics::Metrics;
use serde_json::{Value, json};

/// Bounds a wait that should end in milliseconds; only a broken build reaches it.
const DEADLINE: Duration = Duration::from_secs(60);

struct Cluster {
    kubeconfig: PathBuf,
    dir: PathBuf,
    kubectl: PathBuf,
    /// Held so the cluster lives as long as the test.
    _backend: microservice_testkit::Cluster,
}

impl Cluster {
    async fn start(test: &str) -> Option<Cluster> {
        if std::process::Command::new("kubectl").arg("version").arg("--client").output().is_err() {
            eprintln!("SKIPPED {test}: kubectl is not on PATH");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("admission-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let backend = microservice_testkit::Cluster::start(microservice_testkit::ClusterOptions::default()).await;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, backend.kubeconfig_yaml()).expect("write the kubeconfig");
        let cluster = Cluster { kubeconfig, dir, kubectl: backend.kubectl(), _backend: backend };
        cluster.ok(&[
            "apply",
            "--server-side",
            "-f",
            &crate::support::repo_root().join("deploy/crd.yaml").display().to_string(),
        ]);
        cluster.ok(&[
            "wait",
            "--for",
            "condition=Established",
            "crd/microservices.platform.example.com",
            "--timeout",
            "60s",
        ]);
        Some(cluster)
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        std::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn apply_json(&self, name: &str, object: &Value) {
        let path = self.dir.join(format!("{name}.json"));
        std::fs::write(&path, object.to_string()).expect("write a manifest");
        self.ok(&["apply", "-f", &path.display().to_string()]);
    }

    /// A fresh namespace, the generated policy, and a binding with `actions` for that namespace only.
    fn namespace(&self, test: &str, actions: &[&str]) -> (String, String) {
        let namespace = format!("{test}-{}", std::process::id());
        self.ok(&["create", "namespace", &namespace]);
        self.apply_json("policy", &policy(&PlatformProfile::default()));
        let mut bound = binding();
        let binding_name = format!("{namespace}.platform.example.com");
        bound["metadata"]["name"] = json!(binding_name);
        bound["spec"]["validationActions"] = json!(actions);
        bound["spec"]["matchResources"] =
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}});
        self.apply_json(&binding_name, &bound);
        (namespace, binding_name)
    }

    async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).expect("read the kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("a client config");
        kube::Client::try_from(config).expect("a client")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every refused sample with what the contract says about it.
fn samples() -> Vec<(PathBuf, String, Vec<Violation>)> {
    let dir = crate::support::repo_root().join("crates/operator/tests/samples_refused");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("the samples").filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let ms: Microservice = serde_saphyr::from_str(&std::fs::read_to_string(&path).expect("a sample"))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = ms.metadata.name.clone().unwrap_or_default();
            let violations = contract::validate_object(&ms, &PlatformProfile::default())
                .expect_err("a refused sample breaks the contract");
            (path, name, violations)
        })
        .collect()
}

fn headline_of(v: &Violation) -> String {
    headline(v.reason.as_str(), v.field, &v.message)
}

fn file(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_each_refused_sample_is_refused_with_the_contracts_words() {
    let Some(cluster) = Cluster::start("deny").await else { return };
    let (namespace, binding_name) = cluster.namespace("deny", &["Deny"]);
    for (path, name, violations) in samples() {
        let out = cluster.kubectl(&["apply", "-n", &namespace, "-f", &file(&path)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{} was admitted", path.display());
        // kubectl prints a 422 from its causes: `The microservices "x" is invalid: : ValidatingAdmissionPolicy …`.
        let expected = format!(
            "\"{name}\" is invalid: : ValidatingAdmissionPolicy '{POLICY_NAME}' with binding '{binding_name}' denied \
             request: {}",
            headline_of(&violations[0])
        );
        assert!(stderr.contains(&expected), "{}:\n{stderr}\nexpected: {expected}", path.display());
        let get = cluster.kubectl(&["get", "microservice", &name, "-n", &namespace]);
        assert!(!get.status.success(), "nothing was stored for {name}");
    }
    // What the contract accepts passes.
    let mut sample = serde_json::to_value(crate::support::sample_microservice()).expect("the sample serializes");
    sample["metadata"] = json!({"name": "todo-api", "namespace": namespace});
    cluster.apply_json("todo-api", &sample);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_warn_a_refused_sample_is_stored_with_warnings_and_the_operator_marks_it_invalid() {
    let Some(cluster) = Cluster::start("warn").await else { return };
    let (namespace, binding_name) = cluster.namespace("warn", &["Warn"]);
    let samples = samples();
    for (path, _, violations) in &samples {
        let out = cluster.kubectl(&["apply", "-n", &namespace, "-f", &file(path)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", path.display());
        for v in violations {
            let warning = format!(
                "Warning: Validation failed for ValidatingAdmissionPolicy '{POLICY_NAME}' with binding \
                 '{binding_name}': {}",
                headline_of(v)
            );
            assert!(stderr.contains(&warning), "{}:\n{stderr}\nexpected: {warning}", path.display());
        }
    }

    // The operator, the source of truth, says the same in status.
    let client = cluster.client().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = Config { namespace: Some(namespace.clone()), ..Config::default() };
    let operator = tokio::spawn(controller::run(client.clone(), config, Arc::new(Metrics::new()), async move {
        let _ = stopped.await;
    }));
    let api: Api<Microservice> = Api::namespaced(client, &namespace);
    for (_, name, violations) in &samples {
        let reason = violations[0].reason.as_str();
        let refused = await_condition(api.clone(), name, move |ms: Option<&Microservice>| {
            ms.and_then(|ms| ms.status.as_ref()).is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == ConditionType::Accepted && c.status == ConditionStatus::False && c.reason == reason
                })
            })
        });
        let ms = tokio::time::timeout(DEADLINE, refused).await.expect("marked Invalid in time").expect("a watch");
        let message = ms
            .and_then(|ms| ms.status)
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == ConditionType::Accepted))
            .map(|c| c.message)
            .unwrap_or_default();
        assert_eq!(message, contract::summarize(violations), "{name}");
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(DEADLINE, operator).await;
}
