//! The CRD's schema judged by an apiextensions-style validator (kubesim's, which follows kube-openapi's paths and
//! messages): it compiles as a structural schema, refuses what the platform can never run with 422-style causes
//! on the right fields, prunes unknown fields and accepts every status the operator writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kubesim::schema::{CompiledSchema, validate_crd};
use microservice_core::contract::validate;
use microservice_core::profile::PlatformProfile;
use microservice_core::status::compute_status;
use serde_json::{Value, json};

fn crd() -> Value {
    serde_json::to_value(microservice_core::crd::crd()).unwrap()
}

fn schema() -> CompiledSchema {
    let crd = crd();
    CompiledSchema::compile(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
        .unwrap_or_else(|causes| panic!("the CRD schema does not compile: {causes:?}"))
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "Microservice",
        "metadata": {"name": "todo-api", "namespace": "todo"},
        "spec": spec,
    })
}

/// The fields refused. After a type, required or enum error the API server adds a note naming no field (`<nil>`:
/// "some validation rules were not checked"), which is about the CEL rules, not a field.
fn failing_fields(schema: &CompiledSchema, obj: &Value) -> Vec<String> {
    schema.validate(obj).into_iter().map(|c| c.field).filter(|f| f != "<nil>").collect()
}

#[test]
fn the_crd_is_valid_and_structural() {
    let causes = validate_crd(&crd());
    assert!(causes.is_empty(), "{causes:?}");
    assert!(schema().unsupported_rules().is_empty());
}

#[test]
fn the_sample_is_valid() {
    let text = std::fs::read_to_string(crate::support::repo_root().join("deploy/samples/todo-api.yaml")).unwrap();
    let sample: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(schema().validate(&sample).len(), 0, "{:?}", schema().validate(&sample));
}

#[test]
fn specs_the_platform_can_never_run_are_refused_on_their_field() {
    let schema = schema();
    let image = "ghcr.io/example/todo-api:1.4.2";
    let cases = [
        (json!({"image": image, "port": 80}), "spec.port"),
        (json!({"image": image, "port": 1023}), "spec.port"),
        (json!({"image": image, "port": 65536}), "spec.port"),
        (json!({"image": image, "port": "8080"}), "spec.port"),
        (json!({"port": 8080}), "spec.image"),
        (json!({"image": image}), "spec.port"),
        (json!({"image": "ghcr.io/example/todo-api", "port": 8080}), "spec.image"),
        (json!({"image": "ghcr.io/Example/todo-api:1", "port": 8080}), "spec.image"),
        (json!({"image": "ghcr.io/example/todo-api@sha256:abc", "port": 8080}), "spec.image"),
        (json!({"image": "", "port": 8080}), "spec.image"),
        (json!({"image": image, "port": 8080, "replicas": 0}), "spec.replicas"),
        (json!({"image": image, "port": 8080, "replicas": 21}), "spec.replicas"),
    ];
    for (spec, field) in cases {
        let fields = failing_fields(&schema, &object(spec.clone()));
        assert_eq!(fields, [field], "{spec}");
    }
    // Named: the API server names every object (generateName included) before it validates it.
    let no_spec = json!({"apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice", "metadata": {"name": "todo-api"}});
    assert_eq!(failing_fields(&schema, &no_spec), ["spec"]);
}

#[test]
fn replicas_and_autoscaling_are_exclusive_and_bounds_ordered() {
    let schema = schema();
    let image = "ghcr.io/example/todo-api:1.4.2";
    let autoscaled = json!({"image": image, "port": 8080, "autoscaling": {"maxReplicas": 5}});
    assert_eq!(failing_fields(&schema, &object(autoscaled)), Vec::<String>::new());
    let both = json!({"image": image, "port": 8080, "replicas": 2, "autoscaling": {"maxReplicas": 5}});
    let causes = schema.validate(&object(both));
    assert_eq!(causes.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(), ["spec"], "{causes:?}");
    assert!(causes[0].message.contains("spec.replicas and spec.autoscaling are exclusive"), "{causes:?}");
    let cases = [
        (json!({"minReplicas": 6, "maxReplicas": 5}), "spec.autoscaling"),
        (json!({"minReplicas": 0, "maxReplicas": 5}), "spec.autoscaling.minReplicas"),
        (json!({"maxReplicas": 21}), "spec.autoscaling.maxReplicas"),
        (json!({"minReplicas": 2}), "spec.autoscaling.maxReplicas"),
        (
            json!({"maxReplicas": 3, "targetCPUUtilizationPercentage": 0}),
            "spec.autoscaling.targetCPUUtilizationPercentage",
        ),
    ];
    for (autoscaling, field) in cases {
        let spec = json!({"image": image, "port": 8080, "autoscaling": autoscaling});
        assert_eq!(failing_fields(&schema, &object(spec.clone())), [field], "{spec}");
    }
}

#[test]
fn pinned_images_pass_the_schema_and_the_contract_decides_the_rest() {
    let schema = schema();
    let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for image in [
        "ghcr.io/example/todo-api:1.4.2".to_string(),
        format!("ghcr.io/example/todo-api@{sha}"),
        format!("ghcr.io/example/todo-api:1.4.2@{sha}"),
        "registry.internal:5000/team/todo-api:2".into(),
        // Allowed by the schema so the operator can explain the refusal (MutableTag, ImageNotAllowed).
        "ghcr.io/example/todo-api:latest".into(),
        "nginx:1.27".into(),
    ] {
        let obj = object(json!({"image": image, "port": 8080, "replicas": 20}));
        assert!(schema.validate(&obj).is_empty(), "{image}: {:?}", schema.validate(&obj));
    }
}

#[test]
fn unknown_fields_are_pruned_not_kept() {
    let schema = schema();
    let mut obj = object(json!({"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080, "color": "blue"}));
    obj["status"] = json!({"phase": "Ready", "mood": "happy"});
    let mut pruned = schema.prune(&mut obj);
    pruned.sort();
    assert_eq!(pruned, ["spec.color", "status.mood"]);
    assert_eq!(obj["spec"], json!({"image": "ghcr.io/example/todo-api:1.4.2", "port": 8080}));
}

#[test]
fn every_status_the_operator_computes_is_valid() {
    let schema = schema();
    let profile = PlatformProfile::default();
    let mut ms = crate::support::sample_microservice();
    let now = Time(Timestamp::from_second(1_780_000_000).unwrap());
    for image in ["ghcr.io/example/todo-api:1.4.2", "ghcr.io/example/todo-api:latest"] {
        ms.spec.image = image.into();
        let contract = validate(&ms.spec, &profile);
        ms.status = Some(compute_status(&ms, &contract, None, None, &[], &now));
        let obj = serde_json::to_value(&ms).unwrap();
        assert!(schema.validate(&obj).is_empty(), "{image}: {:?}", schema.validate(&obj));
    }
    let mut bad = serde_json::to_value(&ms).unwrap();
    bad["status"]["phase"] = json!("Sleeping");
    bad["status"]["conditions"][0]["reason"] = json!("");
    let mut fields = failing_fields(&schema, &bad);
    fields.sort();
    fields.dedup(); // an empty reason breaks both minLength and pattern
    assert_eq!(fields, ["status.conditions[0].reason", "status.phase"]);
}
