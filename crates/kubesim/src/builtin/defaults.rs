//! The stateless defaults a real kube-apiserver applies to built-in objects: the `SetDefaults_*` functions of
//! `pkg/apis/*/v1/defaults.go`, the allocation-free parts of the Service registry, the create-time parts of the
//! Namespace and Pod strategies, and the Pod admission plugins that need no state (ServiceAccount name, Priority,
//! DefaultTolerationSeconds). Stateful parts (clusterIP and nodePort allocation, the service-account token volume)
//! are the caller's.
//!
//! "Unset" follows Go: a missing or null field, and for non-pointer Go fields also `""` or `0`.

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;

pub fn apply(rt: &ResourceType, obj: &mut Value) {
    if rt.is_crd() {
        return;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => pod(obj),
        ("", "Service") => service(obj),
        ("", "Namespace") => namespace(obj),
        ("", "Secret") => {
            if let Some(m) = obj.as_object_mut() {
                set_str(m, "type", "Opaque");
            }
        }
        ("", "Endpoints") => {
            for subset in each_mut(obj, "subsets") {
                for port in each_mut(subset, "ports") {
                    port_protocol(port);
                }
            }
        }
        ("discovery.k8s.io", "EndpointSlice") => {
            for port in each_mut(obj, "ports") {
                if let Some(m) = port.as_object_mut() {
                    set_val(m, "name", json!(""));
                    set_val(m, "protocol", json!("TCP"));
                }
            }
        }
        ("apps", "Deployment") => deployment(obj),
        ("autoscaling", "HorizontalPodAutoscaler") => super::hpa::default(obj),
        ("apps", "ReplicaSet") => {
            let spec = child_obj(obj, "spec");
            set_val(spec, "replicas", json!(1));
            pod_template(obj);
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            for subject in each_mut(obj, "subjects") {
                if let Some(m) = subject.as_object_mut() {
                    let kind = m.get("kind").and_then(Value::as_str).unwrap_or_default();
                    if matches!(kind, "User" | "Group") {
                        set_str(m, "apiGroup", "rbac.authorization.k8s.io");
                    }
                }
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            let spec = child_obj(obj, "spec");
            set_str(spec, "failurePolicy", "Fail");
            if let Some(constraints) = spec.get_mut("matchConstraints") {
                match_resources(constraints);
            }
        }
        // A binding's matchResources is defaulted only when given.
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            if let Some(resources) = obj.pointer_mut("/spec/matchResources") {
                match_resources(resources);
            }
        }
        _ => {}
    }
}

/// `SetDefaults_MatchResources` and the rules' `scope`, as admissionregistration/v1 defaults them.
fn match_resources(resources: &mut Value) {
    let Some(m) = resources.as_object_mut() else { return };
    set_str(m, "matchPolicy", "Equivalent");
    set_val(m, "namespaceSelector", json!({}));
    set_val(m, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for rule in each_mut(resources, key) {
            if let Some(r) = rule.as_object_mut() {
                set_str(r, "scope", "*");
            }
        }
    }
}

/// The object's field `key` as an object, created when missing or not an object.
pub(crate) fn child_obj<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let Value::Object(m) = v else { unreachable!("just made an object") };
    let child = m.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !child.is_object() {
        *child = Value::Object(Map::new());
    }
    match child {
        Value::Object(c) => c,
        _ => unreachable!("just made an object"),
    }
}

/// The elements of the array at `key`, if there is one.
pub(crate) fn each_mut<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten()
}

fn is_unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Defaults a Go pointer field: only missing or null counts as unset.
fn set_val(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

/// Defaults a Go value field (string or number): also `""` / `0` count as unset.
fn set_str(m: &mut Map<String, Value>, key: &str, value: &str) {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), json!(value));
    }
}

fn set_num(m: &mut Map<String, Value>, key: &str, value: i64) {
    if is_unset(m.get(key)) {
        m.insert(key.to_string(), json!(value));
    }
}

fn port_protocol(port: &mut Value) {
    if let Some(m) = port.as_object_mut() {
        set_str(m, "protocol", "TCP");
    }
}

