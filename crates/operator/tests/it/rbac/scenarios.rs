//! What the operator must be able to do in a cluster, each as one scenario that reports success or why it failed
//! (with the CR's last status, where a Forbidden names the missing permission). Every scenario uses its own
//! Microservice, so they can run one after another against one operator.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use microservice_core::crd::{ConditionStatus, ConditionType, Microservice, MicroserviceStatus, Phase};
use serde_json::json;

use super::cluster::{Cluster, WATCHED_NS};
use crate::support::ready_for_current_generation;

const IMAGE_V1: &str = "ghcr.io/example/todo-api:1.0.0";
const IMAGE_V2: &str = "ghcr.io/example/todo-api:2.0.0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A new Microservice gets its Deployment and Service and becomes Ready.
    CreateReady,
    /// The same on a server that refuses streaming lists (Kubernetes 1.33's default): the caches fill from lists.
    CreateReadyWithoutStreamingLists,
    /// An image change rolls out and is Ready for generation 2.
    Update,
    /// A deleted Service is recreated.
    RepairDeletedService,
    /// Hand edits of the Deployment and the Service are reverted.
    RepairEdits,
    /// A pre-existing Deployment handed over with the annotation is adopted in place.
    Handover,
    /// An image outside the allowed repositories is refused in status (Invalid).
    InvalidSpec,
    /// The operator's Events are recorded: both children's creation, the second as a series of the first.
    EventsRecorded,
    /// An autoscaled Microservice gets its HPA, which is repaired when edited or deleted and deleted when
    /// autoscaling is turned off.
    Autoscaling,
}

impl Scenario {
    pub const ALL: [Scenario; 8] = [
        Scenario::CreateReady,
        Scenario::EventsRecorded,
        Scenario::RepairDeletedService,
        Scenario::RepairEdits,
        Scenario::Update,
        Scenario::InvalidSpec,
        Scenario::Handover,
        Scenario::Autoscaling,
    ];

    /// Whether this scenario runs on a server that refuses streaming lists (its own cluster: not one of [`ALL`]).
    pub fn without_streaming_lists(self) -> bool {
        self == Scenario::CreateReadyWithoutStreamingLists
    }

    pub async fn run(self, cluster: &Cluster, deadline: Duration) -> Result<(), String> {
        let s = Steps { client: cluster.admin.clone(), deadline };
        match self {
            Scenario::CreateReady => s.create_ready("todo-api").await.map(drop),
            Scenario::CreateReadyWithoutStreamingLists => s.create_ready("todo-paged").await.map(drop),
            Scenario::Update => s.update("todo-update").await,
            Scenario::RepairDeletedService => s.repair_deleted_service("todo-repair").await,
            Scenario::RepairEdits => s.repair_edits("todo-edits").await,
            Scenario::Handover => s.handover("legacy-api").await,
            Scenario::InvalidSpec => s.invalid("nginx").await,
            Scenario::EventsRecorded => s.events("todo-events").await,
            Scenario::Autoscaling => s.autoscaling("todo-autoscaled").await,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Scenario::CreateReady => "create → Ready",
            Scenario::CreateReadyWithoutStreamingLists => "create → Ready on a server without streaming lists",
            Scenario::Update => "image update → Ready for generation 2",
            Scenario::RepairDeletedService => "deleted Service recreated",
            Scenario::RepairEdits => "edited Deployment and Service reverted",
            Scenario::Handover => "handed-over Deployment adopted",
            Scenario::InvalidSpec => "invalid spec reported Invalid",
            Scenario::EventsRecorded => "Events recorded",
            Scenario::Autoscaling => "HPA created, repaired, deleted when autoscaling ends",
        };
        f.write_str(name)
    }
}

/// The scenarios' steps, through the admin's client (the test's eyes and hands, never limited by RBAC).
struct Steps {
    client: Client,
    deadline: Duration,
}

