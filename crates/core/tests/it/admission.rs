//! The admission policy says what the contract says: for generated specs (valid, and invalid in every way the
//! contract knows), the API server's admission verdict, reasons and messages equal `contract::validate_object`'s.
//! The API server here is kubesim in-process (no HTTP, so thousands of cases stay fast); the operator's `tests/it/admission_kubectl.rs`
//! drives the same policy through kubectl.

use kubesim::cluster::{Cluster, WriteOptions};
use kubesim::error::ApiError;
use kubesim::resources::ResourceRef;
use microservice_core::admission_policy::{BINDING_NAME, POLICY_NAME, binding, policy};
use microservice_core::contract::{self, Violation};
use microservice_core::crd::{Microservice, MicroserviceSpec};
use microservice_core::profile::PlatformProfile;
use microservice_core::wording::headline;
use proptest::prelude::*;
use serde_json::{Value, json};

const NS: &str = "todo";

/// A cluster with the Microservice CRD, namespace `todo`, the generated policy and its binding with `actions`.
/// `schema_checks: false` strips the CRD's own rules and ranges, so the policy alone decides.
fn cluster(actions: &[&str], schema_checks: bool) -> (Cluster, ResourceRef) {
    let cluster = Cluster::new();
    let opts = WriteOptions::default();
    let mut crd = serde_json::to_value(microservice_core::crd::crd()).expect("the CRD serializes");
    if !schema_checks {
        let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in ["image", "port", "replicas"] {
            if let Some(node) = spec[field].as_object_mut() {
                for key in ["pattern", "minimum", "maximum", "maxLength", "x-kubernetes-validations"] {
                    node.remove(key);
                }
            }
        }
        let root = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        if let Some(root) = root.as_object_mut() {
            root.remove("x-kubernetes-validations");
        }
    }
    let create = |group: &str, plural: &str, ns: Option<&str>, obj: Value| {
        let rt = cluster.resolve(group, "v1", plural).expect("a built-in type");
        cluster.create(&rt, ns, obj, &opts).unwrap_or_else(|e| panic!("{plural}: {e}"));
    };
    create("apiextensions.k8s.io", "customresourcedefinitions", None, crd);
    create("", "namespaces", None, json!({"metadata": {"name": NS}}));
    create("admissionregistration.k8s.io", "validatingadmissionpolicies", None, policy(&PlatformProfile::default()));
    let mut bound = binding();
    bound["spec"]["validationActions"] = json!(actions);
    create("admissionregistration.k8s.io", "validatingadmissionpolicybindings", None, bound);
    let rt = cluster.resolve("platform.example.com", "v1alpha1", "microservices").expect("the CRD is served");
    (cluster, rt)
}

