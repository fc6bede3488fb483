//! What a scheduler and kubelet would report for a pod, kwok-style (no containers run): the status documents of
//! each stage of a pod's life, as pure functions of the pod, its behaviour and the time.

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::util::{fnv1a32, time};
use super::{ImageRule, PodBehaviour};

/// The one fake node every pod is scheduled to.
pub const NODE_NAME: &str = "kubesim-node";
pub const HOST_IP: &str = "172.18.0.2";

/// The n-th pod IP: 10.244.0.2, 10.244.0.3, ... (the node's pod CIDR 10.244.0.0/16, skipping .0 and .1 of each
/// /24 as a bridge network would).
pub fn pod_ip(n: u32) -> String {
    let n = n % (256 * 253);
    format!("10.244.{}.{}", n / 253, n % 253 + 2)
}

fn ts(t: Timestamp) -> Value {
    serde_json::to_value(time(t)).unwrap_or(Value::Null)
}

fn containers(pod: &Value, key: &str) -> Vec<Value> {
    pod.pointer(&format!("/spec/{key}")).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn image(c: &Value) -> &str {
    c.get("image").and_then(Value::as_str).unwrap_or("")
}

fn cname(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The behaviour of a container by its image, by the first matching rule; None = becomes ready.
pub fn behaviour(rules: &[ImageRule], image: &str) -> Option<PodBehaviour> {
    rules.iter().find(|r| !r.image_contains.is_empty() && image.contains(&r.image_contains)).map(|r| r.behaviour)
}

/// Whether any container of the pod crash-loops (the kubelet then keeps restarting it).
pub fn crash_loops(pod: &Value, rules: &[ImageRule]) -> bool {
    containers(pod, "containers").iter().any(|c| behaviour(rules, image(c)) == Some(PodBehaviour::CrashLoop))
}

fn condition(type_: &str, status: &str, at: &Value, reason: Option<&str>, message: Option<String>) -> Value {
    let mut c = json!({"type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": at});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

/// The existing condition of a type, if its status is unchanged (so lastTransitionTime stays).
fn keep_condition(pod: &Value, type_: &str, status: &str) -> Option<Value> {
    pod.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_ && c["status"] == status).cloned()
}

/// The status after scheduling: Pending, PodScheduled True. Keeps what the API server set (qosClass).
pub fn scheduled_status(pod: &Value, now: Timestamp) -> Value {
    let mut status = pod.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    status["phase"] = json!("Pending");
    let scheduled = keep_condition(pod, "PodScheduled", "True")
        .unwrap_or_else(|| condition("PodScheduled", "True", &ts(now), None, None));
    status["conditions"] = json!([scheduled]);
    status
}

fn hex_id(seed: &str) -> String {
    (0..8).map(|i| format!("{:08x}", fnv1a32(format!("{seed}/{i}").as_bytes()))).collect()
}

// Over 80 lines on purpose: Builds one PodStatus field by field (phase, IPs, conditions, container states) as the
// kubelet reports it; the fields depend on each other's values, so it is one function.
/// The status once the containers started: Running, IPs, container states per the image rules.
/// `restarts` is how often crash-looping containers have restarted so far.
pub fn started_status(pod: &Value, rules: &[ImageRule], ip: &str, restarts: i32, now: Timestamp) -> Value {
    let mut status = pod.get("status").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
    let obj = status.as_object_mut().map(std::mem::take).unwrap_or_default();
    let mut status: Map<String, Value> = obj;
    let at = ts(now);
    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let ns = pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    // A running container keeps its start time across status rewrites.
    let started_at = pod.pointer("/status/startTime").cloned().filter(|v| !v.is_null()).unwrap_or_else(|| at.clone());
    let mut unready = Vec::new();
    let mut statuses = Vec::new();
    for c in containers(pod, "containers") {
        let (n, img) = (cname(&c), image(&c));
        let id = format!("containerd://{}", hex_id(&format!("{uid}/{n}/{restarts}")));
        let image_id = format!("{}@sha256:{}", img.split(':').next().unwrap_or(img), hex_id(img));
        let mut s = json!({"name": n, "image": img, "imageID": image_id, "containerID": id});
        match behaviour(rules, img) {
            None => {
                s["ready"] = json!(true);
                s["started"] = json!(true);
                s["restartCount"] = json!(0);
                s["state"] = json!({"running": {"startedAt": started_at}});
            }
            Some(PodBehaviour::NeverReady) => {
                unready.push(n.to_string());
                s["ready"] = json!(false);
                s["started"] = json!(true);
                s["restartCount"] = json!(0);
                s["state"] = json!({"running": {"startedAt": started_at}});
            }
            Some(PodBehaviour::CrashLoop) => {
                unready.push(n.to_string());
                let backoff = crash_backoff_seconds(restarts);
                s["ready"] = json!(false);
                s["started"] = json!(false);
                s["restartCount"] = json!(restarts);
                s["state"] = json!({"waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": format!("back-off {backoff}s restarting failed container={n} pod={name}_{ns}({uid})"),
                }});
                s["lastState"] = json!({"terminated": {
                    "exitCode": 1, "reason": "Error", "startedAt": at, "finishedAt": at,
                    "containerID": id,
                }});
            }
        }
        statuses.push(s);
    }
    let init: Vec<Value> = containers(pod, "initContainers")
        .iter()
        .map(|c| {
            json!({"name": cname(c), "image": image(c), "imageID": format!("{}@sha256:{}", image(c), hex_id(image(c))),
                   "ready": true, "restartCount": 0, "started": false,
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started_at,
                                            "finishedAt": started_at}}})
        })
        .collect();
    let ready = unready.is_empty();
    let (ready_status, reason, message) = if ready {
        ("True", None, None)
    } else {
        ("False", Some("ContainersNotReady"), Some(format!("containers with unready status: [{}]", unready.join(" "))))
    };
    let cond = |t: &str, st: &str, reason: Option<&str>, message: Option<String>| {
        keep_condition(pod, t, st).map_or_else(
            || condition(t, st, &at, reason, message.clone()),
            |mut c| {
                // Same status: the transition time stays, the message follows the containers.
                if let Some(m) = &message {
                    c["message"] = json!(m);
                }
                c
            },
        )
    };
    let scheduled = cond("PodScheduled", "True", None, None);
    let conditions = vec![
        cond("PodReadyToStartContainers", "True", None, None),
        cond("Initialized", "True", None, None),
        cond("Ready", ready_status, reason, message.clone()),
        cond("ContainersReady", ready_status, reason, message),
        scheduled,
    ];
    status.insert("phase".into(), json!("Running"));
    status.insert("conditions".into(), Value::Array(conditions));
    status.insert("hostIP".into(), json!(HOST_IP));
    status.insert("hostIPs".into(), json!([{"ip": HOST_IP}]));
    status.insert("podIP".into(), json!(ip));
    status.insert("podIPs".into(), json!([{"ip": ip}]));
    status.insert("startTime".into(), started_at);
    status.insert("containerStatuses".into(), Value::Array(statuses));
    if !init.is_empty() {
        status.insert("initContainerStatuses".into(), Value::Array(init));
    }
    Value::Object(status)
}

