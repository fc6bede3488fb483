//! Object semantics through kube-rs: generation and resourceVersion rules, no-op writes, the status split,
//! optimistic locking, finalizers, namespaces, Services, CRD registration, and bad input answered with a Status.

use std::time::Duration;

use crate::support::api_only;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::{Api, Client};
use kubesim::Sim;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn rv(meta: &kube::api::ObjectMeta) -> u64 {
    meta.resource_version.as_deref().unwrap().parse().unwrap()
}

fn api_code<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> u16 {
    match r {
        Err(kube::Error::Api(s)) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn generation_follows_spec_changes_and_no_op_writes_keep_the_resource_version() {
    let sim = api_only().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    let d = api.create(&PostParams::default(), &deployment("web")).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert!(d.status.is_none() || d.status == Some(Default::default()));

    let pp = PatchParams::default();
    let d2 = api.patch("web", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    assert_eq!(d2.metadata.generation, Some(2));
    assert!(rv(&d2.metadata) > rv(&d.metadata));

    let d3 = api.patch("web", &pp, &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}}))).await.unwrap();
    assert_eq!(d3.metadata.generation, Some(2), "metadata-only writes keep the generation");
    assert!(rv(&d3.metadata) > rv(&d2.metadata));

    let d4 = api.patch("web", &pp, &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}}))).await.unwrap();
    assert_eq!(rv(&d4.metadata), rv(&d3.metadata), "a no-op write keeps the resourceVersion");

    let s = api
        .patch_status("web", &pp, &Patch::Merge(json!({"status": {"observedGeneration": 2, "replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(s.metadata.generation, Some(2), "/status writes never bump the generation");
    assert_eq!(s.status.unwrap().replicas, Some(3));
}

/// Upstream's Deployment status strategy resets only spec and labels, so the Deployment controller writes its
/// revision annotation with the status in one write; a custom resource's /status keeps only the status (below).
#[tokio::test]
async fn a_deployment_status_write_keeps_annotations_but_not_labels_or_spec() {
    let sim = api_only().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    api.create(&PostParams::default(), &deployment("web")).await.unwrap();
    let pp = PatchParams::default();
    let s = api
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({
                "metadata": {"annotations": {"deployment.kubernetes.io/revision": "1"}, "labels": {"team": "a"}},
                "spec": {"replicas": 7},
                "status": {"observedGeneration": 1}
            })),
        )
        .await
        .unwrap();
    let annotations = s.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("deployment.kubernetes.io/revision").map(String::as_str), Some("1"));
    assert!(!s.metadata.labels.unwrap_or_default().contains_key("team"), "/status writes ignore labels");
    assert_eq!(s.spec.and_then(|spec| spec.replicas), Some(1), "/status writes ignore the spec");
    assert_eq!(s.metadata.generation, Some(1));
    assert_eq!(s.status.and_then(|st| st.observed_generation), Some(1));
}

#[tokio::test]
async fn a_no_op_write_sends_no_watch_event() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "1"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let start = created.metadata.resource_version.clone().unwrap();
    let mut events = api.watch(&WatchParams::default().timeout(10), &start).await.unwrap().boxed();
    let pp = PatchParams::default();
    api.patch("c", &pp, &Patch::Merge(json!({"data": {"k": "1"}}))).await.unwrap();
    api.patch("c", &pp, &Patch::Merge(json!({"data": {"k": "2"}}))).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), events.try_next()).await.unwrap().unwrap().unwrap();
    match first {
        WatchEvent::Modified(c) => assert_eq!(c.data.unwrap()["k"], "2", "the no-op write produced an event"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn put_with_a_stale_resource_version_conflicts() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "1"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    api.patch("c", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "2"}}))).await.unwrap();
    let code = api_code(api.replace("c", &PostParams::default(), &created).await);
    assert_eq!(code, 409);
    assert_eq!(api_code(api.create(&PostParams::default(), &cm).await), 409, "AlreadyExists");
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap()
}

fn widgets(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    Api::namespaced_with(client, "default", &ApiResource::from_gvk_with_plural(&gvk, "widgets"))
}

