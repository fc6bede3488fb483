//! When a Deployment's rollout is complete, judged the way `kubectl rollout status` does, independently of the
//! operator's own status logic: the benchmark uses it to catch a Microservice reported Ready too early.

use microservice_core::contract;
use microservice_core::crd::Microservice;
use microservice_core::desired::CONTAINER_NAME;
use microservice_core::profile::PlatformProfile;
use serde_json::Value;

/// What a Microservice's generation asks to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    pub image: String,
    pub replicas: i64,
}

impl Want {
    /// None for a spec the platform contract refuses (nothing is rolled out for it).
    pub fn of(ms: &Microservice, profile: &PlatformProfile) -> Option<Want> {
        let c = contract::validate_object(ms, profile).ok()?;
        Some(Want { image: c.image, replicas: i64::from(c.scaling.floor()) })
    }
}

/// The parts of a Deployment a rollout verdict needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentView {
    pub image: Option<String>,
    pub spec_replicas: i64,
    pub generation: i64,
    pub observed_generation: i64,
    pub replicas: i64,
    pub updated: i64,
    pub available: i64,
}

impl DeploymentView {
    pub fn of(obj: &Value) -> DeploymentView {
        let int = |path: &str, default: i64| obj.pointer(path).and_then(Value::as_i64).unwrap_or(default);
        let containers = obj.pointer("/spec/template/spec/containers").and_then(Value::as_array);
        let image = containers
            .and_then(|cs| {
                cs.iter().find(|c| c.get("name").and_then(Value::as_str) == Some(CONTAINER_NAME)).or(cs.first())
            })
            .and_then(|c| c.get("image"))
            .and_then(Value::as_str)
            .map(str::to_string);
        DeploymentView {
            image,
            // The API server defaults an absent spec.replicas to 1.
            spec_replicas: int("/spec/replicas", 1),
            generation: int("/metadata/generation", 0),
            observed_generation: int("/status/observedGeneration", 0),
            replicas: int("/status/replicas", 0),
            updated: int("/status/updatedReplicas", 0),
            available: int("/status/availableReplicas", 0),
        }
    }

    /// Every replica runs `want`'s image and is available, and no old replica is left.
    pub fn complete_for(&self, want: &Want) -> bool {
        self.image.as_deref() == Some(want.image.as_str())
            && self.spec_replicas == want.replicas
            && self.observed_generation >= self.generation
            && self.updated == want.replicas
            && self.available == want.replicas
            && self.replicas == want.replicas
    }

    pub fn describe(&self) -> String {
        format!(
            "image {:?}, spec.replicas {}, generation {} observed {}, replicas {} updated {} available {}",
            self.image,
            self.spec_replicas,
            self.generation,
            self.observed_generation,
            self.replicas,
            self.updated,
            self.available
        )
    }
}

/// The Ready condition holds for the object's current generation.
pub fn ready_for_current_generation(ms: &Value) -> bool {
    let generation = ms.pointer("/metadata/generation").and_then(Value::as_i64);
    ms.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
                && c.get("observedGeneration").and_then(Value::as_i64) == generation
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(image: &str, observed: i64, updated: i64, available: i64, replicas: i64) -> Value {
        json!({
            "metadata": {"generation": 2},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}},
            "status": {"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated,
                       "availableReplicas": available}
        })
    }

    #[test]
    fn complete_only_when_every_replica_is_new_and_available() {
        let want = Want { image: "ghcr.io/example/todo-api:2.0.0".into(), replicas: 2 };
        assert!(DeploymentView::of(&deployment(&want.image, 2, 2, 2, 2)).complete_for(&want));
        // Not yet observed by the Deployment controller.
        assert!(!DeploymentView::of(&deployment(&want.image, 1, 2, 2, 2)).complete_for(&want));
        // An old pod is still there (surge).
        assert!(!DeploymentView::of(&deployment(&want.image, 2, 2, 2, 3)).complete_for(&want));
        // A new pod is not available yet.
        assert!(!DeploymentView::of(&deployment(&want.image, 2, 2, 1, 2)).complete_for(&want));
        // Another image.
        assert!(!DeploymentView::of(&deployment("ghcr.io/example/todo-api:1.0.0", 2, 2, 2, 2)).complete_for(&want));
    }

    #[test]
    fn ready_must_be_for_the_current_generation() {
        let ms = |observed: i64| {
            json!({"metadata": {"generation": 2},
                   "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": observed}]}})
        };
        assert!(ready_for_current_generation(&ms(2)));
        assert!(!ready_for_current_generation(&ms(1)));
    }
}
