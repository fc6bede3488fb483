//! The `Microservice` custom resource: what a team asks for (spec) and what the operator reports (status).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, ValidationRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared_text::SharedText;

/// The distribution grammar of a reference that ends in a tag and/or a sha256/sha512 digest: the last of the
/// CRD's rules on `spec.image` ([`image_rules`]), reached only by what the earlier, more specific rules let pass.
pub const IMAGE_PATTERN: &str = concat!(
    r"^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])",
    r"(?::[0-9]+)?/)?",
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*",
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(?:@sha(?:256|512):[0-9a-f]{32,})?",
    r"|@sha(?:256|512):[0-9a-f]{32,})$"
);

/// The example every CRD message gives.
const EXAMPLE_IMAGE: &str = "ghcr.io/example/todo-api:1.4.2";

/// The CRD's checks of `spec.image`, most specific first, as (CEL condition on `self`, message). Each rule only
/// speaks when every earlier one holds, so a refusal says the one thing that is wrong, in words, with an example
/// (a regex in an error message helps nobody). The digest's exact length and everything the platform decides
/// (allowed repositories, mutable tags) are the contract's: the admission policy and the operator explain those.
pub fn image_rules() -> Vec<(String, String)> {
    use crate::wording::lit;
    let rules: [(String, &str); 6] = [
        ("size(self) > 0".into(), "the image is empty"),
        (
            "self.matches('^[!-~]+$')".into(),
            "the image contains whitespace or characters outside ASCII, which no image reference has",
        ),
        (
            "!self.startsWith(':') && !self.startsWith('@')".into(),
            "the image has no repository name before its tag or digest",
        ),
        (
            "self.contains('@') || self.matches(':[^/]*$')".into(),
            "the image has no tag or digest, so what runs could change without a spec change; pin a version",
        ),
        (
            "!self.contains('@') || self.matches('@sha(256|512):[0-9a-f]{32,}$')".into(),
            "the image's digest must be `sha256:` followed by 64 lowercase hex digits (or `sha512:` followed by 128)",
        ),
        (
            format!("self.matches({})", lit(IMAGE_PATTERN)),
            "the image is not an image reference: write [REGISTRY[:PORT]/]REPOSITORY:TAG or REPOSITORY@sha256:DIGEST, \
             where the repository is lowercase letters and digits separated by `/`, `.`, `_`, `__` or `-`, and the \
             tag is at most 128 letters, digits, `_`, `.` or `-`",
        ),
    ];
    let mut out = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    for (condition, what) in rules {
        let expression =
            if earlier.is_empty() { condition.clone() } else { format!("!({}) || {condition}", earlier.join(" && ")) };
        out.push((expression, format!("{what}; e.g. {EXAMPLE_IMAGE}")));
        earlier.push(format!("({condition})"));
    }
    out
}

/// The rule on the object's name: the Service is named like the Microservice, and Service names are DNS-1035
/// labels, stricter than the DNS-1123 subdomains the API server checks for every object.
pub const NAME_RULE: &str =
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63";
pub const NAME_RULE_MESSAGE: &str = "metadata.name must also name the Microservice's Service: at most 63 lowercase \
                                     letters, digits and `-`, starting with a letter and ending with a letter or \
                                     digit, e.g. todo-api";

/// What a team asks the platform to run.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "platform.example.com",
    version = "v1alpha1",
    kind = "Microservice",
    namespaced,
    shortname = "ms",
    category = "platform",
    status = "MicroserviceStatus",
    derive = "PartialEq",
    doc = "A Todo API instance run by the platform: the operator turns it into a Deployment and a Service.",
    // Raw JSON form: the structured form trips clippy's duplicated_attributes on repeated keys.
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    // What runs (status.image) and the generation the status describes, not the spec's wish: while the operator
    // is down or a rollout runs, the spec's image would read as if it were running.
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".status.image","description":"the image every replica runs"}"#,
    printcolumn = r#"{"name":"Observed","type":"integer","jsonPath":".status.observedGeneration","description":"the generation the status describes"}"#,
    printcolumn = r#"{"name":"Replicas","type":"string","jsonPath":".status.replicasSummary","description":"ready/desired replicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Spec-Image","type":"string","jsonPath":".spec.image","description":"the image the spec asks for","priority":1}"#,
    printcolumn = r#"{"name":"Generation","type":"integer","jsonPath":".metadata.generation","priority":1}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MicroserviceSpec {
    /// Container image with an explicit tag or digest, e.g. ghcr.io/example/todo-api:1.4.2. The platform
    /// accepts only its allowed repositories and refuses mutable tags such as `latest`.
    #[schemars(with = "String", length(max = 512))]
    pub image: SharedText,
    /// Port the application listens on inside the container (unprivileged: 1024-65535).
    #[schemars(range(min = 1024, max = 65535))]
    pub port: i32,
    /// Number of pods. When absent the platform decides (2 by default). Exclusive with `autoscaling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub replicas: Option<i32>,
    /// Let a HorizontalPodAutoscaler scale the pods between these bounds on CPU use. Exclusive with `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
}

