//! End-to-end tests through the real `kubectl` (1.32 at /usr/bin/kubectl): an in-process emulator, its
//! kubeconfig in a temp dir, and assertions on what kubectl prints. Skipped, with a message, when kubectl is
//! missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::{sim, start};
use kubesim::Sim;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};

const KUBECTL: &str = "/usr/bin/kubectl";
/// Upper bound for one kubectl invocation; they take well under a second against the emulator.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound for something that happens asynchronously (controllers, watch lines).
const EVENTUALLY: Duration = Duration::from_secs(30);

struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// A kubectl bound to one emulator through a private kubeconfig and discovery cache.
struct Kubectl {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Kubectl {
    /// None (and a message) when kubectl is not installed.
    fn new(sim: &Sim) -> Option<Kubectl> {
        if !Path::new(KUBECTL).exists() {
            eprintln!("SKIPPED: {KUBECTL} is not installed; the kubectl end-to-end tests need it");
            return None;
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kubesim-kubectl-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, sim.kubeconfig_yaml()).unwrap();
        Some(Kubectl { dir, kubeconfig })
    }

    /// A kubectl with this kubeconfig (e.g. a ServiceAccount's token); kubectl must exist.
    fn with_kubeconfig(yaml: &str) -> Kubectl {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kubesim-kubectl-token-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, yaml).unwrap();
        Kubectl { dir, kubeconfig }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(KUBECTL);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    async fn run_with(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().unwrap();
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(input.as_bytes()).await.unwrap();
            drop(pipe);
        }
        let out = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within {COMMAND_TIMEOUT:?}"))
            .unwrap();
        Output {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None, &[]).await
    }

    /// Runs kubectl and returns its stdout; panics with kubectl's stderr when it fails.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(out.success, "kubectl {args:?} failed:\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
        out.stdout
    }

    async fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run_with(args, Some(stdin), &[]).await;
        assert!(out.success, "kubectl {args:?} failed:\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
        out.stdout
    }

    /// Runs kubectl until its stdout satisfies `done`, within [`EVENTUALLY`]; returns the last stdout.
    async fn eventually(&self, args: &[&str], done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            let out = self.run(args).await;
            if out.success && done(&out.stdout) {
                return out.stdout;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl {args:?} never gave the expected output:\nstdout: {}\nstderr: {}",
                out.stdout,
                out.stderr
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>, deadline: Instant) -> String {
    tokio::time::timeout_at(deadline.into(), lines.next_line())
        .await
        .expect("kubectl get -w printed nothing in time")
        .unwrap()
        .expect("kubectl get -w ended")
}

/// Cells of the first table row whose first cell is `name`.
fn row<'a>(table: &'a str, name: &str) -> Option<Vec<&'a str>> {
    table.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|cells| cells.first() == Some(&name))
}

fn header(table: &str) -> Vec<&str> {
    table.lines().next().unwrap_or_default().split_whitespace().collect()
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.kubesim.dev
spec:
  group: test.kubesim.dev
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wd], categories: [all]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, enum: [red, green, blue]}
              size: {type: integer, minimum: 1, maximum: 10}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#;

const WIDGET: &str = r#"
apiVersion: test.kubesim.dev/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {color: red, size: 3}
"#;

