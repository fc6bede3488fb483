//! `spec.autoscaling` end to end, on kubesim and on a real control plane (neither runs an HPA controller, so the
//! test scales the Deployment itself, as `kubectl scale` or an HPA would): the operator creates the HPA, leaves the
//! Deployment's replicas to others while autoscaled, and takes them back when autoscaling is turned off.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use microservice_core::crd::{Autoscaling, Microservice};
use microservice_testkit::ClusterOptions;
use serde_json::json;

use crate::support::harness::*;
use crate::support::ready_for_current_generation;

fn ready_at(ms: &Microservice, summary: &str) -> bool {
    ready_for_current_generation(ms) && ms.status.as_ref().and_then(|s| s.replicas_summary.as_deref()) == Some(summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autoscaled_microservice_leaves_replicas_to_its_hpa_and_takes_them_back() {
    let h = Harness::start(ClusterOptions::default()).await;
    let _op = h.operator();
    let mut ms = microservice("todo-api", IMAGE_V1);
    ms.spec.autoscaling =
        Some(Autoscaling { min_replicas: Some(1), max_replicas: 5, target_cpu_utilization_percentage: Some(70) });
    h.microservices().create(&PostParams::default(), &ms).await.unwrap();
    let ready = h.wait_ready("todo-api").await;

    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(h.client.clone(), NS);
    let hpa =
        h.eventually("the HorizontalPodAutoscaler", || async { hpas.get_opt("todo-api").await.ok().flatten() }).await;
    assert!(
        hpa.owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == ready.metadata.uid.as_ref()),
        "the HPA is controlled by its Microservice: {:?}",
        hpa.owner_references()
    );
    let spec = hpa.spec.clone().unwrap();
    assert_eq!((spec.scale_target_ref.kind.as_str(), spec.scale_target_ref.name.as_str()), ("Deployment", "todo-api"));
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(1), 5));
    let target = spec.metrics.unwrap().remove(0).resource.unwrap();
    assert_eq!((target.name.as_str(), target.target.average_utilization), ("cpu", Some(70)));

    // `kubectl scale --replicas 3`: through the scale subresource, under kubectl's field manager.
    let scale = PatchParams { field_manager: Some("kubectl".into()), ..PatchParams::default() };
    h.deployments().patch_scale("todo-api", &scale, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    // Ready at 3/3 is a status the operator computed after the scale, so it reconciled and left the count alone.
    h.wait_for("todo-api", "Ready at 3/3", |ms| ready_at(ms, "3/3")).await;
    let replicas = h.deployments().get("todo-api").await.unwrap().spec.and_then(|s| s.replicas);
    assert_eq!(replicas, Some(3), "the scale is not reverted");

    // Both set: the CRD refuses it before the operator sees it.
    let both = json!({"spec": {"replicas": 2}});
    let err = h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&both)).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422
            && s.message.contains("spec.replicas and spec.autoscaling are exclusive")),
        "{err}"
    );

    // Autoscaling off: the HPA goes, and the spec's count is applied again (the operator takes the field back).
    let off = json!({"spec": {"replicas": 2, "autoscaling": null}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&off)).await.unwrap();
    h.eventually("the HPA deleted", || async { hpas.get_opt("todo-api").await.ok().filter(Option::is_none) }).await;
    h.wait_for("todo-api", "Ready at 2/2 for generation 2", |ms| ready_at(ms, "2/2")).await;
    let replicas = h.deployments().get("todo-api").await.unwrap().spec.and_then(|s| s.replicas);
    assert_eq!(replicas, Some(2));

    // On again: the operator releases the count it owned without the server resetting it to 1 pod.
    let on = json!({"spec": {"replicas": null, "autoscaling": {"minReplicas": 1, "maxReplicas": 5}}});
    h.microservices().patch("todo-api", &PatchParams::default(), &Patch::Merge(&on)).await.unwrap();
    h.eventually("the HPA again", || async { hpas.get_opt("todo-api").await.ok().flatten() }).await;
    let ms = h.wait_for("todo-api", "Ready at 2/2 for generation 3", |ms| ready_at(ms, "2/2")).await;
    assert_eq!(ms.metadata.generation, Some(3));
    let live = h.deployments().get("todo-api").await.unwrap();
    assert_eq!(live.spec.as_ref().and_then(|s| s.replicas), Some(2), "the count is kept, not reset");
    let operator_owns_replicas = live.metadata.managed_fields.iter().flatten().any(|f| {
        f.manager.as_deref() == Some("microservice-operator")
            && f.fields_v1.as_ref().is_some_and(|v| v.0.pointer("/f:spec/f:replicas").is_some())
    });
    assert!(!operator_owns_replicas, "the operator no longer owns spec.replicas: {:?}", live.metadata.managed_fields);
}