fn widget(name: &str, body: Value) -> DynamicObject {
    let mut v = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    for (k, val) in body.as_object().unwrap() {
        v[k] = val.clone();
    }
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn crds_register_their_resources_and_take_them_away() {
    let sim = api_only().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    let crd = crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    for t in ["Established", "NamesAccepted"] {
        assert!(conditions.iter().any(|c| c.type_ == t && c.status == "True"), "{t} missing: {conditions:?}");
    }

    let api = widgets(sim.client());
    api.create(&PostParams::default(), &widget("w1", json!({"spec": {"size": 1}}))).await.unwrap();
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);

    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(api.list(&ListParams::default()).await), 404);
    // Re-creating it starts empty: the objects went with it.
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn custom_resources_split_status_from_the_rest() {
    let sim = api_only().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let api = widgets(sim.client());
    let pp = PatchParams::default();

    let w = api
        .create(&PostParams::default(), &widget("w", json!({"spec": {"size": 1}, "status": {"ready": true}})))
        .await
        .unwrap();
    assert!(w.data.get("status").is_none(), "create drops status");
    assert_eq!(w.metadata.generation, Some(1));

    let w = api.patch("w", &pp, &Patch::Merge(json!({"spec": {"size": 2}, "status": {"ready": true}}))).await.unwrap();
    assert!(w.data.get("status").is_none(), "main-endpoint writes ignore status");
    assert_eq!(w.metadata.generation, Some(2));

    let w = api
        .patch_status(
            "w",
            &pp,
            &Patch::Merge(json!({
                "metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}},
                "spec": {"size": 9},
                "status": {"ready": true}
            })),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.data["spec"]["size"], 2, "/status writes ignore the spec");
    assert!(w.metadata.labels.is_none(), "/status writes ignore labels");
    assert!(w.metadata.annotations.is_none(), "a custom resource's /status writes ignore annotations");
    assert_eq!(w.metadata.generation, Some(2));

    // Custom resources refuse unconditional updates.
    let mut unconditional = w.clone();
    unconditional.metadata.resource_version = None;
    assert_eq!(api_code(api.replace("w", &PostParams::default(), &unconditional).await), 422);
    assert_eq!(
        api_code(api.patch("w", &pp, &Patch::Strategic(json!({"spec": {"size": 3}}))).await),
        415,
        "strategic merge is for built-ins only"
    );
}

#[tokio::test]
async fn finalizers_hold_a_deletion_until_the_last_is_removed() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();

    let pending = api.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = pending.left().expect("a held deletion answers with the object");
    assert!(obj.metadata.deletion_timestamp.is_some());
    assert!(api.get("held").await.unwrap().metadata.deletion_timestamp.is_some());

    let pp = PatchParams::default();
    let add = Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}));
    assert_eq!(api_code(api.patch("held", &pp, &add).await), 422, "no new finalizers while deleting");

    api.patch("held", &pp, &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    assert_eq!(api_code(api.get("held").await), 404);
}

#[tokio::test]
async fn namespaces_gate_creation() {
    let sim = api_only().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "nowhere");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap();
    assert_eq!(api_code(cms.create(&PostParams::default(), &cm).await), 404);

    let nss: Api<Namespace> = Api::all(sim.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "todo"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "todo");
    cms.create(&PostParams::default(), &cm).await.unwrap();

    nss.delete("todo", &DeleteParams::default()).await.unwrap();
    let terminating = nss.get("todo").await.unwrap();
    assert_eq!(terminating.status.unwrap().phase.as_deref(), Some("Terminating"));
    let other: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "d"}})).unwrap();
    assert_eq!(api_code(cms.create(&PostParams::default(), &other).await), 403);
    assert_eq!(api_code(nss.delete("default", &DeleteParams::default()).await), 403);
}

#[tokio::test]
async fn services_get_a_cluster_ip_that_survives_updates() {
    let sim = api_only().await;
    let api: Api<Service> = Api::namespaced(sim.client(), "default");
    let kubernetes = api.get("kubernetes").await.unwrap();
    assert_eq!(kubernetes.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.1"));

    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &svc).await.unwrap();
    let spec = created.spec.clone().unwrap();
    let ip = spec.cluster_ip.clone().unwrap();
    assert!(ip.starts_with("10.9") && ip != "10.96.0.1", "{ip}");
    assert_eq!(spec.cluster_ips, Some(vec![ip.clone()]));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));

    let mut update = created.clone();
    update.spec.as_mut().unwrap().cluster_ip = None;
    update.spec.as_mut().unwrap().cluster_ips = None;
    let updated = api.replace("web", &PostParams::default(), &update).await.unwrap();
    assert_eq!(updated.spec.unwrap().cluster_ip, Some(ip));
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"generateName": "job-"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");

    let before = sim.cluster().resource_version();
    let dry = PostParams { dry_run: true, ..Default::default() };
    let named: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dry"}})).unwrap();
    api.create(&dry, &named).await.unwrap();
    assert_eq!(sim.cluster().resource_version(), before, "dry runs consume no resourceVersion");
    assert_eq!(api_code(api.get("dry").await), 404);

    let nameless: ConfigMap = serde_json::from_value(json!({"metadata": {}})).unwrap();
    assert_eq!(api_code(api.create(&PostParams::default(), &nameless).await), 422);
}

