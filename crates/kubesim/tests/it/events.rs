//! core/v1 and events.k8s.io/v1 Events are one resource: what kube-rs's Recorder writes (events.k8s.io) is
//! what core clients and `kubectl get events` read, and the other way round.

use crate::support::api_only;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Resource};
use serde_json::json;

#[tokio::test]
async fn the_recorders_events_are_core_events_too() {
    let sim = api_only().await;
    let client = sim.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms
        .create(&Default::default(), &serde_json::from_value(json!({"metadata": {"name": "subject"}})).unwrap())
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter { controller: "microservice-operator".into(), instance: Some("op-0".into()) },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Created".into(),
        note: Some("created the Deployment".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    // The same event again: the Recorder patches its series.
    recorder.publish(&event, &reference).await.unwrap();

    let new: Vec<NewEvent> =
        Api::<NewEvent>::namespaced(client.clone(), "default").list(&Default::default()).await.unwrap().items;
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].series.as_ref().map(|s| s.count), Some(2));

    let core: Vec<CoreEvent> =
        Api::<CoreEvent>::namespaced(client.clone(), "default").list(&Default::default()).await.unwrap().items;
    assert_eq!(core.len(), 1, "one resource, two views");
    let e = &core[0];
    assert_eq!(e.metadata.name, new[0].metadata.name);
    assert_eq!(e.metadata.resource_version, new[0].metadata.resource_version);
    assert_eq!(e.message.as_deref(), Some("created the Deployment"));
    assert_eq!(e.reason.as_deref(), Some("Created"));
    assert_eq!(e.involved_object.name.as_deref(), Some("subject"));
    assert_eq!(e.reporting_component.as_deref(), Some("microservice-operator"));
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));

    // Written through core, read through events.k8s.io.
    let core_api: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    core_api
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "old-style"}, "involvedObject": {"kind": "ConfigMap", "name": "subject", "namespace": "default"},
                "reason": "Legacy", "message": "from a core client", "type": "Warning", "source": {"component": "kubelet"},
                "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let seen = Api::<NewEvent>::namespaced(client, "default").get("old-style").await.unwrap();
    assert_eq!(seen.note.as_deref(), Some("from a core client"));
    assert_eq!(seen.regarding.and_then(|r| r.name).as_deref(), Some("subject"));
    assert_eq!(seen.deprecated_source.and_then(|s| s.component).as_deref(), Some("kubelet"));
    assert_eq!(seen.deprecated_count, Some(1));
}
