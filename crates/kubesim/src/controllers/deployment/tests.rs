//! The rollout state machine, step by step: each test drives `sync` against a tiny in-memory world that applies
//! the plan, runs a stand-in ReplicaSet controller, and lets time pass.

use super::*;
use serde_json::json;

/// Deployment + ReplicaSets; pods are represented only by the ReplicaSets' status counters.
struct World {
    d: Deployment,
    rss: Vec<ReplicaSet>,
    now: Timestamp,
    uid: u32,
    events: Vec<String>,
    /// Mid-sync status writes (upstream's `UpdateStatus` in `getNewReplicaSet` / `checkPausedConditions`).
    mid_sync_writes: usize,
}

fn t0() -> Timestamp {
    "2026-12-02T10:00:00Z".parse().unwrap()
}

impl World {
    fn new(replicas: i32, image: &str) -> World {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "d-uid", "generation": 1},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": image}]}
                },
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "progressDeadlineSeconds": 600,
                "revisionHistoryLimit": 10
            }
        }))
        .unwrap();
        World { d, rss: vec![], now: t0(), uid: 0, events: vec![], mid_sync_writes: 0 }
    }

    fn spec_mut(&mut self) -> &mut k8s_openapi::api::apps::v1::DeploymentSpec {
        self.d.metadata.generation = Some(self.d.metadata.generation.unwrap_or(0) + 1);
        self.d.spec.as_mut().unwrap()
    }

    fn set_image(&mut self, image: &str) {
        let spec = self.spec_mut();
        spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
    }

    fn set_replicas(&mut self, n: i32) {
        self.spec_mut().replicas = Some(n);
    }

    fn advance(&mut self, secs: i64) {
        self.now = Timestamp::from_second(self.now.as_second() + secs).unwrap();
    }

    /// One Deployment sync, its plan applied as the API server would.
    fn sync(&mut self) -> Plan {
        let plan = sync(&self.d, &self.rss, &HashMap::new(), self.now);
        for a in &plan.actions {
            match a {
                Action::CreateReplicaSet(rs) => {
                    let mut rs = rs.clone();
                    self.uid += 1;
                    rs.metadata.uid = Some(format!("rs-uid-{}", self.uid));
                    rs.metadata.generation = Some(1);
                    rs.metadata.creation_timestamp = Some(time(self.now));
                    assert!(self.rss.iter().all(|r| r.metadata.name != rs.metadata.name), "duplicate ReplicaSet");
                    self.rss.push(rs);
                }
                Action::UpdateReplicaSet(rs) => {
                    let slot = self.rss.iter_mut().find(|r| r.metadata.name == rs.metadata.name).unwrap();
                    let mut rs = rs.clone();
                    if rs.spec != slot.spec {
                        rs.metadata.generation = Some(slot.metadata.generation.unwrap_or(0) + 1);
                    }
                    rs.status = slot.status.clone();
                    *slot = rs;
                }
                Action::DeleteReplicaSet { name, .. } => self.rss.retain(|r| r.metadata.name.as_ref() != Some(name)),
                Action::AnnotateDeployment(a) => {
                    self.d.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(a.clone());
                }
                Action::UpdateDeploymentStatus { annotations, status } => {
                    self.d.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations.clone());
                    self.d.status = Some(status.clone());
                    self.mid_sync_writes += 1;
                }
                Action::Event { message, .. } => self.events.push(message.clone()),
            }
        }
        if let Some(s) = &plan.status {
            self.d.status = Some(s.clone());
        }
        plan
    }

    /// The ReplicaSet controller and kubelet: every ReplicaSet has its pods; those of `ready(image)` are ready.
    fn pods(&mut self, ready: impl Fn(&str) -> bool) {
        for rs in &mut self.rss {
            let n = rs_replicas(rs);
            let spec = rs.spec.as_ref().unwrap().template.as_ref().unwrap().spec.as_ref().unwrap();
            let image = spec.containers[0].image.clone().unwrap_or_default();
            let up = if ready(&image) { n } else { 0 };
            rs.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
                replicas: n,
                fully_labeled_replicas: nonzero(n),
                ready_replicas: nonzero(up),
                available_replicas: nonzero(up),
                observed_generation: rs.metadata.generation,
                ..Default::default()
            });
        }
    }

    fn status(&self) -> DeploymentStatus {
        self.d.status.clone().unwrap_or_default()
    }

    fn counters(&self) -> [i32; 5] {
        let s = self.status();
        [s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas, s.unavailable_replicas].map(count)
    }

    fn cond(&self, type_: &str) -> (String, String, String) {
        let s = self.status();
        let c = condition(&s, type_).unwrap_or_else(|| panic!("no {type_} condition"));
        (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
    }

    fn rs_named(&self, image: &str) -> &ReplicaSet {
        self.rss
            .iter()
            .find(|rs| {
                let t = rs.spec.as_ref().unwrap().template.as_ref().unwrap();
                t.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image)
            })
            .unwrap()
    }

    fn sizes(&self) -> Vec<(String, i32)> {
        let mut v: Vec<(String, i32)> = self
            .rss
            .iter()
            .map(|rs| {
                let t = rs.spec.as_ref().unwrap().template.as_ref().unwrap();
                (t.spec.as_ref().unwrap().containers[0].image.clone().unwrap(), rs_replicas(rs))
            })
            .collect();
        v.sort();
        v
    }

    fn revision(&self) -> Option<&str> {
        annotation(&self.d.metadata, REVISION)
    }

    /// What `kubectl rollout status` concludes.
    fn rollout_done(&self) -> bool {
        let s = self.status();
        let want = replicas(&self.d);
        s.observed_generation >= self.d.metadata.generation
            && count(s.updated_replicas) == want
            && count(s.replicas) == count(s.updated_replicas)
            && count(s.available_replicas) == count(s.updated_replicas)
    }

    /// Syncs and lets pods report until nothing changes (bounded).
    fn settle(&mut self, ready: impl Fn(&str) -> bool) {
        for _ in 0..50 {
            let plan = self.sync();
            let before = self.rss.clone();
            self.pods(&ready);
            if plan.actions.is_empty() && plan.status.is_none() && before == self.rss {
                return;
            }
        }
        panic!("did not settle");
    }
}