async fn install_widget_crd(k: &Kubectl) {
    let out = k.ok_stdin(&["apply", "-f", "-"], WIDGET_CRD).await;
    assert_eq!(out.trim(), "customresourcedefinition.apiextensions.k8s.io/widgets.test.kubesim.dev created");
    k.ok(&["wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.test.kubesim.dev"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everyday_create_commands_send_protobuf_and_work() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };

    assert_eq!(k.ok(&["create", "namespace", "todo"]).await.trim(), "namespace/todo created");
    assert_eq!(k.ok(&["get", "namespace", "todo", "-o", "jsonpath={.status.phase}"]).await, "Active");

    let out = k.ok(&["create", "configmap", "cfg", "-n", "todo", "--from-literal=a=1", "--from-literal=b=two"]).await;
    assert_eq!(out.trim(), "configmap/cfg created");
    assert_eq!(k.ok(&["get", "cm", "cfg", "-n", "todo", "-o", "jsonpath={.data.a},{.data.b}"]).await, "1,two");

    let out = k.ok(&["create", "secret", "generic", "s1", "-n", "todo", "--from-literal=pw=hunter2"]).await;
    assert_eq!(out.trim(), "secret/s1 created");
    assert_eq!(k.ok(&["get", "secret", "s1", "-n", "todo", "-o", "jsonpath={.data.pw}"]).await, "aHVudGVyMg==");

    let out =
        k.ok(&["create", "deployment", "web", "-n", "todo", "--image=nginx:1.27", "--replicas=2", "--port=80"]).await;
    assert_eq!(out.trim(), "deployment.apps/web created");
    let got = k
        .ok(&[
            "get",
            "deploy",
            "web",
            "-n",
            "todo",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.strategy.type} {.metadata.generation}",
        ])
        .await;
    assert_eq!(got, "2 nginx:1.27 80 RollingUpdate 1", "the server defaults the strategy");

    // A second create of the same name is refused with upstream's wording.
    let dup = k.run(&["create", "namespace", "todo"]).await;
    assert!(!dup.success);
    assert!(
        dup.stderr.contains("Error from server (AlreadyExists): namespaces \"todo\" already exists"),
        "{}",
        dup.stderr
    );

    // Creating in a namespace that does not exist is a 404.
    let missing = k.run(&["create", "configmap", "x", "-n", "nope"]).await;
    assert!(!missing.success);
    assert!(missing.stderr.contains("namespaces \"nope\" not found"), "{}", missing.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_answers() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let out = k.run(&["auth", "can-i", "get", "pods"]).await;
    assert_eq!(out.stdout.trim(), "yes", "stderr: {}", out.stderr);
    let who = k.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await;
    assert_eq!(who, "system:admin");
}

const OPERATOR_RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: todo}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: todo}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op, namespace: todo}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [get, list, watch, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op, namespace: todo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: op}
subjects:
- {kind: ServiceAccount, name: op, namespace: todo}
"#;

