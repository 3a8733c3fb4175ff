//! The Streamable HTTP transport (H-02…H-31): one POST endpoint; a JSON reply, or a
//! request-scoped SSE reply once the request streams progress, logs or listen notifications.
//!
//! Checks run in the order the spec and the conformance suite expect: Host/Origin (403, before
//! the body is read), content type (415), `Accept` (406), body size (413), JSON and JSON-RPC
//! shape (-32700/-32600, 400), `_meta` (-32602, 400), `MCP-Protocol-Version` against `_meta`
//! (-32020, 400), the version (-32022, 400), `Mcp-Method` (-32020), the method (-32601, 404),
//! params (-32602), then `Mcp-Name` and `Mcp-Param-*` against the body (-32020, 400).

mod accept;
mod auth;
mod checks;
mod config;
mod flood;
pub(crate) mod forwarded;
mod legacy;
mod refusal;
mod reply;
mod service;

use refusal::{Refusal, body_too_slow, json_response, status_for};

pub use auth::OAuth;
use auth::{Caller, Guard};
pub use config::{DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES, HttpConfig};
pub use flood::{DEFAULT_FLOOD_LIMIT, FloodControl, TOO_MANY_REQUESTS};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::StatusCode;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{ErrorObject, MessageKind, RawMessage, RequestId, RequestMeta};

use crate::observe;
use crate::observe::RefusalReason;
use crate::request::frame::{Message, read_message, read_meta};
use crate::request::last_meta::LastMeta;
use crate::request::route::{CallFrame, Route, legacy_initialize, removed_method_error};
use crate::safety::limits::{ClientId, Limiter};
use crate::server::Server;
use crate::state::sessions::MemorySessionStore;

struct HttpState {
    server: Server,
    config: HttpConfig,
    /// Parent of every request's cancellation: fires when the shutdown grace runs out.
    hard_stop: CancellationToken,
    /// Legacy clients' sessions; `None` for a modern-only server.
    sessions: Option<legacy::Sessions>,
    /// The resource server; `None` without OAuth.
    guard: Option<Arc<Guard>>,
    /// Who the client is, and the flood limit per client.
    admission: flood::Admission,
}

/// An axum router serving `server` at the configured path. GET and DELETE serve legacy
/// sessions (`Mcp-Session-Id`); without one they get 405 (H-16), as do other methods. Requests
/// are cancelled `shutdown_grace` after [`Server::shutdown`].
///
/// Serve it with the peer's address, `router.into_make_service_with_connect_info::<SocketAddr>()`
/// (as [`serve`] does), or configure [`HttpConfig::forwarded_header`]: the flood limit and the
/// tool quotas of callers without a principal count per client address, and without one every
/// anonymous caller shares a single bucket (logged once).
pub fn router(server: Server, config: HttpConfig) -> Router {
    build(server, config).0
}

/// The router, and the state its MCP handlers share.
fn build(server: Server, config: HttpConfig) -> (Router, Arc<HttpState>) {
    let hard_stop = CancellationToken::new();
    let (shutdown, grace, stop) = (
        server.shutdown_token(),
        config.shutdown_grace,
        hard_stop.clone(),
    );
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
            stop.cancel();
        });
    }
    let path = config.path.clone();
    let sessions = server.serves_legacy().then(|| {
        let store = match (&config.session_store, server.store()) {
            (Some(store), _) => store.0.clone(),
            (None, Some(store)) => store.session_store(config.max_sessions, config.session_idle),
            (None, None) => Arc::new(MemorySessionStore::new(
                config.max_sessions,
                config.session_idle,
            )),
        };
        // Well within the idle time, so an open stream keeps its session.
        let touch = (config.session_idle / 3).max(Duration::from_millis(10));
        legacy::Sessions::new(store, touch, server.session_relay().cloned())
    });
    let guard = config
        .oauth
        .clone()
        .map(|oauth| Arc::new(Guard::new(oauth)));
    let metadata_paths = guard.as_ref().map(|g| g.paths.clone()).unwrap_or_default();
    let flood = flood::limiter(&config).unwrap_or_else(|error| {
        // `serve` refuses such a config; a router made directly keeps the default.
        tracing::error!(%error, "invalid flood limit; using the default");
        Limiter::new(DEFAULT_FLOOD_LIMIT, 1).ok()
    });
    let admission = flood::Admission::new(&config, flood);
    let state = Arc::new(HttpState {
        server,
        config,
        hard_stop,
        sessions,
        guard,
        admission,
    });
    let mut router = Router::new().route(
        &path,
        post(handle_post).get(handle_get).delete(handle_delete),
    );
    for metadata in metadata_paths {
        router = router.route(&metadata, axum::routing::get(handle_metadata));
    }
    if state.config.admin_endpoints {
        router = router
            .route(observe::METRICS_PATH, axum::routing::get(handle_admin))
            .route(observe::HEALTHZ_PATH, axum::routing::get(handle_admin))
            .route(observe::READYZ_PATH, axum::routing::get(handle_admin));
    }
    (router.with_state(state.clone()), state)
}