/// The kubelet's restart back-off as it reports it: 10 s doubling to 5 minutes.
pub fn crash_backoff_seconds(restarts: i32) -> u64 {
    10u64.saturating_mul(1 << restarts.clamp(0, 5)).min(300)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(image: &str) -> Value {
        json!({
            "metadata": {"name": "web-abc-xyz12", "namespace": "default", "uid": "p-uid"},
            "spec": {"containers": [{"name": "app", "image": image}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}
        })
    }

    fn rules() -> Vec<ImageRule> {
        vec![
            ImageRule { image_contains: "never".into(), behaviour: PodBehaviour::NeverReady },
            ImageRule { image_contains: "crash".into(), behaviour: PodBehaviour::CrashLoop },
        ]
    }

    fn now() -> Timestamp {
        "2026-12-02T10:00:00Z".parse().unwrap()
    }

    fn cond<'a>(status: &'a Value, t: &str) -> &'a Value {
        status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == t).unwrap()
    }

    fn as_pod(mut p: Value, status: Value) -> Pod {
        p["status"] = status;
        // Clients (kube-rs, kubectl) must be able to read it.
        serde_json::from_value(p).unwrap()
    }

    #[test]
    fn a_scheduled_pod_is_pending_with_pod_scheduled() {
        let s = scheduled_status(&pod("nginx"), now());
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["qosClass"], "BestEffort", "what the API server set stays");
        assert_eq!(cond(&s, "PodScheduled")["status"], "True");
        as_pod(pod("nginx"), s);
    }

    #[test]
    fn a_started_pod_is_running_and_ready_with_ips() {
        let mut p = pod("nginx:1.27");
        p["status"] = scheduled_status(&p, now());
        let later: Timestamp = "2026-12-02T10:00:05Z".parse().unwrap();
        let s = started_status(&p, &rules(), &pod_ip(0), 0, later);
        assert_eq!(s["phase"], "Running");
        for t in ["Initialized", "Ready", "ContainersReady", "PodScheduled"] {
            assert_eq!(cond(&s, t)["status"], "True", "{t}");
        }
        assert_eq!(cond(&s, "PodScheduled")["lastTransitionTime"], "2026-12-02T10:00:00Z");
        assert_eq!(cond(&s, "Ready")["lastTransitionTime"], "2026-12-02T10:00:05Z");
        assert_eq!((s["podIP"].as_str(), s["hostIP"].as_str()), (Some("10.244.0.2"), Some(HOST_IP)));
        let c = &s["containerStatuses"][0];
        assert_eq!((c["ready"].as_bool(), c["started"].as_bool()), (Some(true), Some(true)));
        assert!(c["state"]["running"]["startedAt"].is_string());
        let typed = as_pod(p, s);
        assert_eq!(typed.status.unwrap().pod_ips.unwrap()[0].ip, "10.244.0.2");
    }

    #[test]
    fn never_ready_images_run_without_becoming_ready() {
        let s = started_status(&pod("registry/never-ready:1"), &rules(), "10.244.0.9", 0, now());
        assert_eq!(s["phase"], "Running");
        assert_eq!(cond(&s, "Ready")["status"], "False");
        assert_eq!(cond(&s, "Ready")["reason"], "ContainersNotReady");
        assert_eq!(cond(&s, "Ready")["message"], "containers with unready status: [app]");
        assert_eq!(s["containerStatuses"][0]["ready"], false);
        as_pod(pod("x"), s);
    }

    #[test]
    fn crash_looping_images_wait_in_back_off_with_growing_restarts() {
        let p = pod("crash:1");
        assert!(crash_loops(&p, &rules()));
        let s1 = started_status(&p, &rules(), "10.244.0.9", 1, now());
        let s3 = started_status(&p, &rules(), "10.244.0.9", 3, now());
        assert_eq!(s1["containerStatuses"][0]["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(s3["containerStatuses"][0]["restartCount"], 3);
        assert_eq!(s3["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(cond(&s3, "Ready")["status"], "False");
        assert_eq!((crash_backoff_seconds(0), crash_backoff_seconds(2), crash_backoff_seconds(9)), (10, 40, 300));
        as_pod(p, s3);
    }

    #[test]
    fn pod_ips_are_distinct() {
        let ips: std::collections::HashSet<String> = (0..1000).map(pod_ip).collect();
        assert_eq!(ips.len(), 1000);
        assert!(!ips.contains("10.244.0.1"));
    }
}