fn deployment(obj: &mut Value) {
    let spec = child_obj(obj, "spec");
    set_val(spec, "replicas", json!(1));
    set_val(spec, "revisionHistoryLimit", json!(10));
    set_val(spec, "progressDeadlineSeconds", json!(600));
    let strategy = child_obj_map(spec, "strategy");
    set_str(strategy, "type", "RollingUpdate");
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let ru = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
        if let Some(ru) = ru.as_object_mut() {
            set_val(ru, "maxUnavailable", json!("25%"));
            set_val(ru, "maxSurge", json!("25%"));
        } else {
            *ru = json!({"maxUnavailable": "25%", "maxSurge": "25%"});
        }
    }
    pod_template(obj);
}

fn pod_template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        pod_spec(spec, false);
    }
}

fn pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else { return };
    pod_spec(spec, true);
    let Some(m) = spec.as_object_mut() else { return };
    set_val(m, "enableServiceLinks", json!(true));
    // Admission (ServiceAccount, Priority, DefaultTolerationSeconds), stateless parts.
    set_str(m, "serviceAccountName", "default");
    let sa = m.get("serviceAccountName").cloned().unwrap_or(json!("default"));
    set_val(m, "serviceAccount", sa);
    if m.get("priorityClassName").is_none_or(|v| is_unset(Some(v))) {
        set_val(m, "priority", json!(0));
    }
    set_str(m, "preemptionPolicy", "PreemptLowerPriority");
    let tolerations = m.entry("tolerations").or_insert_with(|| json!([]));
    if let Some(list) = tolerations.as_array_mut() {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            let present = list.iter().any(|t| {
                let k = t.get("key").and_then(Value::as_str);
                let effect = t.get("effect").and_then(Value::as_str).unwrap_or_default();
                (k == Some(key) || k.is_none()) && (effect.is_empty() || effect == "NoExecute")
            });
            if !present {
                list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
            }
        }
    }
    // PrepareForCreate: a new pod is Pending, with its QoS class.
    let qos = qos_class(spec);
    let status = child_obj(obj, "status");
    set_str(status, "phase", "Pending");
    set_str(status, "qosClass", qos);
}

/// `qos.GetPodQOS`, comparing quantities by their string form.
fn qos_class(spec: &Value) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for key in ["containers", "initContainers"] {
        for c in spec.get(key).and_then(Value::as_array).into_iter().flatten() {
            let requests = c.pointer("/resources/requests").and_then(Value::as_object);
            let limits = c.pointer("/resources/limits").and_then(Value::as_object);
            let relevant = |m: Option<&Map<String, Value>>| {
                m.map(|m| m.keys().filter(|k| *k == "cpu" || *k == "memory").count()).unwrap_or(0)
            };
            if relevant(requests) + relevant(limits) > 0 {
                any = true;
            }
            for r in ["cpu", "memory"] {
                let l = limits.and_then(|m| m.get(r));
                let q = requests.and_then(|m| m.get(r));
                if l.is_none() || q.is_some_and(|q| Some(q) != l) {
                    guaranteed = false;
                }
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn pod_spec(spec: &mut Value, is_pod: bool) {
    let Some(m) = spec.as_object_mut() else { return };
    set_str(m, "dnsPolicy", "ClusterFirst");
    set_str(m, "restartPolicy", "Always");
    set_val(m, "securityContext", json!({}));
    set_val(m, "terminationGracePeriodSeconds", json!(30));
    set_str(m, "schedulerName", "default-scheduler");
    let host_network = m.get("hostNetwork").and_then(Value::as_bool).unwrap_or(false);
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in each_mut(spec, key) {
            container(c, is_pod, host_network && is_pod);
        }
    }
    for v in each_mut(spec, "volumes") {
        volume(v);
    }
}

/// `parsers.ParseImageName`: no tag and no digest means `latest`.
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_some() => None,
        None => Some("latest"),
    }
}