/// The CR's status in one line: phase and every condition that is not True (where a Forbidden would show).
fn summary(ms: Option<&Microservice>) -> String {
    let Some(ms) = ms else { return "the Microservice is gone".into() };
    let status = ms.status.clone().unwrap_or_default();
    let mut out = format!("generation {}, status {:?}", ms.metadata.generation.unwrap_or_default(), status.phase);
    for c in &status.conditions {
        if c.status != ConditionStatus::True || c.type_ == ConditionType::Degraded {
            out.push_str(&format!("; {:?}={:?} {}: {}", c.type_, c.status, c.reason, c.message));
        }
    }
    if status == MicroserviceStatus::default() {
        out.push_str(" (the operator never wrote status)");
    }
    out
}

/// Degraded because the API server refused the operator a request (a permanent error: it waits for a change).
fn forbidden(ms: &Microservice) -> bool {
    ms.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == ConditionType::Degraded && c.status == ConditionStatus::True && c.reason == "Forbidden")
    })
}

impl Steps {
    fn microservices(&self) -> Api<Microservice> {
        Api::namespaced(self.client.clone(), WATCHED_NS)
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), WATCHED_NS)
    }

    fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), WATCHED_NS)
    }

    /// Polls `probe` until it gives a value; on the deadline, fails with what it last reported. A permanent
    /// Forbidden in the status of Microservice `of` ends the wait at once: the operator does not retry it, so
    /// nothing would change before the deadline.
    async fn until<T, F, Fut>(&self, of: &str, what: &str, mut probe: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let api = self.microservices();
        let started = Instant::now();
        loop {
            let last = match probe().await {
                Ok(value) => return Ok(value),
                Err(last) => last,
            };
            if let Some(ms) = api.get_opt(of).await.ok().flatten()
                && forbidden(&ms)
            {
                return Err(format!("{what} cannot happen: {}", summary(Some(&ms))));
            }
            if started.elapsed() >= self.deadline {
                return Err(format!("{what} did not happen within {:?}; last seen: {last}", self.deadline));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Waits until the Microservice satisfies `done`.
    async fn wait_for(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&Microservice) -> bool,
    ) -> Result<Microservice, String> {
        let api = self.microservices();
        self.until(name, &format!("{name} {what}"), || async {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(ms) if done(&ms) => Ok(ms),
                other => Err(summary(other.as_ref())),
            }
        })
        .await
    }

    async fn create(&self, name: &str, image: &str) -> Result<Microservice, String> {
        let ms: Microservice = serde_json::from_value(json!({
            "apiVersion": "platform.example.com/v1alpha1",
            "kind": "Microservice",
            "metadata": {"name": name, "namespace": WATCHED_NS},
            "spec": {"image": image, "port": 8080}
        }))
        .map_err(|e| e.to_string())?;
        self.microservices().create(&PostParams::default(), &ms).await.map_err(|e| format!("create {name}: {e}"))
    }

    async fn create_ready(&self, name: &str) -> Result<Microservice, String> {
        self.create(name, IMAGE_V1).await?;
        let ms = self.wait_for(name, "Ready", ready_for_current_generation).await?;
        for (kind, owners) in [
            ("Deployment", self.deployments().get(name).await.map(|d| d.owner_references().to_vec())),
            ("Service", self.services().get(name).await.map(|s| s.owner_references().to_vec())),
        ] {
            let owners = owners.map_err(|e| format!("{kind} {name}: {e}"))?;
            if !owners.iter().any(|o| o.controller == Some(true) && o.uid == ms.uid().unwrap_or_default()) {
                return Err(format!("{kind} {name} is not controlled by its Microservice: {owners:?}"));
            }
        }
        Ok(ms)
    }

    async fn update(&self, name: &str) -> Result<(), String> {
        self.create_ready(name).await?;
        let patch = json!({"spec": {"image": IMAGE_V2}});
        self.microservices()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("update {name}: {e}"))?;
        let ms = self.wait_for(name, "Ready for generation 2", ready_for_current_generation).await?;
        match ms.status.and_then(|s| s.image) {
            Some(image) if image == IMAGE_V2 => Ok(()),
            other => Err(format!("Ready for generation 2 but rolled out {other:?}")),
        }
    }

    async fn repair_deleted_service(&self, name: &str) -> Result<(), String> {
        self.create_ready(name).await?;
        self.delete_service_until_recreated(name).await
    }

    async fn delete_service_until_recreated(&self, name: &str) -> Result<(), String> {
        let old = self.services().get(name).await.map_err(|e| e.to_string())?.uid();
        self.services().delete(name, &DeleteParams::default()).await.map_err(|e| e.to_string())?;
        let services = self.services();
        self.until(name, &format!("Service {name} recreated"), || async {
            match services.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(s) if s.uid() != old => Ok(()),
                Some(_) => Err("the deleted Service is still there".into()),
                None => Err("no Service".into()),
            }
        })
        .await
    }

    async fn repair_edits(&self, name: &str) -> Result<(), String> {
        self.create_ready(name).await?;
        let params = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
        let edit = json!({"spec": {"replicas": 5}});
        self.deployments().patch(name, &params, &Patch::Merge(&edit)).await.map_err(|e| e.to_string())?;
        let deployments = self.deployments();
        self.until(name, &format!("the edit of Deployment {name}'s replicas reverted"), || async {
            let replicas = deployments.get(name).await.map_err(|e| e.to_string())?.spec.and_then(|s| s.replicas);
            if replicas == Some(5) { Err("replicas still 5".into()) } else { Ok(()) }
        })
        .await?;

        let selector = json!({"spec": {"selector": {"app.kubernetes.io/instance": "someone-else"}}});
        self.services().patch(name, &params, &Patch::Merge(&selector)).await.map_err(|e| e.to_string())?;
        let services = self.services();
        self.until(name, &format!("the edit of Service {name}'s selector reverted"), || async {
            let service = services.get(name).await.map_err(|e| e.to_string())?;
            let selector = service.spec.and_then(|s| s.selector).unwrap_or_default();
            match selector.get("app.kubernetes.io/instance") {
                Some(instance) if instance == name => Ok(()),
                other => Err(format!("selector instance {other:?}")),
            }
        })
        .await
    }

    async fn handover(&self, name: &str) -> Result<(), String> {
        let labels = json!({"app.kubernetes.io/name": name, "app.kubernetes.io/instance": name});
        let foreign: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {"platform.example.com/handover": name}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "app", "image": "ghcr.io/example/todo-api:0.9.0"}]}
                }
            }
        }))
        .map_err(|e| e.to_string())?;
        let params = PostParams { field_manager: Some("legacy-deployer".into()), ..PostParams::default() };
        let foreign = self.deployments().create(&params, &foreign).await.map_err(|e| e.to_string())?;
        self.create(name, IMAGE_V1).await?;
        self.wait_for(name, "Ready after the handover", ready_for_current_generation).await?;
        let adopted = self.deployments().get(name).await.map_err(|e| e.to_string())?;
        if adopted.uid() != foreign.uid() {
            return Err("the handed-over Deployment was replaced, not adopted".into());
        }
        if !adopted.owner_references().iter().any(|o| o.controller == Some(true) && o.name == name) {
            return Err("the adopted Deployment is not controlled by the Microservice".into());
        }
        if adopted.annotations().contains_key("platform.example.com/handover") {
            return Err("the handover annotation was not removed".into());
        }
        Ok(())
    }

    async fn invalid(&self, name: &str) -> Result<(), String> {
        self.create(name, "docker.io/library/nginx:1.27").await?;
        let ms = self
            .wait_for(name, "reported Invalid", |ms| {
                ms.status.as_ref().is_some_and(|s| s.phase == Some(Phase::Invalid))
            })
            .await?;
        let status = ms.status.unwrap_or_default();
        match status.condition(ConditionType::Accepted) {
            Some(c) if c.status == ConditionStatus::False && c.reason == "ImageNotAllowed" => Ok(()),
            other => Err(format!("Accepted condition {other:?}")),
        }
    }

    fn hpas(&self) -> Api<HorizontalPodAutoscaler> {
        Api::namespaced(self.client.clone(), WATCHED_NS)
    }

    async fn autoscaling(&self, name: &str) -> Result<(), String> {
        let ms: Microservice = serde_json::from_value(json!({
            "apiVersion": "platform.example.com/v1alpha1",
            "kind": "Microservice",
            "metadata": {"name": name, "namespace": WATCHED_NS},
            "spec": {"image": IMAGE_V1, "port": 8080, "autoscaling": {"minReplicas": 1, "maxReplicas": 4}}
        }))
        .map_err(|e| e.to_string())?;
        self.microservices().create(&PostParams::default(), &ms).await.map_err(|e| format!("create {name}: {e}"))?;
        let ms = self.wait_for(name, "Ready", ready_for_current_generation).await?;
        let hpas = self.hpas();
        let max = || async {
            let hpa = hpas.get_opt(name).await.map_err(|e| e.to_string())?;
            let Some(hpa) = hpa else { return Err("no HorizontalPodAutoscaler".to_string()) };
            if !hpa
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == ms.uid().unwrap_or_default())
            {
                return Err(format!("HorizontalPodAutoscaler {name} is not controlled by its Microservice"));
            }
            Ok((hpa.uid(), hpa.spec.map(|s| s.max_replicas)))
        };
        let (first, _) = self.until(name, "the HorizontalPodAutoscaler created", max).await?;

        let params = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
        let edit = json!({"spec": {"maxReplicas": 9}});
        hpas.patch(name, &params, &Patch::Merge(&edit)).await.map_err(|e| e.to_string())?;
        self.until(name, &format!("the edit of HorizontalPodAutoscaler {name} reverted"), || async {
            match max().await? {
                (_, Some(4)) => Ok(()),
                (_, other) => Err(format!("maxReplicas {other:?}")),
            }
        })
        .await?;

        hpas.delete(name, &DeleteParams::default()).await.map_err(|e| e.to_string())?;
        self.until(name, &format!("HorizontalPodAutoscaler {name} recreated"), || async {
            match max().await? {
                (uid, _) if uid != first => Ok(()),
                _ => Err("the deleted HorizontalPodAutoscaler is still there".into()),
            }
        })
        .await?;

        let off = json!({"spec": {"replicas": 2, "autoscaling": null}});
        self.microservices()
            .patch(name, &PatchParams::default(), &Patch::Merge(&off))
            .await
            .map_err(|e| format!("turn autoscaling off for {name}: {e}"))?;
        let deployments = self.deployments();
        self.until(name, &format!("HorizontalPodAutoscaler {name} deleted, replicas 2"), || async {
            let hpa = hpas.get_opt(name).await.map_err(|e| e.to_string())?;
            let replicas = deployments.get(name).await.map_err(|e| e.to_string())?.spec.and_then(|s| s.replicas);
            match (hpa, replicas) {
                (None, Some(2)) => Ok(()),
                (hpa, replicas) => Err(format!("HPA present: {}, replicas {replicas:?}", hpa.is_some())),
            }
        })
        .await
    }

    /// Creating a Microservice records one "Created" Event naming its Deployment and its Service; the same repair
    /// twice is one Event whose series the Recorder patches (count 2).
    async fn events(&self, name: &str) -> Result<(), String> {
        self.create_ready(name).await?;
        self.delete_service_until_recreated(name).await?;
        self.delete_service_until_recreated(name).await?;
        let events: Api<Event> = Api::namespaced(self.client.clone(), WATCHED_NS);
        self.until(name, &format!("the Created and Repaired Events of {name}"), || async {
            let listed = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let of = |reason: &str| -> Vec<&Event> {
                listed
                    .items
                    .iter()
                    .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                    .filter(|e| e.reason.as_deref() == Some(reason))
                    .collect()
            };
            let summary = |events: &[&Event]| {
                format!("{:?}", events.iter().map(|e| (e.note.clone(), e.series.clone())).collect::<Vec<_>>())
            };
            let created = of("Created");
            match created.as_slice() {
                [one] if one.note.as_deref().is_some_and(|n| n.contains("Deployment") && n.contains("Service")) => {}
                other => return Err(format!("not one Created Event naming both children: {}", summary(other))),
            }
            let repaired = of("Repaired");
            match repaired.as_slice() {
                [one] if one.series.as_ref().is_some_and(|s| s.count >= 2) => Ok(()),
                other => Err(format!("the repeated repair is not one Event series: {}", summary(other))),
            }
        })
        .await
    }
}