/// `kubesim serve --rbac` as a user meets it: the admin applies RBAC, mints a token with `kubectl create
/// token`, and kubectl with that token is held to the Role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_holds_a_service_account_to_its_role() {
    let sim = start(Sim::builder().rbac(true)).await;
    let Some(admin) = Kubectl::new(&sim) else { return };
    admin.ok_stdin(&["apply", "-f", "-"], OPERATOR_RBAC).await;
    let token = admin.ok(&["create", "token", "op", "-n", "todo"]).await;
    let op = Kubectl::with_kubeconfig(&sim.kubeconfig_yaml_for_token(token.trim()));

    let can = |verb: &'static str, what: &'static str| {
        let op = &op;
        async move { op.run(&["auth", "can-i", verb, what, "-n", "todo"]).await.stdout.trim().to_string() }
    };
    assert_eq!(can("patch", "deployments").await, "yes");
    assert_eq!(can("delete", "deployments").await, "no");
    assert_eq!(can("get", "secrets").await, "no");
    let who = op.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await;
    assert_eq!(who, "system:serviceaccount:todo:op");

    op.ok(&["get", "deployments", "-n", "todo"]).await;
    let denied = op.run(&["get", "deployments", "-n", "default"]).await;
    assert!(!denied.success);
    assert!(
        denied.stderr.contains(
            "Error from server (Forbidden): deployments.apps is forbidden: User \"system:serviceaccount:todo:op\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"default\""
        ),
        "{}",
        denied.stderr
    );
    let create = op.run(&["create", "configmap", "x", "-n", "todo"]).await;
    assert!(create.stderr.contains("cannot create resource \"configmaps\""), "{}", create.stderr);
    assert!(sim.requests().code(403) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_builtins_and_a_new_crd() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let before = k.ok(&["api-resources"]).await;
    assert_eq!(header(&before), ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]);
    assert_eq!(row(&before, "deployments"), Some(vec!["deployments", "deploy", "apps/v1", "true", "Deployment"]));
    assert_eq!(row(&before, "namespaces"), Some(vec!["namespaces", "ns", "v1", "false", "Namespace"]));
    assert!(row(&before, "widgets").is_none());

    install_widget_crd(&k).await;
    // kubectl caches discovery; a new type shows up once the cache is invalidated, as on a real cluster.
    let after = k.eventually(&["api-resources", "--cached=false"], |out| row(out, "widgets").is_some()).await;
    assert_eq!(row(&after, "widgets"), Some(vec!["widgets", "wd", "test.kubesim.dev/v1", "true", "Widget"]));
    let apps = k.ok(&["api-resources", "--api-group=apps", "-o", "name"]).await;
    assert!(apps.lines().any(|l| l == "deployments.apps"), "{apps}");
    assert!(apps.lines().any(|l| l == "replicasets.apps"), "{apps}");

    let explain = k.ok(&["explain", "widgets.spec"]).await;
    assert!(explain.contains("color") && explain.contains("size"), "{explain}");
    let explain = k.ok(&["explain", "deployment.spec.template.spec.containers.image"]).await;
    assert!(explain.contains("FIELD: image <string>"), "{explain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_lifecycle() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    install_widget_crd(&k).await;

    // Without --validate=false: kubectl must find the kind in /openapi/v3 and validate server-side.
    let out = k.ok_stdin(&["apply", "-f", "-"], WIDGET).await;
    assert_eq!(out.trim(), "widget.test.kubesim.dev/w1 created");
    assert_eq!(k.ok_stdin(&["apply", "-f", "-"], WIDGET).await.trim(), "widget.test.kubesim.dev/w1 unchanged");

    let table = k.ok(&["get", "wd"]).await;
    assert_eq!(header(&table), ["NAME", "COLOR", "SIZE", "AGE"]);
    let cells = row(&table, "w1").unwrap();
    assert_eq!(&cells[..3], ["w1", "red", "3"]);
    assert!(cells[3].ends_with('s') || cells[3].ends_with('m'), "an age like 2s: {table}");

    let yaml = k.ok(&["get", "widget", "w1", "-o", "yaml"]).await;
    for line in ["apiVersion: test.kubesim.dev/v1", "kind: Widget", "  color: red", "  generation: 1", "  uid: "] {
        assert!(yaml.contains(line), "{line:?} missing from\n{yaml}");
    }

    let out = k.ok(&["patch", "widget", "w1", "--type", "merge", "-p", r#"{"spec":{"size":5}}"#]).await;
    assert_eq!(out.trim(), "widget.test.kubesim.dev/w1 patched");
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size} {.metadata.generation}"]).await, "5 2");

    // A patch that changes nothing says so, and the object keeps its resourceVersion.
    let rv = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.resourceVersion}"]).await;
    let out = k.ok(&["patch", "widget", "w1", "--type", "merge", "-p", r#"{"spec":{"size":5}}"#]).await;
    assert_eq!(out.trim(), "widget.test.kubesim.dev/w1 patched (no change)");
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.resourceVersion}"]).await, rv);

    // Schema validation is server-side and reported the way kubectl prints a 422.
    let bad =
        k.run(&["patch", "widget", "w1", "--type", "merge", "-p", r#"{"spec":{"color":"pink","size":50}}"#]).await;
    assert!(!bad.success);
    assert!(bad.stderr.contains("is invalid"), "{}", bad.stderr);
    assert!(bad.stderr.contains("spec.color") && bad.stderr.contains("spec.size"), "{}", bad.stderr);

    // The status subresource: kubectl patch --subresource=status changes status only.
    let out = k
        .ok(&["patch", "widget", "w1", "--subresource=status", "--type", "merge", "-p", r#"{"status":{"ready":true}}"#])
        .await;
    assert_eq!(out.trim(), "widget.test.kubesim.dev/w1 patched");
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.status.ready} {.metadata.generation}"]).await, "true 2");

    let out = k.ok(&["delete", "widget", "w1"]).await;
    assert_eq!(out.trim(), "widget.test.kubesim.dev \"w1\" deleted");
    let gone = k.run(&["get", "widget", "w1"]).await;
    assert!(!gone.success);
    assert!(
        gone.stderr.contains("Error from server (NotFound): widgets.test.kubesim.dev \"w1\" not found"),
        "{}",
        gone.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_changes() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    install_widget_crd(&k).await;
    k.ok_stdin(&["apply", "-f", "-"], WIDGET).await;

    let mut child = k.command(&["get", "widgets", "-w"]).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + EVENTUALLY;
    let first = next_line(&mut lines, deadline).await;
    assert_eq!(header(&first), ["NAME", "COLOR", "SIZE", "AGE"]);
    let initial = next_line(&mut lines, deadline).await;
    assert_eq!(row(&initial, "w1").map(|c| c[..3].to_vec()), Some(vec!["w1", "red", "3"]));

    k.ok(&["patch", "widget", "w1", "--type", "merge", "-p", r#"{"spec":{"color":"blue","size":7}}"#]).await;
    let changed = next_line(&mut lines, deadline).await;
    assert_eq!(row(&changed, "w1").map(|c| c[..3].to_vec()), Some(vec!["w1", "blue", "7"]), "{changed}");

    k.ok(&["delete", "widget", "w1"]).await;
    // kubectl get -w prints the deleted object's last state once more.
    let deleted = next_line(&mut lines, deadline).await;
    assert_eq!(row(&deleted, "w1").map(|c| c[..3].to_vec()), Some(vec!["w1", "blue", "7"]), "{deleted}");
    child.kill().await.unwrap();
}

const DEPLOYMENT_V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
      - name: sidecar
        image: busybox:1.36
"#;

const DEPLOYMENT_V2: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.28
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_on_a_deployment() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    assert_eq!(k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V1).await.trim(), "deployment.apps/web created");
    assert_eq!(k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V1).await.trim(), "deployment.apps/web unchanged");

    // A label added by someone else survives the next apply (three-way merge), removed items go.
    k.ok(&["label", "deployment", "web", "team=blue"]).await;
    let out = k.run_with(&["apply", "-f", "-"], Some(DEPLOYMENT_V2), &[]).await;
    assert!(out.success, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "deployment.apps/web configured");
    assert!(!out.stderr.contains("warning"), "kubectl computed the patch without complaint: {}", out.stderr);
    let got = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].name} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[*].name} {.metadata.labels.team} {.spec.template.spec.containers[0].terminationMessagePath}",
        ])
        .await;
    assert_eq!(got, "web nginx:1.28 A blue /dev/termination-log");

    // replace and edit validate server-side too (no --validate=false).
    let replaced = DEPLOYMENT_V2.replace("replicas: 1", "replicas: 2");
    assert_eq!(k.ok_stdin(&["replace", "-f", "-"], &replaced).await.trim(), "deployment.apps/web replaced");
    let edited = k
        .run_with(&["edit", "deployment", "web"], None, &[("KUBE_EDITOR", "sed -i -e s/replicas:\\ 2/replicas:\\ 4/")])
        .await;
    assert!(edited.success, "{}", edited.stderr);
    assert_eq!(edited.stdout.trim(), "deployment.apps/web edited");
    assert_eq!(k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]).await, "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_records_kubectl_as_manager() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], DEPLOYMENT_V1).await;
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    let managers = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ])
        .await;
    assert!(managers.split(' ').any(|m| m == "kubectl"), "{managers}");
    let ops = k
        .ok(&[
            "get",
            "deployment",
            "web",
            "--show-managed-fields",
            "-o",
            r#"jsonpath={.metadata.managedFields[?(@.manager=="kubectl")].operation}"#,
        ])
        .await;
    assert_eq!(ops, "Apply");

    let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], DEPLOYMENT_V2).await;
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    assert_eq!(
        k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].name}"]).await,
        "web",
        "fields this manager stopped applying are removed"
    );

    // Another manager changing a field kubectl owns conflicts.
    let other = DEPLOYMENT_V2.replace("nginx:1.28", "nginx:1.29");
    let conflict =
        k.run_with(&["apply", "--server-side", "--field-manager=rancher", "-f", "-"], Some(&other), &[]).await;
    assert!(!conflict.success);
    assert!(conflict.stderr.contains("conflict with \"kubectl\""), "{}", conflict.stderr);
    assert!(conflict.stderr.contains(".spec.template.spec.containers[name=\"web\"].image"), "{}", conflict.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_rollout_status_and_orphaning_delete() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    k.ok(&["create", "deployment", "web", "--image=nginx:1.27"]).await;
    assert_eq!(k.ok(&["scale", "deployment", "web", "--replicas=3"]).await.trim(), "deployment.apps/web scaled");
    assert_eq!(k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]).await, "3");

    let out = k.ok(&["rollout", "status", "deployment/web", "--timeout=60s"]).await;
    assert!(out.trim_end().ends_with("deployment \"web\" successfully rolled out"), "{out}");
    let table = k.ok(&["get", "deployment", "web"]).await;
    assert_eq!(header(&table), ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(row(&table, "web").map(|c| c[..4].to_vec()), Some(vec!["web", "3/3", "3", "3"]));

    let rs = k.ok(&["get", "replicasets", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"]).await;
    assert!(rs.starts_with("web-") && !rs.contains(' '), "one ReplicaSet: {rs}");
    let out = k.ok(&["delete", "deployment", "web", "--cascade=orphan"]).await;
    assert_eq!(out.trim(), "deployment.apps \"web\" deleted");
    // The ReplicaSet stays, released by the garbage collector (no owner reference left).
    k.eventually(&["get", "replicaset", &rs, "-o", "jsonpath={.metadata.ownerReferences}"], |out| out.is_empty()).await;
    assert!(k.run(&["get", "deployment", "web"]).await.stderr.contains("NotFound"));
}

/// The project's own CRD and sample, when the repository has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_crd_and_sample() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (crd, sample) = (root.join("deploy/crd.yaml"), root.join("deploy/samples/todo-api.yaml"));
    if !crd.exists() || !sample.exists() {
        eprintln!("SKIPPED: deploy/crd.yaml or deploy/samples/todo-api.yaml is not in the repository yet");
        return;
    }
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let out = k.ok(&["apply", "-f", crd.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "customresourcedefinition.apiextensions.k8s.io/microservices.platform.example.com created");
    k.ok(&["wait", "--for=condition=Established", "--timeout=30s", "crd/microservices.platform.example.com"]).await;
    let resources = k.eventually(&["api-resources", "--cached=false"], |out| row(out, "microservices").is_some()).await;
    assert_eq!(
        row(&resources, "microservices"),
        Some(vec!["microservices", "ms", "platform.example.com/v1alpha1", "true", "Microservice"])
    );
    // The sample's own instructions: its namespace first.
    k.ok(&["create", "namespace", "todo"]).await;
    let out = k.ok(&["apply", "-f", sample.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "microservice.platform.example.com/todo-api created");
    // A status as the operator writes it, so every printer column has a value to show.
    // The operator is behind: the pods still run 1.4.1 (generation 1 of a spec that now says 1.4.2 would show the
    // same), and the default columns show what runs and the generation it describes.
    let status = r#"{"status": {"phase": "Ready", "replicasSummary": "2/2", "image": "ghcr.io/example/todo-api:1.4.1", "observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True", "reason": "RolledOut", "message": "all replicas ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#;
    k.ok(&["patch", "ms", "todo-api", "-n", "todo", "--subresource=status", "--type=merge", "-p", status]).await;
    let table = k.ok(&["get", "ms", "-n", "todo"]).await;
    assert_eq!(header(&table), ["NAME", "READY", "PHASE", "IMAGE", "OBSERVED", "REPLICAS", "AGE"]);
    let cells = row(&table, "todo-api").unwrap();
    assert_eq!(cells[..6], ["todo-api", "True", "Ready", "ghcr.io/example/todo-api:1.4.1", "1", "2/2"], "{table}");
    let table = k.ok(&["get", "ms", "-A"]).await;
    assert_eq!(header(&table), ["NAMESPACE", "NAME", "READY", "PHASE", "IMAGE", "OBSERVED", "REPLICAS", "AGE"]);
    let wide = k.ok(&["get", "ms", "-n", "todo", "-o", "wide"]).await;
    assert!(header(&wide).ends_with(&["AGE", "SPEC-IMAGE", "GENERATION", "REASON"]), "{wide}");
    let wide_cells = row(&wide, "todo-api").unwrap();
    assert!(wide_cells.contains(&"ghcr.io/example/todo-api:1.4.2"), "the spec's image in -o wide: {wide}");
}

/// `kubectl get events` (core/v1) shows what kube-rs's Recorder wrote through events.k8s.io/v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_shows_what_the_recorder_wrote() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    k.ok(&["create", "configmap", "subject"]).await;
    let cm = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(sim.client(), "default")
        .get("subject")
        .await
        .unwrap();
    let recorder = Recorder::new(sim.client(), Reporter { controller: "microservice-operator".into(), instance: None });
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidSpec".into(),
        note: Some("spec.port must be between 1 and 65535".into()),
        action: "Validate".into(),
        secondary: None,
    };
    recorder.publish(&event, &kube::Resource::object_ref(&cm, &())).await.unwrap();
    let table = k.ok(&["get", "events"]).await;
    assert_eq!(header(&table), ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], "{table}");
    let line = table.lines().find(|l| l.contains("InvalidSpec")).unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("Warning") && line.contains("configmap/subject"), "{line}");
    assert!(line.ends_with("spec.port must be between 1 and 65535"), "{line}");
}

/// kubectl asks for strict field validation: a typo in a built-in kind is an error, as on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_in_a_built_in_kind_is_rejected() {
    let sim = sim().await;
    let Some(k) = Kubectl::new(&sim) else { return };
    let typo = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo}\ndata: {a: '1'}\ndtaa: {b: '2'}\n";
    let out = k.run_with(&["apply", "-f", "-"], Some(typo), &[]).await;
    assert!(!out.success);
    assert!(
        out.stderr.contains("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"dtaa\""),
        "{}",
        out.stderr
    );
    let warned = k.run_with(&["apply", "--validate=warn", "-f", "-"], Some(typo), &[]).await;
    assert!(warned.success, "{}", warned.stderr);
    assert!(warned.stderr.contains("unknown field \"dtaa\""), "{}", warned.stderr);
    assert_eq!(k.ok(&["get", "configmap", "typo", "-o", "jsonpath={.data.a}"]).await, "1");
}
