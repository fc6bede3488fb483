//! The sample Microservice's desired Deployment and Service, checked in under tests/golden/.

use microservice_core::contract::validate;
use microservice_core::crd::Microservice;
use microservice_core::desired::{desired_deployment, desired_service};
use microservice_core::image::ImageReference;
use microservice_core::profile::PlatformProfile;
use proptest::prelude::*;

const REGENERATE: &str = "UPDATE_GOLDEN=1 cargo test -p microservice-core --test it golden";

fn children(ms: &Microservice, profile: &PlatformProfile) -> (serde_json::Value, serde_json::Value) {
    let contract = validate(&ms.spec, profile).unwrap();
    let deployment = desired_deployment(ms, &contract, profile).unwrap();
    let service = desired_service(ms, profile).unwrap();
    (serde_json::to_value(deployment).unwrap(), serde_json::to_value(service).unwrap())
}

#[test]
fn sample_deployment_matches_golden() {
    let (deployment, _) = children(&crate::support::sample_microservice(), &PlatformProfile::default());
    let yaml = serde_saphyr::to_string(&deployment).unwrap();
    crate::support::assert_golden("crates/core/tests/golden/todo-api.deployment.yaml", &yaml, REGENERATE);
}

#[test]
fn sample_service_matches_golden() {
    let (_, service) = children(&crate::support::sample_microservice(), &PlatformProfile::default());
    let yaml = serde_saphyr::to_string(&service).unwrap();
    crate::support::assert_golden("crates/core/tests/golden/todo-api.service.yaml", &yaml, REGENERATE);
}

#[test]
fn the_same_input_gives_byte_identical_json() {
    let profile = PlatformProfile::default();
    let ms = crate::support::sample_microservice();
    // A CR that went through a JSON round trip (as from the API) must build the same children.
    let reparsed: Microservice = serde_json::from_slice(&serde_json::to_vec(&ms).unwrap()).unwrap();
    let contract = validate(&ms.spec, &profile).unwrap();
    let first = serde_json::to_vec(&desired_deployment(&ms, &contract, &profile).unwrap()).unwrap();
    for _ in 0..20 {
        let again = serde_json::to_vec(&desired_deployment(&reparsed, &contract, &profile).unwrap()).unwrap();
        assert_eq!(first, again);
    }
    let service = serde_json::to_vec(&desired_service(&ms, &profile).unwrap()).unwrap();
    assert_eq!(service, serde_json::to_vec(&desired_service(&reparsed, &profile).unwrap()).unwrap());
}

fn tag() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}".prop_filter("mutable", |t| t != "latest")
}

fn digest() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}".prop_map(|hex| format!("sha256:{hex}"))
}

fn repository() -> impl Strategy<Value = String> {
    let component = "[a-z0-9]{1,8}([._-][a-z0-9]{1,8}){0,2}";
    let registry = prop_oneof![
        Just("ghcr.io".to_string()),
        Just("localhost:5000".to_string()),
        "[a-z]{1,10}\\.[a-z]{2,5}(:[1-9][0-9]{1,3})?"
    ];
    (registry, proptest::collection::vec(component, 1..4)).prop_map(|(r, path)| format!("{r}/{}", path.join("/")))
}

fn pinned_image() -> impl Strategy<Value = String> {
    (repository(), proptest::option::of(tag()), proptest::option::of(digest())).prop_map(|(repo, tag, digest)| {
        let tag = if tag.is_none() && digest.is_none() { Some("1.0.0".to_string()) } else { tag };
        format!(
            "{repo}{}{}",
            tag.map(|t| format!(":{t}")).unwrap_or_default(),
            digest.map(|d| format!("@{d}")).unwrap_or_default()
        )
    })
}

proptest! {
    /// Whatever image a Microservice runs, its selectors are the same: a new version never changes them.
    #[test]
    fn selectors_never_depend_on_the_image(image in pinned_image(), other in pinned_image()) {
        let baseline = crate::support::sample_microservice();
        let profile_for = |image: &str| PlatformProfile {
            allowed_repositories: vec![ImageReference::parse(image).unwrap().repository()],
            ..PlatformProfile::default()
        };
        let (base_deployment, base_service) = children(&baseline, &PlatformProfile::default());
        for image in [&image, &other] {
            let mut ms = baseline.clone();
            ms.spec.image = image.as_str().into();
            let (deployment, service) = children(&ms, &profile_for(image));
            let selector = &deployment["spec"]["selector"];
            prop_assert_eq!(selector, &base_deployment["spec"]["selector"]);
            prop_assert_eq!(&service["spec"]["selector"], &base_service["spec"]["selector"]);
            prop_assert_eq!(&selector["matchLabels"], &service["spec"]["selector"]);
            let keys: Vec<&String> = selector["matchLabels"].as_object().unwrap().keys().collect();
            prop_assert_eq!(keys, ["app.kubernetes.io/instance", "app.kubernetes.io/name"]);
            prop_assert!(selector["matchExpressions"].is_null());
            let container_image = &deployment["spec"]["template"]["spec"]["containers"][0]["image"];
            prop_assert_eq!(container_image, &serde_json::json!(image));
        }
    }
}
