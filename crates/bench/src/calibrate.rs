//! How fast this machine is right now: the same 2 cores gave operator CPU figures twice as large in one session as
//! in the one before, with nothing else running. A fixed piece of the operator's own work, timed before the
//! scenarios, lets a reader compare figures across runs: per-CR CPU times scale with it.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use microservice_core::contract;
use microservice_core::crd::Microservice;
use microservice_core::desired::desired_deployment;
use microservice_core::profile::PlatformProfile;
use serde_json::json;

const ROUNDS: usize = 3;
const PER_ROUND: usize = 2000;

/// Milliseconds, best of three rounds, to build, encode and decode 1,000 desired Deployments on one thread (what a
/// reconcile and a watch event do most); None if the fixture does not build.
pub fn desired_deployments_ms() -> Option<f64> {
    // What the server adds on create and the desired objects' owner reference needs.
    let mut body = crate::env::microservice(0);
    body["metadata"]["generation"] = json!(1);
    body["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000001");
    let ms: Microservice = serde_json::from_value(body).ok()?;
    let profile = PlatformProfile::default();
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..PER_ROUND {
            let valid = contract::validate_object(&ms, &profile).ok()?;
            let desired = desired_deployment(&ms, &valid, &profile).ok()?;
            let text = serde_json::to_string(&desired).ok()?;
            std::hint::black_box(serde_json::from_str::<Deployment>(&text).ok()?);
        }
        best = best.min(started.elapsed().as_secs_f64() * 1000.0 * 1000.0 / PER_ROUND as f64);
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fixture_builds_and_is_timed() {
        assert!(super::desired_deployments_ms().is_some_and(|ms| ms > 0.0 && ms.is_finite()));
    }
}
