//! The HTTP face of the emulator: an axum server on 127.0.0.1 that routes upstream's URL layout to
//! [`crate::cluster::Cluster`], negotiates content, counts every request and applies injected faults.

pub mod counting;
mod identity;
pub mod negotiate;
mod output;
mod resource;
pub mod route;
pub mod tls;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use crate::auth::{Authn, Tokens, UserInfo};
use crate::cluster::Cluster;
use crate::error::ApiError;
use crate::faults::{FaultConfig, FaultInjector};
pub use counting::{Counters, RequestCounts, RequestKey};
use route::Route;

/// Everything a request handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub cluster: Cluster,
    pub faults: FaultInjector,
    pub counters: Counters,
    /// The tokens that authenticate: the admin's and those issued to ServiceAccounts.
    pub tokens: Tokens,
    /// Whether RBAC decides (otherwise every authenticated request is allowed).
    pub rbac: bool,
    /// Whether watches serve `sendInitialEvents` (streaming lists), as kube-apiserver's WatchList feature gate says:
    /// on since 1.34 (and in 1.32), off in 1.33, where such a watch is refused with 422.
    pub watch_list: bool,
    /// `host:port` the server listens on (for /api's serverAddressByClientCIDRs).
    pub address: Arc<str>,
    /// /readyz fails until then (`kubesim serve --ready-delay-ms`).
    pub ready_at: Instant,
}

impl AppState {
    pub fn new(cluster: Cluster, faults: FaultInjector, token: Option<String>) -> Self {
        AppState {
            cluster,
            faults,
            counters: Counters::default(),
            tokens: Tokens::new(token),
            rbac: false,
            watch_list: true,
            address: Arc::from("127.0.0.1:0"),
            ready_at: Instant::now(),
        }
    }
}

pub fn router(state: AppState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}

