//! The install bundle: `microservice-operator manifests` prints what `kubectl kustomize deploy` renders, the
//! bundle holds what a platform team expects of an operator install (restricted pods, probes, least-privilege
//! RBAC), and a Kubernetes API server accepts every object in it.

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use kube::runtime::{conditions, wait::await_condition};
use microservice_operator::cli::manifests::{RESOURCES, bundle_objects, bundle_yaml};
use microservice_testkit::{Cluster, ClusterOptions};
use serde_json::Value;

const OPERATOR_NS: &str = "microservice-operator";
const DEADLINE: Duration = Duration::from_secs(60);

fn read_yaml(relative: &str) -> Value {
    let path = crate::support::repo_root().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap()
}

fn objects() -> Vec<Value> {
    bundle_objects().expect("the bundle parses as YAML")
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<T: serde::de::DeserializeOwned>(objects: &[Value], kind: &str, namespace: &str) -> T {
    let found: Vec<&Value> =
        of_kind(objects, kind).into_iter().filter(|o| o["metadata"]["namespace"] == namespace).collect();
    assert_eq!(found.len(), 1, "exactly one {kind} in namespace {namespace}");
    serde_json::from_value(found[0].clone()).unwrap()
}

/// Deleting the bundle (`kubectl delete -k deploy`, `manifests | kubectl delete -f -`) deletes what it creates: it
/// must never hold the watched namespace, where the teams' workloads live.
#[test]
fn the_bundle_does_not_own_the_watched_namespace() {
    let objects = objects();
    let namespaces: Vec<&str> =
        of_kind(&objects, "Namespace").iter().filter_map(|n| n["metadata"]["name"].as_str()).collect();
    assert_eq!(namespaces, [OPERATOR_NS], "only the operator's own namespace");
    let sample = read_yaml("deploy/samples/namespace.yaml");
    assert_eq!((sample["kind"].as_str(), sample["metadata"]["name"].as_str()), (Some("Namespace"), Some("todo")));
}

#[test]
fn manifests_embed_the_kustomization_resources_in_order() {
    let kustomization = read_yaml("deploy/kustomization.yaml");
    let listed: Vec<&str> = kustomization["resources"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let embedded: Vec<&str> = RESOURCES.iter().map(|(name, _)| *name).collect();
    assert_eq!(embedded, listed, "cli/manifests.rs RESOURCES must list deploy/kustomization.yaml's resources");
    for (name, text) in RESOURCES {
        let on_disk = std::fs::read_to_string(crate::support::repo_root().join("deploy").join(name)).unwrap();
        assert_eq!(*text, on_disk, "deploy/{name} changed since the binary was built");
    }
    // Anything else (namespace:, labels:, patches:, images:, generators) would rewrite or add objects, and the
    // embedded files would no longer be the bundle.
    let mut keys: Vec<&str> = kustomization.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["apiVersion", "kind", "resources", "sortOptions"]);
    assert_eq!(kustomization["sortOptions"]["order"], "fifo", "the bundle keeps the listed order");
}

#[test]
fn samples_stay_out_of_the_bundle() {
    let objects = objects();
    assert!(of_kind(&objects, "Microservice").is_empty());
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "Deployment",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ],
        "namespaces and the CRD come before what needs them"
    );
}

#[test]
fn the_binary_prints_what_kubectl_kustomize_renders() {
    let printed = Command::new(env!("CARGO_BIN_EXE_microservice-operator")).arg("manifests").output().unwrap();
    assert!(printed.status.success(), "manifests failed: {}", String::from_utf8_lossy(&printed.stderr));
    let printed = String::from_utf8(printed.stdout).unwrap();
    assert_eq!(printed, bundle_yaml());
    let printed: Vec<Value> = serde_saphyr::from_multiple(&printed).unwrap();
    let printed: Vec<Value> = printed.into_iter().filter(|d| !d.is_null()).collect();

    let rendered =
        match Command::new("kubectl").arg("kustomize").arg(crate::support::repo_root().join("deploy")).output() {
            Ok(output) => output,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("SKIPPED the comparison with `kubectl kustomize deploy`: kubectl is not on PATH");
                return;
            }
            Err(e) => panic!("cannot run kubectl: {e}"),
        };
    assert!(
        rendered.status.success(),
        "kubectl kustomize deploy failed: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let rendered: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8(rendered.stdout).unwrap()).unwrap();
    let rendered: Vec<Value> = rendered.into_iter().filter(|d| !d.is_null()).collect();
    assert_eq!(printed.len(), rendered.len(), "same number of objects");
    for (printed, rendered) in printed.iter().zip(&rendered) {
        let what = format!("{} {}", printed["kind"], printed["metadata"]["name"]);
        if let Some(path) = first_difference(printed, rendered, "") {
            panic!("`manifests` and `kubectl kustomize deploy` differ for {what} at {path}");
        }
    }
}