fn ready_all(_: &str) -> bool {
    true
}

#[test]
fn fenceposts_round_like_upstream() {
    let pct = |s: &str| IntOrString::String(s.into());
    assert_eq!(scaled_value(&pct("25%"), 10, true), Some(3));
    assert_eq!(scaled_value(&pct("25%"), 10, false), Some(2));
    assert_eq!(scaled_value(&pct("25%"), 1, true), Some(1));
    assert_eq!(scaled_value(&pct("25%"), 1, false), Some(0));
    assert_eq!(scaled_value(&IntOrString::Int(2), 10, true), Some(2));
    assert_eq!(scaled_value(&pct("x"), 10, true), None);
    assert_eq!(resolve_fenceposts(&pct("25%"), &pct("25%"), 4), (1, 1));
    assert_eq!(resolve_fenceposts(&pct("25%"), &pct("25%"), 1), (1, 0));
    // Both zero after rounding: one pod may be unavailable.
    assert_eq!(resolve_fenceposts(&IntOrString::Int(0), &pct("10%"), 5), (0, 1));
    let mut w = World::new(2, "a");
    w.d.spec.as_mut().unwrap().strategy.as_mut().unwrap().rolling_update.as_mut().unwrap().max_unavailable =
        Some(IntOrString::Int(5));
    assert_eq!(max_unavailable(&w.d), 2, "capped at the replica count");
    w.d.spec.as_mut().unwrap().strategy.as_mut().unwrap().type_ = Some("Recreate".into());
    assert_eq!((max_surge(&w.d), max_unavailable(&w.d)), (0, 0));
}

