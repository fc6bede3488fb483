//! The patch formats and server-side apply end to end: kube-rs clients against a running emulator, so the
//! wiring in the write path (status restored, defaults, resourceVersion, managedFields) is exercised too.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::Sim;

async fn sim() -> Sim {
    Sim::builder().without_controllers().start().await.unwrap()
}

fn deployment(containers: Value, replicas: Option<u32>) -> Value {
    let mut d = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
        "spec":{"selector":{"matchLabels":{"app":"web"}},
            "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":containers}}}});
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn managers(d: &Deployment) -> Vec<(String, String)> {
    d.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| (e.manager.clone().unwrap_or_default(), e.operation.clone().unwrap_or_default()))
        .collect()
}

fn apply_params(manager: &str) -> PatchParams {
    PatchParams::apply(manager)
}

#[tokio::test]
async fn two_field_managers_apply_a_deployment() {
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let alpha = deployment(json!([{"name":"app","image":"app:1","env":[{"name":"A","value":"1"}]}]), Some(2));
    let created = api.patch("web", &apply_params("alpha"), &Patch::Apply(&alpha)).await.unwrap();
    assert_eq!(created.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(managers(&created), [("alpha".to_string(), "Apply".to_string())]);

    // beta adds a sidecar and an env var to alpha's container: list maps merge by name.
    let beta = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
        "spec":{"template":{"spec":{"containers":[
            {"name":"app","env":[{"name":"B","value":"2"}]},{"name":"sidecar","image":"proxy:1"}]}}}});
    let merged = api.patch("web", &apply_params("beta"), &Patch::Apply(&beta)).await.unwrap();
    let pod = merged.spec.unwrap().template.spec.unwrap();
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "sidecar"]);
    let env: Vec<&str> = pod.containers[0].env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert_eq!(env, ["A", "B"]);

    // beta changing alpha's replicas conflicts, with upstream's message; force takes the field.
    // (beta applies its whole intent each time: what it leaves out, it gives up.)
    let mut replicas = beta.clone();
    replicas["spec"]["replicas"] = json!(5);
    let err = api_error(api.patch("web", &apply_params("beta"), &Patch::Apply(&replicas)).await);
    assert_eq!(err.code, 409);
    assert_eq!(err.message, "Apply failed with 1 conflict: conflict with \"alpha\": .spec.replicas");
    let forced = api.patch("web", &apply_params("beta").force(), &Patch::Apply(&replicas)).await.unwrap();
    assert_eq!(forced.spec.unwrap().replicas, Some(5));

    // alpha stops applying env A and replicas: A goes, replicas (now beta's) stays.
    let alpha2 = deployment(json!([{"name":"app","image":"app:1"}]), None);
    let out = api.patch("web", &apply_params("alpha"), &Patch::Apply(&alpha2)).await.unwrap();
    let spec = out.spec.unwrap();
    assert_eq!(spec.replicas, Some(5));
    let pod = spec.template.spec.unwrap();
    let env: Vec<&str> = pod.containers[0].env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert_eq!(env, ["B"]);
    assert_eq!(pod.containers.len(), 2);

    // beta giving up its sidecar removes it: nobody else owns it.
    let out = api.patch("web", &apply_params("beta").force(), &Patch::Apply(&beta)).await.unwrap();
    let pod = out.spec.unwrap().template.spec.unwrap();
    let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "sidecar"]);
    let without_sidecar = json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
        "spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}});
    let out = api.patch("web", &apply_params("beta"), &Patch::Apply(&without_sidecar)).await.unwrap();
    let spec = out.spec.unwrap();
    let names: Vec<&str> = spec.template.spec.as_ref().unwrap().containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app"]);
    // ... and replicas, which beta owned alone since alpha gave it up, goes back to the default.
    assert_eq!(spec.replicas, Some(1));
}

#[tokio::test]
async fn a_repeated_apply_keeps_the_resource_version() {
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let body = deployment(json!([{"name":"app","image":"app:1","ports":[{"containerPort":80}]}]), Some(1));
    let first = api.patch("web", &apply_params("alpha"), &Patch::Apply(&body)).await.unwrap();
    let again = api.patch("web", &apply_params("alpha"), &Patch::Apply(&body)).await.unwrap();
    assert_eq!(first.metadata.resource_version, again.metadata.resource_version);
    assert_eq!(first.metadata.managed_fields, again.metadata.managed_fields);
}