fn container(c: &mut Value, is_pod: bool, host_network: bool) {
    let Some(m) = c.as_object_mut() else { return };
    let image = m.get("image").and_then(Value::as_str).unwrap_or_default();
    let policy = if !image.is_empty() && image_tag(image) == Some("latest") { "Always" } else { "IfNotPresent" };
    set_str(m, "imagePullPolicy", policy);
    set_str(m, "terminationMessagePath", "/dev/termination-log");
    set_str(m, "terminationMessagePolicy", "File");
    // A non-pointer struct in Go: always serialised, as `{}` when empty.
    set_val(m, "resources", json!({}));
    if is_pod {
        // SetDefaults_Pod: requests default to limits.
        if let Some(res) = m.get_mut("resources").and_then(Value::as_object_mut)
            && let Some(limits) = res.get("limits").and_then(Value::as_object).cloned()
        {
            let requests = child_obj_map(res, "requests");
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
    for port in each_mut(c, "ports") {
        if let Some(p) = port.as_object_mut() {
            set_str(p, "protocol", "TCP");
            if host_network && is_unset(p.get("hostPort")) {
                let cp = p.get("containerPort").cloned().unwrap_or(json!(0));
                p.insert("hostPort".into(), cp);
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_num(p, "timeoutSeconds", 1);
            set_num(p, "periodSeconds", 10);
            set_num(p, "successThreshold", 1);
            set_num(p, "failureThreshold", 3);
            if let Some(h) = p.get_mut("httpGet") {
                http_get(h);
            }
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(h) = c.get_mut("lifecycle").and_then(|l| l.get_mut(hook)).and_then(|h| h.get_mut("httpGet")) {
            http_get(h);
        }
    }
    for env in each_mut(c, "env") {
        if let Some(vf) = env.get_mut("valueFrom") {
            object_field_ref(vf);
        }
    }
}

fn child_obj_map<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let child = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if !child.is_object() {
        *child = json!({});
    }
    match child {
        Value::Object(c) => c,
        _ => unreachable!("just made an object"),
    }
}

fn http_get(h: &mut Value) {
    if let Some(m) = h.as_object_mut() {
        set_str(m, "path", "/");
        set_str(m, "scheme", "HTTP");
    }
}

/// fieldRef.apiVersion defaults to v1; resourceFieldRef.divisor is a non-pointer Quantity, serialised as "0".
fn object_field_ref(holder: &mut Value) {
    if let Some(f) = holder.get_mut("fieldRef").and_then(Value::as_object_mut) {
        set_str(f, "apiVersion", "v1");
    }
    if let Some(r) = holder.get_mut("resourceFieldRef").and_then(Value::as_object_mut) {
        set_val(r, "divisor", json!("0"));
    }
}

fn volume(v: &mut Value) {
    let Some(m) = v.as_object_mut() else { return };
    if m.keys().all(|k| k == "name") {
        m.insert("emptyDir".into(), json!({}));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(src) = m.get_mut(key).and_then(Value::as_object_mut) {
            set_val(src, "defaultMode", json!(420));
        }
    }
    if let Some(h) = m.get_mut("hostPath").and_then(Value::as_object_mut) {
        set_val(h, "type", json!(""));
    }
    if let Some(d) = m.get_mut("downwardAPI") {
        for item in each_mut(d, "items") {
            object_field_ref(item);
        }
    }
    if let Some(p) = m.get_mut("projected") {
        for source in each_mut(p, "sources") {
            if let Some(d) = source.get_mut("downwardAPI") {
                for item in each_mut(d, "items") {
                    object_field_ref(item);
                }
            }
            if let Some(t) = source.get_mut("serviceAccountToken").and_then(Value::as_object_mut) {
                set_val(t, "expirationSeconds", json!(3600));
            }
        }
    }
}

fn service(obj: &mut Value) {
    let spec = child_obj(obj, "spec");
    set_str(spec, "type", "ClusterIP");
    set_str(spec, "sessionAffinity", "None");
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or_default().to_string();
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let has_timeout =
                spec.get("sessionAffinityConfig").and_then(|c| c.pointer("/clientIP/timeoutSeconds")).is_some();
            if !has_timeout {
                spec.insert("sessionAffinityConfig".into(), json!({"clientIP": {"timeoutSeconds": 10800}}));
            }
        }
        _ => {}
    }
    for port in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(p) = port.as_object_mut() {
            set_str(p, "protocol", "TCP");
            if is_unset(p.get("targetPort"))
                && let Some(n) = p.get("port").cloned()
            {
                p.insert("targetPort".into(), n);
            }
        }
    }
    let has_external_ips = spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let externally_accessible = ty == "LoadBalancer" || ty == "NodePort" || (ty == "ClusterIP" && has_external_ips);
    if externally_accessible {
        set_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set_val(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_val(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if ty != "ExternalName" {
        // The registry keeps clusterIP and clusterIPs in step.
        let ip = spec.get("clusterIP").and_then(Value::as_str).unwrap_or_default().to_string();
        let ips_empty = spec.get("clusterIPs").and_then(Value::as_array).is_none_or(|a| a.is_empty());
        if !ip.is_empty() && ips_empty {
            spec.insert("clusterIPs".into(), json!([ip]));
        } else if ip.is_empty()
            && !ips_empty
            && let Some(first) = spec.get("clusterIPs").and_then(|a| a.get(0)).cloned()
        {
            spec.insert("clusterIP".into(), first);
        }
    }
    let status = child_obj(obj, "status");
    set_val(status, "loadBalancer", json!({}));
}

/// The IP family fields of a Service that has cluster IPs. Upstream's IP allocator sets them inside the
/// registry, after the field manager ran, so no manager owns them (not decoder defaulting).
pub fn service_ip_families(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    // Headless services without a selector are dual-stack by default (on this single-stack cluster: IPv4).
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let no_selector = spec.get("selector").and_then(Value::as_object).is_none_or(|m| m.is_empty());
    let policy = if headless && no_selector { "RequireDualStack" } else { "SingleStack" };
    set_val(spec, "ipFamilyPolicy", json!(policy));
    let families_empty = spec.get("ipFamilies").and_then(Value::as_array).is_none_or(|a| a.is_empty());
    if families_empty {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
}

/// Namespace create: the `kubernetes` finalizer is added by the registry's PrepareForCreate, after the field
/// manager ran (upstream keeps it out of defaulting because /finalize may remove it later).
pub fn namespace_finalizer(obj: &mut Value) {
    let spec = child_obj(obj, "spec");
    let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
    if !finalizers.is_array() {
        *finalizers = json!([]);
    }
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == "kubernetes")
    {
        list.push(json!("kubernetes"));
    }
}

fn namespace(obj: &mut Value) {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    if !name.is_empty() {
        let metadata = child_obj(obj, "metadata");
        let labels = child_obj_map(metadata, "labels");
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let status = child_obj(obj, "status");
    set_str(status, "phase", "Active");
}

fn crd(obj: &mut Value) {
    let spec = child_obj(obj, "spec");
    let names = child_obj_map(spec, "names");
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    set_str(names, "singular", &kind.to_lowercase());
    if !kind.is_empty() {
        set_str(names, "listKind", &format!("{kind}List"));
    }
    let conversion = child_obj_map(spec, "conversion");
    set_str(conversion, "strategy", "None");
    if let Some(svc) = conversion.get_mut("webhook").and_then(|w| w.pointer_mut("/clientConfig/service"))
        && let Some(s) = svc.as_object_mut()
    {
        set_val(s, "port", json!(443));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_types;

    fn rt(group: &str, kind: &str) -> ResourceType {
        builtin_types().into_iter().find(|t| t.group == group && t.kind == kind).unwrap()
    }

    fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
        apply(&rt(group, kind), &mut obj);
        obj
    }

    #[test]
    fn deployment_gets_every_upstream_default() {
        let d = defaulted(
            "apps",
            "Deployment",
            json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                 "readinessProbe": {"httpGet": {"port": 80}},
                 "env": [{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}
            ]}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["progressDeadlineSeconds"], 600);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["schedulerName"], "default-scheduler");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(pod["securityContext"], json!({}));
        assert!(pod.get("enableServiceLinks").is_none(), "templates do not get pod-only defaults");
        let c = &pod["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["resources"], json!({}));
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                   "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    }

    #[test]
    fn defaulting_is_idempotent_and_keeps_set_values() {
        let mut d = json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "template": {"spec": {
            "restartPolicy": "Always", "containers": [{"name": "a", "image": "x", "imagePullPolicy": "Never"}]}}}});
        let t = rt("apps", "Deployment");
        apply(&t, &mut d);
        let once = d.clone();
        apply(&t, &mut d);
        assert_eq!(d, once);
        assert_eq!(d["spec"]["replicas"], 0, "replicas is a pointer: 0 is a value");
        assert!(d["spec"]["strategy"].get("rollingUpdate").is_none());
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Never");
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            ("app@sha256:abcd", "IfNotPresent"),
            ("app:latest@sha256:abcd", "Always"),
        ];
        for (image, want) in cases {
            let p = defaulted("", "Pod", json!({"spec": {"containers": [{"name": "a", "image": image}]}}));
            assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], want, "{image}");
        }
    }

    #[test]
    fn pod_specific_defaults() {
        let p = defaulted(
            "",
            "Pod",
            json!({"spec": {"containers": [{"name": "a", "image": "x:1",
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                "volumes": [{"name": "tmp"}, {"name": "cfg", "configMap": {"name": "c"}}]}}),
        );
        let spec = &p["spec"];
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["tolerations"].as_array().map(Vec::len), Some(2));
        assert_eq!(spec["containers"][0]["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], 420);
        assert_eq!(p["status"], json!({"phase": "Pending", "qosClass": "Guaranteed"}));
        let best = defaulted("", "Pod", json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
        assert_eq!(best["status"]["qosClass"], "BestEffort");
    }

    #[test]
    fn service_defaults() {
        let s = defaulted(
            "",
            "Service",
            json!({"spec": {"selector": {"app": "web"}, "ports": [{"port": 80}, {"port": 443, "targetPort": "https", "protocol": "UDP"}]}}),
        );
        let spec = &s["spec"];
        assert_eq!(spec["type"], "ClusterIP");
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
        assert_eq!(spec["ports"][1], json!({"port": 443, "protocol": "UDP", "targetPort": "https"}));
        assert!(spec.get("ipFamilies").is_none(), "the allocator's, after the field manager");
        assert_eq!(spec["internalTrafficPolicy"], "Cluster");
        assert!(spec.get("externalTrafficPolicy").is_none());
        assert!(spec.get("clusterIP").is_none(), "allocation is the caller's");
        assert_eq!(s["status"], json!({"loadBalancer": {}}));

        let np = defaulted(
            "",
            "Service",
            json!({"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}),
        );
        assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
        assert_eq!(np["spec"]["allocateLoadBalancerNodePorts"], true);
        assert_eq!(np["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"], 10800);

        let mut headless = defaulted("", "Service", json!({"spec": {"clusterIP": "None"}}));
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        service_ip_families(&mut headless);
        assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
        let mut plain = s.clone();
        service_ip_families(&mut plain);
        assert_eq!(
            (&plain["spec"]["ipFamilies"], &plain["spec"]["ipFamilyPolicy"]),
            (&json!(["IPv4"]), &json!("SingleStack"))
        );

        let mut ext =
            defaulted("", "Service", json!({"spec": {"type": "ExternalName", "externalName": "example.com"}}));
        service_ip_families(&mut ext);
        assert!(ext["spec"].get("ipFamilies").is_none());
        assert!(ext["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn namespace_defaults() {
        let ns = defaulted("", "Namespace", json!({"metadata": {"name": "todo", "labels": {"a": "b"}}}));
        assert_eq!(ns["metadata"]["labels"], json!({"a": "b", "kubernetes.io/metadata.name": "todo"}));
        assert!(ns.get("spec").is_none(), "the finalizer is PrepareForCreate's, after the field manager");
        assert_eq!(ns["status"]["phase"], "Active");
        let mut created = json!({"spec": {"finalizers": ["example.com/x"]}});
        namespace_finalizer(&mut created);
        assert_eq!(created["spec"]["finalizers"], json!(["example.com/x", "kubernetes"]));
    }

    #[test]
    fn small_type_defaults() {
        assert_eq!(defaulted("", "Secret", json!({"data": {}}))["type"], "Opaque");
        assert_eq!(defaulted("apps", "ReplicaSet", json!({"spec": {}}))["spec"]["replicas"], 1);
        let rb = defaulted(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            json!({"subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s"}]}),
        );
        assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        let crd = defaulted(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            json!({"spec": {"names": {"kind": "Microservice", "plural": "microservices"}}}),
        );
        assert_eq!(crd["spec"]["names"]["singular"], "microservice");
        assert_eq!(crd["spec"]["names"]["listKind"], "MicroserviceList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        let sa = defaulted("", "ServiceAccount", json!({"metadata": {"name": "x"}}));
        assert_eq!(sa, json!({"metadata": {"name": "x"}}));
    }
}
