//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kubesim::Sim;
use microservice_core::crd::Microservice;
use microservice_testkit::Cluster;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The sample CR as the API server would hand it to the operator right after `kubectl apply`.
pub fn sample_microservice() -> Microservice {
    let path = repo_root().join("deploy/samples/todo-api.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut ms: Microservice = serde_saphyr::from_str(&text).unwrap();
    ms.metadata.uid = Some("6f1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d".into());
    ms.metadata.generation = Some(1);
    ms
}

/// Compares `actual` with a checked-in file; `UPDATE_GOLDEN=1` rewrites the file instead.
pub fn assert_golden(relative: &str, actual: &str, regenerate: &str) {
    let path = repo_root().join(relative);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{relative} differs from what the code generates.\nIf the change is intended, regenerate it with: \
         {regenerate}\n--- expected ({relative})\n{expected}\n--- actual\n{actual}"
    );
}

/// The test cluster: kubesim without controllers, the committed CRD (`deploy/crd.yaml`) installed and Established,
/// and namespace `todo`.
pub async fn cluster_with_crd() -> (Cluster, Client) {
    let sim = Sim::builder().without_controllers().start().await.unwrap();
    let cluster = Cluster::from_sim(sim);
    let text = std::fs::read_to_string(repo_root().join("deploy/crd.yaml")).unwrap();
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
    cluster.install(&crd, "todo", Duration::from_secs(10)).await;
    let client = cluster.client();
    (cluster, client)
}