/// Where two parsed objects differ, comparing numbers by value (YAML's `65535.0` and kustomize's `65535` are one
/// number to the API server).
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => (x.as_f64() != y.as_f64()).then(|| format!("{path}: {x} vs {y}")),
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort_unstable();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(x), Some(y)) => first_difference(x, y, &format!("{path}.{k}")),
                _ => Some(format!("{path}.{k}: present on one side only")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]")))
        }
        _ => (a != b).then(|| format!("{path}: {a} vs {b}")),
    }
}

#[test]
fn the_operator_pods_meet_the_restricted_pod_security_standard() {
    let objects = objects();
    let deployment: Deployment = one(&objects, "Deployment", OPERATOR_NS);
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("microservice-operator"));
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert_eq!(pod.containers.len(), 1);
    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
    assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    assert!(security.privileged.is_none_or(|p| !p));

    let port = &container.ports.as_ref().unwrap()[0];
    assert_eq!((port.container_port, port.name.as_deref()), (8080, Some("http-metrics")));
    let probe_path = |probe: &Option<k8s_openapi::api::core::v1::Probe>| {
        let get = probe.as_ref().unwrap().http_get.as_ref().unwrap();
        assert_eq!(serde_json::to_value(&get.port).unwrap(), "http-metrics");
        get.path.clone().unwrap()
    };
    assert_eq!(probe_path(&container.liveness_probe), "/healthz");
    assert_eq!(probe_path(&container.readiness_probe), "/readyz");
    let resources = container.resources.as_ref().unwrap();
    for key in ["cpu", "memory"] {
        assert!(resources.requests.as_ref().unwrap().contains_key(key), "requests.{key}");
        assert!(resources.limits.as_ref().unwrap().contains_key(key), "limits.{key}");
    }
    assert_eq!(container.args.as_deref().unwrap(), ["run", "--namespace", "todo"]);
    let from_field = |name: &str| {
        let env = container.env.as_ref().unwrap().iter().find(|e| e.name == name).unwrap();
        env.value_from.as_ref().unwrap().field_ref.as_ref().unwrap().field_path.clone()
    };
    assert_eq!(from_field("POD_NAME"), "metadata.name");
    assert_eq!(from_field("POD_NAMESPACE"), "metadata.namespace");
}

/// The Deployment runs the binary's own `run` command with flags it accepts, and the Lease its Role names is the
/// one `run` elects on by default.
#[test]
fn the_deployment_runs_what_the_binary_accepts_on_the_lease_its_role_names() {
    let objects = objects();
    let deployment: Deployment = one(&objects, "Deployment", OPERATOR_NS);
    let args = deployment.spec.unwrap().template.spec.unwrap().containers[0].args.clone().unwrap();
    // clap parses every argument before acting on --help: an unknown flag or a bad value fails here.
    let help = Command::new(env!("CARGO_BIN_EXE_microservice-operator")).args(&args).arg("--help").output().unwrap();
    assert!(help.status.success(), "the binary refuses {args:?}: {}", String::from_utf8_lossy(&help.stderr));
    let help = String::from_utf8(help.stdout).unwrap();
    let after_flag = help.split_once("--leader-election-id").map(|(_, rest)| rest).unwrap_or_default();
    let default = after_flag.split_once("[default: ").and_then(|(_, rest)| rest.split_once(']')).map(|(d, _)| d);

    let role: Role = serde_json::from_value(
        of_kind(&objects, "Role").into_iter().find(|r| r["metadata"]["namespace"] == OPERATOR_NS).unwrap().clone(),
    )
    .unwrap();
    let named: Vec<String> = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.resources.as_deref() == Some(&["leases".to_string()][..]))
        .flat_map(|r| r.resource_names.unwrap_or_default())
        .collect();
    assert_eq!(named, [default.unwrap_or("<no default in `run --help`>")], "the Role names the default Lease");
}

