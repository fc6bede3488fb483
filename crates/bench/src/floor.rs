//! The floor client: what a perfect operator must send, run in the benchmark process as the reference for the
//! operator's times. On create: list the Microservices, watch the Deployments, create each Service and Deployment,
//! and patch each status once when its rollout completes (the operator's own `compute_status` body). On an update
//! wave (the image of all N changed): list again, patch each Deployment once to its new desired state, and patch
//! each status once when the new rollout completes.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use microservice_core::contract;
use microservice_core::crd::Microservice;
use microservice_core::desired::{desired_deployment, desired_service};
use microservice_core::profile::PlatformProfile;
use microservice_core::status::compute_status;
use serde_json::json;

use crate::env::{Env, Progress};
use crate::error::{BenchError, Result};
use crate::fixture::{Backend, IMAGE_V2, NAMESPACE};
use crate::report::Report;
use crate::rollout::{DeploymentView, Want};
use crate::scenarios::{Judged, non_watch, per_cr_note, ready_latency, secs};

/// The floor's times, the references of the operator's converge and update.
pub struct FloorTimes {
    pub converge: Duration,
    /// None when the update wave was not asked for.
    pub update: Option<Duration>,
}

/// The floor on a fresh cluster: converge, then (with `update`) the update wave, each reported on its own.
pub async fn floor(backend: Backend, n: usize, update: bool, out: &Path) -> Result<(Vec<Report>, FloorTimes)> {
    let env = Env::start(backend, out).await?;
    env.create_microservices(n).await?;
    let client = env.floor_client().await?;
    let profile = Arc::new(PlatformProfile::default());
    let (converge_report, converge) = wave(&env, &client, n, &profile, Wave::Create).await?;
    let mut reports = vec![converge_report];
    let mut times = FloorTimes { converge, update: None };
    if update {
        let (report, took) = wave(&env, &client, n, &profile, Wave::Update).await?;
        reports.push(report);
        times.update = Some(took);
    }
    Ok((reports, times))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wave {
    Create,
    Update,
}

impl Wave {
    /// What the wave did to a Microservice's children, for the progress line.
    fn written(self) -> &'static str {
        match self {
            Wave::Create => "created",
            Wave::Update => "updated",
        }
    }
}

/// One wave of the floor: from the first write until every Microservice's status is patched Ready.
async fn wave(
    env: &Env,
    client: &Client,
    n: usize,
    profile: &Arc<PlatformProfile>,
    wave: Wave,
) -> Result<(Report, Duration)> {
    let before = env.requests();
    let latency_before = env.observer.seen().ready_latency_ms.len();
    let started = Instant::now();
    if wave == Wave::Update {
        // Timed from the first spec change, as the operator's update wave is.
        env.set_images(n, IMAGE_V2).await?;
    }
    let microservices: Api<Microservice> = Api::namespaced(client.clone(), NAMESPACE);
    let list = microservices.list(&ListParams::default()).await.map_err(BenchError::kube("floor: list"))?;
    let by_name: Arc<HashMap<String, Microservice>> =
        Arc::new(list.items.into_iter().map(|ms| (ms.name_any(), ms)).collect());

    let patched = Arc::new(AtomicUsize::new(0));
    let watcher_task =
        tokio::spawn(patch_ready_when_complete(client.clone(), by_name.clone(), profile.clone(), patched.clone()));
    let (scenario, what) = match wave {
        Wave::Create => ("floor", "time until all Ready (generation 1)"),
        Wave::Update => ("floor-update", "time until all Ready (generation 2)"),
    };
    write_all_children(client, &by_name, profile, wave).await?;
    let waited = wait_patched(&patched, n, env.timeout_for(n)).await;
    let took = started.elapsed();
    watcher_task.abort();
    waited?;
    let counts = env.requests().since(&before);
    let mut r = Report::new(scenario, n);
    r.info(what, secs(took), Some(took.as_secs_f64()));
    let per_cr = non_watch(&counts) as f64 / n as f64;
    r.info("API requests per CR (watch excluded)", format!("{per_cr:.2}"), Some(per_cr));
    r.note(per_cr_note(&counts, n));
    let latencies = env.observer.seen().ready_latency_ms[latency_before..].to_vec();
    ready_latency(&mut r, latencies, Judged::Reference);
    r.note(match env.backend() {
        Backend::Kubesim => "the floor client runs in the benchmark process, beside the emulator",
        Backend::Real => "the floor client runs in the benchmark process; its requests are counted from the audit log",
    });
    Ok((r, took))
}

