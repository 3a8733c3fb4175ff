//! Liveness and readiness (O-05, O-06): `/healthz` answers while the process serves at all;
//! `/readyz` asks every [`Readiness`] check of the server and says which parts are not ready
//! and why, in words an operator can act on (never a secret such as a store URL's password).
//! The admin endpoints (`/metrics`, `/healthz`, `/readyz`) as an axum router are here too.

use std::borrow::Cow;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::observe::metrics::Metrics;

/// The path of the metrics endpoint.
pub const METRICS_PATH: &str = "/metrics";
/// The path of the liveness endpoint.
pub const HEALTHZ_PATH: &str = "/healthz";
/// The path of the readiness endpoint.
pub const READYZ_PATH: &str = "/readyz";

/// The content type of the Prometheus text format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A part of the service that is not ready, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotReady {
    /// What is not ready: `store`, `tools`, `upstream:NAME`, ….
    pub part: Cow<'static, str>,
    /// Why, for a person: what failed and what to look at. Never a secret.
    pub reason: String,
    /// Whether it makes the whole service not ready (503), or only degrades it: `/readyz`
    /// then still answers 200 and lists it under `degraded`.
    #[serde(skip)]
    pub blocking: bool,
}

impl NotReady {
    /// `part` is not ready because of `reason`, and so neither is the service.
    pub fn new(part: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        NotReady {
            part: part.into(),
            reason: reason.into(),
            blocking: true,
        }
    }

    /// `part` is not ready because of `reason`, but the service is, with less to offer.
    pub fn degraded(part: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        NotReady {
            blocking: false,
            ..NotReady::new(part, reason)
        }
    }
}

/// One readiness check: the parts it watches that are not ready now (empty: ready), each
/// blocking or only degrading ([`NotReady::degraded`]). Give it to
/// [`crate::ServerBuilder::readiness`]; a check should answer within a second or two (the
/// store's is bounded by its timeout).
pub trait Readiness: Send + Sync + 'static {
    /// The parts not ready now.
    fn check(&self) -> BoxFuture<'_, Vec<NotReady>>;
}

/// What the admin endpoints read of a server: its metrics, whether it is ready, and when it
/// stops. [`crate::Server`] is one; the endpoints are generic over it so that they live on the
/// floor of what they report, below the server.
pub trait Observed: Clone + Send + Sync + 'static {
    /// Its metrics, if it keeps any.
    fn metrics(&self) -> Option<&Metrics>;
    /// The parts not ready now, by every readiness check it has.
    fn not_ready(&self) -> BoxFuture<'_, Vec<NotReady>>;
    /// Cancelled when it shuts down.
    fn shutdown_token(&self) -> CancellationToken;
}

/// What `/readyz` answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReadyBody<'a> {
    ready: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_ready: Vec<&'a NotReady>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    degraded: Vec<&'a NotReady>,
}

/// A router of the admin endpoints of `server`: `GET /metrics` (404 without
/// [`crate::ServerBuilder::metrics`]), `GET /healthz` and `GET /readyz`. They need no token and
/// are not MCP requests (no audit, no rate limit): bind it to an address only operators reach,
/// such as 127.0.0.1 or a private network.
pub fn admin_router<S: Observed>(server: S) -> Router {
    use axum::routing::get;
    Router::new()
        .route(METRICS_PATH, get(metrics::<S>))
        .route(HEALTHZ_PATH, get(healthz))
        .route(READYZ_PATH, get(readyz::<S>))
        .with_state(server)
}

/// Serves [`admin_router`] on `listener` until the server shuts down.
pub async fn serve_admin<S: Observed>(
    server: S,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let shutdown = server.shutdown_token();
    axum::serve(listener, admin_router(server))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

pub(crate) async fn metrics<S: Observed>(State(server): State<S>) -> Response {
    let Some(metrics) = server.metrics() else {
        return (StatusCode::NOT_FOUND, "metrics are off on this server\n").into_response();
    };
    let mut response = metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(METRICS_CONTENT_TYPE),
    );
    response
}

pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, "ok").into_response()
}

pub(crate) async fn readyz<S: Observed>(State(server): State<S>) -> Response {
    let parts = server.not_ready().await;
    let (not_ready, degraded): (Vec<_>, Vec<_>) = parts.iter().partition(|p| p.blocking);
    let body = ReadyBody {
        ready: not_ready.is_empty(),
        not_ready,
        degraded,
    };
    let status = if body.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let json = serde_json::to_string(&body).unwrap_or_else(|_| r#"{"ready":false}"#.into());
    let mut response = (status, json).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