/// `/metrics`, `/healthz` and `/readyz` on the MCP address
/// ([`HttpConfig::admin_endpoints`]): no token and no MCP limits, since they are not MCP
/// requests, but the Host and Origin check (against DNS rebinding) and the flood limit. Behind
/// a proxy ([`HttpConfig::forwarded_header`]) a probe that comes straight to the instance, with
/// no forwarding header, is counted as its TCP peer's rather than refused.
async fn handle_admin(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    if let Err(turned) = state.admission.admit_probe(&parts) {
        state.server.count_refusal(RefusalReason::Flood);
        return turned.into_response();
    }
    if let Err(refusal) = checks::host_and_origin(&state.config, &parts.uri, &parts.headers) {
        return refusal.into_response();
    }
    let server = State(state.server.clone());
    match parts.uri.path() {
        observe::METRICS_PATH => observe::metrics_endpoint(server).await,
        observe::HEALTHZ_PATH => observe::healthz().await,
        _ => observe::readyz(server).await,
    }
}

/// RFC 9728 Protected Resource Metadata; needs no token.
async fn handle_metadata(State(state): State<Arc<HttpState>>) -> Response {
    match &state.guard {
        Some(guard) => guard.metadata_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The caller of a request that needs no body to be known: from its access token with OAuth,
/// else from the principal resolver.
async fn caller_of(
    state: &HttpState,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    id: Option<&RequestId>,
) -> Result<Caller, Refusal> {
    match &state.guard {
        Some(guard) => guard
            .admit(uri, headers)
            .await
            .inspect_err(|refusal| count_auth_refusal(state, refusal)),
        None => Ok(Caller {
            principal: resolve_principal(&state.config, headers, id.unwrap_or(&0.into()))?
                .map(Into::into),
            scopes: None,
            claims: None,
            token: None,
            address: None,
        }),
    }
}

/// Serves `server` on `listener` until [`Server::shutdown`]: listen streams end with their
/// closing result (L-10), other requests get `shutdown_grace` to finish, and no new connection
/// is accepted. At most [`HttpConfig::max_connections`] connections are open at once (503
/// past it); request headers and bodies must arrive within [`HttpConfig::header_timeout`] and
/// [`HttpConfig::body_timeout`]; free heap memory goes back to the system after connections
/// close ([`HttpConfig::release_memory`]).
pub async fn serve(
    server: Server,
    listener: TcpListener,
    config: HttpConfig,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    flood::limiter(&config).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("flood limit: {e}"),
        )
    })?;
    let shutdown = server.shutdown_token();
    // Replies go out in one write; Nagle's algorithm would only add latency.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    // Past the grace, requests are cancelled and answer at once; a little more for that.
    let wait = config.shutdown_grace + Duration::from_secs(2);
    let (router, state) = build(server, config);
    let make = service::MakeMcp {
        state: state.clone(),
        router,
    };
    accept::run(listener, make, &state.config, shutdown, wait).await;
    Ok(())
}