#[test]
fn the_metrics_service_selects_the_operator_pods() {
    let objects = objects();
    let deployment: Deployment = one(&objects, "Deployment", OPERATOR_NS);
    let service: k8s_openapi::api::core::v1::Service = one(&objects, "Service", OPERATOR_NS);
    let spec = service.spec.unwrap();
    let pod_labels = deployment.spec.unwrap().template.metadata.unwrap().labels.unwrap();
    for (key, value) in spec.selector.unwrap() {
        assert_eq!(pod_labels.get(&key), Some(&value), "the Service selects on {key}={value}");
    }
    let port = &spec.ports.unwrap()[0];
    assert_eq!(port.port, 8080);
    assert_eq!(serde_json::to_value(&port.target_port).unwrap(), "http-metrics");
}

#[test]
fn rbac_is_namespaced_and_never_touches_secrets() {
    let objects = objects();
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(of_kind(&objects, kind).is_empty(), "the operator watches one namespace: no {kind}");
    }
    let roles: Vec<Role> =
        of_kind(&objects, "Role").into_iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect();
    assert_eq!(roles.len(), 2);
    for role in &roles {
        for rule in role.rules.as_deref().unwrap_or_default() {
            let resources = rule.resources.as_deref().unwrap_or_default();
            let groups = rule.api_groups.as_deref().unwrap_or_default();
            for wildcard in [&rule.verbs[..], resources, groups] {
                assert!(!wildcard.iter().any(|v| v == "*"), "no wildcards: {rule:?}");
            }
            assert!(!resources.iter().any(|r| r.starts_with("secrets")), "nothing on Secrets: {rule:?}");
            assert!(rule.non_resource_urls.is_none());
        }
    }
    let bindings: Vec<RoleBinding> =
        of_kind(&objects, "RoleBinding").into_iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect();
    for binding in &bindings {
        let role = roles
            .iter()
            .find(|r| {
                r.metadata.name == Some(binding.role_ref.name.clone())
                    && r.metadata.namespace == binding.metadata.namespace
            })
            .unwrap_or_else(|| panic!("RoleBinding {:?} binds a Role of its namespace", binding.metadata.name));
        assert_eq!(binding.role_ref.kind, "Role", "{:?}", role.metadata.name);
        let subjects = binding.subjects.as_deref().unwrap();
        assert_eq!(subjects.len(), 1);
        assert_eq!(
            (subjects[0].kind.as_str(), subjects[0].name.as_str(), subjects[0].namespace.as_deref()),
            ("ServiceAccount", "microservice-operator", Some(OPERATOR_NS))
        );
    }
    let namespaces: Vec<&str> = bindings.iter().filter_map(|b| b.metadata.namespace.as_deref()).collect();
    assert_eq!(namespaces, ["todo", OPERATOR_NS], "the watched namespace and the Lease's namespace");
}

/// What an apply can change: the object without its status, the status writers' managedFields entries, the
/// resourceVersion and the managedFields' times (and the order they give). A controller's status write can make the
/// server rewrite the next apply (the admission policy's type checking, the Deployment's rollout: kubectl's time
/// moves) though it changes no field; what the bundle makes the server rewrite or drop is what `rewritten` finds.
fn applied_part(object: &DynamicObject) -> Value {
    let mut v = serde_json::to_value(object).unwrap();
    v.as_object_mut().unwrap().remove("status");
    let meta = v["metadata"].as_object_mut().unwrap();
    meta.remove("resourceVersion");
    if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
        entries.retain(|e| e["subresource"] != "status");
        for entry in entries.iter_mut() {
            entry.as_object_mut().unwrap().remove("time");
        }
        entries.sort_by_key(|e| e["manager"].to_string());
    }
    v
}