#[test]
fn a_new_deployment_reports_the_upstream_status_sequence() {
    let mut w = World::new(3, "nginx:1");
    let plan = w.sync();
    let Some(Action::CreateReplicaSet(rs)) = plan.actions.first() else { panic!("no ReplicaSet created: {plan:?}") };
    let rs_name = rs.metadata.name.clone().unwrap();
    let hash = &rs.metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH];
    assert_eq!(rs_name, format!("web-{hash}"));
    assert_eq!(rs.spec.as_ref().unwrap().selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH], *hash);
    let template_labels = rs.spec.as_ref().unwrap().template.as_ref().unwrap().metadata.as_ref().unwrap();
    assert_eq!(template_labels.labels.as_ref().unwrap()[POD_TEMPLATE_HASH], *hash);
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Deployment", "d-uid"));
    assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
    assert_eq!(annotation(&rs.metadata, REVISION), Some("1"));
    assert_eq!(rs_replicas(rs), 3);
    assert_eq!(w.revision(), Some("1"));
    // Upstream's getNewReplicaSet writes the revision and Progressing=NewReplicaSetCreated mid-sync; the sync's
    // final status write then conflicts (a stale resourceVersion), so observedGeneration follows a sync later.
    assert_eq!(w.mid_sync_writes, 1);
    assert_eq!(plan.status, None);
    assert_eq!(w.status().observed_generation, None);
    assert_eq!(w.cond(PROGRESSING).1, NEW_RS_CREATED);
    w.sync();

    // Just created: nothing reported by the ReplicaSet yet.
    assert_eq!(w.status().observed_generation, Some(1));
    assert_eq!(w.counters(), [0, 0, 0, 0, 3]);
    assert_eq!(
        w.cond(PROGRESSING),
        ("True".into(), NEW_RS_CREATED.into(), format!("Created new replica set \"{rs_name}\""))
    );
    assert_eq!(w.cond(AVAILABLE).1, MIN_UNAVAILABLE);
    let wire = serde_json::to_value(w.status()).unwrap();
    assert!(wire.get("replicas").is_none() && wire.get("readyReplicas").is_none(), "zero counters are omitted");

    // Pods exist but are not ready.
    w.pods(|_| false);
    w.sync();
    assert_eq!(w.counters(), [3, 3, 0, 0, 3]);
    assert_eq!(
        w.cond(PROGRESSING),
        ("True".into(), RS_UPDATED.into(), format!("ReplicaSet \"{rs_name}\" is progressing."))
    );
    assert!(!w.rollout_done());

    // Ready.
    w.pods(ready_all);
    w.sync();
    assert_eq!(w.counters(), [3, 3, 3, 3, 0]);
    assert_eq!(w.cond(AVAILABLE), ("True".into(), MIN_AVAILABLE.into(), "Deployment has minimum availability.".into()));
    assert_eq!(
        w.cond(PROGRESSING),
        ("True".into(), NEW_RS_AVAILABLE.into(), format!("ReplicaSet \"{rs_name}\" has successfully progressed."))
    );
    let types: Vec<String> = w.status().conditions.unwrap().into_iter().map(|c| c.type_).collect();
    assert_eq!(types, ["Available", "Progressing"]);
    assert!(w.rollout_done());

    // Converged: the next sync writes nothing.
    let plan = w.sync();
    assert!(plan.actions.is_empty() && plan.status.is_none(), "{plan:?}");
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn a_rolling_update_surges_and_scales_down_as_new_pods_become_available() {
    let mut w = World::new(4, "app:1");
    w.settle(ready_all);
    let since = w.status().conditions.unwrap()[1].last_transition_time.clone();
    w.set_image("app:2");

    // maxSurge 1: one new pod; maxUnavailable 1: one old pod may go at once.
    let plan = w.sync();
    assert!(matches!(plan.actions[0], Action::CreateReplicaSet(_)));
    assert_eq!(w.sizes(), [("app:1".to_string(), 3), ("app:2".to_string(), 1)]);
    assert_eq!(w.revision(), Some("2"));
    assert_eq!(w.cond(PROGRESSING).1, NEW_RS_CREATED);
    assert_eq!(w.status().conditions.unwrap()[1].last_transition_time, since, "status stayed True");
    assert_eq!(w.status().observed_generation, Some(1), "the final status write conflicted");
    w.sync();
    // The resync sees the old ReplicaSet at 3: the surge allows a second new pod.
    assert_eq!(w.sizes(), [("app:1".to_string(), 3), ("app:2".to_string(), 2)]);
    assert_eq!(w.status().observed_generation, Some(2));
    // Old pods still serve while the new version is not rolled out.
    assert_eq!(w.cond(AVAILABLE).0, "True");
    assert!(!w.rollout_done());

    // New pods start but are not ready yet: the old ones stay available, the rollout waits.
    w.pods(|image| image == "app:1");
    w.sync();
    assert_eq!(w.counters(), [5, 2, 3, 3, 2]);
    assert_eq!(w.sizes(), [("app:1".to_string(), 3), ("app:2".to_string(), 2)]);
    assert_eq!(w.cond(PROGRESSING).1, RS_UPDATED);
    w.pods(|image| image == "app:1");
    let plan = w.sync();
    assert!(plan.actions.is_empty(), "nothing more can move without available new pods: {plan:?}");

    w.settle(ready_all);
    assert_eq!(w.sizes(), [("app:1".to_string(), 0), ("app:2".to_string(), 4)]);
    assert_eq!(w.counters(), [4, 4, 4, 4, 0]);
    assert_eq!(w.cond(PROGRESSING).1, NEW_RS_AVAILABLE);
    assert!(w.rollout_done());
    assert!(w.events.iter().any(|e| e.starts_with("Scaled down replica set web-") && e.ends_with("to 0")));
}