/// Binds `addr` and serves; see [`serve`]. Bind to 127.0.0.1 unless the server must be reachable
/// from elsewhere (H-03).
pub async fn bind_and_serve(
    server: Server,
    addr: SocketAddr,
    config: HttpConfig,
) -> std::io::Result<()> {
    serve(server, TcpListener::bind(addr).await?, config).await
}

async fn handle_get(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let Some(sessions) = &state.sessions else {
        return legacy::method_not_allowed();
    };
    let (parts, caller) = match admit_session_request(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    match checks::Accept::parse(&parts.headers) {
        Ok(accept) => legacy::get(&state, sessions, &parts.headers, accept, &caller).await,
        Err(refusal) => refusal.into_response(),
    }
}

async fn handle_delete(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let Some(sessions) = &state.sessions else {
        return legacy::method_not_allowed();
    };
    match admit_session_request(&state, request).await {
        Ok((parts, caller)) => legacy::delete(&state, sessions, &parts.headers, &caller).await,
        Err(refused) => refused,
    }
}

/// What a GET or a DELETE (legacy sessions only) passes before anything else: the flood limit,
/// Host and Origin, and who the caller is.
async fn admit_session_request(
    state: &HttpState,
    request: Request,
) -> Result<(http::request::Parts, Caller), Response> {
    let (parts, _) = request.into_parts();
    let address = state
        .admission
        .admit(&parts, state.server.clock())
        .map_err(|turned| {
            state.server.count_refusal(RefusalReason::Flood);
            turned.into_response()
        })?;
    checks::host_and_origin(&state.config, &parts.uri, &parts.headers)
        .map_err(IntoResponse::into_response)?;
    let caller = caller_of(state, &parts.uri, &parts.headers, None)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok((parts, Caller { address, ..caller }))
}

async fn handle_post(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    post_on(&state, request, None).await
}

/// A POST; `last_meta` is its connection's last `_meta` when the connection is Toolwire's own
/// (`service.rs`), not when the router is served by someone else's loop.
async fn post_on(state: &HttpState, request: Request, last_meta: Option<&LastMeta>) -> Response {
    let (parts, body) = request.into_parts();
    // A flood is turned away before anything else is looked at (T-15).
    let address = match state.admission.admit(&parts, state.server.clock()) {
        Ok(address) => address,
        Err(turned) => {
            state.server.count_refusal(RefusalReason::Flood);
            return turned.into_response();
        }
    };
    match admit_and_run(state, parts, body, address, last_meta).await {
        Ok(response) => response,
        Err(refusal) => refusal.into_response(),
    }
}

/// A POST: checked, read, admitted and run, in the order the checks must come (the token
/// before anything else is read, A-03; the body after its headers).
async fn admit_and_run(
    state: &HttpState,
    parts: http::request::Parts,
    body: Body,
    address: Option<ClientId>,
    last_meta: Option<&LastMeta>,
) -> Result<Response, Refusal> {
    let headers = &parts.headers;
    checks::host_and_origin(&state.config, &parts.uri, headers)?;
    // Without a usable token nothing else is read.
    let oauth_caller = match &state.guard {
        Some(guard) => Some(Caller {
            address: address.clone(),
            ..guard
                .admit(&parts.uri, headers)
                .await
                .inspect_err(|refusal| count_auth_refusal(state, refusal))?
        }),
        None => None,
    };
    checks::content_type(headers)?;
    let accept = checks::Accept::parse(headers)?;
    let body = read_body(state, body).await?;
    let message = read_message(&body, state.server.config().max_json_depth, last_meta)
        .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, e.id.as_ref(), e.error))?;
    let (id, meta, route) = match message {
        // The common case: a well-formed tools/call, read in one pass (a 2026-07-28 request,
        // so never a legacy one).
        Message::Call(call) => {
            admit_call(&state.server, headers, &call)?;
            let CallFrame { id, meta, route } = *call;
            (id, meta, route)
        }
        Message::Raw(raw) => {
            if let Some(sessions) = &state.sessions {
                if legacy::claims(headers, &raw) {
                    let caller = match oauth_caller {
                        Some(caller) => caller,
                        None => Caller {
                            address,
                            ..caller_of(state, &parts.uri, headers, raw.request_id().as_ref())
                                .await?
                        },
                    };
                    // Boxed: a 2026-07-28 request's future need not be as large as this one.
                    let post = legacy::post(state, sessions, headers, raw, accept, caller);
                    return Ok(Box::pin(post).await);
                }
            }
            let Some(id) = request_id(&raw)? else {
                // Notifications are accepted and need no answer (H-04); cancellation on HTTP
                // is closing the stream (H-26), so `notifications/cancelled` has nothing to
                // act on.
                return Ok(StatusCode::ACCEPTED.into_response());
            };
            let (meta, route) = admit_request(&state.server, headers, &id, &raw)?;
            (id, Arc::new(meta), route)
        }
    };
    let caller = match oauth_caller {
        Some(caller) => caller,
        None => Caller {
            principal: resolve_principal(&state.config, headers, &id)?.map(Into::into),
            scopes: None,
            claims: None,
            token: None,
            address,
        },
    };
    check_scopes(state, &caller, &id, &meta, &route)?;
    let incoming = crate::request::incoming::Incoming::http(headers);
    let request = reply::Admitted {
        id,
        meta,
        route,
        incoming,
    };
    Ok(reply::run(state, request, accept, caller).await)
}

