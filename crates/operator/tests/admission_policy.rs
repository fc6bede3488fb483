//! The committed admission policy is the one generated from the default platform profile.

mod support;

use microservice_operator::admission_policy::policy_yaml;
use microservice_operator::profile::PlatformProfile;

#[test]
fn committed_policy_matches_the_generated_one() {
    let generated = policy_yaml(&PlatformProfile::default()).expect("the policy serializes");
    support::assert_golden(
        "deploy/admission-policy.yaml",
        &generated,
        "UPDATE_GOLDEN=1 cargo test -p microservice-operator --test admission_policy",
    );
}