/// Watches the Deployments and patches each Microservice's status once when its Deployment's rollout completes,
/// counting the patches that succeeded in `patched`. Runs until aborted.
async fn patch_ready_when_complete(
    client: Client,
    by_name: Arc<HashMap<String, Microservice>>,
    profile: Arc<PlatformProfile>,
    patched: Arc<AtomicUsize>,
) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let mut done = std::collections::HashSet::new();
    let completed = watcher(deployments, watcher::Config::default())
        .applied_objects()
        .filter_map(|d| futures::future::ready(d.ok()))
        .filter_map(move |d: Deployment| {
            let name = d.name_any();
            let ms = by_name.get(&name).cloned();
            let complete = ms
                .as_ref()
                .and_then(|ms| Want::of(ms, &profile))
                .is_some_and(|want| serde_json::to_value(&d).is_ok_and(|v| DeploymentView::of(&v).complete_for(&want)));
            let fresh = complete && done.insert(name);
            futures::future::ready(if fresh { ms.map(|ms| (ms, d)) } else { None })
        });
    completed
        .for_each_concurrent(16, |(ms, d)| {
            let client = client.clone();
            let patched = patched.clone();
            async move {
                if patch_ready(&client, &ms, &d).await.is_ok() {
                    patched.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .await;
}

/// Creates every Microservice's Service and Deployment, or patches every Deployment to its new desired state, 16
/// at a time, saying how far it is (on the real control plane a Service create takes about a second, so the
/// creates of 10,000 take minutes).
async fn write_all_children(
    client: &Client,
    by_name: &HashMap<String, Microservice>,
    profile: &Arc<PlatformProfile>,
    wave: Wave,
) -> Result<()> {
    let n = by_name.len();
    let (mut done, mut progress) = (0, Progress::new());
    futures::stream::iter(by_name.values().cloned().collect::<Vec<_>>())
        .map(|ms| {
            let client = client.clone();
            let profile = profile.clone();
            async move {
                match wave {
                    Wave::Create => create_children(&client, &ms, &profile).await,
                    Wave::Update => update_deployment(&client, &ms, &profile).await,
                }
            }
        })
        .buffer_unordered(16)
        .try_for_each(|()| {
            done += 1;
            progress.say(|| format!("floor: {done}/{n} Microservices' children {}", wave.written()));
            std::future::ready(Ok(()))
        })
        .await
}

/// Waits until `patched` reaches `n`, or fails after `timeout`.
async fn wait_patched(patched: &AtomicUsize, n: usize, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut progress = Progress::new();
    while patched.load(Ordering::Relaxed) < n {
        progress.say(|| format!("floor: {}/{n} statuses patched Ready", patched.load(Ordering::Relaxed)));
        if Instant::now() > deadline {
            return Err(BenchError::Timeout {
                what: format!("the floor client to patch {n} statuses ({} done)", patched.load(Ordering::Relaxed)),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

async fn create_children(client: &Client, ms: &Microservice, profile: &PlatformProfile) -> Result<()> {
    let valid = contract::validate_object(ms, profile)
        .map_err(|v| BenchError::emulator("floor: the contract", contract::summarize(&v)))?;
    let service = desired_service(ms, profile).map_err(|e| BenchError::emulator("floor: desired Service", e))?;
    let deployment =
        desired_deployment(ms, &valid, profile).map_err(|e| BenchError::emulator("floor: desired Deployment", e))?;
    let params = PostParams { field_manager: Some("floor".into()), ..PostParams::default() };
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .create(&params, &service)
        .await
        .map_err(BenchError::kube("floor: create Service"))?;
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .create(&params, &deployment)
        .await
        .map_err(BenchError::kube("floor: create Deployment"))?;
    Ok(())
}

/// The Deployment as the new generation wants it, in one merge patch (the whole desired object: the container list
/// is replaced).
async fn update_deployment(client: &Client, ms: &Microservice, profile: &PlatformProfile) -> Result<()> {
    let valid = contract::validate_object(ms, profile)
        .map_err(|v| BenchError::emulator("floor: the contract", contract::summarize(&v)))?;
    let deployment =
        desired_deployment(ms, &valid, profile).map_err(|e| BenchError::emulator("floor: desired Deployment", e))?;
    let params = PatchParams { field_manager: Some("floor".into()), ..PatchParams::default() };
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .patch(&ms.name_any(), &params, &Patch::Merge(&deployment))
        .await
        .map_err(BenchError::kube("floor: patch Deployment"))?;
    Ok(())
}

/// The operator's own status for a complete rollout, so the floor writes the same bytes.
async fn patch_ready(client: &Client, ms: &Microservice, d: &Deployment) -> Result<()> {
    let profile = PlatformProfile::default();
    let valid = contract::validate_object(ms, &profile);
    let service = desired_service(ms, &profile).map_err(|e| BenchError::emulator("floor: desired Service", e))?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = compute_status(ms, &valid, Some(d), Some(&service), &[], &now);
    let body = json!({ "status": status });
    Api::<Microservice>::namespaced(client.clone(), NAMESPACE)
        .patch_status(&ms.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(BenchError::kube("floor: patch status"))?;
    Ok(())
}