#[test]
fn a_rollout_without_progress_misses_its_deadline() {
    let mut w = World::new(2, "app:1");
    w.d.spec.as_mut().unwrap().progress_deadline_seconds = Some(30);
    w.settle(ready_all);
    w.set_image("broken:1");
    w.sync();
    w.sync();
    w.pods(|image| image != "broken:1");
    w.sync();
    let new_name = w.rs_named("broken:1").metadata.name.clone().unwrap();
    assert_eq!(w.cond(PROGRESSING).1, RS_UPDATED);

    // Stuck: the controller asks to be woken at the deadline rather than polling.
    w.advance(10);
    w.pods(|image| image != "broken:1");
    let plan = w.sync();
    assert!(plan.status.is_none());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(21)));
    w.advance(21);
    w.sync();
    assert_eq!(
        w.cond(PROGRESSING),
        ("False".into(), TIMED_OUT.into(), format!("ReplicaSet \"{new_name}\" has timed out progressing."))
    );
    // Old pods keep the Deployment available.
    assert_eq!(w.cond(AVAILABLE).0, "True");
    let plan = w.sync();
    assert_eq!(plan.requeue_after, None, "a timed-out rollout is not re-checked");
    assert!(!w.rollout_done());
}

#[test]
fn scaling_up_keeps_the_rollout_complete_and_moves_only_counters() {
    let mut w = World::new(2, "app:1");
    w.settle(ready_all);
    w.set_replicas(5);
    w.sync();
    assert_eq!(w.sizes(), [("app:1".to_string(), 5)]);
    let rs = w.rs_named("app:1");
    assert_eq!(annotation(&rs.metadata, DESIRED_REPLICAS), Some("5"));
    assert_eq!(annotation(&rs.metadata, MAX_REPLICAS), Some("7"));
    w.pods(|_| false);
    w.sync();
    assert_eq!(w.status().observed_generation, Some(2));
    assert_eq!(w.counters(), [5, 5, 0, 0, 5]);
    assert_eq!(w.cond(AVAILABLE).1, MIN_UNAVAILABLE);
    assert_eq!(w.cond(PROGRESSING).1, NEW_RS_AVAILABLE, "a scale is not a new rollout");
    assert!(!w.rollout_done());
    w.settle(ready_all);
    assert_eq!(w.counters(), [5, 5, 5, 5, 0]);
    assert!(w.rollout_done());
}

