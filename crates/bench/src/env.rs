//! One benchmark cluster: an in-process emulator with pod readiness delay 0, the Microservice CRD, the benchmark
//! namespace and an observer. The benchmark's own writes go through the in-process Cluster API, so the emulator's
//! HTTP request counters hold the operator's requests alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kubesim::Sim;
use kubesim::cluster::{Cluster, PatchBody, Subresource, WriteOptions};
use kubesim::controllers::ControllerConfig;
use kubesim::resources::ResourceRef;
use microservice_core::crd;
use serde_json::{Value, json};

use crate::child::OperatorProcess;
use crate::error::{BenchError, Result};
use crate::observe::Observer;

pub const NAMESPACE: &str = "bench";
pub const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
pub const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";

pub struct Env {
    pub sim: Sim,
    pub microservices: ResourceRef,
    pub deployments: ResourceRef,
    pub services: ResourceRef,
    pub kubeconfig: PathBuf,
    pub observer: Observer,
}

fn opts() -> WriteOptions {
    WriteOptions { field_manager: Some("bench".into()), ..WriteOptions::default() }
}

pub fn name(i: usize) -> String {
    format!("ms-{i:05}")
}

impl Env {
    pub async fn start(dir: &Path) -> Result<Env> {
        let sim = Sim::builder().controllers(ControllerConfig::default()).start().await?;
        let cluster = sim.cluster().clone();
        let crds = cluster
            .resolve("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .map_err(|e| BenchError::emulator("resolving CRDs", e))?;
        let body = serde_json::to_value(crd::crd()).map_err(BenchError::json("the CRD"))?;
        cluster.create(&crds, None, body, &opts()).map_err(|e| BenchError::emulator("the Microservice CRD", e))?;
        let microservices = wait_resolvable(&cluster, "platform.example.com", "v1alpha1", "microservices").await?;
        let namespaces = cluster.resolve("", "v1", "namespaces").map_err(|e| BenchError::emulator("namespaces", e))?;
        cluster
            .create(&namespaces, None, json!({"metadata": {"name": NAMESPACE}}), &opts())
            .map_err(|e| BenchError::emulator("the benchmark namespace", e))?;
        let deployments =
            cluster.resolve("apps", "v1", "deployments").map_err(|e| BenchError::emulator("deployments", e))?;
        let services = cluster.resolve("", "v1", "services").map_err(|e| BenchError::emulator("services", e))?;
        std::fs::create_dir_all(dir).map_err(BenchError::io(format!("cannot create {}", dir.display())))?;
        let kubeconfig = dir.join(format!("kubeconfig-{}.yaml", sim.addr().port()));
        sim.write_kubeconfig(&kubeconfig)?;
        let observer = Observer::start(&sim);
        Ok(Env { sim, microservices, deployments, services, kubeconfig, observer })
    }

    pub fn cluster(&self) -> &Cluster {
        self.sim.cluster()
    }

    /// Creates Microservices `ms-00000`.. with image v1.
    pub fn create_microservices(&self, n: usize) -> Result<()> {
        for i in 0..n {
            let body = json!({
                "apiVersion": "platform.example.com/v1alpha1",
                "kind": "Microservice",
                "metadata": {"name": name(i), "namespace": NAMESPACE},
                "spec": {"image": IMAGE_V1, "port": 8080}
            });
            self.cluster()
                .create(&self.microservices, Some(NAMESPACE), body, &opts())
                .map_err(|e| BenchError::emulator(format!("creating Microservice {}", name(i)), e))?;
        }
        Ok(())
    }

    pub fn set_image(&self, i: usize, image: &str) -> Result<()> {
        self.patch(&self.microservices.clone(), &name(i), json!({"spec": {"image": image}}))
    }

    pub fn patch(&self, rt: &ResourceRef, name: &str, body: Value) -> Result<()> {
        self.cluster()
            .patch(rt, Some(NAMESPACE), name, PatchBody::Merge(body), Subresource::Main, &opts())
            .map(|_| ())
            .map_err(|e| BenchError::emulator(format!("patching {} {name}", rt.kind), e))
    }

    pub fn delete(&self, rt: &ResourceRef, name: &str) -> Result<()> {
        self.cluster()
            .delete(rt, Some(NAMESPACE), name, &Default::default())
            .map(|_| ())
            .map_err(|e| BenchError::emulator(format!("deleting {} {name}", rt.kind), e))
    }

    pub fn get(&self, rt: &ResourceRef, name: &str) -> Option<Value> {
        self.cluster().get(rt, Some(NAMESPACE), name).ok()
    }

    /// Waits until `n` Microservices are Ready for `generation`; returns when the last one became Ready.
    pub async fn wait_all_ready(
        &self,
        n: usize,
        generation: i64,
        timeout: Duration,
        op: &mut OperatorProcess,
    ) -> Result<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            op.check_alive()?;
            {
                let seen = self.observer.seen();
                if seen.ready_for(generation) >= n {
                    return Ok(seen.last_ready.unwrap_or_else(Instant::now));
                }
            }
            if Instant::now() > deadline {
                let ready = self.observer.seen().ready_for(generation);
                return Err(BenchError::Timeout {
                    what: format!("{n} Microservices Ready for generation {generation} ({ready} were)"),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the operator's request count has not moved for `quiet`, so late requests (Events after the
    /// last status write) are counted. Bounded by `timeout`.
    pub async fn wait_quiet(&self, quiet: Duration, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut last = self.sim.requests().total();
        let mut since = Instant::now();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.sim.requests().total();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                return;
            }
        }
    }
}

async fn wait_resolvable(cluster: &Cluster, group: &str, version: &str, plural: &str) -> Result<ResourceRef> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cluster.resolve(group, version, plural) {
            Ok(rt) => return Ok(rt),
            Err(e) if Instant::now() > deadline => return Err(BenchError::emulator(format!("serving {plural}"), e)),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
