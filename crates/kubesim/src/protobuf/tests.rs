use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use proptest::prelude::*;

use super::*;

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// ObjectMeta as Go's encoder writes it for a new object: every non-pointer field present, zero-valued.
fn new_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

#[test]
fn namespace_as_kubectl_create_sends_it() {
    let ns = core::Namespace {
        metadata: Some(new_meta("todo")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus { phase: Some(String::new()), conditions: vec![] }),
    };
    let got = decode_body(&envelope("v1", "Namespace", ns.encode_to_vec())).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "todo"}, "spec": {}, "status": {}})
    );
}

#[test]
fn config_map_and_secret_data() {
    let cm = core::ConfigMap {
        metadata: Some(meta::ObjectMeta { namespace: Some("default".into()), ..new_meta("cfg") }),
        immutable: None,
        data: BTreeMap::from([("a".to_string(), "1".to_string()), ("b".to_string(), "two".to_string())]),
        binary_data: BTreeMap::from([("bin".to_string(), vec![0u8, 255, 1])]),
    };
    let got = decode_body(&envelope("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"},
               "data": {"a": "1", "b": "two"}, "binaryData": {"bin": "AP8B"}})
    );

    let s = core::Secret {
        metadata: Some(new_meta("s1")),
        immutable: Some(false),
        data: BTreeMap::from([("a".to_string(), b"b".to_vec()), ("pw".to_string(), b"hunter22".to_vec())]),
        string_data: BTreeMap::new(),
        r#type: Some("Opaque".into()),
    };
    let got = decode_body(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "immutable": false,
               "data": {"a": "Yg==", "pw": "aHVudGVyMjI="}, "type": "Opaque"})
    );
}

#[test]
fn base64_matches_rfc4648() {
    for (input, want) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(input.as_bytes()), want);
    }
}

// Over 80 lines on purpose: A fixture: the Deployment kubectl sends, written out field by field.
fn kubectl_deployment() -> apps::Deployment {
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let container = core::Container {
        name: Some("nginx".into()),
        image: Some("nginx:1.27".into()),
        command: vec!["nginx".into(), "-g".into(), "daemon off;".into()],
        ports: vec![core::ContainerPort {
            name: Some(String::new()),
            host_port: Some(0),
            container_port: Some(80),
            protocol: Some(String::new()),
            host_ip: Some(String::new()),
        }],
        env: vec![core::EnvVar {
            name: Some("POD".into()),
            value: Some(String::new()),
            value_from: Some(core::EnvVarSource {
                field_ref: Some(core::ObjectFieldSelector {
                    api_version: Some("v1".into()),
                    field_path: Some("metadata.name".into()),
                }),
                ..Default::default()
            }),
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([("cpu".to_string(), Quantity { string: Some("500m".into()) })]),
            ..Default::default()
        }),
        working_dir: Some(String::new()),
        termination_message_path: Some(String::new()),
        termination_message_policy: Some(String::new()),
        image_pull_policy: Some(String::new()),
        stdin: Some(false),
        stdin_once: Some(false),
        tty: Some(false),
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: Some("/healthz".into()),
                    port: Some(IntOrString { r#type: Some(1), int_val: Some(0), str_val: Some("http".into()) }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(0),
            period_seconds: Some(5),
            ..Default::default()
        }),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta::ObjectMeta { labels: labels.clone(), ..new_meta("web") }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            selector: Some(meta::LabelSelector { match_labels: labels.clone(), match_expressions: vec![] }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta { labels, ..new_meta("") }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    restart_policy: Some(String::new()),
                    dns_policy: Some(String::new()),
                    service_account_name: Some(String::new()),
                    host_network: Some(false),
                    scheduler_name: Some(String::new()),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy { r#type: Some(String::new()), rolling_update: None }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            updated_replicas: Some(0),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(0),
            ..Default::default()
        }),
    }
}