/// Bounds and target of the HorizontalPodAutoscaler the operator creates for a Microservice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Autoscaling {
    /// The fewest pods (1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub min_replicas: Option<i32>,
    /// The most pods.
    #[schemars(range(min = 1, max = 20))]
    pub max_replicas: i32,
    /// Average CPU use, in percent of the pods' CPU request, the autoscaler aims for (80 by default).
    // Spelled as autoscaling/v1's field, which people know.
    #[serde(default, rename = "targetCPUUtilizationPercentage", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization_percentage: Option<i32>,
}

/// The CRD's rule refusing both `spec.replicas` and `spec.autoscaling`: two owners of one number would fight.
pub const EXCLUSIVE_SCALING_RULE: &str = "!(has(self.replicas) && has(self.autoscaling))";
pub const EXCLUSIVE_SCALING_MESSAGE: &str = crate::wording::SCALING_EXCLUSIVE;
/// The CRD's rule on `spec.autoscaling`: the bounds are in order.
pub const AUTOSCALING_BOUNDS_RULE: &str = "!has(self.minReplicas) || self.minReplicas <= self.maxReplicas";
pub const AUTOSCALING_BOUNDS_MESSAGE: &str = "spec.autoscaling.minReplicas must not exceed maxReplicas";

/// What the operator observed, for the generation in `observedGeneration`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MicroserviceStatus {
    /// The newest metadata.generation the operator has acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Pods of the Deployment that are ready (any version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Pods of the Deployment (any version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// "ready/desired", for `kubectl get`; while the observed generation rolls out, only its own available replicas
    /// count as ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub replicas_summary: Option<SharedText>,
    /// The image every replica runs: set once a rollout completes, kept while the next one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub image: Option<SharedText>,
    /// The contract of the newest generation the platform accepted: while a later generation is refused, the
    /// children are kept (and repaired) at this, so an invalid spec never takes the service down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accepted: Option<AcceptedContract>,
}

/// What a generation the platform accepted asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedContract {
    pub generation: i64,
    #[schemars(with = "String")]
    pub image: SharedText,
    pub port: i32,
    /// The fixed number of pods; with `autoscaling`, the autoscaler's minimum.
    pub replicas: i32,
    /// The autoscaler's bounds, defaults filled in, when the HorizontalPodAutoscaler scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
}

/// The one-word summary a query tool shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Accepted, nothing observed yet.
    Pending,
    /// A rollout for the current generation is running.
    Progressing,
    /// The current generation is fully rolled out and available.
    Ready,
    /// Something stops the rollout (missed deadline, conflicting resource).
    Degraded,
    /// The spec breaks the platform contract; nothing is deployed for it.
    Invalid,
}

/// A condition in the metav1.Condition shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: ConditionType,
    pub status: ConditionStatus,
    /// The metadata.generation this condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// When status last changed.
    pub last_transition_time: Time,
    /// CamelCase, machine-readable cause.
    #[schemars(
        with = "String",
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
        length(min = 1, max = 1024)
    )]
    pub reason: SharedText,
    /// Human-readable detail: what happened and what to do.
    #[schemars(with = "String", length(max = 32768))]
    pub message: SharedText,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub enum ConditionType {
    /// The spec satisfies the platform contract.
    Accepted,
    /// A rollout for the current generation is running.
    Progressing,
    /// The current generation is fully rolled out and available.
    Ready,
    /// The rollout cannot proceed without help.
    Degraded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Accepted => "Accepted",
            ConditionType::Progressing => "Progressing",
            ConditionType::Ready => "Ready",
            ConditionType::Degraded => "Degraded",
        }
    }
}

impl MicroserviceStatus {
    /// The condition of this type, if the status has one.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

impl Microservice {
    /// The status condition of this type, if the status has one.
    pub fn condition(&self, type_: ConditionType) -> Option<&Condition> {
        self.status.as_ref().and_then(|s| s.condition(type_))
    }
}

/// The CRD as installed. kube-derive leaves `names.listKind` out; the API server would default it, so it is set
/// here to make the manifest equal to what the server stores (no diff on a later `kubectl apply`).
pub fn crd() -> CustomResourceDefinition {
    use kube::CustomResourceExt;
    let mut crd = Microservice::crd();
    if crd.spec.names.list_kind.is_none() {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    }
    let rule =
        |rule: String, message: String| ValidationRule { rule, message: Some(message), ..ValidationRule::default() };
    for version in &mut crd.spec.versions {
        let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else { continue };
        root.x_kubernetes_validations = Some(vec![rule(NAME_RULE.into(), NAME_RULE_MESSAGE.into())]);
        let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) else { continue };
        spec.x_kubernetes_validations =
            Some(vec![rule(EXCLUSIVE_SCALING_RULE.into(), EXCLUSIVE_SCALING_MESSAGE.into())]);
        let Some(fields) = spec.properties.as_mut() else { continue };
        if let Some(image) = fields.get_mut("image") {
            image.x_kubernetes_validations =
                Some(image_rules().into_iter().map(|(expression, message)| rule(expression, message)).collect());
        }
        if let Some(autoscaling) = fields.get_mut("autoscaling") {
            autoscaling.x_kubernetes_validations =
                Some(vec![rule(AUTOSCALING_BOUNDS_RULE.into(), AUTOSCALING_BOUNDS_MESSAGE.into())]);
        }
    }
    crd
}

/// The CRD as YAML, the form `microservice-operator crd` prints and `deploy/crd.yaml` holds.
pub fn crd_yaml() -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(&crd())
}
