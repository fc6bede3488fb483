//! The operator's HTTP endpoints: `/metrics` (Prometheus/OpenMetrics text), `/healthz` (liveness) and `/readyz`
//! (readiness), as controller-runtime serves them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use thiserror::Error;
use tokio::net::TcpListener;

use crate::health::Health;
use crate::metrics::Metrics;

/// What prometheus-client's text encoder produces.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Error)]
pub enum HttpError {
    #[error("cannot listen on {addr} for metrics and probes: {source}; choose another --metrics-bind-address")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

#[derive(Clone)]
struct Endpoints {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

pub fn router(metrics: Arc<Metrics>, health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Endpoints { metrics, health })
}

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, HttpError> {
    TcpListener::bind(addr).await.map_err(|source| HttpError::Bind { addr, source })
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

async fn metrics_text(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], endpoints.metrics.encode())
}

async fn healthz(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    if endpoints.health.live() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "a watch stream ended; restart the operator\n")
    }
}

async fn readyz(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    let health = &endpoints.health;
    match (health.caches_synced(), health.leader()) {
        (true, Some(_)) => (StatusCode::OK, "ok\n"),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "caches not synced yet\n"),
        (true, None) => (StatusCode::SERVICE_UNAVAILABLE, "leader election has not answered yet\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
        let answer = microservice_testkit::http::get(addr, path).await.expect("the endpoint answers");
        (answer.status, answer.content_type, answer.body)
    }

    #[tokio::test]
    async fn probes_follow_the_health_state_and_metrics_are_served() {
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(Health::new());
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router(metrics.clone(), health.clone()), async {
            let _ = stopped.await;
        }));

        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!((status, body.as_str()), (503, "caches not synced yet\n"));
        health.set_caches_synced();
        assert_eq!(get(addr, "/readyz").await.0, 503, "leader state unknown");
        health.set_leader(Some(false));
        assert_eq!(get(addr, "/readyz").await.0, 200, "a standby is ready");
        assert_eq!(get(addr, "/healthz").await.0, 200);

        metrics.set_leader("microservice-operator", false);
        let (status, content_type, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
        assert!(body.contains(r#"leader_election_master_status{name="microservice-operator"} 0"#), "{body}");
        assert!(body.trim_end().ends_with("# EOF"));
        assert_eq!(get(addr, "/nothing").await.0, 404);

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_ended_watch_stream_fails_liveness() {
        let health = Arc::new(Health::new());
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server =
            tokio::spawn(serve(listener, router(Arc::new(Metrics::new()), health.clone()), std::future::pending()));
        health.watch_started();
        assert_eq!(get(addr, "/healthz").await.0, 200);
        health.watch_ended();
        let (status, _, body) = get(addr, "/healthz").await;
        assert_eq!(status, 503);
        assert!(body.contains("restart"), "{body}");
        server.abort();
    }

    #[tokio::test]
    async fn a_taken_address_is_a_clear_error() {
        let taken = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind(addr).await.unwrap_err().to_string();
        assert!(err.contains(&addr.to_string()) && err.contains("--metrics-bind-address"), "{err}");
    }
}
