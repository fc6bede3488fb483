//! The Deployment controller's decisions, as a pure function of the observed Deployment and its ReplicaSets.
//!
//! It follows upstream's `pkg/controller/deployment` step by step (sync → paused / scaling event / Recreate /
//! RollingUpdate → status), because clients (`kubectl rollout status`, kube-runtime's `is_deployment_completed`,
//! operators) read the exact status sequence: which counter moves when, which condition reason follows which.
//! Status is computed from the ReplicaSets as observed *before* this sync's writes, exactly like upstream, so a
//! scale-up shows in the status one sync later.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::util::{canonical_json, controller_ref, fnv1a32, safe_encode, selector_is_empty, time};

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
const MAX_REV_HISTORY_CHARS: usize = 2000;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";

mod conditions;
mod fields;
mod scaling;
#[cfg(test)]
mod tests;

pub use conditions::*;
pub use fields::*;

/// One write the controller wants done.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this ReplicaSet (no resourceVersion).
    CreateReplicaSet(ReplicaSet),
    /// Replace this ReplicaSet (it carries the observed resourceVersion): a scale and/or annotation change.
    UpdateReplicaSet(ReplicaSet),
    DeleteReplicaSet {
        name: String,
        uid: String,
    },
    /// Set these annotations on the Deployment's metadata (the revision).
    AnnotateDeployment(BTreeMap<String, String>),
    /// Write the Deployment's status now, in the middle of the sync, with these changed annotations: upstream's
    /// `UpdateStatus` calls in `checkPausedConditions` and `getNewReplicaSet` (a new ReplicaSet's revision and
    /// Progressing condition), which clients see before the sync's final status.
    UpdateDeploymentStatus {
        annotations: BTreeMap<String, String>,
        status: DeploymentStatus,
    },
    /// An Event about the Deployment (`ScalingReplicaSet`, ...).
    Event {
        reason: String,
        message: String,
    },
}

/// What one sync decided: the writes, the new status (None when unchanged), when to look again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub status: Option<DeploymentStatus>,
    /// Re-sync after this long even without a change (progress deadline, minReadySeconds).
    pub requeue_after: Option<Duration>,
}

/// The decisions of one sync over the observed state.
struct Sync<'a> {
    d: Deployment,
    /// The ReplicaSets this Deployment controls, as observed.
    rss: Vec<ReplicaSet>,
    /// Non-terminal pods per ReplicaSet uid (Recreate waits for old pods to be gone).
    active_pods: &'a HashMap<String, usize>,
    now: Timestamp,
    plan: Plan,
    /// The Deployment's annotations as observed (what a write compares with).
    observed_annotations: BTreeMap<String, String>,
    /// The status an `UpdateDeploymentStatus` wrote in this sync, and the annotations as stored after it.
    written: Option<(DeploymentStatus, BTreeMap<String, String>)>,
    /// Where a second Deployment write would have been. Upstream's mid-sync write does not refresh its copy's
    /// resourceVersion, so its next Deployment write conflicts and the sync ends there; the resync after the
    /// conflict (here: after the written status's own event) continues.
    conflict_at: Option<usize>,
}

/// Decides one sync of `deployment` given the ReplicaSets it controls (`replica_sets`, any order) and the
/// number of non-terminal pods per ReplicaSet uid.
pub fn sync(
    deployment: &Deployment,
    replica_sets: &[ReplicaSet],
    active_pods: &HashMap<String, usize>,
    now: Timestamp,
) -> Plan {
    let mut rss = replica_sets.to_vec();
    rss.sort_by(by_creation);
    let mut s = Sync {
        d: deployment.clone(),
        rss,
        active_pods,
        now,
        plan: Plan::default(),
        observed_annotations: deployment.metadata.annotations.clone().unwrap_or_default(),
        written: None,
        conflict_at: None,
    };
    s.run();
    s.finish(deployment)
}