fn manifest(name: &str, spec: &MicroserviceSpec) -> Value {
    json!({
        "apiVersion": "platform.example.com/v1alpha1",
        "kind": "Microservice",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

fn contract_says(name: &str, spec: &MicroserviceSpec) -> Result<(), Vec<Violation>> {
    let ms = Microservice::new(name, spec.clone());
    contract::validate_object(&ms, &PlatformProfile::default()).map(|_| ())
}

/// What a user reads for one violation, wherever the refusal reaches them.
fn headline_of(v: &Violation) -> String {
    headline(v.reason.as_str(), v.field, &v.message)
}

fn dry_run() -> WriteOptions {
    WriteOptions { dry_run: true, ..WriteOptions::default() }
}

const SHA256: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn images() -> impl Strategy<Value = String> {
    let repository = prop_oneof![
        Just("ghcr.io/example/todo-api".to_string()),
        Just("docker.io/someone/todo-api".to_string()),
        Just("todo-api".to_string()),
        Just("library/nginx".to_string()),
        Just("index.docker.io/library/todo-api".to_string()),
        Just("localhost:5000/todo-api".to_string()),
        Just("[::1]:5000/todo-api".to_string()),
        Just("ghcr.io/Example/todo-api".to_string()),
        Just("reg-.io/todo-api".to_string()),
        Just("reg.io:99999/todo-api".to_string()),
        Just("reg.io:0065535/todo-api".to_string()),
        Just("ghcr.io//todo-api".to_string()),
        Just("ghcr.io/example/todo-api/".to_string()),
        Just("ghcr.io/a__b/c---d".to_string()),
        Just("ghcr.io/a___b/c".to_string()),
        Just(String::new()),
        "[a-z0-9._/:-]{1,24}",
        "(ghcr\\.io/)?[a-z][a-z0-9]{0,5}(/[a-z0-9]{1,4}){0,2}",
    ];
    let tag = prop_oneof![
        Just(None),
        Just(Some("1.4.2".to_string())),
        Just(Some("latest".to_string())),
        Just(Some("-bad".to_string())),
        Just(Some(String::new())),
        Just(Some("a".repeat(129))),
        "[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}".prop_map(Some),
    ];
    let digest = prop_oneof![
        3 => Just(None),
        1 => Just(Some(SHA256.to_string())),
        1 => Just(Some("sha256:0123".to_string())),
        1 => Just(Some(SHA256.to_uppercase().replace("SHA256", "sha256"))),
        1 => Just(Some(format!("sha512:{}", "ab".repeat(64)))),
        1 => Just(Some(format!("sha512:{}", "ab".repeat(32)))),
        1 => Just(Some(format!("multihash+base58:{}", "Qm".repeat(20)))),
        1 => Just(Some(String::new())),
        1 => Just(Some(format!("{SHA256}@{SHA256}"))),
    ];
    prop_oneof![
        8 => (repository, tag, digest).prop_map(|(r, t, d)| {
            let mut image = r;
            if let Some(t) = t {
                image.push(':');
                image.push_str(&t);
            }
            if let Some(d) = d {
                image.push('@');
                image.push_str(&d);
            }
            image
        }),
        1 => "[ -~]{0,30}",
        1 => Just("ghcr.io/example/todo-api:1 2".to_string()),
        1 => Just(format!("ghcr.io/{}:1", "a".repeat(250))),
    ]
}

fn specs() -> impl Strategy<Value = MicroserviceSpec> {
    let port =
        prop_oneof![Just(9090), Just(8080), Just(1023), Just(1024), Just(65535), Just(65536), any::<i32>(), 0..70000];
    let replicas = prop_oneof![Just(None), (-2..25).prop_map(Some)];
    (images(), port, replicas).prop_map(|(image, port, replicas)| MicroserviceSpec {
        image: image.into(),
        port,
        replicas,
        autoscaling: None,
    })
}

/// Names the API server itself accepts (DNS-1123 subdomains), some of which cannot name a Service.
fn names() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("todo-api".to_string()),
        1 => "[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?",
        1 => "[a-z0-9]{1,5}(\\.[a-z0-9]{1,5}){1,2}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The policy alone (schema checks stripped), every failed validation as a warning: the warnings are the
    /// contract's violations, in its order and words.
    #[test]
    fn the_policy_warns_exactly_what_the_contract_refuses(name in names(), spec in specs()) {
        thread_local! { static WARN: (Cluster, ResourceRef) = cluster(&["Warn"], false); }
        let outcome = WARN.with(|(cluster, rt)| cluster.create(rt, Some(NS), manifest(&name, &spec), &dry_run()));
        let warnings = match outcome {
            Ok(o) => o.warnings,
            Err(e) => return Err(TestCaseError::fail(format!("a Warn binding refused: {e}"))),
        };
        let expected: Vec<String> = match contract_says(&name, &spec) {
            Ok(()) => Vec::new(),
            Err(violations) => violations
                .iter()
                .map(|v| format!(
                    "Validation failed for ValidatingAdmissionPolicy '{POLICY_NAME}' with binding '{BINDING_NAME}': {}",
                    headline_of(v)
                ))
                .collect(),
        };
        prop_assert_eq!(warnings, expected);
    }

    /// The bundle as shipped (the CRD's own checks, then the policy with `Deny`): refused exactly when the
    /// contract refuses; when the policy refuses, it names the contract's first violation.
    #[test]
    fn the_bundle_refuses_exactly_what_the_contract_refuses(name in names(), spec in specs()) {
        thread_local! { static DENY: (Cluster, ResourceRef) = cluster(&["Deny"], true); }
        let outcome = DENY.with(|(cluster, rt)| cluster.create(rt, Some(NS), manifest(&name, &spec), &dry_run()));
        match (outcome, contract_says(&name, &spec)) {
            (Ok(o), Ok(())) => prop_assert!(o.warnings.is_empty(), "{:?}", o.warnings),
            (Ok(_), Err(v)) => return Err(TestCaseError::fail(format!("admitted what the contract refuses: {v:?}"))),
            (Err(e), Ok(())) => return Err(TestCaseError::fail(format!("refused what the contract accepts: {e}"))),
            (Err(e), Err(violations)) => {
                prop_assert_eq!(e.code, 422);
                if e.message.contains("ValidatingAdmissionPolicy") {
                    prop_assert_eq!(e.message, denial(&name, &headline_of(&violations[0])));
                }
            }
        }
    }
}

fn denial(name: &str, message: &str) -> String {
    format!(
        "microservices.platform.example.com \"{name}\" is forbidden: ValidatingAdmissionPolicy '{POLICY_NAME}' with \
         binding '{BINDING_NAME}' denied request: {message}"
    )
}

fn refusal(cluster: &Cluster, rt: &ResourceRef, name: &str, image: &str, port: i32) -> ApiError {
    let spec = MicroserviceSpec { image: image.into(), port, replicas: None, autoscaling: None };
    match cluster.create(rt, Some(NS), manifest(name, &spec), &WriteOptions::default()) {
        Ok(o) => panic!("{image} :{port} was admitted: {:?}", o.object),
        Err(e) => e,
    }
}

#[test]
fn a_denial_reads_as_the_api_server_writes_it() {
    let (cluster, rt) = cluster(&["Deny"], true);
    let e = refusal(&cluster, &rt, "todo-api", "docker.io/someone/todo-api:1.5.0", 8080);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        denial(
            "todo-api",
            "ImageNotAllowed: spec.image: repository `docker.io/someone/todo-api` is not one the platform runs \
             (allowed: ghcr.io/example/todo-api); use e.g. `ghcr.io/example/todo-api:1.5.0`"
        )
    );
    let status = e.to_status();
    assert_eq!(status["details"]["kind"], "microservices");
    assert_eq!(status["details"]["group"], "platform.example.com");
    assert_eq!(status["details"]["causes"][0]["message"], e.message.split_once(" is forbidden: ").unwrap().1);
}

#[test]
fn an_update_that_keeps_the_spec_is_not_judged_again() {
    let (cluster, rt) = cluster(&["Warn"], true);
    let spec = MicroserviceSpec {
        image: "ghcr.io/example/todo-api:latest".into(),
        port: 8080,
        replicas: None,
        autoscaling: None,
    };
    let created = cluster.create(&rt, Some(NS), manifest("legacy", &spec), &WriteOptions::default()).unwrap();
    assert_eq!(created.warnings.len(), 1, "{:?}", created.warnings);
    // Now the platform enforces: the binding turns to Deny.
    let bindings = cluster.resolve("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings").unwrap();
    let mut bound = binding();
    bound["metadata"]["resourceVersion"] = json!(null);
    let patch = kubesim::cluster::PatchBody::Merge(json!({"spec": {"validationActions": ["Deny"]}}));
    let opts = WriteOptions::default();
    cluster.patch(&bindings, None, BINDING_NAME, patch, kubesim::cluster::Subresource::Main, &opts).unwrap();
    // A label on the old, invalid Microservice is still allowed; a spec change that keeps it invalid is not.
    let label = kubesim::cluster::PatchBody::Merge(json!({"metadata": {"labels": {"team": "a"}}}));
    cluster.patch(&rt, Some(NS), "legacy", label, kubesim::cluster::Subresource::Main, &opts).unwrap();
    let spec_change = kubesim::cluster::PatchBody::Merge(json!({"spec": {"port": 8081}}));
    let e =
        cluster.patch(&rt, Some(NS), "legacy", spec_change, kubesim::cluster::Subresource::Main, &opts).unwrap_err();
    assert!(e.message.contains("MutableTag: spec.image: tag `latest` is mutable"), "{}", e.message);
    // The operator's status writes go to the status subresource, which the policy does not match.
    let status = kubesim::cluster::PatchBody::Merge(json!({"status": {"phase": "Invalid"}}));
    cluster.patch(&rt, Some(NS), "legacy", status, kubesim::cluster::Subresource::Status, &opts).unwrap();
}
