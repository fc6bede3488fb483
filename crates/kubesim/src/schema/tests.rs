use super::*;
use serde_json::json;

fn schema() -> CompiledSchema {
    CompiledSchema::compile(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string", "minLength": 1},
                    "port": {"type": "integer", "minimum": 1024, "maximum": 65535, "default": 8080},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                    "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1},
                    "size": {"x-kubernetes-int-or-string": true},
                    "note": {"type": "string", "nullable": true},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "x-kubernetes-list-type": "set"},
                    "env": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {
                                "name": {"type": "string"}, "value": {"type": "string"}}}},
                    "resources": {"type": "object", "default": {}, "properties": {
                        "cpu": {"type": "string", "default": "100m"}}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                              "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "x-kubernetes-preserve-unknown-fields": true},
                    "when": {"type": "string", "format": "date-time"}
                }
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }
    }))
    .unwrap()
}

fn messages(causes: &[Cause]) -> Vec<String> {
    causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
}

#[test]
fn valid_object_passes() {
    let obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
        "spec": {"image": "nginx", "port": 8080, "mode": "a", "size": "50%", "note": null, "tags": ["a", "b"],
                 "ratio": 0.5, "labels": {"a": "b"}, "when": "2026-01-02T03:04:05Z",
                 "template": {"apiVersion": "v1", "kind": "Pod", "spec": {}}}});
    assert_eq!(messages(&schema().validate(&obj)), Vec::<String>::new());
}

#[test]
fn errors_read_like_upstream() {
    let obj = json!({"spec": {"port": 80, "mode": "x", "name": "ABC", "ratio": 1, "size": true,
        "tags": ["a", "a", "b", "c"], "replicas": 1, "when": "yesterday", "env": [{"name": "A"}, {"name": "A", "value": "2"}]}});
    let got = messages(&schema().validate(&obj));
    let want = [
        "spec.image: Required value",
        "spec.env[1]: Duplicate value: {\"name\":\"A\"}",
        "spec.mode: Unsupported value: \"x\": supported values: \"a\", \"b\"",
        "spec.name: Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'",
        "spec.port: Invalid value: 80: spec.port in body should be greater than or equal to 1024",
        "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
        "spec.size: Invalid value: \"boolean\": spec.size in body must be of type integer,string: \"boolean\"",
        "spec.tags: Too many: 4: must have at most 3 items",
        "spec.tags[1]: Duplicate value: \"a\"",
        "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
    ];
    assert_eq!(got, want);
}

#[test]
fn type_errors_stop_at_the_node() {
    let got = messages(&schema().validate(&json!({"spec": {"image": "x", "port": "80", "note": 3, "name": null}})));
    assert_eq!(
        got,
        [
            "spec.name: Invalid value: \"null\": spec.name in body must be of type string: \"null\"",
            "spec.note: Invalid value: \"integer\": spec.note in body must be of type string: \"integer\"",
            "spec.port: Invalid value: \"string\": spec.port in body must be of type integer: \"string\"",
        ]
    );
    assert_eq!(
        schema().validate(&json!({"spec": {"image": "x"}, "status": {"ready": "yes"}}))[0].reason,
        "FieldValueTypeInvalid"
    );
    assert!(schema().validate(&json!({"spec": {"image": "x", "port": 2048.0}})).is_empty(), "2048.0 is an integer");
}

#[test]
fn string_length_errors() {
    let got = messages(&schema().validate(&json!({"spec": {"image": "", "name": "abcdef"}})));
    assert_eq!(
        got,
        [
            "spec.image: Invalid value: \"\": spec.image in body should be at least 1 chars long",
            "spec.name: Too long: may not be more than 5 bytes",
        ]
    );
}