#[tokio::test]
async fn lists_paginate_with_continue_tokens() {
    let sim = api_only().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for i in 0..7 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("c{i}")}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    // A change between pages does not show up: pages are a consistent snapshot.
    let late: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c9"}})).unwrap();
    api.create(&PostParams::default(), &late).await.unwrap();
    let mut names: Vec<String> = first.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    let mut token = first.metadata.continue_;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api.list(&ListParams::default().limit(3).continue_token(&t)).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        token = page.metadata.continue_;
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    let bad = api.list(&ListParams::default().fields("data.k=v")).await;
    assert_eq!(api_code(bad), 400, "unsupported field selector");
}

/// One raw HTTP/1.1 exchange: (status code, body).
async fn raw(sim: &Sim, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
    raw_accept(sim, method, path, content_type, "application/json", body).await
}

async fn raw_accept(
    sim: &Sim,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: {content_type}\r\nAccept: {accept}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        sim.addr(),
        sim.token(),
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (413) before reading all of a large body.
    let _ = s.write_all(body).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let code: u16 = text.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4).unwrap_or(out.len());
    (code, out[split..].to_vec())
}

fn status_of(body: &[u8]) -> Value {
    let v: Value =
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(body)));
    assert_eq!(v["kind"], "Status", "{v}");
    v
}

#[tokio::test]
async fn bad_input_gets_the_right_status() {
    let sim = api_only().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cases: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        ("POST", cms, b"{not json".to_vec(), 400),
        ("POST", cms, br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(), 400),
        ("POST", cms, br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(), 400),
        ("POST", cms, br#"{"metadata":{"name":"Not_A_Name"}}"#.to_vec(), 422),
        ("POST", cms, br#"{"metadata":{"name":"x","namespace":"other"}}"#.to_vec(), 400),
        ("GET", "/api/v1/namespaces/default/nonsense", Vec::new(), 404),
        ("GET", "/apis/nope.example.com/v1/things", Vec::new(), 404),
        ("POST", cms, vec![b' '; 4 * 1024 * 1024], 413),
        ("PUT", cms, b"{}".to_vec(), 405),
    ];
    for (method, path, body, want) in cases {
        let (code, reply) = raw(&sim, method, path, "application/json", &body).await;
        assert_eq!(code, want, "{method} {path}: {}", String::from_utf8_lossy(&reply));
        assert_eq!(status_of(&reply)["code"], want);
    }
    let (code, reply) = raw(&sim, "POST", cms, "text/plain", b"hello").await;
    assert_eq!((code, status_of(&reply)["reason"].as_str()), (415, Some("UnsupportedMediaType")));
    let (code, reply) = raw(&sim, "POST", cms, "application/yaml", b"metadata:\n  name: from-yaml\n").await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&reply));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
        let json_values = proptest::arbitrary::any::<(String, i64, bool)>().prop_map(|(s, n, b)| {
            serde_json::to_vec(&json!({"metadata": {"name": s, "labels": {s.clone(): n}}, "data": b, "kind": s}))
                .unwrap()
        });
        prop_oneof![proptest::collection::vec(any::<u8>(), 0..512), json_values]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn request_decoding_never_fails_the_server(
            body in body_strategy(),
            ct in prop_oneof![
                Just("application/json"),
                Just("application/yaml"),
                Just("application/vnd.kubernetes.protobuf"),
                Just("application/merge-patch+json"),
                Just("application/json-patch+json"),
                Just("application/apply-patch+yaml"),
            ],
            patch in any::<bool>(),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let sim = api_only().await;
                let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
                let target: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "target"}})).unwrap();
                api.create(&PostParams::default(), &target).await.unwrap();
                let (method, path) = if patch {
                    ("PATCH", "/api/v1/namespaces/default/configmaps/target?fieldManager=fuzz")
                } else {
                    ("POST", "/api/v1/namespaces/default/configmaps")
                };
                let (code, reply) = raw(&sim, method, path, ct, &body).await;
                prop_assert!(code > 0 && code < 500, "{method} {ct}: {code} {}", String::from_utf8_lossy(&reply));
                if code >= 400 {
                    let v: Value = serde_json::from_slice(&reply).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(&v["kind"], "Status");
                    prop_assert_eq!(v["code"].as_u64(), Some(u64::from(code)));
                }
                // Still serving, data intact.
                prop_assert!(api.get("target").await.is_ok());
                Ok(())
            })?;
        }
    }
}

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "properties": {
                                "size": {"type": "integer", "minimum": 1},
                                "color": {"type": "string", "enum": ["blue", "red"], "default": "blue"}
                            }
                        }
                    }
                }}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn custom_resources_are_validated_pruned_and_defaulted_by_their_schema() {
    let sim = api_only().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client());
    crds.create(&PostParams::default(), &gadget_crd()).await.unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let api: Api<DynamicObject> =
        Api::namespaced_with(sim.client(), "default", &ApiResource::from_gvk_with_plural(&gvk, "gadgets"));
    let mk = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap()
    };

    let err = api.create(&PostParams::default(), &mk("bad", json!({"size": 0, "color": "green"}))).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!(status.code, 422);
    assert!(status.message.contains("spec.size") && status.message.contains("spec.color"), "{}", status.message);

    let ok = api.create(&PostParams::default(), &mk("ok", json!({"size": 2, "bogus": true}))).await.unwrap();
    assert_eq!(ok.data["spec"]["color"], "blue", "defaults applied");
    assert!(ok.data["spec"].get("bogus").is_none(), "unknown fields pruned");

    let body =
        br#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"strict"},"spec":{"size":1,"bogus":1}}"#;
    let (code, reply) = raw(
        &sim,
        "POST",
        "/apis/example.com/v1/namespaces/default/gadgets?fieldValidation=Strict",
        "application/json",
        body,
    )
    .await;
    assert_eq!(code, 400);
    assert!(status_of(&reply)["message"].as_str().unwrap().contains("unknown field \"spec.bogus\""));
}