/// Serves HTTPS with `tls` (and plain HTTP on the same port, see [`tls`]) until `shutdown` resolves; open
/// connections, watches included, end with it.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: tls::Tls,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => {
                    let _ = tcp.set_nodelay(true);
                    connections.spawn(serve_connection(tcp, tls.acceptor.clone(), app.clone()));
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(e) => {
                    tracing::warn!(error = %e, "kubesim cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(tcp: tokio::net::TcpStream, acceptor: tokio_rustls::TlsAcceptor, app: Router) {
    let mut first = [0u8; 1];
    if !matches!(tcp.peek(&mut first).await, Ok(n) if n > 0) {
        return;
    }
    let service = hyper_util::service::TowerToHyperService::new(app);
    let http = hyper::server::conn::http1::Builder::new();
    let served = if first[0] == tls::HANDSHAKE_RECORD {
        match acceptor.accept(tcp).await {
            Ok(stream) => http.serve_connection(hyper_util::rt::TokioIo::new(stream), service).with_upgrades().await,
            Err(e) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
        }
    } else {
        http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service).with_upgrades().await
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

pub(crate) fn json_response(code: u16, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    json_bytes(code, bytes, "application/json")
}

pub(crate) fn json_bytes(code: u16, bytes: Vec<u8>, content_type: &str) -> Response {
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/json")),
    );
    r
}

pub(crate) fn error_response(e: &ApiError) -> Response {
    let mut r = json_response(e.code, &e.to_status());
    if let Some(secs) = e.details.retry_after_seconds {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

fn text_response(code: u16, text: String) -> Response {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// A path no API group serves: kube-apiserver's NotFound handler answers with Go's `http.NotFound`, in plain text
/// (a served group version answers an unknown resource with a Status instead).
fn page_not_found() -> Response {
    text_response(404, "404 page not found\n".into())
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

async fn handle(State(state): State<AppState>, req: Request) -> Response {
    let route = route::parse(req.uri().path());
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let user = match state.tokens.authenticate(&state.cluster, authorization) {
        Authn::User(user) => Some(user),
        // Anonymous requests are RBAC's to judge; without RBAC only probes and /version are open to them.
        Authn::Anonymous if state.rbac || matches!(route, Route::Health | Route::Version) => {
            Some(UserInfo::anonymous())
        }
        Authn::Anonymous | Authn::Invalid => None,
    };
    let Some(user) = user else {
        state.counters.record("", "", 401);
        return error_response(&unauthorized());
    };
    match route {
        Route::Resource(path) => resource::handle(&state, &user, path, req).await,
        other => {
            let method = req.method().clone();
            let verb = if method == Method::GET { "get" } else { method.as_str() }.to_lowercase();
            let attrs = crate::rbac::Attributes::NonResource { verb: verb.clone(), path: req.uri().path().to_string() };
            let decision = identity::authorize(&state, &user, &attrs);
            let response = if decision.allowed {
                non_resource(&state, other, req).await
            } else {
                error_response(&crate::rbac::forbidden(&user, &attrs, &decision.reason))
            };
            state.counters.record(&verb, "", response.status().as_u16());
            response
        }
    }
}

fn accepts_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.split(',').next().is_some_and(|first| first.contains("as=APIGroupDiscoveryList")))
}

async fn non_resource(state: &AppState, route: Route, req: Request) -> Response {
    let types = state.cluster.resource_types();
    let method = req.method().clone();
    if method != Method::GET && route != Route::Faults {
        return error_response(&ApiError::method_not_allowed());
    }
    match route {
        Route::Version => json_response(200, &crate::discovery::version()),
        Route::Health => {
            let path = req.uri().path();
            if path.starts_with("/readyz") && Instant::now() < state.ready_at {
                text_response(500, "[-]kubesim-ready failed: starting\nreadyz check failed\n".into())
            } else {
                text_response(200, "ok".into())
            }
        }
        Route::Metrics => text_response(200, state.counters.prometheus()),
        Route::Faults => faults_admin(state, req).await,
        Route::Api if accepts_aggregated(req.headers()) => json_bytes(
            200,
            serde_json::to_vec(&crate::discovery::aggregated(&types, true)).unwrap_or_default(),
            crate::discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Route::Apis if accepts_aggregated(req.headers()) => json_bytes(
            200,
            serde_json::to_vec(&crate::discovery::aggregated(&types, false)).unwrap_or_default(),
            crate::discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Route::Api => json_response(200, &crate::discovery::api_versions(&state.address)),
        Route::Apis => json_response(200, &crate::discovery::group_list(&types)),
        Route::Group(g) => match crate::discovery::group(&types, &g) {
            Some(doc) => json_response(200, &doc),
            None => page_not_found(),
        },
        Route::ResourceList { group, version } => {
            let doc = if group.is_empty() && version == "v1" {
                Some(crate::discovery::core_resource_list(&types))
            } else {
                crate::discovery::resource_list(&types, &group, &version)
            };
            match doc {
                Some(doc) => json_response(200, &doc),
                None => page_not_found(),
            }
        }
        // Upstream's handler writes the JSON without a content type, so Go's sniffing labels it plain text.
        Route::OpenApiRoot => json_bytes(
            200,
            serde_json::to_vec(&crate::openapi::root(&types)).unwrap_or_default(),
            "text/plain; charset=utf-8",
        ),
        Route::OpenApiDoc(path) => match crate::openapi::group_version_doc(&types, &path) {
            Some(doc) => json_response(200, &doc),
            None => error_response(&ApiError::path_not_found()),
        },
        Route::Resource(_) => error_response(&ApiError::path_not_found()),
        Route::NotFound => page_not_found(),
    }
}

async fn faults_admin(state: &AppState, req: Request) -> Response {
    match *req.method() {
        Method::GET => json_response(200, &serde_json::to_value(state.faults.config()).unwrap_or(Value::Null)),
        Method::PUT | Method::POST => {
            let body = match axum::body::to_bytes(req.into_body(), negotiate::MAX_BODY).await {
                Ok(b) => b,
                Err(_) => return error_response(&ApiError::too_large()),
            };
            match serde_json::from_slice::<FaultConfig>(&body) {
                Ok(cfg) => match cfg.validate() {
                    Err(e) => error_response(&e),
                    Ok(()) => {
                        state.faults.set_config(cfg);
                        json_response(200, &serde_json::to_value(state.faults.config()).unwrap_or(Value::Null))
                    }
                },
                Err(e) => error_response(&ApiError::bad_request(format!("invalid fault configuration: {e}"))),
            }
        }
        _ => error_response(&ApiError::method_not_allowed()),
    }
}

/// Watch streams end after this long when the client asks for no timeout (upstream: 30-60 min).
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
