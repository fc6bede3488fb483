//! The ReplicaSet controller's decisions: how many pods to create or which to delete, and the status, from the
//! ReplicaSet and the pods it controls (upstream `pkg/controller/replicaset`).

use std::cmp::Reverse;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::util::{controller_ref, selector_matches};

/// Upstream's `BurstReplicas`: at most this many creations or deletions per sync.
pub const BURST: usize = 500;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Pods to create (generateName `<rs>-`).
    pub create: Vec<Pod>,
    /// Pods to delete: (name, uid).
    pub delete: Vec<(String, String)>,
    /// The new status when it differs from the observed one.
    pub status: Option<ReplicaSetStatus>,
    /// Look again then: a ready pod becomes available after minReadySeconds.
    pub requeue_after: Option<Duration>,
}

/// Not terminated and not being deleted (`controller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded") | Some("Failed"))
}

/// When the pod became Ready, if it is.
fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref())?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(ready.last_transition_time.as_ref().map(|t| t.0))
}

/// Decides one sync. `pods` are those whose controller is this ReplicaSet (any state).
pub fn sync(rs: &ReplicaSet, pods: &[Pod], now: Timestamp) -> Plan {
    let mut plan = Plan::default();
    let active: Vec<&Pod> = pods.iter().filter(|p| is_active(p)).collect();
    let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as usize;
    let deleting = rs.metadata.deletion_timestamp.is_some();
    if !deleting {
        if active.len() < want {
            let n = (want - active.len()).min(BURST);
            plan.create = (0..n).map(|_| pod_from_template(rs)).collect();
        } else if active.len() > want {
            let n = (active.len() - want).min(BURST);
            let mut ranked = active.clone();
            ranked.sort_by_key(|p| deletion_rank(p));
            plan.delete = ranked
                .iter()
                .take(n)
                .map(|p| (p.metadata.name.clone().unwrap_or_default(), p.metadata.uid.clone().unwrap_or_default()))
                .collect();
        }
    }
    let min_ready = i64::from(rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0));
    let template_labels = rs.spec.as_ref().and_then(|s| s.template.as_ref()).and_then(|t| t.metadata.as_ref());
    let template_labels = template_labels.and_then(|m| m.labels.clone()).unwrap_or_default();
    let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
    let mut next_available: Option<i64> = None;
    for p in &active {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        if template_labels.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            fully_labeled += 1;
        }
        if let Some(since) = ready_since(p) {
            ready += 1;
            let ready_for = since.map_or(i64::MAX, |s| now.as_second() - s.as_second());
            if min_ready == 0 || ready_for >= min_ready {
                available += 1;
            } else {
                let due = min_ready - ready_for;
                next_available = Some(next_available.map_or(due, |d| d.min(due)));
            }
        }
    }
    let nonzero = |n: i32| (n != 0).then_some(n);
    let old = rs.status.clone().unwrap_or_default();
    let status = ReplicaSetStatus {
        replicas: active.len() as i32,
        fully_labeled_replicas: nonzero(fully_labeled),
        ready_replicas: nonzero(ready),
        available_replicas: nonzero(available),
        observed_generation: rs.metadata.generation,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    if rs.status.as_ref() != Some(&status) {
        plan.status = Some(status);
    }
    plan.requeue_after = next_available.map(|s| Duration::from_secs(s.max(0) as u64));
    plan
}

/// Sort key of `ActivePodsWithRanks`, first deleted first: unscheduled, then pending, not ready, ready for the
/// shortest time, most restarts, newest.
fn deletion_rank(p: &Pod) -> impl Ord {
    let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| !n.is_empty());
    let phase = match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => 0,
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    };
    let ready = ready_since(p);
    let restarts: i32 = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    (scheduled, phase, ready.is_some(), Reverse(ready.flatten()), Reverse(restarts), Reverse(created))
}

