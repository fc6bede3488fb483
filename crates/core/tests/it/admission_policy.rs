//! The committed admission policy is the one generated from the default platform profile.

use microservice_core::admission_policy::policy_yaml;
use microservice_core::profile::PlatformProfile;

#[test]
fn committed_policy_matches_the_generated_one() {
    let generated = policy_yaml(&PlatformProfile::default()).expect("the policy serializes");
    crate::support::assert_golden(
        "deploy/admission-policy.yaml",
        &generated,
        "UPDATE_GOLDEN=1 cargo test -p microservice-core --test it admission_policy",
    );
}