/// The annotations of `d` that differ from `stored` (added or changed; the controller removes none).
fn changed_annotations(stored: &BTreeMap<String, String>, d: &Deployment) -> BTreeMap<String, String> {
    let now = d.metadata.annotations.clone().unwrap_or_default();
    now.into_iter().filter(|(k, v)| stored.get(k) != Some(v)).collect()
}

/// Each planned ReplicaSet write builds on the previous one for the same ReplicaSet, so only the last is kept (at
/// its place); a write to a ReplicaSet about to be created folds into the creation.
fn coalesce(actions: Vec<Action>) -> Vec<Action> {
    let mut out: Vec<Action> = Vec::with_capacity(actions.len());
    for a in actions {
        if let Action::UpdateReplicaSet(rs) = &a {
            if let Some(Action::CreateReplicaSet(created)) =
                out.iter_mut().find(|o| matches!(o, Action::CreateReplicaSet(c) if c.metadata.name == rs.metadata.name))
            {
                *created = rs.clone();
                continue;
            }
            out.retain(|o| !matches!(o, Action::UpdateReplicaSet(u) if u.metadata.name == rs.metadata.name));
        }
        out.push(a);
    }
    out
}

/// Which ReplicaSet (by index into `rss`) is new, and which are old.
struct Split {
    new: Option<usize>,
    old: Vec<usize>,
}