/// Every field the bundle writes that the server stores with another value or not at all, as JSON pointers; what the
/// server adds (defaults, metadata) is no difference.
fn rewritten(written: &Value, stored: &Value, at: &str, found: &mut Vec<String>) {
    match (written, stored) {
        (Value::Object(written), Value::Object(stored)) => {
            for (key, value) in written {
                let at = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                match stored.get(key) {
                    Some(kept) => rewritten(value, kept, &at, found),
                    None => found.push(format!("{at}: dropped")),
                }
            }
        }
        (Value::Array(written), Value::Array(stored)) if written.len() == stored.len() => {
            for (i, (value, kept)) in written.iter().zip(stored).enumerate() {
                rewritten(value, kept, &format!("{at}/{i}"), found);
            }
        }
        // A number is the same number however it is spelled: the real server answers the CRD schema's 20.0 as 20.
        (Value::Number(w), Value::Number(s)) if w.as_f64() == s.as_f64() => {}
        _ if written == stored => {}
        _ => found.push(format!("{at}: wrote {written}, stored {stored}")),
    }
}

#[test]
fn a_field_the_server_rewrites_or_drops_is_found_and_one_it_adds_is_not() {
    let written =
        serde_json::json!({"metadata": {"annotations": {"a/b": "x"}}, "spec": {"cpu": "1000m", "ports": [1, 2.0]}});
    let stored = serde_json::json!({"metadata": {"uid": "u"}, "spec": {"cpu": "1", "ports": [1, 2], "added": true}});
    let mut found = Vec::new();
    rewritten(&written, &stored, "", &mut found);
    assert_eq!(found, ["/metadata/annotations: dropped", "/spec/cpu: wrote \"1000m\", stored \"1\""]);
    found.clear();
    rewritten(&written["spec"], &stored["spec"], "", &mut found);
    rewritten(&stored, &stored, "", &mut found);
    assert_eq!(found, ["/cpu: wrote \"1000m\", stored \"1\""]);
}

/// Server-side applies one object of the bundle, resolving its resource through discovery as kubectl does.
async fn apply(client: &kube::Client, object: &Value) -> DynamicObject {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, capabilities) =
        discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await.unwrap();
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            Api::namespaced_with(client.clone(), object["metadata"]["namespace"].as_str().unwrap(), &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let name = object["metadata"]["name"].as_str().unwrap();
    let params = PatchParams::apply("kubectl").force();
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("the API server refused {kind} {name}: {e}"))
}