#[test]
fn rolling_back_reuses_the_old_replica_set_with_a_new_revision() {
    let mut w = World::new(2, "app:1");
    w.settle(ready_all);
    let first = w.rs_named("app:1").metadata.name.clone();
    w.set_image("app:2");
    w.settle(ready_all);
    assert_eq!(w.revision(), Some("2"));
    // kubectl rollout undo: the template goes back to the old ReplicaSet's.
    w.set_image("app:1");
    let plan = w.sync();
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::CreateReplicaSet(_))), "no new ReplicaSet");
    let rs = w.rs_named("app:1");
    assert_eq!(rs.metadata.name, first);
    assert_eq!(annotation(&rs.metadata, REVISION), Some("3"));
    assert_eq!(annotation(&rs.metadata, REVISION_HISTORY), Some("1"));
    assert_eq!(w.revision(), Some("3"));
    w.settle(ready_all);
    assert_eq!(w.sizes(), [("app:1".to_string(), 2), ("app:2".to_string(), 0)]);
    assert_eq!(w.cond(PROGRESSING).1, NEW_RS_AVAILABLE);
    assert!(w.rollout_done());
}

#[test]
fn recreate_scales_old_pods_away_before_creating_the_new_replica_set() {
    let mut w = World::new(3, "app:1");
    w.d.spec.as_mut().unwrap().strategy =
        Some(k8s_openapi::api::apps::v1::DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None });
    w.settle(ready_all);
    w.set_image("app:2");
    let plan = w.sync();
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::CreateReplicaSet(_))));
    assert_eq!(w.sizes(), [("app:1".to_string(), 0)]);
    // The old ReplicaSet still reports pods until they are gone.
    let plan = w.sync();
    assert!(plan.actions.is_empty());
    w.pods(ready_all);
    w.sync();
    assert_eq!(w.sizes(), [("app:1".to_string(), 0), ("app:2".to_string(), 3)]);
    w.settle(ready_all);
    assert!(w.rollout_done());
}

#[test]
fn a_paused_deployment_reports_unknown_progress_and_does_not_roll_out() {
    let mut w = World::new(2, "app:1");
    w.settle(ready_all);
    w.spec_mut().paused = Some(true);
    w.sync();
    assert_eq!(w.cond(PROGRESSING), ("Unknown".into(), PAUSED.into(), "Deployment is paused".into()));
    w.set_image("app:2");
    let plan = w.sync();
    assert!(plan.actions.is_empty(), "{plan:?}");
    assert_eq!(w.status().observed_generation, Some(3));
    w.spec_mut().paused = Some(false);
    let writes = w.mid_sync_writes;
    w.sync();
    // checkPausedConditions writes DeploymentResumed mid-sync; the new ReplicaSet is created, but writing its
    // Progressing=NewReplicaSetCreated conflicts and ends the sync, and the next sync finds the condition set.
    assert_eq!(w.cond(PROGRESSING).1, RESUMED);
    assert_eq!(w.mid_sync_writes, writes + 1);
    assert!(w.sizes().iter().any(|(image, _)| image == "app:2"), "the new ReplicaSet was created");
    w.sync();
    assert_eq!(w.cond(PROGRESSING).1, RESUMED);
    w.pods(|image| image == "app:1");
    w.sync();
    assert_eq!(w.cond(PROGRESSING).1, RS_UPDATED);
    w.settle(ready_all);
    assert!(w.rollout_done());
}

#[test]
fn old_replica_sets_beyond_the_history_limit_are_deleted() {
    let mut w = World::new(1, "app:0");
    w.d.spec.as_mut().unwrap().revision_history_limit = Some(1);
    w.settle(ready_all);
    for i in 1..4 {
        w.set_image(&format!("app:{i}"));
        w.settle(ready_all);
    }
    assert_eq!(w.sizes(), [("app:2".to_string(), 0), ("app:3".to_string(), 1)]);
}

#[test]
fn the_template_hash_is_stable_and_changes_with_the_template() {
    let w = World::new(1, "a");
    let t = &w.d.spec.as_ref().unwrap().template;
    assert_eq!(pod_template_hash(t, None), pod_template_hash(&t.clone(), None));
    assert_ne!(pod_template_hash(t, None), pod_template_hash(t, Some(1)));
    let mut other = t.clone();
    other.spec.as_mut().unwrap().containers[0].image = Some("b".into());
    assert_ne!(pod_template_hash(t, None), pod_template_hash(&other, None));
}