impl Sync<'_> {
    fn run(&mut self) {
        let selector = self.d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        if selector_is_empty(&selector) {
            // Upstream refuses to select every pod; it only records that it saw this generation.
            let status = self.d.status.get_or_insert_with(Default::default);
            if status.observed_generation < self.d.metadata.generation {
                status.observed_generation = self.d.metadata.generation;
            }
            return;
        }
        if self.d.metadata.deletion_timestamp.is_some() {
            let split = self.split(false);
            self.sync_status(&split);
            return;
        }
        self.check_paused_conditions();
        if paused(&self.d) {
            return self.sync_scaling();
        }
        if self.is_scaling_event() {
            return self.sync_scaling();
        }
        if strategy_type(&self.d) == "Recreate" { self.rollout_recreate() } else { self.rollout_rolling() }
    }

    fn finish(mut self, observed: &Deployment) -> Plan {
        if let Some(at) = self.conflict_at {
            self.plan.actions.truncate(at);
            self.plan.actions = coalesce(std::mem::take(&mut self.plan.actions));
            self.plan.requeue_after = None;
            return self.plan;
        }
        self.plan.actions = coalesce(std::mem::take(&mut self.plan.actions));
        let (stored_status, stored_annotations) = match self.written.take() {
            Some(w) => w,
            None => {
                (observed.status.clone().unwrap_or_default(), observed.metadata.annotations.clone().unwrap_or_default())
            }
        };
        let changed = changed_annotations(&stored_annotations, &self.d);
        let new_status = self.d.status.clone().unwrap_or_default();
        if new_status == stored_status {
            if !changed.is_empty() {
                self.plan.actions.push(Action::AnnotateDeployment(changed));
            }
            return self.plan;
        }
        if self.conflicts_after_write() {
            self.plan.requeue_after = None;
            return self.plan;
        }
        if !changed.is_empty() {
            self.plan.actions.push(Action::AnnotateDeployment(changed));
        }
        self.plan.status = Some(new_status);
        self.plan
    }

    /// Whether this sync already wrote the Deployment mid-way (its final status write would then conflict).
    fn conflicts_after_write(&self) -> bool {
        self.plan.actions.iter().any(|a| matches!(a, Action::UpdateDeploymentStatus { .. }))
    }

    /// Upstream's mid-sync `UpdateStatus(d)`: the first one succeeds; a second Deployment write in the same sync
    /// conflicts and ends it.
    fn write_status_now(&mut self) {
        if self.written.is_some() {
            self.conflict_at.get_or_insert(self.plan.actions.len());
            return;
        }
        let before = self.stored_annotations();
        let annotations = changed_annotations(&before, &self.d);
        let status = self.d.status.clone().unwrap_or_default();
        self.plan.actions.push(Action::UpdateDeploymentStatus { annotations, status: status.clone() });
        self.written = Some((status, self.d.metadata.annotations.clone().unwrap_or_default()));
    }

    fn stored_annotations(&self) -> BTreeMap<String, String> {
        match &self.written {
            Some((_, a)) => a.clone(),
            None => self.observed_annotations.clone(),
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.d.spec.as_ref().map(|s| &s.template)
    }

    /// `FindNewReplicaSet` (template equal ignoring the hash label, oldest first) and `FindOldReplicaSets`.
    fn find_new(&self) -> Option<usize> {
        let want = template_ignoring_hash(self.template());
        let hash = self.template().map(|t| pod_template_hash(t, self.collision_count()));
        self.rss
            .iter()
            .position(|rs| template_ignoring_hash(rs.spec.as_ref().and_then(|s| s.template.as_ref())) == want)
            .or_else(|| {
                // Defaulting may differ in detail between the two kinds' templates; the hash label the new
                // ReplicaSet was created with identifies it as well.
                self.rss.iter().position(|rs| {
                    let labels = rs.spec.as_ref().and_then(|s| s.template.as_ref()).and_then(|t| t.metadata.as_ref());
                    let label = labels.and_then(|m| m.labels.as_ref()).and_then(|l| l.get(POD_TEMPLATE_HASH));
                    label.is_some() && label == hash.as_ref()
                })
            })
    }

    fn collision_count(&self) -> Option<i32> {
        self.d.status.as_ref().and_then(|s| s.collision_count)
    }

    /// `getAllReplicaSetsAndSyncRevision`.
    fn split(&mut self, create: bool) -> Split {
        let new = self.find_new();
        let old: Vec<usize> = (0..self.rss.len()).filter(|i| Some(*i) != new).collect();
        let max_old_revision = old.iter().map(|i| revision(&self.rss[*i])).max().unwrap_or(0);
        let new_revision = (max_old_revision + 1).to_string();
        match new {
            Some(i) => {
                let mut rs = self.rss[i].clone();
                let mut updated = self.set_new_rs_annotations(&mut rs, &new_revision, true);
                let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
                let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
                if min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0) {
                    rs.spec.get_or_insert_with(Default::default).min_ready_seconds = min_ready;
                    updated = true;
                }
                if updated {
                    self.plan.actions.push(Action::UpdateReplicaSet(rs.clone()));
                }
                let rev = annotation(&rs.metadata, REVISION).unwrap_or("").to_string();
                self.rss[i] = rs;
                let mut needs_write = self.set_deployment_revision(&rev);
                let has_cond = self.d.status.as_ref().and_then(|s| condition(s, PROGRESSING)).is_some();
                if progress_deadline(&self.d).is_some() && !has_cond {
                    let msg = format!("Found new replica set \"{}\"", name(&self.rss[i].metadata));
                    let c = new_condition(PROGRESSING, "True", FOUND_NEW_RS, msg, self.now);
                    set_condition(self.d.status.get_or_insert_with(Default::default), c);
                    needs_write = true;
                }
                if needs_write {
                    self.write_status_now();
                }
                Split { new: Some(i), old }
            }
            None if create => {
                let rs = self.new_replica_set(&old, &new_revision);
                let n = rs_replicas(&rs);
                let rs_name = name(&rs.metadata).to_string();
                self.plan.actions.push(Action::CreateReplicaSet(rs.clone()));
                if n > 0 {
                    self.event("ScalingReplicaSet", format!("Scaled up replica set {rs_name} from 0 to {n}"));
                }
                self.rss.push(rs);
                let mut needs_write = self.set_deployment_revision(&new_revision);
                if progress_deadline(&self.d).is_some() {
                    let msg = format!("Created new replica set \"{rs_name}\"");
                    let c = new_condition(PROGRESSING, "True", NEW_RS_CREATED, msg, self.now);
                    set_condition(self.d.status.get_or_insert_with(Default::default), c);
                    needs_write = true;
                }
                if needs_write {
                    self.write_status_now();
                }
                Split { new: Some(self.rss.len() - 1), old }
            }
            None => Split { new: None, old },
        }
    }

    fn new_replica_set(&self, old: &[usize], revision: &str) -> ReplicaSet {
        let d = &self.d;
        let spec = d.spec.clone().unwrap_or_default();
        let hash = pod_template_hash(&spec.template, self.collision_count());
        let mut template = spec.template.clone();
        let meta = template.metadata.get_or_insert_with(Default::default);
        meta.labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let labels = meta.labels.clone();
        let mut selector: LabelSelector = spec.selector.clone();
        selector.match_labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{}-{hash}", name(&d.metadata))),
                namespace: d.metadata.namespace.clone(),
                labels,
                owner_references: Some(vec![controller_ref("apps/v1", "Deployment", &d.metadata)]),
                creation_timestamp: Some(time(self.now)),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let all: Vec<&ReplicaSet> = old.iter().map(|i| &self.rss[*i]).chain([&rs]).collect();
        let n = self.new_rs_new_replicas(&all, &rs);
        set_rs_replicas(&mut rs, n);
        self.set_new_rs_annotations(&mut rs, revision, false);
        rs
    }

    /// `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, bump the revision (keeping the history
    /// on a rollback), and for a new ReplicaSet the replica annotations.
    fn set_new_rs_annotations(&self, rs: &mut ReplicaSet, new_revision: &str, exists: bool) -> bool {
        let mut changed = false;
        let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in self.d.metadata.annotations.iter().flatten() {
            let skip = [LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO];
            if skip.contains(&k.as_str()) || annotations.get(k) == Some(v) {
                continue;
            }
            annotations.insert(k.clone(), v.clone());
            changed = true;
        }
        let old_revision = annotations.get(REVISION).cloned();
        let Ok(old_int) = old_revision.as_deref().map_or(Ok(0), str::parse::<i64>) else { return changed };
        let new_int: i64 = new_revision.parse().unwrap_or(0);
        if old_int < new_int {
            annotations.insert(REVISION.into(), new_revision.to_string());
            changed = true;
            if let Some(old) = old_revision {
                let history = annotations.get(REVISION_HISTORY).cloned().unwrap_or_default();
                if history.is_empty() {
                    annotations.insert(REVISION_HISTORY.into(), old);
                } else {
                    let mut parts: Vec<&str> = history.split(',').collect();
                    let mut total = history.len() + old.len() + 1;
                    let mut start = 0;
                    while total > MAX_REV_HISTORY_CHARS && start < parts.len() {
                        total -= parts[start].len() + 1;
                        start += 1;
                    }
                    if total <= MAX_REV_HISTORY_CHARS {
                        parts = parts.split_off(start);
                        parts.push(&old);
                        annotations.insert(REVISION_HISTORY.into(), parts.join(","));
                    }
                }
            }
        }
        if !exists && self.set_replicas_annotations(rs) {
            changed = true;
        }
        changed
    }

    /// `SetReplicasAnnotations`: desired-replicas and max-replicas, as the Deployment is now.
    fn set_replicas_annotations(&self, rs: &mut ReplicaSet) -> bool {
        let desired = replicas(&self.d).to_string();
        let max = (replicas(&self.d) + max_surge(&self.d)).to_string();
        let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
        let mut changed = false;
        for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
            if a.get(k) != Some(&v) {
                a.insert(k.into(), v);
                changed = true;
            }
        }
        changed
    }

    /// Sets the revision annotation; whether it changed.
    fn set_deployment_revision(&mut self, revision: &str) -> bool {
        if revision.is_empty() {
            return false;
        }
        let a = self.d.metadata.annotations.get_or_insert_with(BTreeMap::new);
        if a.get(REVISION).map(String::as_str) == Some(revision) {
            return false;
        }
        a.insert(REVISION.into(), revision.to_string());
        true
    }

    fn event(&mut self, reason: &str, message: String) {
        self.plan.actions.push(Action::Event { reason: reason.into(), message });
    }

    /// `NewRSNewReplicas`: how far the new ReplicaSet may grow now.
    fn new_rs_new_replicas(&self, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
        let desired = replicas(&self.d);
        if !is_rolling(&self.d) {
            return desired;
        }
        let (surge, _) = rolling_params(&self.d);
        let surge = scaled_value(&surge, desired, true).unwrap_or(0);
        let current: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
        let max_total = desired + surge;
        if current >= max_total {
            return rs_replicas(new_rs);
        }
        let up = (max_total - current).min(desired - rs_replicas(new_rs));
        rs_replicas(new_rs) + up
    }

    /// `scaleReplicaSet`: sets the size and the replica annotations; an Event when the size changed.
    fn scale(&mut self, i: usize, new_scale: i32, operation: Option<&str>) -> bool {
        let mut rs = self.rss[i].clone();
        let old_scale = rs_replicas(&rs);
        let size_changed = old_scale != new_scale;
        let annotations_changed = self.set_replicas_annotations(&mut rs);
        if !size_changed && !annotations_changed {
            return false;
        }
        set_rs_replicas(&mut rs, new_scale);
        let rs_name = name(&rs.metadata).to_string();
        // Upstream computes the status from the ReplicaSets as they were before the write.
        self.plan.actions.push(Action::UpdateReplicaSet(rs));
        if size_changed {
            let op = operation.unwrap_or(if old_scale < new_scale { "up" } else { "down" });
            self.event(
                "ScalingReplicaSet",
                format!("Scaled {op} replica set {rs_name} from {old_scale} to {new_scale}"),
            );
        }
        size_changed
    }

    /// The latest ReplicaSet state known to this sync (a planned update replaces the observed one).
    fn current(&self, i: usize) -> ReplicaSet {
        let n = name(&self.rss[i].metadata);
        self.plan
            .actions
            .iter()
            .rev()
            .find_map(|a| match a {
                Action::UpdateReplicaSet(rs) if name(&rs.metadata) == n => Some(rs.clone()),
                _ => None,
            })
            .unwrap_or_else(|| self.rss[i].clone())
    }

    fn scale_if_needed(&mut self, i: usize, new_scale: i32) -> bool {
        if rs_replicas(&self.current(i)) == new_scale {
            return false;
        }
        let current = self.current(i);
        let saved = std::mem::replace(&mut self.rss[i], current);
        let scaled = self.scale(i, new_scale, None);
        self.rss[i] = saved;
        scaled
    }

    fn rollout_rolling(&mut self) {
        let split = self.split(true);
        let Some(new) = split.new else { return };
        if self.reconcile_new(new, &split) {
            return self.sync_rollout_status(&split);
        }
        let active_old: Vec<usize> = split.old.iter().copied().filter(|i| rs_replicas(&self.rss[*i]) > 0).collect();
        if self.reconcile_old(new, &split, &active_old) {
            return self.sync_rollout_status(&split);
        }
        if complete(&self.d, &self.d.status.clone().unwrap_or_default()) {
            self.cleanup(&split);
        }
        self.sync_rollout_status(&split);
    }

    /// `reconcileNewReplicaSet`.
    fn reconcile_new(&mut self, new: usize, split: &Split) -> bool {
        let desired = replicas(&self.d);
        let have = rs_replicas(&self.rss[new]);
        if have == desired {
            return false;
        }
        if have > desired {
            return self.scale_if_needed(new, desired);
        }
        let all: Vec<&ReplicaSet> = split.old.iter().chain([&new]).map(|i| &self.rss[*i]).collect();
        let n = self.new_rs_new_replicas(&all, &self.rss[new]);
        self.scale_if_needed(new, n)
    }

    /// `reconcileOldReplicaSets`: scale old ReplicaSets down as far as availability allows.
    fn reconcile_old(&mut self, new: usize, split: &Split, active_old: &[usize]) -> bool {
        let old_pods: i32 = active_old.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        if old_pods == 0 {
            return false;
        }
        let all_pods: i32 = split.old.iter().chain([&new]).map(|i| rs_replicas(&self.rss[*i])).sum();
        let min_available = replicas(&self.d) - max_unavailable(&self.d);
        let new_rs = &self.rss[new];
        let new_unavailable = rs_replicas(new_rs) - rs_available(new_rs);
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return false;
        }
        let mut old_sorted = active_old.to_vec();
        old_sorted.sort_by(|a, b| by_creation(&self.rss[*a], &self.rss[*b]));
        // Unhealthy replicas first, or they would block the rollout.
        let mut cleaned = 0;
        for &i in &old_sorted {
            if cleaned >= max_scaled_down {
                break;
            }
            let rs = self.current(i);
            let (want, avail) = (rs_replicas(&rs), rs_available(&rs));
            if want == 0 || want == avail {
                continue;
            }
            let down = (max_scaled_down - cleaned).min(want - avail);
            self.scale_if_needed(i, want - down);
            cleaned += down;
        }
        // Then healthy ones, keeping minAvailable available.
        let available: i32 = split.old.iter().chain([&new]).map(|i| rs_available(&self.current(*i))).sum();
        let mut scaled = 0;
        if available > min_available {
            let total = available - min_available;
            for &i in &old_sorted {
                if scaled >= total {
                    break;
                }
                let want = rs_replicas(&self.current(i));
                if want == 0 {
                    continue;
                }
                let down = want.min(total - scaled);
                self.scale_if_needed(i, want - down);
                scaled += down;
            }
        }
        cleaned + scaled > 0
    }

    /// `rolloutRecreate`: all old pods gone before the new ReplicaSet scales up.
    fn rollout_recreate(&mut self) {
        let mut split = self.split(false);
        let active_old: Vec<usize> = split.old.iter().copied().filter(|i| rs_replicas(&self.rss[*i]) > 0).collect();
        let mut scaled_down = false;
        for i in active_old {
            scaled_down |= self.scale_if_needed(i, 0);
        }
        if scaled_down {
            return self.sync_rollout_status(&split);
        }
        if self.old_pods_running(&split) {
            return self.sync_rollout_status(&split);
        }
        if split.new.is_none() {
            split = self.split(true);
        }
        if let Some(new) = split.new {
            let desired = replicas(&self.d);
            self.scale_if_needed(new, desired);
        }
        if complete(&self.d, &self.d.status.clone().unwrap_or_default()) {
            self.cleanup(&split);
        }
        self.sync_rollout_status(&split);
    }

    fn old_pods_running(&self, split: &Split) -> bool {
        let old_actual: i32 = split.old.iter().map(|i| rs_status(&self.rss[*i], |s| Some(s.replicas))).sum();
        if old_actual > 0 {
            return true;
        }
        split.old.iter().any(|i| {
            let uid = self.rss[*i].metadata.uid.as_deref().unwrap_or("");
            self.active_pods.get(uid).copied().unwrap_or(0) > 0
        })
    }

    /// `cleanupDeployment`: old, empty ReplicaSets beyond revisionHistoryLimit are deleted, oldest revision first.
    fn cleanup(&mut self, split: &Split) {
        let limit = self.d.spec.as_ref().and_then(|s| s.revision_history_limit).unwrap_or(10);
        let mut cleanable: Vec<usize> =
            split.old.iter().copied().filter(|i| self.rss[*i].metadata.deletion_timestamp.is_none()).collect();
        let diff = cleanable.len() as i64 - i64::from(limit);
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            revision(&self.rss[*a]).cmp(&revision(&self.rss[*b])).then(by_creation(&self.rss[*a], &self.rss[*b]))
        });
        for &i in cleanable.iter().take(diff as usize) {
            let rs = &self.rss[i];
            let observed = rs.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0);
            if rs_status(rs, |s| Some(s.replicas)) != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            let (name, uid) = (name(&rs.metadata).to_string(), rs.metadata.uid.clone().unwrap_or_default());
            self.plan.actions.push(Action::DeleteReplicaSet { name, uid });
        }
    }

    fn split_refs(&self, split: &Split) -> (Vec<&ReplicaSet>, Option<&ReplicaSet>) {
        let all = split.old.iter().chain(split.new.iter()).map(|i| &self.rss[*i]).collect();
        (all, split.new.map(|i| &self.rss[i]))
    }

    /// `syncDeploymentStatus`: counters and Available only.
    fn sync_status(&mut self, split: &Split) {
        let (all, new) = self.split_refs(split);
        let status = calculate_status(&self.d, &all, new, self.now);
        self.d.status = Some(status);
    }

    /// `checkPausedConditions`.
    fn check_paused_conditions(&mut self) {
        if progress_deadline(&self.d).is_none() {
            return;
        }
        let now = self.now;
        let is_paused = paused(&self.d);
        let status = self.d.status.get_or_insert_with(Default::default);
        let reason = condition(status, PROGRESSING).and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(TIMED_OUT) {
            return;
        }
        let paused_cond = reason.as_deref() == Some(PAUSED);
        if is_paused && !paused_cond {
            set_condition(status, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused".into(), now));
        } else if !is_paused && paused_cond {
            set_condition(status, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed".into(), now));
        } else {
            return;
        }
        self.write_status_now();
    }

    /// `syncRolloutStatus`: counters, Available, and Progressing from the progress made since the last status.
    fn sync_rollout_status(&mut self, split: &Split) {
        let (all, new) = self.split_refs(split);
        let new_name = new.map(|rs| name(&rs.metadata).to_string());
        let mut status = calculate_status(&self.d, &all, new, self.now);
        let deadline = progress_deadline(&self.d);
        if deadline.is_none() {
            remove_condition(&mut status, PROGRESSING);
        }
        let old_status = self.d.status.clone().unwrap_or_default();
        let current = condition(&old_status, PROGRESSING).cloned();
        let complete_before = count(status.replicas) == count(status.updated_replicas)
            && current.as_ref().is_some_and(|c| c.reason.as_deref() == Some(NEW_RS_AVAILABLE));
        let subject = |what: &str| match &new_name {
            Some(n) => format!("ReplicaSet \"{n}\" {what}"),
            None => format!("Deployment \"{}\" {what}", name(&self.d.metadata)),
        };
        if deadline.is_some() && !complete_before {
            if complete(&self.d, &status) {
                let msg = subject("has successfully progressed.");
                set_condition(&mut status, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg, self.now));
            } else if progressing(&self.d, &status) {
                let mut c = new_condition(PROGRESSING, "True", RS_UPDATED, subject("is progressing."), self.now);
                if let Some(cur) = &current {
                    if cur.status == "True" {
                        c.last_transition_time = cur.last_transition_time.clone();
                    }
                    remove_condition(&mut status, PROGRESSING);
                }
                set_condition(&mut status, c);
            } else if timed_out(&self.d, &status, self.now) {
                let msg = subject("has timed out progressing.");
                set_condition(&mut status, new_condition(PROGRESSING, "False", TIMED_OUT, msg, self.now));
            }
        }
        // No ReplicaSet reports ReplicaFailure in the emulator (pod creation does not fail), so none is copied.
        remove_condition(&mut status, REPLICA_FAILURE);
        if status == old_status {
            self.plan.requeue_after = self.stuck_requeue(&status);
        }
        self.d.status = Some(status);
    }

    /// `requeueStuckDeployment`: when to check the progress deadline again.
    fn stuck_requeue(&self, new_status: &DeploymentStatus) -> Option<Duration> {
        let deadline = progress_deadline(&self.d)?;
        let cur = self.d.status.as_ref().and_then(|s| condition(s, PROGRESSING))?;
        if complete(&self.d, new_status) || cur.reason.as_deref() == Some(TIMED_OUT) {
            return None;
        }
        let from = cur.last_update_time.as_ref()?.0;
        let due_ms = (from.as_millisecond() + i64::from(deadline) * 1000) - self.now.as_millisecond();
        // A second more, as upstream does, so the strict comparison in `timed_out` holds when it fires.
        Some(Duration::from_millis(due_ms.max(0) as u64) + Duration::from_secs(1))
    }
}
