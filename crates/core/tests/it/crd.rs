//! The committed CRD is the generated one, and it is a structural schema a real API server accepts.

use kubesim::schema::CompiledSchema;
use microservice_core::crd::{IMAGE_PATTERN, NAME_RULE, crd_yaml, image_rules};
use microservice_core::image::ImageReference;
use serde_json::Value;

#[test]
fn committed_crd_matches_the_generated_one() {
    let generated = crd_yaml().unwrap();
    crate::support::assert_golden(
        "deploy/crd.yaml",
        &generated,
        "cargo run -p microservice-operator -- crd > deploy/crd.yaml (or UPDATE_GOLDEN=1 cargo test -p microservice-core --test it crd)",
    );
}

fn schema() -> Value {
    let crd = serde_json::to_value(microservice_core::crd::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Structural: every node has a type, no value-dependent shapes (anyOf/oneOf/allOf/not), nothing preserved.
fn assert_structural(node: &Value, path: &str) {
    let object = node.as_object().unwrap_or_else(|| panic!("{path} is not a schema object"));
    assert!(object.get("type").and_then(Value::as_str).is_some(), "{path} has no type");
    for forbidden in ["anyOf", "oneOf", "allOf", "not", "x-kubernetes-preserve-unknown-fields", "additionalProperties"]
    {
        assert!(!object.contains_key(forbidden), "{path} has {forbidden}");
    }
    if object.get("nullable").is_some() {
        assert_eq!(object["nullable"], Value::Bool(true), "{path}: nullable is only ever true");
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            assert_structural(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = object.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
}

#[test]
fn schema_is_structural() {
    assert_structural(&schema(), "");
}

#[test]
fn schema_states_the_spec_rules() {
    let schema = schema();
    let spec = &schema["properties"]["spec"];
    let required: Vec<&str> = spec["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(required, ["image", "port"]);
    assert_eq!(spec["properties"]["port"]["minimum"].as_f64(), Some(1024.0));
    assert_eq!(spec["properties"]["port"]["maximum"].as_f64(), Some(65535.0));
    assert_eq!(spec["properties"]["replicas"]["minimum"].as_f64(), Some(1.0));
    assert_eq!(spec["properties"]["replicas"]["maximum"].as_f64(), Some(20.0));
    // CEL rules with messages in words, not a pattern the server would quote back at the user.
    assert!(spec["properties"]["image"].get("pattern").is_none());
    let image_rules_in_crd = spec["properties"]["image"]["x-kubernetes-validations"].as_array().unwrap();
    assert_eq!(image_rules_in_crd.len(), image_rules().len());
    assert!(image_rules_in_crd.last().unwrap()["rule"].as_str().unwrap().contains("self.matches("));
    assert_eq!(schema["x-kubernetes-validations"][0]["rule"], NAME_RULE);
    let conditions = &schema["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], serde_json::json!(["type"]));
    let condition_required = conditions["items"]["required"].as_array().unwrap();
    assert!(condition_required.contains(&Value::from("type")), "a list-map key must be required");
    let phases = &schema["properties"]["status"]["properties"]["phase"]["enum"];
    assert_eq!(phases, &serde_json::json!(["Pending", "Progressing", "Ready", "Degraded", "Invalid"]));
}

#[test]
fn names_columns_and_subresources() {
    let crd = serde_json::to_value(microservice_core::crd::crd()).unwrap();
    let spec = &crd["spec"];
    assert_eq!(crd["metadata"]["name"], "microservices.platform.example.com");
    assert_eq!(spec["scope"], "Namespaced");
    assert_eq!(spec["names"]["shortNames"], serde_json::json!(["ms"]));
    assert_eq!(spec["names"]["categories"], serde_json::json!(["platform"]));
    assert_eq!(spec["names"]["listKind"], "MicroserviceList");
    let version = &spec["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    let default_columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("priority").is_none())
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(default_columns, ["Ready", "Phase", "Image", "Observed", "Replicas", "Age"]);
    let column = |name: &str| {
        version["additionalPrinterColumns"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().unwrap()
    };
    // What runs and the generation that describes, not what the spec asks for.
    assert_eq!(column("Image")["jsonPath"], ".status.image");
    assert_eq!(column("Observed")["jsonPath"], ".status.observedGeneration");
    assert_eq!(column("Spec-Image")["jsonPath"], ".spec.image");
}

/// The CRD's rules on `spec.image` and `metadata.name`, as kubesim's CEL evaluates them: the message of each
/// refusal (none when admitted).
fn refusals(name: &str, image: &str) -> Vec<String> {
    let crd = serde_json::to_value(microservice_core::crd::crd()).unwrap();
    let schema = CompiledSchema::compile(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]).unwrap();
    assert!(schema.unsupported_rules().is_empty());
    let object = serde_json::json!({
        "apiVersion": "platform.example.com/v1alpha1", "kind": "Microservice",
        "metadata": {"name": name, "namespace": "todo"},
        "spec": {"image": image, "port": 8080},
    });
    schema.validate(&object).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
}

#[test]
fn image_rules_admit_every_pinned_reference_the_parser_accepts() {
    let sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let sha512 = format!("sha512:{}", "0123456789abcdef".repeat(8));
    let pinned = [
        "ghcr.io/example/todo-api:1.4.2".to_string(),
        "todo-api:1".into(),
        "localhost:5000/todo-api:dev".into(),
        "registry.internal:5000/team/apps/todo-api:1.0.0-rc.1".into(),
        format!("ghcr.io/example/todo-api@{sha}"),
        format!("ghcr.io/example/todo-api@{sha512}"),
        format!("ghcr.io/example/todo-api:1.4.2@{sha}"),
        "[::1]:5000/todo-api:1".into(),
        "ghcr.io/example/todo_api__x.y-z--w:_under".into(),
        "Registry.Example.com/todo-api:A.B".into(),
        "ghcr.io/example/todo-api:latest".into(),
    ];
    let pattern = regex::Regex::new(IMAGE_PATTERN).unwrap();
    for image in &pinned {
        let parsed = ImageReference::parse(image).unwrap();
        assert!(parsed.tag.is_some() || parsed.digest.is_some());
        assert!(pattern.is_match(image), "{image}");
        assert_eq!(refusals("todo-api", image), Vec::<String>::new(), "the CRD refuses {image}");
    }
    let refused = [
        "ghcr.io/example/todo-api",
        "todo-api",
        "registry.internal:5000/todo-api",
        "ghcr.io/Example/todo-api:1",
        "ghcr.io/example/todo-api: 1",
        "",
        "ghcr.io/example/todo-api:",
        "ghcr.io/example/todo-api@sha256:abc",
        "ghcr.io//todo-api:1",
    ];
    for image in refused {
        assert_eq!(refusals("todo-api", image).len(), 1, "the CRD admits {image:?} or says more than one thing");
    }
}

#[test]
fn image_refusals_say_in_words_what_is_wrong_with_an_example() {
    let md5 = format!("ghcr.io/example/todo-api@md5:{}", "0123456789abcdef".repeat(2));
    let cases: [(&str, &str); 7] = [
        ("ghcr.io/example/todo-api", "has no tag or digest"),
        ("", "the image is empty"),
        ("   ", "whitespace"),
        ("ghcr.io/example/tödo-api:1", "outside ASCII"),
        (":latest", "no repository name before its tag or digest"),
        (&md5, "digest must be `sha256:` followed by 64 lowercase hex digits"),
        ("ghcr.io/Example/todo-api:1", "is not an image reference"),
    ];
    for (image, words) in cases {
        let messages = refusals("todo-api", image);
        assert_eq!(messages.len(), 1, "{image:?}: {messages:?}");
        let message = &messages[0];
        assert!(message.starts_with("spec.image: "), "{message}");
        assert!(message.contains(words), "{image:?}: {message}");
        assert!(message.contains("e.g. ghcr.io/example/todo-api:1.4.2"), "{message}");
        assert!(message.len() < 400, "{image:?}: a message, not the grammar: {message}");
        assert!(!message.contains("(?:"), "{message}");
    }
}

#[test]
fn names_that_cannot_name_a_service_are_refused_by_the_crd() {
    for name in ["1abc", "todo.api", &"a".repeat(64)] {
        let messages = refusals(name, "ghcr.io/example/todo-api:1.4.2");
        assert_eq!(messages.len(), 1, "{name}: {messages:?}");
        assert!(messages[0].contains("metadata.name must also name the Microservice's Service"), "{messages:?}");
    }
    for name in ["todo-api", "a", &"a".repeat(63)] {
        assert_eq!(refusals(name, "ghcr.io/example/todo-api:1.4.2"), Vec::<String>::new(), "{name}");
    }
}