/// A pod for the ReplicaSet's template, named by the server from `generateName`, controlled by the ReplicaSet.
pub fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs.spec.as_ref().and_then(|s| s.template.clone()).unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let name = rs.metadata.name.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: rs.metadata.namespace.clone(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![controller_ref("apps/v1", "ReplicaSet", &rs.metadata)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Whether `pod` is one this ReplicaSet would claim (matching selector, same namespace).
pub fn selects(rs: &ReplicaSet, pod: &Pod) -> bool {
    let Some(sel) = rs.spec.as_ref().map(|s| &s.selector) else { return false };
    rs.metadata.namespace == pod.metadata.namespace
        && !super::util::selector_is_empty(sel)
        && selector_matches(sel, pod.metadata.labels.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-uid", "generation": 2},
            "spec": {
                "replicas": replicas,
                "minReadySeconds": min_ready,
                "selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}},
                "template": {
                    "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]}
                }
            }
        }))
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>, ready_at: Option<&str>) -> Pod {
        let mut conditions = vec![];
        if let Some(t) = ready_at {
            conditions.push(json!({"type": "Ready", "status": "True", "lastTransitionTime": t}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"),
                         "labels": {"app": "web", "pod-template-hash": "abc"},
                         "creationTimestamp": "2026-12-02T10:00:00Z"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}], "nodeName": node},
            "status": {"phase": if ready_at.is_some() { "Running" } else { "Pending" }, "conditions": conditions}
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-12-02T10:01:00Z".parse().unwrap()
    }

    #[test]
    fn creates_missing_pods_from_the_template_with_a_controller_reference() {
        let plan = sync(&rs(3, 0), &[pod("a", Some("n"), Some("2026-12-02T10:00:10Z"))], now());
        assert_eq!(plan.create.len(), 2);
        let p = &plan.create[0];
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.labels.as_ref().unwrap()["pod-template-hash"], "abc");
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("ReplicaSet", "rs-uid", Some(true)));
        assert!(selects(&rs(3, 0), &pod("x", None, None)));
        let status = plan.status.unwrap();
        assert_eq!((status.replicas, status.ready_replicas, status.available_replicas), (1, Some(1), Some(1)));
        assert_eq!(status.observed_generation, Some(2));
    }

    #[test]
    fn scales_down_unscheduled_and_unready_pods_first() {
        let pods = [
            pod("ready", Some("n"), Some("2026-12-02T10:00:10Z")),
            pod("unready", Some("n"), None),
            pod("unscheduled", None, None),
        ];
        let plan = sync(&rs(1, 0), &pods, now());
        let deleted: Vec<&str> = plan.delete.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(deleted, ["unscheduled", "unready"]);
        assert!(plan.create.is_empty());
    }

    #[test]
    fn terminating_pods_do_not_count_and_are_replaced() {
        let mut gone = pod("gone", Some("n"), Some("2026-12-02T10:00:10Z"));
        gone.metadata.deletion_timestamp = Some(super::super::util::time(now()));
        let plan = sync(&rs(1, 0), &[gone], now());
        assert_eq!(plan.create.len(), 1);
        assert_eq!(plan.status.unwrap().replicas, 0);
    }

    #[test]
    fn ready_pods_become_available_after_min_ready_seconds() {
        let pods = [pod("a", Some("n"), Some("2026-12-02T10:00:50Z"))];
        let plan = sync(&rs(1, 30), &pods, now());
        let status = plan.status.unwrap();
        assert_eq!((status.ready_replicas, status.available_replicas), (Some(1), None));
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(20)));
        let later: Timestamp = "2026-12-02T10:01:20Z".parse().unwrap();
        assert_eq!(sync(&rs(1, 30), &pods, later).status.unwrap().available_replicas, Some(1));
    }

    #[test]
    fn an_unchanged_status_is_not_rewritten() {
        let pods = [pod("a", Some("n"), Some("2026-12-02T10:00:10Z"))];
        let mut r = rs(1, 0);
        r.status = sync(&r, &pods, now()).status;
        assert_eq!(sync(&r, &pods, now()), Plan::default());
    }
}
