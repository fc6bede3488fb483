//! What the integration test modules share: the emulator as the tests start it, and waiting for what it does
//! asynchronously.

use std::time::Duration;

use kubesim::{Sim, SimBuilder};

/// How long a test waits for something the emulator does asynchronously (controllers, GC).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `get` until `done` holds and returns that value; fails the test, naming `what`, after [`DEADLINE`].
pub async fn until<T, F, Fut>(what: &str, mut get: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let start = tokio::time::Instant::now();
    loop {
        let v = get().await;
        if done(&v) {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// [`until`] for a `get` that may find nothing yet (`None` counts as not done).
pub async fn until_some<T, F, Fut>(what: &str, mut get: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = tokio::time::Instant::now();
    loop {
        if let Some(v) = get().await
            && done(&v)
        {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The emulator as a test starts it: HTTPS on 127.0.0.1 with its own CA and a kubeconfig carrying the CA and the
/// bearer token, configured by `builder` (faults, RBAC, history, the controllers' settings).
pub async fn start(builder: SimBuilder) -> Sim {
    builder.start().await.expect("kubesim starts")
}

/// With the simulated controller-manager: Deployments roll out, pods become ready, owners are collected.
pub async fn sim() -> Sim {
    start(Sim::builder()).await
}

/// The API server alone, no controllers.
pub async fn api_only() -> Sim {
    start(Sim::builder().without_controllers()).await
}
