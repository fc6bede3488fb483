//! Reading a Deployment and its ReplicaSets as upstream's `deploymentutil` does: replicas, surge and
//! unavailability, revisions, the pod-template hash.

use super::*;

/// `intstr.GetScaledValueFromIntOrPercent`: percentages of `total`, rounded up or down.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.trim().parse().ok()?;
            let scaled = pct * i64::from(total);
            let value = if round_up { (scaled + 99).div_euclid(100) } else { scaled.div_euclid(100) };
            i32::try_from(value).ok()
        }
    }
}

pub(super) fn is_rolling(d: &Deployment) -> bool {
    strategy_type(d) == "RollingUpdate"
}

pub(super) fn strategy_type(d: &Deployment) -> &str {
    d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate")
}

/// Desired replicas (API default 1).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub(super) fn rolling_params(d: &Deployment) -> (IntOrString, IntOrString) {
    let default = || IntOrString::String("25%".into());
    let ru = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    (
        ru.and_then(|r| r.max_surge.clone()).unwrap_or_else(default),
        ru.and_then(|r| r.max_unavailable.clone()).unwrap_or_else(default),
    )
}

/// `ResolveFenceposts`: surge rounds up, unavailable rounds down; both zero → unavailable 1.
pub fn resolve_fenceposts(max_surge: &IntOrString, max_unavailable: &IntOrString, desired: i32) -> (i32, i32) {
    let surge = scaled_value(max_surge, desired, true).unwrap_or(0);
    let mut unavailable = scaled_value(max_unavailable, desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling(d) {
        return 0;
    }
    let (s, u) = rolling_params(d);
    resolve_fenceposts(&s, &u, replicas(d)).0
}

pub fn max_unavailable(d: &Deployment) -> i32 {
    let desired = replicas(d);
    if !is_rolling(d) || desired == 0 {
        return 0;
    }
    let (s, u) = rolling_params(d);
    resolve_fenceposts(&s, &u, desired).1.min(desired)
}

/// Seconds without progress before Progressing=False; None when disabled (MaxInt32). The API defaults it to 600.
pub(super) fn progress_deadline(d: &Deployment) -> Option<i32> {
    match d.spec.as_ref().and_then(|s| s.progress_deadline_seconds) {
        Some(i32::MAX) => None,
        Some(s) => Some(s),
        None => Some(600),
    }
}

pub(super) fn paused(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
}

pub(super) fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

pub(super) fn set_rs_replicas(rs: &mut ReplicaSet, n: i32) {
    rs.spec.get_or_insert_with(ReplicaSetSpec::default).replicas = Some(n);
}

pub(super) fn rs_status(
    rs: &ReplicaSet,
    f: impl Fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>,
) -> i32 {
    rs.status.as_ref().and_then(f).unwrap_or(0)
}

pub(super) fn rs_available(rs: &ReplicaSet) -> i32 {
    rs_status(rs, |s| s.available_replicas)
}

pub(super) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

pub(super) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

pub(super) fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION).and_then(|r| r.parse().ok()).unwrap_or(0)
}

pub(super) fn created(rs: &ReplicaSet) -> Option<Timestamp> {
    rs.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    created(a).cmp(&created(b)).then_with(|| name(&a.metadata).cmp(name(&b.metadata)))
}

/// The template without the `pod-template-hash` label, in wire form, for `EqualIgnoreHash`.
pub(super) fn template_ignoring_hash(t: Option<&PodTemplateSpec>) -> serde_json::Value {
    let mut t = t.cloned().unwrap_or_default();
    if let Some(meta) = t.metadata.as_mut()
        && let Some(labels) = meta.labels.as_mut()
    {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            meta.labels = None;
        }
    }
    serde_json::to_value(&t).unwrap_or_default()
}

/// `controller.ComputeHash`: FNV-1a of the template (and the collision count), safe-encoded.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut data = canonical_json(&serde_json::to_value(template).unwrap_or_default());
    if let Some(c) = collision_count {
        data.push_str(&c.to_string());
    }
    safe_encode(&fnv1a32(data.as_bytes()).to_string())
}
