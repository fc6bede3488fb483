//! kwok's part: the stages that play the kubelet (a node becomes Ready; a scheduled pod becomes Running and Ready
//! after a delay; a deleted pod goes away) and the fake nodes it manages.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::Error;

/// The annotation that marks a node as kwok's.
const FAKE_NODE: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

// Over 80 lines on purpose: A table: kwok's stage definitions as one YAML document.
/// kwok's configuration: its stages for nodes and pods, as one multi-document YAML file.
pub(super) fn config(pod_ready_delay: Duration, never_ready_images: &[String]) -> String {
    let delay = pod_ready_delay.as_millis();
    // A pod whose first container runs one of these images stays Running but never Ready.
    let never_ready = if never_ready_images.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = never_ready_images.iter().map(|i| format!("'{i}'")).collect();
        format!(
            "\n    - key: '.spec.containers.[0].image'\n      operator: 'NotIn'\n      values: [{}]",
            quoted.join(", ")
        )
    };
    format!(
        r#"apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Running']
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $now | Quote }}}}
        message: kwok plays this node's kubelet
        reason: KubeletReady
        status: "True"
        type: Ready
      addresses:
      - address: {{{{ NodeIP | Quote }}}}
        type: InternalIP
      allocatable: {{cpu: 1k, memory: 1Ti, pods: 1M}}
      capacity: {{cpu: 1k, memory: 1Ti, pods: 1M}}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: fake
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']{never_ready}
  delay:
    durationMilliseconds: {delay}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{type: Initialized, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: ContainersReady, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
      - {{type: Ready, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      {{{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}}}
      podIP: {{{{ . | Quote }}}}
      podIPs:
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"#
    )
}

/// The arguments kwok runs with: only nodes carrying [`FAKE_NODE`] are its.
pub(super) fn args(kubeconfig: &str, config: &str) -> Vec<String> {
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--config={config}"),
        "--manage-all-nodes=false".into(),
        format!("--manage-nodes-with-annotation-selector={}={}", FAKE_NODE.0, FAKE_NODE.1),
        "--node-ip=10.0.0.1".into(),
        "--cidr=10.244.0.0/16".into(),
    ]
}

/// Registers `count` fake nodes, as kubelets would.
pub(super) async fn create_nodes(client: &kube::Client, count: usize) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..count {
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": format!("kwok-node-{i}"),
                "annotations": {FAKE_NODE.0: FAKE_NODE.1, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": format!("kwok-node-{i}"), "kubernetes.io/os": "linux"}
            }
        }))
        .map_err(|e| Error::Setup(format!("fake node: {e}")))?;
        let name = format!("kwok-node-{i}");
        nodes.create(&PostParams::default(), &node).await.map_err(|e| Error::Api("create a fake node", e))?;
        // Admission (TaintNodesByCondition) gives a new node the not-ready taint; the node lifecycle controller,
        // which would lift it, is not run (it would also want kubelet heartbeats), so lift it here.
        let untaint = Patch::Merge(json!({"spec": {"taints": null}}));
        nodes
            .patch(&name, &PatchParams::default(), &untaint)
            .await
            .map_err(|e| Error::Api("untaint a fake node", e))?;
    }
    Ok(())
}