#[test]
fn pruning_removes_unknown_fields_and_reports_them() {
    let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "bogus": 1},
        "spec": {"image": "x", "unknown": 1, "env": [{"name": "a", "junk": true}],
                 "extra": {"anything": 1, "known": {"a": "1", "b": "2"}},
                 "labels": {"free": "form"},
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "nope": 1}, "spec": {"x": 1}}},
        "top": 1});
    let mut pruned = schema().prune(&mut obj);
    pruned.sort();
    assert_eq!(
        pruned,
        [
            "metadata.bogus",
            "spec.env[0].junk",
            "spec.extra.known.b",
            "spec.template.metadata.nope",
            "spec.unknown",
            "top"
        ]
    );
    assert_eq!(obj["metadata"], json!({"name": "a"}));
    assert_eq!(obj["spec"]["extra"], json!({"anything": 1, "known": {"a": "1"}}));
    assert_eq!(obj["spec"]["labels"], json!({"free": "form"}));
    assert_eq!(
        obj["spec"]["template"]["spec"],
        json!({"x": 1}),
        "preserved under x-kubernetes-preserve-unknown-fields"
    );
    assert_eq!(obj["apiVersion"], "x/v1");
}

#[test]
fn defaults_apply_where_the_parent_exists() {
    let mut obj = json!({"spec": {"image": "x", "port": null}});
    schema().apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["port"], 8080, "a null non-nullable field is defaulted");
    assert_eq!(obj["spec"]["resources"], json!({"cpu": "100m"}), "defaults inside a default apply");
    assert!(obj.get("status").is_none(), "no parent, no default");
    let mut kept = json!({"spec": {"port": 9000, "resources": {"cpu": "2"}}});
    schema().apply_defaults(&mut kept);
    assert_eq!(kept["spec"]["port"], 9000);
    assert_eq!(kept["spec"]["resources"]["cpu"], "2");
}

#[test]
fn additional_properties_false_and_combinators() {
    let s = CompiledSchema::compile(&json!({"type": "object", "properties": {"spec": {"type": "object",
        "additionalProperties": false, "properties": {"a": {"type": "integer"}},
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}}))
    .unwrap();
    let got = messages(&s.validate(&json!({"spec": {"c": 1}})));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("spec.c: Forbidden"));
    assert!(got[1].contains("anyOf"));
}

#[test]
fn bad_patterns_fail_compilation() {
    let e =
        CompiledSchema::compile(&json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}))
            .unwrap_err();
    assert_eq!(e[0].field, "openAPIV3Schema.properties[a].pattern");
}

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "microservices.platform.example.com"},
        "spec": {"group": "platform.example.com", "scope": "Namespaced",
            "names": {"plural": "microservices", "singular": "microservice", "kind": "Microservice",
                      "listKind": "MicroserviceList", "shortNames": ["ms"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"image": {"type": "string"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
                "additionalPrinterColumns": [{"name": "Image", "type": "string", "jsonPath": ".spec.image"}]}]}})
}

#[test]
fn a_good_crd_is_valid() {
    assert_eq!(messages(&validate_crd(&crd())), Vec::<String>::new());
}

#[test]
fn crd_rules() {
    let mut c = crd();
    c["metadata"]["name"] = json!("wrong.example.com");
    c["spec"]["scope"] = json!("Global");
    c["spec"]["versions"][0]["storage"] = json!(false);
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"] =
        json!({"description": "no type"});
    c["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("text");
    let got = messages(&validate_crd(&c));
    let fields: Vec<&str> = got.iter().map(|m| m.split(": ").next().unwrap_or_default()).collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.scope",
            "spec.validation.openAPIV3Schema.properties[spec].properties[x].type",
            "spec.additionalPrinterColumns[0].type",
            "spec.versions",
        ]
    );
    assert_eq!(
        got[0],
        "metadata.name: Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    let mut no_schema = crd();
    no_schema["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
    assert_eq!(messages(&validate_crd(&no_schema)), ["spec.versions[0].schema.openAPIV3Schema: Required value"]);
    let mut root = crd();
    root["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["type"] = json!("string");
    assert!(messages(&validate_crd(&root))[0].contains("must be object at the root"));
}
