//! The kubelet's and scheduler's part of the loop: a Pod is scheduled, started (or crash-loops) and reports its
//! status; the pure decisions are `kubelet`'s.

use super::*;

impl Manager {
    // Over 80 lines on purpose: One Pod's lifecycle step (deletion, scheduling, start, crash-loop, readiness) in the
    // order the kubelet and scheduler act; each branch ends the sync.
    pub(super) fn sync_pod(&mut self, key: &Key) {
        let Some(cached) = self.pods.objects.get(key).cloned() else { return };
        let pod = cached.value;
        let uid = cached.uid;
        let rt = self.types.pods.clone();
        let (ns, name) = key;
        if meta_str(&pod, "deletionTimestamp").is_some() {
            // No containers to stop: the kubelet confirms the deletion at once.
            if self.killed.insert(uid.clone()) {
                let del = DeleteOptions {
                    grace_period_seconds: Some(0),
                    precondition_uid: Some(uid.clone()),
                    ..Default::default()
                };
                if let Ok(out) = self.cluster.delete(&rt, ns_opt(ns), name, &del) {
                    self.deleted(&rt, out);
                }
            }
            return;
        }
        let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if matches!(phase, "Succeeded" | "Failed") {
            return;
        }
        let now = Instant::now();
        let scheduled = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let started = phase == "Running";
        if !self.runs.contains_key(&uid) {
            let stage = match (scheduled, started) {
                (false, _) => Stage::Unscheduled,
                (true, false) => Stage::Starting,
                (true, true) if kubelet::crash_loops(&pod, &self.config.image_rules) => Stage::CrashLooping,
                (true, true) => Stage::Running,
            };
            let delay = match stage {
                Stage::Unscheduled => self.config.schedule_delay,
                Stage::Starting => self.config.ready_delay,
                _ => self.crash_interval(0),
            };
            let restarts = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map(|cs| cs.iter().filter_map(|c| c["restartCount"].as_i64()).max().unwrap_or(0))
                .unwrap_or(0) as i32;
            let ip = pod.pointer("/status/podIP").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
                self.next_ip += 1;
                kubelet::pod_ip(self.next_ip - 1)
            });
            self.runs.insert(uid.clone(), PodRun { stage, due: now + delay, restarts, ip });
        }
        let Some(run) = self.runs.get(&uid) else { return };
        if run.due > now {
            let after = run.due - now;
            self.schedule(after, Work::Pod(key.clone()));
            return;
        }
        match run.stage {
            Stage::Unscheduled => {
                let patch = PatchBody::Merge(json!({"spec": {"nodeName": kubelet::NODE_NAME}}));
                let Ok(out) =
                    self.cluster.patch(&rt, ns_opt(ns), name, patch, Subresource::Main, &Self::opts(SCHEDULER))
                else {
                    return;
                };
                let pod = self.wrote(&rt, out.object);
                if self.config.ready_delay.is_zero() {
                    // Started on the next pass, not in this one: as with a real scheduler and kubelet, the
                    // ReplicaSet controller reports the created pods (not yet ready) before they become Ready, and
                    // the Deployment controller sees that intermediate status (Progressing=ReplicaSetUpdated).
                    if let Some(run) = self.runs.get_mut(&uid) {
                        run.stage = Stage::Starting;
                        run.due = now;
                    }
                    self.schedule(Duration::ZERO, Work::Pod(key.clone()));
                } else {
                    let status = kubelet::scheduled_status(&pod, now_seconds());
                    self.write_pod_status(key, &pod, status);
                    let due = now + self.config.ready_delay;
                    if let Some(run) = self.runs.get_mut(&uid) {
                        run.stage = Stage::Starting;
                        run.due = due;
                    }
                    self.schedule(self.config.ready_delay, Work::Pod(key.clone()));
                }
            }
            Stage::Starting => self.start_pod(key, &uid, &pod),
            Stage::CrashLooping => {
                if let Some(run) = self.runs.get_mut(&uid) {
                    run.restarts += 1;
                }
                self.start_pod(key, &uid, &pod);
            }
            Stage::Running => {}
        }
    }

    /// Time between restarts of a crash-looping container: the configured ready delay (at least 1 s), doubling.
    pub(super) fn crash_interval(&self, restarts: i32) -> Duration {
        let base = self.config.ready_delay.max(Duration::from_secs(1));
        (base * 2u32.saturating_pow(restarts.clamp(0, 8) as u32)).min(Duration::from_secs(300))
    }

    pub(super) fn start_pod(&mut self, key: &Key, uid: &str, pod: &Value) {
        let Some(run) = self.runs.get(uid) else { return };
        let (ip, restarts) = (run.ip.clone(), run.restarts);
        let status = kubelet::started_status(pod, &self.config.image_rules, &ip, restarts, now_seconds());
        self.write_pod_status(key, pod, status);
        let crash = kubelet::crash_loops(pod, &self.config.image_rules);
        let interval = self.crash_interval(restarts);
        if let Some(run) = self.runs.get_mut(uid) {
            run.stage = if crash { Stage::CrashLooping } else { Stage::Running };
            run.due = Instant::now() + interval;
        }
        if crash {
            self.schedule(interval, Work::Pod(key.clone()));
        }
    }

    pub(super) fn write_pod_status(&mut self, key: &Key, pod: &Value, status: Value) {
        let rt = self.types.pods.clone();
        let mut body = pod.clone();
        body["status"] = status;
        let opts = Self::opts(KUBELET);
        if let Ok(out) = self.cluster.update(&rt, ns_opt(&key.0), &key.1, body, Subresource::Status, &opts) {
            self.wrote(&rt, out.object);
        }
    }
}