#[tokio::test]
async fn every_object_of_the_bundle_is_accepted_by_the_api_server() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let client = cluster.client();
    // The documented first step: the watched namespace exists apart from the bundle.
    apply(&client, &read_yaml("deploy/samples/namespace.yaml")).await;
    let objects = objects();
    for object in &objects {
        let stored = apply(&client, object).await;
        assert_eq!(stored.metadata.name.as_deref(), object["metadata"]["name"].as_str());
        assert!(stored.metadata.uid.is_some(), "{} stored", object["kind"]);
        if object["kind"] == "CustomResourceDefinition" {
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            let established =
                await_condition(crds, "microservices.platform.example.com", conditions::is_crd_established());
            tokio::time::timeout(DEADLINE, established).await.unwrap().unwrap();
        }
    }

    // The controller-manager type-checks each policy and writes its status.
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    for object in objects.iter().filter(|o| o["kind"] == "ValidatingAdmissionPolicy") {
        let name = object["metadata"]["name"].as_str().unwrap();
        let checked = await_condition(policies.clone(), name, |p: Option<&ValidatingAdmissionPolicy>| {
            p.and_then(|p| Some((p.status.as_ref()?.observed_generation?, p.metadata.generation?)))
                .is_some_and(|(observed, generation)| observed == generation)
        });
        tokio::time::timeout(DEADLINE, checked).await.expect("the policy's status describes its generation").unwrap();
    }

    // The bundle is what the server stores (no field it rewrites or drops), and applying it again changes nothing.
    for object in &objects {
        let stored = apply(&client, object).await;
        let mut found = Vec::new();
        rewritten(object, &serde_json::to_value(&stored).unwrap(), "", &mut found);
        assert!(
            found.is_empty(),
            "the server stores {} {} otherwise: {found:?}",
            object["kind"],
            object["metadata"]["name"]
        );
        let before = applied_part(&stored);
        let again = applied_part(&apply(&client, object).await);
        let changed = serde_json::to_string(&json_patch::diff(&before, &again)).unwrap();
        assert_eq!(
            before, again,
            "re-applying {} {} is a no-op; it changed {changed}",
            object["kind"], object["metadata"]["name"]
        );
    }

    // The operator Deployment is valid enough for the controllers to roll it out (its namespace enforces the
    // restricted Pod Security Standard, which the real server's admission checks).
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), OPERATOR_NS);
    let started = Instant::now();
    loop {
        let status = deployments.get("microservice-operator").await.unwrap().status.unwrap_or_default();
        if status.available_replicas == Some(2) {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "the operator Deployment never became available: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `kubectl ARGS` against `cluster` (its own kubectl on the real backend), with `stdin` piped in when given.
async fn kubectl(cluster: &Cluster, dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> Option<String> {
    use tokio::io::AsyncWriteExt;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig_yaml()).unwrap();
    let mut child = match tokio::process::Command::new(cluster.kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .current_dir(crate::support::repo_root())
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED `kubectl {}` of the bundle: kubectl is not on PATH", args.join(" "));
            return None;
        }
        Err(e) => panic!("cannot run kubectl: {e}"),
    };
    let mut pipe = child.stdin.take().unwrap();
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).await.unwrap();
    }
    drop(pipe);
    let out = tokio::time::timeout(DEADLINE, child.wait_with_output()).await.expect("kubectl finished").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_bundle_installs_with_kubectl_apply() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("bundle-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let printed = Command::new(env!("CARGO_BIN_EXE_microservice-operator")).arg("manifests").output().unwrap();
    let bundle = String::from_utf8(printed.stdout).unwrap();
    let expected: Vec<String> = objects()
        .iter()
        .map(|o| {
            let kind = o["kind"].as_str().unwrap().to_lowercase();
            let group =
                o["apiVersion"].as_str().unwrap().split_once('/').map(|(g, _)| format!(".{g}")).unwrap_or_default();
            format!("{kind}{group}/{}", o["metadata"]["name"].as_str().unwrap())
        })
        .collect();

    let namespace = std::fs::read_to_string(crate::support::repo_root().join("deploy/samples/namespace.yaml")).unwrap();
    let Some(created_ns) = kubectl(&cluster, &dir, &["apply", "-f", "-"], Some(&namespace)).await else { return };
    assert_eq!(created_ns.trim(), "namespace/todo created");
    let first = kubectl(&cluster, &dir, &["apply", "-f", "-"], Some(&bundle)).await.unwrap();
    let lines: Vec<&str> = first.lines().collect();
    let created: Vec<String> = expected.iter().map(|e| format!("{e} created")).collect();
    assert_eq!(lines, created, "every object created, in the bundle's order");
    // A server-side dry run of the checkout's bundle passes admission and validation and stores nothing. (Before the
    // install it cannot: the real server refuses a dry-run create in a namespace that does not exist yet.)
    let dry = kubectl(&cluster, &dir, &["apply", "--dry-run=server", "-k", "deploy"], None).await.unwrap();
    assert_eq!(dry.lines().count(), expected.len(), "{dry}");
    assert!(dry.lines().all(|l| l.ends_with(" unchanged (server dry run)")), "{dry}");
    // Applying again, from the binary or from the checkout, is a no-op: the server stores what the bundle says.
    let unchanged: Vec<String> = expected.iter().map(|e| format!("{e} unchanged")).collect();
    let second = kubectl(&cluster, &dir, &["apply", "-f", "-"], Some(&bundle)).await.unwrap();
    assert_eq!(second.lines().collect::<Vec<_>>(), unchanged);
    let mut third: Vec<String> =
        kubectl(&cluster, &dir, &["apply", "-k", "deploy"], None).await.unwrap().lines().map(str::to_string).collect();
    let mut unchanged_sorted = unchanged.clone();
    third.sort_unstable();
    unchanged_sorted.sort_unstable();
    assert_eq!(third, unchanged_sorted, "`kubectl apply -k deploy` after the binary's bundle changes nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_comparison_sees_real_differences_and_only_those() {
    use serde_json::json;
    assert_eq!(first_difference(&json!({"max": 65535.0, "l": [1]}), &json!({"max": 65535, "l": [1.0]}), ""), None);
    assert_eq!(first_difference(&json!({"a": {"b": 1}}), &json!({"a": {"b": 2}}), "").as_deref(), Some(".a.b: 1 vs 2"));
    assert!(first_difference(&json!({"a": 1}), &json!({"a": 1, "b": 2}), "").is_some());
    assert!(first_difference(&json!([1, 2]), &json!([1]), "").is_some());
    assert!(first_difference(&json!("x"), &json!("y"), "").is_some());
}