/// The body, whole, within the size and time limits. The deadline is only armed if the body is
/// not all there yet (`timeout` polls it first).
async fn read_body(state: &HttpState, body: Body) -> Result<axum::body::Bytes, Refusal> {
    let max = state.server.config().max_message_bytes;
    tokio::time::timeout(state.config.body_timeout, axum::body::to_bytes(body, max))
        .await
        .map_err(|_| body_too_slow(state.config.body_timeout))?
        .map_err(|_| {
            let error = ErrorObject::invalid_request(format!("the body exceeds {max} bytes"));
            Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, None, error)
        })
}

/// The id of a request; `None` for a notification. A response from the client, or a message
/// that is neither, is refused.
fn request_id(raw: &RawMessage<'_>) -> Result<Option<RequestId>, Refusal> {
    let refuse = |error| Refusal::new(StatusCode::BAD_REQUEST, raw.request_id().as_ref(), error);
    match raw.kind() {
        Err(why) => Err(refuse(ErrorObject::invalid_request(why))),
        Ok(MessageKind::Notification) => Ok(None),
        Ok(MessageKind::Response) => Err(refuse(ErrorObject::invalid_request(
            // H-20
            "clients send requests and notifications, never responses",
        ))),
        Ok(MessageKind::Request(id)) => Ok(Some(id)),
    }
}

/// With OAuth, the scopes of what the request addresses (403 without them); a refused
/// `tools/call` is audited.
fn check_scopes(
    state: &HttpState,
    caller: &Caller,
    id: &RequestId,
    meta: &RequestMeta,
    route: &Route,
) -> Result<(), Refusal> {
    let (Some(guard), Some(granted)) = (&state.guard, &caller.scopes) else {
        return Ok(());
    };
    guard
        .check_scopes(&state.server, route, granted, id)
        .inspect_err(|refusal| {
            state.server.count_refusal(RefusalReason::Scope);
            if let Route::CallTool(call) = route {
                let principal = caller.principal.as_deref();
                let code = refusal.error.code;
                state
                    .server
                    .audit_refused(id, call, principal, Some(meta), code);
            }
        })
}

/// Counts an OAuth refusal: 403 is a missing scope, anything else (401, 400, 503) no usable
/// token.
fn count_auth_refusal(state: &HttpState, refusal: &Refusal) {
    let reason = if refusal.status == StatusCode::FORBIDDEN {
        RefusalReason::Scope
    } else {
        RefusalReason::Auth
    };
    state.server.count_refusal(reason);
}

