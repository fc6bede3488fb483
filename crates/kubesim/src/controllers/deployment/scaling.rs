//! Scaling events: a Deployment whose replica count changed while a rollout runs (or while paused) is scaled
//! proportionally across its active ReplicaSets, as upstream's `sync.go` does, instead of rolling.

use super::*;

impl Sync<'_> {
    /// `isScalingEvent`: an active ReplicaSet was sized for a different replica count.
    pub(super) fn is_scaling_event(&mut self) -> bool {
        let split = self.split(false);
        let desired = replicas(&self.d);
        split.new.iter().chain(split.old.iter()).any(|i| {
            let rs = &self.rss[*i];
            rs_replicas(rs) > 0
                && annotation(&rs.metadata, DESIRED_REPLICAS)
                    .and_then(|v| v.parse::<i32>().ok())
                    .is_some_and(|v| v != desired)
        })
    }

    /// `sync`: scaling (proportionally when a rollout is under way) and the status, for paused Deployments and
    /// scaling events.
    pub(super) fn sync_scaling(&mut self) {
        let split = self.split(false);
        self.scale_proportionally(&split);
        if paused(&self.d) {
            self.cleanup(&split);
        }
        self.sync_status(&split);
    }

    fn scale_proportionally(&mut self, split: &Split) {
        let desired = replicas(&self.d);
        // FindActiveOrLatest: a single active ReplicaSet (or the newest, when none is active) takes it all.
        let mut old_newest_first = split.old.clone();
        old_newest_first.sort_by(|a, b| by_creation(&self.rss[*b], &self.rss[*a]));
        let active: Vec<usize> = split
            .new
            .iter()
            .chain(old_newest_first.iter())
            .copied()
            .filter(|i| rs_replicas(&self.rss[*i]) > 0)
            .collect();
        let target = match active.len() {
            0 => split.new.or(old_newest_first.first().copied()),
            1 => Some(active[0]),
            _ => None,
        };
        if let Some(i) = target {
            if rs_replicas(&self.rss[i]) != desired {
                self.scale(i, desired, None);
            }
            return;
        }
        if let Some(new) = split.new {
            let rs = &self.rss[new];
            let desired_annotation = annotation(&rs.metadata, DESIRED_REPLICAS).and_then(|v| v.parse::<i32>().ok());
            if rs_replicas(rs) == desired && desired_annotation == Some(desired) && rs_available(rs) == desired {
                for i in split.old.clone() {
                    if rs_replicas(&self.rss[i]) > 0 {
                        self.scale(i, 0, None);
                    }
                }
                return;
            }
        }
        if !is_rolling(&self.d) {
            return;
        }
        let mut all = active;
        let all_replicas: i32 = all.iter().map(|i| rs_replicas(&self.rss[*i])).sum();
        let allowed = if desired > 0 { desired + max_surge(&self.d) } else { 0 };
        let to_add = allowed - all_replicas;
        let newer_first = |a: &usize, b: &usize| by_creation(&self.rss[*b], &self.rss[*a]);
        let older_first = |a: &usize, b: &usize| by_creation(&self.rss[*a], &self.rss[*b]);
        let operation = match to_add.cmp(&0) {
            Ordering::Greater => {
                all.sort_by(|a, b| rs_replicas(&self.rss[*b]).cmp(&rs_replicas(&self.rss[*a])).then(newer_first(a, b)));
                Some("up")
            }
            Ordering::Less => {
                all.sort_by(|a, b| rs_replicas(&self.rss[*b]).cmp(&rs_replicas(&self.rss[*a])).then(older_first(a, b)));
                Some("down")
            }
            Ordering::Equal => None,
        };
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
        for &i in &all {
            let rs = &self.rss[i];
            if to_add != 0 {
                let p = self.proportion(rs, to_add, added);
                sizes.push(rs_replicas(rs) + p);
                added += p;
            } else {
                sizes.push(rs_replicas(rs));
            }
        }
        for (k, &i) in all.iter().enumerate() {
            let mut size = sizes[k];
            if k == 0 && to_add != 0 {
                size = (size + to_add - added).max(0);
            }
            self.scale(i, size, operation);
        }
    }

    /// `GetProportion`.
    fn proportion(&self, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
        if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
            return 0;
        }
        let fraction = self.rs_fraction(rs);
        let allowed = to_add - added;
        if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
    }

    fn rs_fraction(&self, rs: &ReplicaSet) -> i32 {
        let desired = replicas(&self.d);
        if desired == 0 {
            return -rs_replicas(rs);
        }
        let deployment_replicas = desired + max_surge(&self.d);
        let annotated = annotation(&rs.metadata, MAX_REPLICAS)
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or_else(|| self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        if annotated == 0 {
            return 0;
        }
        let size = f64::from(rs_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
        size.round() as i32 - rs_replicas(rs)
    }
}
