//! autoscaling/v2 HorizontalPodAutoscalers: discovered, stored with upstream's defaults, validated with its
//! messages, applied server-side, and collected with their owner.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Discovery};
use serde_json::{Value, json};

use crate::support::{sim, until};

fn hpa(name: &str, spec: Value) -> HorizontalPodAutoscaler {
    serde_json::from_value(json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

#[tokio::test]
async fn hpas_are_discovered_defaulted_and_validated() {
    let sim = sim().await;
    let discovery = Discovery::new(sim.client()).run().await.unwrap();
    let found = discovery.groups().flat_map(|g| g.recommended_resources()).any(|(r, _): (ApiResource, _)| {
        r.group == "autoscaling" && r.version == "v2" && r.plural == "horizontalpodautoscalers"
    });
    assert!(found, "autoscaling/v2 horizontalpodautoscalers is discovered");

    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(sim.client(), "default");
    let created = api
        .create(&PostParams::default(), &hpa("web", json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 4})))
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    assert_eq!(spec.min_replicas, Some(1), "minReplicas defaults to 1");
    let metric = spec.metrics.unwrap().remove(0);
    assert_eq!(metric.type_, "Resource");
    let resource = metric.resource.unwrap();
    assert_eq!((resource.name.as_str(), resource.target.average_utilization), ("cpu", Some(80)));
    assert_eq!(created.metadata.generation, Some(1));

    let err = api
        .create(
            &PostParams::default(),
            &hpa(
                "bad",
                json!({"scaleTargetRef": {"kind": "Deployment", "name": ""}, "minReplicas": 3, "maxReplicas": 2}),
            ),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!(status.code, 422, "{status:?}");
    for part in [
        "spec.scaleTargetRef.name: Required value",
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
    ] {
        assert!(status.message.contains(part), "{part} in {}", status.message);
    }

    // Server-side apply: the same HPA applied again changes nothing; a new bound is taken.
    let params = PatchParams::apply("test").force();
    let applied = hpa(
        "web",
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 6}),
    );
    let patched = api.patch("web", &params, &Patch::Apply(&applied)).await.unwrap();
    let spec = patched.spec.unwrap();
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 6));
    assert_eq!(patched.metadata.generation, Some(2));
}

#[tokio::test]
async fn an_hpa_is_collected_with_its_owner() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let owner = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap())
        .await
        .unwrap();
    let api: Api<HorizontalPodAutoscaler> = Api::namespaced(sim.client(), "default");
    let mut owned = hpa("web", json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 2}));
    owned.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    api.create(&PostParams::default(), &owned).await.unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    until("hpa collected", || async { api.get_opt("web").await.unwrap() }, Option::is_none).await;
}