#[tokio::test]
async fn kubectl_get_gets_a_table_and_metadata_clients_get_partial_objects() {
    let sim = api_only().await;
    let api: Api<Deployment> = Api::namespaced(sim.client(), "default");
    api.create(&PostParams::default(), &deployment("web")).await.unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments?limit=500";
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let (code, body) = raw_accept(&sim, "GET", path, "application/json", accept, b"").await;
    assert_eq!(code, 200);
    let table: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&columns[..5], ["Name", "Ready", "Up-to-date", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "web");
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");

    let accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (code, body) = raw_accept(&sim, "GET", path, "application/json", accept, b"").await;
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert!(list["items"][0].get("spec").is_none());
    assert_eq!(list["items"][0]["metadata"]["name"], "web");
}

#[tokio::test]
async fn built_in_kinds_prune_unknown_fields_and_strict_validation_rejects_them() {
    let sim = api_only().await;
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"strict"},"data":{"a":"1"},"bogus":1}"#;
    let (code, reply) =
        raw(&sim, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "application/json", body)
            .await;
    assert_eq!(code, 400);
    assert_eq!(
        status_of(&reply)["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
    );
    let (code, _) = raw(&sim, "POST", "/api/v1/namespaces/default/configmaps", "application/json", body).await;
    assert_eq!(code, 201);
    let stored = Api::<ConfigMap>::namespaced(sim.client(), "default").get("strict").await.unwrap();
    assert_eq!(stored.data.unwrap()["a"], "1");
    let raw_stored =
        sim.cluster().get(&sim.cluster().resolve("", "v1", "configmaps").unwrap(), Some("default"), "strict").unwrap();
    assert!(raw_stored.get("bogus").is_none(), "pruned: {raw_stored}");
}

/// x-kubernetes-validations transition rules (oldSelf) see the stored object on updates, not on create.
#[tokio::test]
async fn cel_transition_rules_compare_with_the_stored_object() {
    let sim = api_only().await;
    let mut crd = gadget_crd();
    let mut value = serde_json::to_value(&crd).unwrap();
    value["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        json!([{"rule": "self.size >= oldSelf.size", "message": "size may only grow"}]);
    crd = serde_json::from_value(value).unwrap();
    Api::<CustomResourceDefinition>::all(sim.client()).create(&PostParams::default(), &crd).await.unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let api: Api<DynamicObject> =
        Api::namespaced_with(sim.client(), "default", &ApiResource::from_gvk_with_plural(&gvk, "gadgets"));
    let patch = |size: i64| Patch::Merge(json!({"spec": {"size": size}}));
    let created: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 5}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &created).await.unwrap();
    api.patch("g", &PatchParams::default(), &patch(7)).await.unwrap();
    let err = api.patch("g", &PatchParams::default(), &patch(3)).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!(status.code, 422);
    assert!(status.message.contains("size may only grow"), "{}", status.message);
    assert_eq!(api.get("g").await.unwrap().data["spec"]["size"], 7);
}