#[tokio::test]
async fn merge_json_and_strategic_patches_record_update_managers() {
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let body = deployment(json!([{"name":"app","image":"app:1"},{"name":"log","image":"log:1"}]), Some(1));
    api.patch("web", &apply_params("alpha"), &Patch::Apply(&body)).await.unwrap();

    let set_image = json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"app"},{"name":"log"}],
        "containers":[{"image":"app:2","name":"app"}]}}}});
    let out = api.patch("web", &PatchParams::default(), &Patch::Strategic(&set_image)).await.unwrap();
    let cs = out.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers.clone();
    assert_eq!((cs[0].image.as_deref(), cs[1].image.as_deref()), (Some("app:2"), Some("log:1")));

    let scaled = api
        .patch(
            "web",
            &PatchParams { field_manager: Some("scaler".into()), ..Default::default() },
            &Patch::Merge(json!({"spec":{"replicas":3}})),
        )
        .await
        .unwrap();
    assert!(managers(&scaled).contains(&("scaler".to_string(), "Update".to_string())));

    // alpha re-applying its replicas now conflicts with the Update manager.
    let err = api_error(api.patch("web", &apply_params("alpha"), &Patch::Apply(&body)).await);
    assert_eq!(err.code, 409);
    assert!(err.message.starts_with("Apply failed with 2 conflicts: "), "{}", err.message);
    assert!(err.message.contains("conflicts with \"scaler\" using apps/v1:\n- .spec.replicas"), "{}", err.message);
    assert!(err.message.contains("- .spec.template.spec.containers[name=\"app\"].image"), "{}", err.message);

    let test = serde_json::from_value(json!([{"op":"test","path":"/spec/replicas","value":4}])).unwrap();
    let err = api_error(api.patch("web", &PatchParams::default(), &Patch::Json::<()>(test)).await);
    assert_eq!(err.code, 422);
}

#[tokio::test]
async fn kube_runtime_finalizer_patch_on_an_object_without_finalizers() {
    let sim = sim().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata":{"name":"c"},"data":{"k":"v"}})).unwrap();
    api.create(&Default::default(), &cm).await.unwrap();
    let patch = serde_json::from_value(json!([
        {"op":"test","path":"/metadata/finalizers","value":null},
        {"op":"add","path":"/metadata/finalizers","value":["example.com/cleanup"]}
    ]))
    .unwrap();
    let out = api.patch("c", &PatchParams::default(), &Patch::Json::<()>(patch)).await.unwrap();
    assert_eq!(out.metadata.finalizers, Some(vec!["example.com/cleanup".to_string()]));
}

/// client-go's csaupgrade, as kube-apiserver answers it: a JSON patch may rewrite managedFields (they replace the
/// stored ones when valid), after which the applier owns what its Update entry owned and an apply that drops a
/// field removes it. A failed `test` of the resourceVersion is refused with 422 and changes nothing.
#[tokio::test]
async fn managed_fields_moved_to_the_apply_manager_let_an_apply_drop_what_a_create_set() {
    let sim = sim().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let port = |p: u32| json!([{"name":"app","image":"app:1","ports":[{"name":"http","containerPort":p}]}]);
    let first: Deployment = serde_json::from_value(deployment(port(8080), Some(1))).unwrap();
    let params = kube::api::PostParams { field_manager: Some("op".into()), ..Default::default() };
    let created = api.create(&params, &first).await.unwrap();
    assert_eq!(managers(&created), [("op".to_string(), "Update".to_string())]);

    // Without the upgrade the Update entry keeps 8080, and the apply's 8081 clashes on the port name.
    let refused =
        api_error(api.patch("web", &apply_params("op").force(), &Patch::Apply(deployment(port(8081), Some(1)))).await);
    assert_eq!(refused.code, 422, "{refused:?}");

    let mut entries = serde_json::to_value(created.metadata.managed_fields.clone().unwrap()).unwrap();
    entries[0]["operation"] = json!("Apply");
    let stale = serde_json::from_value(json!([
        {"op":"test","path":"/metadata/resourceVersion","value":"1"},
        {"op":"replace","path":"/metadata/managedFields","value":entries},
    ]))
    .unwrap();
    assert_eq!(api_error(api.patch("web", &PatchParams::default(), &Patch::<()>::Json(stale)).await).code, 422);
    let upgrade = serde_json::from_value(json!([
        {"op":"test","path":"/metadata/resourceVersion","value":created.metadata.resource_version},
        {"op":"replace","path":"/metadata/managedFields","value":entries},
    ]))
    .unwrap();
    let upgraded = api.patch("web", &PatchParams::default(), &Patch::<()>::Json(upgrade)).await.unwrap();
    assert_eq!(managers(&upgraded), [("op".to_string(), "Apply".to_string())]);

    let applied =
        api.patch("web", &apply_params("op").force(), &Patch::Apply(deployment(port(8081), Some(1)))).await.unwrap();
    let ports: Vec<i32> = applied.spec.unwrap().template.spec.unwrap().containers[0]
        .ports
        .iter()
        .flatten()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(ports, [8081], "the old port is gone");
}
