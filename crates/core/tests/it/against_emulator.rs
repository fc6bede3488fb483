//! The CRD, the desired children and the status as the emulator stores them over HTTP: what the server stores
//! (with its defaults) still contains everything the operator wants, so a converged Microservice needs no write.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use microservice_core::contract::validate;
use microservice_core::crd::{Microservice, MicroserviceSpec};
use microservice_core::desired::{MANAGER, desired_deployment, desired_service};
use microservice_core::drift::differs;
use microservice_core::profile::PlatformProfile;
use microservice_core::status::compute_status;
use serde_json::json;

#[tokio::test]
async fn stored_children_contain_the_desired_state_and_status_round_trips() {
    let (_sim, client) = crate::support::cluster_with_crd().await;
    let profile = PlatformProfile::default();
    let microservices: Api<Microservice> = Api::namespaced(client.clone(), "todo");
    let sample = crate::support::sample_microservice();
    let request = Microservice::new("todo-api", sample.spec.clone());
    let created = microservices.create(&PostParams::default(), &request).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    assert_eq!(
        created.spec,
        MicroserviceSpec {
            image: "ghcr.io/example/todo-api:1.4.2".into(),
            port: 8080,
            replicas: Some(2),
            autoscaling: None
        }
    );

    let contract = validate(&created.spec, &profile).unwrap();
    let deployment = desired_deployment(&created, &contract, &profile).unwrap();
    let service = desired_service(&created, &profile).unwrap();
    let apply = PatchParams::apply(MANAGER).force();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "todo");
    let services: Api<Service> = Api::namespaced(client.clone(), "todo");
    let live_deployment = deployments.patch("todo-api", &apply, &Patch::Apply(&deployment)).await.unwrap();
    let live_service = services.patch("todo-api", &apply, &Patch::Apply(&service)).await.unwrap();

    let diff = differs(&serde_json::to_value(&deployment).unwrap(), &serde_json::to_value(&live_deployment).unwrap());
    assert_eq!(diff, Vec::<String>::new(), "the stored Deployment lacks or changed managed fields");
    let diff = differs(&serde_json::to_value(&service).unwrap(), &serde_json::to_value(&live_service).unwrap());
    assert_eq!(diff, Vec::<String>::new(), "the stored Service lacks or changed managed fields");
    assert!(live_service.spec.and_then(|s| s.cluster_ip).is_some(), "the server allocated a ClusterIP");

    // The status the operator computes is accepted by the schema and reads back unchanged.
    let now = Time(Timestamp::now());
    let status = compute_status(&created, &Ok(contract), Some(&live_deployment), None, &[], &now);
    let patch = json!({ "status": status });
    let patched = microservices.patch_status("todo-api", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(patched.status.as_ref(), Some(&status));
    let read = microservices.get("todo-api").await.unwrap();
    assert_eq!(read.status, Some(status));
    assert_eq!(read.metadata.generation, Some(1), "a status write does not bump the generation");
}