#[test]
fn deployment_with_pod_template() {
    let got = decode_body(&envelope("apps/v1", "Deployment", kubectl_deployment().encode_to_vec())).unwrap();
    let want = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "nginx",
                    "image": "nginx:1.27",
                    "command": ["nginx", "-g", "daemon off;"],
                    "ports": [{"containerPort": 80}],
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                    "resources": {"limits": {"cpu": "500m"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
                }]},
            },
            "strategy": {},
        },
        "status": {},
    });
    assert_eq!(got, want);
}

#[test]
fn self_subject_access_review_for_auth_can_i() {
    let r = authz::SelfSubjectAccessReview {
        metadata: Some(new_meta("")),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: Some("default".into()),
                verb: Some("get".into()),
                group: Some(String::new()),
                version: Some(String::new()),
                resource: Some("pods".into()),
                subresource: Some(String::new()),
                name: Some(String::new()),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }),
        status: Some(authz::SubjectAccessReviewStatus {
            allowed: Some(false),
            denied: Some(false),
            reason: Some(String::new()),
            evaluation_error: Some(String::new()),
        }),
    };
    let got = decode_body(&envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", r.encode_to_vec())).unwrap();
    assert_eq!(
        got,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
               "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}},
               "status": {"allowed": false}})
    );
}

#[test]
fn role_binding_and_timestamps() {
    let b = rbac::RoleBinding {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time { seconds: Some(1_764_633_600), nanos: Some(0) }),
            ..new_meta("rb")
        }),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            api_group: Some(String::new()),
            name: Some("op".into()),
            namespace: Some("system".into()),
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("Role".into()),
            name: Some("op".into()),
        }),
    };
    let got = decode_body(&envelope("rbac.authorization.k8s.io/v1", "RoleBinding", b.encode_to_vec())).unwrap();
    assert_eq!(got["metadata"]["creationTimestamp"], "2025-12-02T00:00:00Z");
    assert_eq!(got["subjects"], json!([{"kind": "ServiceAccount", "name": "op", "namespace": "system"}]));
    assert_eq!(got["roleRef"]["kind"], "Role");
}

