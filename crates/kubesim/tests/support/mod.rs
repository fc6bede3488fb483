//! Helpers shared by the integration tests (each test binary includes this with `mod support;`).

use std::time::Duration;

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
