//! The Deployment's status: the counters `calculateStatus` computes and the Available/Progressing conditions,
//! with upstream's rules for complete, progressing and timed out.

use super::*;

/// The condition of a type.
pub fn condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.iter().flatten().find(|c| c.type_ == type_)
}

pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_update_time: Some(time(now)),
        last_transition_time: Some(time(now)),
    }
}

/// `SetDeploymentCondition`: same status and reason → unchanged; same status → keep lastTransitionTime; the
/// condition moves to the end of the list.
pub(super) fn set_condition(status: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    if let Some(cur) = condition(status, &cond.type_) {
        if cur.status == cond.status && cur.reason == cond.reason {
            return;
        }
        if cur.status == cond.status {
            cond.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(status, &cond.type_);
    status.conditions.get_or_insert_with(Vec::new).push(cond);
}

pub(super) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|c| c.type_ != type_);
        if c.is_empty() {
            status.conditions = None;
        }
    }
}

pub(super) fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The counters as `calculateStatus` computes them, with zero counters omitted as the wire form does.
pub(super) fn calculate_status(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let available: i32 = all.iter().map(|rs| rs_available(rs)).sum();
    let total: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
    let old = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(all.iter().map(|rs| rs_status(rs, |s| Some(s.replicas))).sum()),
        updated_replicas: nonzero(new_rs.map(|rs| rs_status(rs, |s| Some(s.replicas))).unwrap_or(0)),
        ready_replicas: nonzero(all.iter().map(|rs| rs_status(rs, |s| s.ready_replicas)).sum()),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions,
        terminating_replicas: None,
    };
    if available >= replicas(d) - max_unavailable(d) {
        let c = new_condition(AVAILABLE, "True", MIN_AVAILABLE, "Deployment has minimum availability.".into(), now);
        set_condition(&mut status, c);
    } else {
        let msg = "Deployment does not have minimum availability.".to_string();
        set_condition(&mut status, new_condition(AVAILABLE, "False", MIN_UNAVAILABLE, msg, now));
    }
    status
}

pub(super) fn count(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// `DeploymentComplete`.
pub(super) fn complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let want = replicas(d);
    count(s.updated_replicas) == want
        && count(s.replicas) == want
        && count(s.available_replicas) == want
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: any counter moved in the right direction since the last observed status.
pub(super) fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = count(old.replicas) - count(old.updated_replicas);
    let new_old = count(new.replicas) - count(new.updated_replicas);
    count(new.updated_replicas) > count(old.updated_replicas)
        || new_old < old_old
        || count(new.ready_replicas) > count(old.ready_replicas)
        || count(new.available_replicas) > count(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress reported for progressDeadlineSeconds.
pub(super) fn timed_out(d: &Deployment, new: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else { return false };
    let Some(cond) = condition(new, PROGRESSING) else { return false };
    match cond.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => cond.last_update_time.as_ref().is_some_and(|from| {
            from.0.as_second().saturating_add(i64::from(deadline)) < now.as_second()
                || (from.0.as_second().saturating_add(i64::from(deadline)) == now.as_second()
                    && now.subsec_nanosecond() > 0)
        }),
    }
}