#[test]
fn service_ports_keep_target_port() {
    let svc = core::Service {
        metadata: Some(new_meta("web")),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: Some("80-8080".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(IntOrString { r#type: Some(0), int_val: Some(8080), str_val: Some(String::new()) }),
                node_port: Some(0),
                ..Default::default()
            }],
            selector: BTreeMap::from([("app".to_string(), "web".to_string())]),
            r#type: Some("ClusterIP".into()),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus { load_balancer: Some(Default::default()), conditions: vec![] }),
    };
    let got = decode_body(&envelope("v1", "Service", svc.encode_to_vec())).unwrap();
    assert_eq!(
        got["spec"],
        json!({"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
               "selector": {"app": "web"}, "type": "ClusterIP"})
    );
    assert_eq!(got["status"], json!({"loadBalancer": {}}));
}

#[test]
fn unknown_kinds_are_unsupported_media_type() {
    let err = decode_body(&envelope("batch/v1", "Job", vec![])).unwrap_err();
    assert_eq!(err.code, 415);
    assert_eq!(err.reason, "UnsupportedMediaType");
    let err = decode_body(&envelope("platform.example.com/v1alpha1", "Microservice", vec![])).unwrap_err();
    assert_eq!(err.code, 415);
}

#[test]
fn malformed_bodies_are_bad_requests() {
    assert_eq!(decode_body(b"").unwrap_err().code, 400);
    assert_eq!(decode_body(b"{\"kind\":\"Namespace\"}").unwrap_err().code, 400);
    assert_eq!(decode_body(b"k8s\0\xff\xff\xff").unwrap_err().code, 400);
    // A valid envelope around a truncated Namespace.
    let mut raw = core::Namespace { metadata: Some(new_meta("todo")), ..Default::default() }.encode_to_vec();
    raw.truncate(raw.len() - 2);
    assert_eq!(decode_body(&envelope("v1", "Namespace", raw)).unwrap_err().code, 400);
    // No TypeMeta.
    let mut body = MAGIC.to_vec();
    body.extend(Unknown::default().encode_to_vec());
    assert_eq!(decode_body(&body).unwrap_err().code, 400);
}

/// Bodies captured from `/usr/bin/kubectl` 1.32 against a logging server (hex): `create namespace todo`,
/// `create configmap cfg --from-literal=a=1 --from-literal=b=two`, `create secret generic s1
/// --from-literal=a=b`, `create deployment web --image=nginx:1.27 --replicas=3 --port=80 -- nginx -g
/// 'daemon off;'`, `auth can-i get pods`, `create service clusterip web --tcp=80:8080`.
const NS: &[&str] = &[
    "6b3873000a0f0a02763112094e616d657370616365121c0a140a04746f646f12001a0022002a0032003800420012001a020a",
    "001a002200",
];
const CM: &[&str] = &[
    "6b3873000a0f0a0276311209436f6e6669674d617012270a130a0363666712001a0022002a0032003800420012060a016112",
    "013112080a0162120374776f1a002200",
];
const SECRET: &[&str] = &[
    "6b3873000a0c0a0276311206536563726574121e0a120a02733112001a0022002a0032003800420012060a01611201621a00",
    "1a002200",
];
const DEPLOY: &[&str] = &[
    "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412d6010a1f0a0377656212001a0022002a003200380042",
    "005a0a0a03617070120377656212a4010803120c0a0a0a0361707012037765621a89010a1c0a0012001a0022002a00320038",
    "0042005a0a0a0361707012037765621269124b0a056e67696e78120a6e67696e783a312e32371a056e67696e781a022d671a",
    "0b6461656d6f6e206f66663b2a00320a0a001000185022002a0042006a007200800100880100900100a201001a0032004200",
    "4a0052005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a002200",
];
const SSAR: &[&str] = &[
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363657373",
    "526576696577123c0a100a0012001a0022002a00320038004200121e0a1c0a0764656661756c7412036765741a0022002a04",
    "706f647332003a001a08080012001a0020001a002200",
];
const SVC: &[&str] = &[
    "6b3873000a0d0a02763112075365727669636512690a1f0a0377656212001a0022002a003200380042005a0a0a0361707012",
    "0377656212420a1b0a0738302d38303830120354435018502207080010903f1a002800120a0a0361707012037765621a0022",
    "09436c757374657249503a00420052005a00600068001a020a001a002200",
];

fn unhex(parts: &[&str]) -> Vec<u8> {
    let hex: String = parts.concat();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn real_kubectl_bodies_decode_to_what_kubectl_prints_as_json() {
    // The JSON `kubectl create ... --dry-run=client -o json` prints, minus `creationTimestamp: null`.
    let cases = [
        (NS, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "todo"}, "spec": {}, "status": {}})),
        (
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1", "b": "two"}}),
        ),
        (SECRET, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "data": {"a": "Yg=="}})),
        (
            DEPLOY,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"],
                                                 "ports": [{"containerPort": 80}], "resources": {}}]},
                    },
                    "strategy": {},
                },
                "status": {},
            }),
        ),
        (
            SSAR,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
                      "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}},
                      "status": {"allowed": false}}),
        ),
        (
            SVC,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"app": "web"}},
                     "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                              "selector": {"app": "web"}, "type": "ClusterIP"},
                     "status": {"loadBalancer": {}}}),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(decode_body(&unhex(body)).unwrap(), want);
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_body(&bytes);
        let mut body = MAGIC.to_vec();
        body.extend(&bytes);
        let _ = decode_body(&body);
    }

    #[test]
    fn random_typed_payloads_never_panic(kind in 0usize..6, bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let (api_version, kind) = [
            ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("apps/v1", "Deployment"),
            ("authorization.k8s.io/v1", "SelfSubjectAccessReview"), ("v1", "Service"),
        ][kind];
        if let Ok(v) = decode_body(&envelope(api_version, kind, bytes)) {
            prop_assert_eq!(&v["kind"], kind);
        }
    }
}