/// The caller's principal from the configured resolver. The resolver is the server author's
/// code: a panic in it is contained and refuses the request (500, -32603) rather than ending
/// the connection or letting the request through as anonymous (invariant 6: the author's code
/// runs with panics contained).
fn resolve_principal(
    config: &HttpConfig,
    headers: &http::HeaderMap,
    id: &RequestId,
) -> Result<Option<String>, Refusal> {
    let Some(resolver) = &config.principal else {
        return Ok(None);
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (resolver.0)(headers))).map_err(
        |panic| {
            crate::safety::deadline::panicked("principal resolver", &panic);
            let error = ErrorObject::internal("Internal error");
            Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, Some(id), error)
        },
    )
}

/// The request checks, in order; see the module docs.
fn admit_request(
    server: &Server,
    headers: &http::HeaderMap,
    id: &RequestId,
    raw: &RawMessage<'_>,
) -> Result<(RequestMeta, Route), Refusal> {
    let method = raw.method.as_deref().unwrap_or_default();
    let meta = read_meta_or_refuse(server, headers, id, raw)?;
    check_meta(server, headers, id, method, &meta)?;
    let route = Route::parse(method, raw.params).map_err(|e| {
        let error = removed_method_error(method, e);
        Refusal::new(status_for(Some(error.code)), Some(id), error)
    })?;
    check_route(server, headers, id, &route)?;
    Ok((meta, route))
}

/// The checks of [`admit_request`] for a call read in one pass: the same, in the same order,
/// without the reading.
fn admit_call(server: &Server, headers: &http::HeaderMap, call: &CallFrame) -> Result<(), Refusal> {
    use toolwire_protocol::methods::{CallTool, Method as _};
    let method = CallTool::METHOD;
    check_meta(server, headers, &call.id, method, &call.meta)?;
    check_route(server, headers, &call.id, &call.route)
}

/// The headers that mirror the version and the method, and the version itself (H-09, V-04).
fn check_meta(
    server: &Server,
    headers: &http::HeaderMap,
    id: &RequestId,
    method: &str,
    meta: &RequestMeta,
) -> Result<(), Refusal> {
    let refuse = |error: ErrorObject| Refusal::new(status_for(Some(error.code)), Some(id), error);
    checks::exact_header(
        headers,
        &checks::PROTOCOL_VERSION,
        "MCP-Protocol-Version",
        &meta.protocol_version,
    )
    .map_err(refuse)?;
    server.check_version(meta).map_err(refuse)?;
    checks::exact_header(headers, &checks::METHOD, "Mcp-Method", method).map_err(refuse)
}

/// The headers that mirror the name and the `x-mcp-header` arguments (H-13…H-15).
fn check_route(
    server: &Server,
    headers: &http::HeaderMap,
    id: &RequestId,
    route: &Route,
) -> Result<(), Refusal> {
    let refuse = |error: ErrorObject| Refusal::new(status_for(Some(error.code)), Some(id), error);
    if let Some(expected) = route.name_header() {
        checks::name_header(headers, expected).map_err(refuse)?;
    }
    if let Route::CallTool(call) = route {
        if let Some(tool) = server.registry().snapshot().get(&call.name) {
            checks::param_headers(headers, &tool.header_params, &call.arguments).map_err(refuse)?;
        }
    }
    Ok(())
}

/// The request's `_meta`, or the refusal that names what is wrong with it.
fn read_meta_or_refuse(
    server: &Server,
    headers: &http::HeaderMap,
    id: &RequestId,
    raw: &RawMessage<'_>,
) -> Result<RequestMeta, Refusal> {
    let refuse = |error: ErrorObject| Refusal::new(status_for(Some(error.code)), Some(id), error);
    let bad = |error| Refusal::new(StatusCode::BAD_REQUEST, Some(id), error);
    let method = raw.method.as_deref().unwrap_or_default();
    read_meta(raw.params).map_err(|error| match legacy_initialize(method, raw.params) {
        Some(unsupported) => refuse(unsupported),
        None if server.serves_legacy() && legacy::names_a_legacy_version(headers) => {
            bad(ErrorObject::invalid_request(
                "a 2025-11-25 request needs the Mcp-Session-Id of an initialized session: \
                     send initialize first",
            ))
        }
        None => bad(error),
    })
}

#[cfg(test)]
mod tests;
