//! The Streamable HTTP transport (CHECKLIST §4): one POST endpoint; a JSON reply, or a
//! request-scoped SSE reply once the request streams progress, logs or listen notifications.
//!
//! Checks run in the order the spec and the conformance suite expect: Host/Origin (403), body
//! size (413), JSON and JSON-RPC shape (400), `_meta` (-32602, 400), `MCP-Protocol-Version`
//! against `_meta` (-32020, 400), the version (-32022, 400), `Mcp-Method` (-32020), the method
//! (-32601, 404), then `Mcp-Name` and `Mcp-Param-*` against the body (-32020, 400).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::Stream;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use toolwire_protocol::headers::{self as mcp_headers, HeaderParam};
use toolwire_protocol::methods::{Listen, Method};
use toolwire_protocol::{
    ErrorObject, HEADER_MISMATCH, INVALID_REQUEST, METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY, MessageKind, PARSE_ERROR, RawMessage, RequestId,
    RequestMeta, UNSUPPORTED_PROTOCOL_VERSION,
};

use crate::context::{Frame, Outbound, RequestContext};
use crate::dispatch::{Final, Route, is_removed_method, read_frame, read_meta};
use crate::server::Server;

/// Settings of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    path: String,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Vec<String>,
    keep_alive: Duration,
}

impl Default for HttpConfig {
    /// `/mcp`, loopback hosts only (H-02), keep-alive comments every 15 s (H-07).
    fn default() -> Self {
        HttpConfig {
            path: "/mcp".into(),
            allowed_hosts: Some(vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]),
            allowed_origins: Vec::new(),
            keep_alive: Duration::from_secs(15),
        }
    }
}

impl HttpConfig {
    /// The endpoint path (default `/mcp`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Also accepts requests whose `Host` (and `Origin`) name `host`, with any port. Needed when
    /// serving beyond loopback; the defaults are `localhost`, `127.0.0.1` and `[::1]`.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        if let Some(hosts) = &mut self.allowed_hosts {
            hosts.push(host.into().to_ascii_lowercase());
        }
        self
    }

    /// Accepts any `Host` and `Origin`: only behind a proxy that does the check itself.
    pub fn allow_any_host(mut self) -> Self {
        self.allowed_hosts = None;
        self
    }

    /// Also accepts this exact `Origin` (e.g. `https://app.example.com`).
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins
            .push(origin.into().to_ascii_lowercase());
        self
    }

    /// Interval of `:` keep-alive comments on SSE replies.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }
}

struct HttpState {
    server: Server,
    config: HttpConfig,
}

/// An axum router serving `server` at the configured path. GET, DELETE and other methods get
/// 405 (H-16).
pub fn router(server: Server, config: HttpConfig) -> Router {
    let limit = server.inner.config.max_message_bytes;
    let path = config.path.clone();
    let state = Arc::new(HttpState { server, config });
    Router::new()
        .route(&path, post(handle_post))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Serves `server` on `listener` until [`Server::shutdown`]; open listen streams end with their
/// closing result first (L-10).
pub async fn serve(
    server: Server,
    listener: TcpListener,
    config: HttpConfig,
) -> std::io::Result<()> {
    let shutdown = server.shutdown_token();
    axum::serve(listener, router(server, config))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
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

/// An early refusal: status and JSON-RPC error.
struct Refusal {
    status: StatusCode,
    id: Option<RequestId>,
    error: ErrorObject,
}

impl Refusal {
    fn new(status: StatusCode, id: Option<&RequestId>, error: ErrorObject) -> Self {
        Refusal {
            status,
            id: id.cloned(),
            error,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        json_response(
            self.status,
            Final::error(self.id.as_ref(), &self.error).json,
        )
    }
}

fn json_response(status: StatusCode, json: String) -> Response {
    let mut response = Response::new(Body::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The status of a final error response sent as JSON (E-04, E-07, H-11).
fn status_for(code: Option<i64>) -> StatusCode {
    match code {
        None => StatusCode::OK,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            PARSE_ERROR
            | INVALID_REQUEST
            | HEADER_MISMATCH
            | MISSING_REQUIRED_CLIENT_CAPABILITY
            | UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(_) => StatusCode::OK,
    }
}

async fn handle_post(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match admit_and_run(&state, &headers, body).await {
        Ok(response) => response,
        Err(refusal) => refusal.into_response(),
    }
}

async fn admit_and_run(
    state: &HttpState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Refusal> {
    check_host_and_origin(&state.config, headers)?;
    let body = body.map_err(|rejection| {
        let error = ErrorObject::invalid_request(format!(
            "cannot read the body: {}",
            rejection.body_text()
        ));
        Refusal::new(rejection.status(), None, error)
    })?;
    check_content_type(headers)?;
    let accept = Accept::parse(headers)?;
    let config = &state.server.inner.config;
    let raw = read_frame(&body, config.max_json_depth)
        .map_err(|e| Refusal::new(StatusCode::BAD_REQUEST, None, e))?;
    let id = match raw.kind() {
        Err(why) => {
            let error = ErrorObject::invalid_request(why);
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                raw.request_id().as_ref(),
                error,
            ));
        }
        // Notifications are accepted and need no answer (H-04); cancellation on HTTP is closing
        // the stream (H-26), so `notifications/cancelled` has nothing to act on.
        Ok(MessageKind::Notification) => return Ok(StatusCode::ACCEPTED.into_response()),
        Ok(MessageKind::Response) => {
            let error = ErrorObject::invalid_request(
                "clients send requests and notifications, never responses (H-20)",
            );
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                raw.request_id().as_ref(),
                error,
            ));
        }
        Ok(MessageKind::Request(id)) => id,
    };
    let (meta, call) = admit_request(&state.server, headers, &id, &raw)?;
    Ok(run(state, id, meta, call, accept).await)
}

/// The request checks, in order; see the module docs.
fn admit_request(
    server: &Server,
    headers: &HeaderMap,
    id: &RequestId,
    raw: &RawMessage<'_>,
) -> Result<(RequestMeta, Route), Refusal> {
    let bad = |error| Refusal::new(StatusCode::BAD_REQUEST, Some(id), error);
    let method = raw.method.as_deref().unwrap_or_default();
    let meta = read_meta(raw.params).map_err(bad)?;
    let version = single_header(headers, mcp_headers::PROTOCOL_VERSION).map_err(bad)?;
    match version {
        None => {
            return Err(bad(ErrorObject::header_mismatch(
                "Missing MCP-Protocol-Version header",
            )));
        }
        Some(v) if v.trim() != meta.protocol_version => {
            return Err(bad(ErrorObject::header_mismatch(format!(
                "Header mismatch: MCP-Protocol-Version header value '{}' does not match body value '{}'",
                v.trim(),
                meta.protocol_version
            ))));
        }
        Some(_) => {}
    }
    server.check_version(&meta).map_err(bad)?;
    match single_header(headers, mcp_headers::METHOD).map_err(bad)? {
        None => {
            return Err(bad(ErrorObject::header_mismatch(
                "Missing Mcp-Method header",
            )));
        }
        Some(m) if m.trim() != method => {
            return Err(bad(ErrorObject::header_mismatch(format!(
                "Header mismatch: Mcp-Method header value '{}' does not match body value '{method}'",
                m.trim()
            ))));
        }
        Some(_) => {}
    }
    let call = Route::parse(method, raw.params).map_err(|error| match error.code {
        METHOD_NOT_FOUND => {
            let error = if is_removed_method(method) {
                ErrorObject::new(
                    METHOD_NOT_FOUND,
                    format!("Method not found: {method} (removed in protocol version 2026-07-28)"),
                )
            } else {
                error
            };
            Refusal::new(StatusCode::NOT_FOUND, Some(id), error)
        }
        _ => bad(error),
    })?;
    if let Some(expected) = call.name_header() {
        check_name_header(headers, expected).map_err(bad)?;
    }
    if let Route::CallTool { name, arguments } = &call {
        if let Some(tool) = server.inner.registry.snapshot().get(name) {
            check_param_headers(headers, &tool.header_params, arguments).map_err(bad)?;
        }
    }
    Ok((meta, call))
}

/// The value of a header that may appear at most once; -32020 for repeats or bytes that are
/// not visible ASCII.
fn single_header(headers: &HeaderMap, name: &str) -> Result<Option<String>, ErrorObject> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ErrorObject::header_mismatch(format!(
            "Header {name} appears more than once"
        )));
    }
    let text = value.to_str().map_err(|_| {
        ErrorObject::header_mismatch(format!(
            "Header {name} has characters outside visible ASCII"
        ))
    })?;
    Ok(Some(text.to_owned()))
}

/// `Mcp-Name` must be present and equal `params.name` / `params.uri` after decoding (H-13, H-14).
fn check_name_header(headers: &HeaderMap, expected: &str) -> Result<(), ErrorObject> {
    let Some(raw) = single_header(headers, mcp_headers::NAME)? else {
        return Err(ErrorObject::header_mismatch("Missing Mcp-Name header"));
    };
    let value = mcp_headers::decode_value(&raw)
        .map_err(|e| ErrorObject::header_mismatch(format!("Mcp-Name: {e}")))?;
    if value != expected {
        return Err(ErrorObject::header_mismatch(format!(
            "Header mismatch: Mcp-Name header value '{value}' does not match body value '{expected}'"
        )));
    }
    Ok(())
}

/// Every `x-mcp-header` parameter with a value in the arguments must be mirrored in its
/// `Mcp-Param-{Name}` header with an equal value; absent or null values expect no header (H-15).
fn check_param_headers(
    headers: &HeaderMap,
    params: &[HeaderParam],
    arguments: &Value,
) -> Result<(), ErrorObject> {
    for param in params {
        let Some(value) = param.value_in(arguments) else {
            continue;
        };
        let header_name = format!(
            "{}{}",
            mcp_headers::PARAM_PREFIX,
            param.name.to_ascii_lowercase()
        );
        let Some(raw) = single_header(headers, &header_name)? else {
            return Err(ErrorObject::header_mismatch(format!(
                "Missing Mcp-Param-{} header",
                param.name
            )));
        };
        let decoded = mcp_headers::decode_value(&raw)
            .map_err(|e| ErrorObject::header_mismatch(format!("Mcp-Param-{}: {e}", param.name)))?;
        if !param.matches(&decoded, value) {
            return Err(ErrorObject::header_mismatch(format!(
                "Header mismatch: Mcp-Param-{} header value '{decoded}' does not match body value {value}",
                param.name
            )));
        }
    }
    Ok(())
}

/// Host and Origin against the allowlist, against DNS rebinding (H-02): 403 otherwise.
fn check_host_and_origin(config: &HttpConfig, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(allowed) = &config.allowed_hosts else {
        return Ok(());
    };
    let forbidden = |why: String| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            None,
            ErrorObject::invalid_request(why),
        )
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !allowed
        .iter()
        .any(|a| a == &host_name(host).to_ascii_lowercase())
    {
        return Err(forbidden(format!("Host {host:?} is not allowed")));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
        let host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let ok = config.allowed_origins.contains(&origin)
            || host.is_some_and(|h| !h.contains('/') && allowed.iter().any(|a| a == host_name(h)));
        if !ok {
            return Err(forbidden(format!("Origin {origin:?} is not allowed")));
        }
    }
    Ok(())
}

/// The host part of `host[:port]` or `[v6]:port`.
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                host
            } else {
                authority
            }
        })
}

fn check_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        let error = ErrorObject::invalid_request("Content-Type must be application/json");
        Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            error,
        ))
    }
}

/// Which reply kinds the client accepts; a missing `Accept` accepts both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Accept {
    json: bool,
    sse: bool,
}

impl Accept {
    fn parse(headers: &HeaderMap) -> Result<Accept, Refusal> {
        let values: Vec<&str> = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            return Ok(Accept {
                json: true,
                sse: true,
            });
        }
        let mut accept = Accept {
            json: false,
            sse: false,
        };
        for range in values.iter().flat_map(|v| v.split(',')) {
            match range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
                .as_str()
            {
                "*/*" => {
                    accept = Accept {
                        json: true,
                        sse: true,
                    }
                }
                "application/*" | "application/json" => accept.json = true,
                "text/*" | "text/event-stream" => accept.sse = true,
                _ => {}
            }
        }
        if accept.json || accept.sse {
            Ok(accept)
        } else {
            let error = ErrorObject::invalid_request(
                "Accept must include application/json or text/event-stream",
            );
            Err(Refusal::new(StatusCode::NOT_ACCEPTABLE, None, error))
        }
    }
}

/// Runs an admitted request. The reply is JSON if the request finishes before it sends any
/// notification; otherwise it becomes SSE from the first notification on, and the rest of the
/// work continues in a task whose cancellation is tied to the stream (H-08).
async fn run(
    state: &HttpState,
    id: RequestId,
    meta: RequestMeta,
    call: Route,
    accept: Accept,
) -> Response {
    let server = state.server.clone();
    let streams = matches!(call, Route::Listen { .. });
    if streams && !accept.sse {
        let error = ErrorObject::invalid_request(format!(
            "{} replies with text/event-stream; accept it",
            Listen::METHOD
        ));
        return Refusal::new(StatusCode::NOT_ACCEPTABLE, Some(&id), error).into_response();
    }
    let cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel::<Frame>(64);
    let outbound = accept.sse.then(|| Outbound(tx.clone()));
    let logging = server.inner.config.logging;
    let ctx = RequestContext::new(
        id.clone(),
        meta,
        cancel.clone(),
        server.shutdown_token(),
        outbound,
        logging,
    );
    let guard = cancel.clone().drop_guard();
    let finisher = ctx.clone();
    let mut work = Box::pin(async move {
        let done = server.run(&id, call, ctx).await;
        finisher.finish();
        done
    });
    tokio::select! {
        biased;
        done = &mut work => {
            let done = done.map(|f| frame(f, &cancel));
            match rx.try_recv() {
                Err(_) if accept.json => match done {
                    Some(f) => json_response(status_for(f.error_code), f.json),
                    None => StatusCode::NO_CONTENT.into_response(),
                },
                queued => {
                    // Notifications were queued before the work finished: send all of them.
                    drop(tx);
                    let mut frames: Vec<Frame> = queued.into_iter().collect();
                    while let Ok(f) = rx.try_recv() {
                        frames.push(f);
                    }
                    frames.extend(done);
                    sse_response(frames, None, guard, state.config.keep_alive)
                }
            }
        }
        Some(first) = rx.recv() => {
            let task_cancel = cancel.clone();
            tokio::spawn(async move {
                let done = tokio::select! {
                    biased;
                    _ = task_cancel.cancelled() => None,
                    done = work => done,
                };
                if let Some(f) = done {
                    let _ = tx.send(frame(f, &task_cancel)).await;
                }
            });
            sse_response(vec![first], Some(rx), guard, state.config.keep_alive)
        }
    }
}

fn frame(done: Final, cancel: &CancellationToken) -> Frame {
    Frame {
        json: done.json,
        last: true,
        error_code: done.error_code,
        cancel: cancel.clone(),
    }
}

/// An SSE reply: the frames given, then those from `rx` until the final one. Dropping the
/// stream (the client closed it) cancels the request through `guard` (H-08).
fn sse_response(
    frames: Vec<Frame>,
    rx: Option<mpsc::Receiver<Frame>>,
    guard: DropGuard,
    keep_alive: Duration,
) -> Response {
    let stream = frame_stream(frames, rx, guard);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn frame_stream(
    frames: Vec<Frame>,
    rx: Option<mpsc::Receiver<Frame>>,
    guard: DropGuard,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    struct St {
        queued: std::vec::IntoIter<Frame>,
        rx: Option<mpsc::Receiver<Frame>>,
        done: bool,
        _guard: DropGuard,
    }
    let state = St {
        queued: frames.into_iter(),
        rx,
        done: false,
        _guard: guard,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let next = match st.queued.next() {
            Some(f) => f,
            None => st.rx.as_mut()?.recv().await?,
        };
        st.done = next.last;
        let event = Event::default().event("message").data(next.json);
        Some((Ok(event), st))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn host_names() {
        for (authority, want) in [
            ("localhost", "localhost"),
            ("localhost:8080", "localhost"),
            ("127.0.0.1:1", "127.0.0.1"),
            ("[::1]:3000", "[::1]"),
            ("[::1]", "[::1]"),
            ("evil.example.com", "evil.example.com"),
        ] {
            assert_eq!(host_name(authority), want);
        }
    }

    #[test]
    fn host_and_origin_allowlist() {
        let config = HttpConfig::default();
        let ok = [
            headers(&[("host", "127.0.0.1:5000")]),
            headers(&[("host", "localhost:1"), ("origin", "http://localhost:1")]),
            headers(&[("host", "[::1]:9"), ("origin", "https://[::1]:9")]),
        ];
        for h in ok {
            assert!(check_host_and_origin(&config, &h).is_ok(), "{h:?}");
        }
        let bad = [
            headers(&[]),
            headers(&[("host", "evil.example.com")]),
            headers(&[("host", "localhost.evil.com:80")]),
            headers(&[
                ("host", "localhost:1"),
                ("origin", "http://evil.example.com"),
            ]),
            headers(&[("host", "localhost:1"), ("origin", "null")]),
            headers(&[
                ("host", "localhost:1"),
                ("origin", "http://localhost:1/path"),
            ]),
        ];
        for h in bad {
            assert_eq!(
                check_host_and_origin(&config, &h).err().map(|r| r.status),
                Some(StatusCode::FORBIDDEN),
                "{h:?}"
            );
        }
        let custom = HttpConfig::default()
            .allow_host("mcp.example.com")
            .allow_origin("https://app.example.com");
        assert!(
            check_host_and_origin(
                &custom,
                &headers(&[
                    ("host", "mcp.example.com"),
                    ("origin", "https://app.example.com")
                ])
            )
            .is_ok()
        );
        assert!(
            check_host_and_origin(
                &HttpConfig::default().allow_any_host(),
                &headers(&[("host", "x")])
            )
            .is_ok()
        );
    }

    #[test]
    fn accept_header() {
        let parse = |v: Option<&str>| {
            let h = v.map_or_else(HeaderMap::new, |v| headers(&[("accept", v)]));
            Accept::parse(&h).map_err(|r| r.status)
        };
        let both = Accept {
            json: true,
            sse: true,
        };
        assert_eq!(parse(None), Ok(both));
        assert_eq!(parse(Some("application/json, text/event-stream")), Ok(both));
        assert_eq!(parse(Some("*/*")), Ok(both));
        assert_eq!(
            parse(Some("application/json")),
            Ok(Accept {
                json: true,
                sse: false
            })
        );
        assert_eq!(
            parse(Some("text/event-stream;q=1")),
            Ok(Accept {
                json: false,
                sse: true
            })
        );
        assert_eq!(parse(Some("text/html")), Err(StatusCode::NOT_ACCEPTABLE));
    }

    #[test]
    fn param_headers() {
        use toolwire_protocol::headers::ParamKind;
        let params = vec![
            HeaderParam {
                name: "Region".into(),
                path: vec!["region".into()],
                kind: ParamKind::String,
            },
            HeaderParam {
                name: "Priority".into(),
                path: vec!["priority".into()],
                kind: ParamKind::Integer,
            },
        ];
        let args = serde_json::json!({"region": "Hello", "priority": 42});
        let check = |pairs: &[(&'static str, &str)], args: &Value| {
            check_param_headers(&headers(pairs), &params, args)
        };
        assert!(
            check(
                &[("mcp-param-region", "Hello"), ("mcp-param-priority", "42")],
                &args
            )
            .is_ok()
        );
        assert!(
            check(
                &[
                    ("Mcp-Param-Region", "=?base64?SGVsbG8=?="),
                    ("MCP-PARAM-PRIORITY", " 42 ")
                ],
                &args
            )
            .is_ok()
        );
        assert!(
            check(&[], &serde_json::json!({"region": null})).is_ok(),
            "null expects no header"
        );
        for bad in [
            vec![("mcp-param-priority", "42")],
            vec![
                ("mcp-param-region", "Goodbye"),
                ("mcp-param-priority", "42"),
            ],
            vec![
                ("mcp-param-region", "=?base64?SGVsbG8?="),
                ("mcp-param-priority", "42"),
            ],
            vec![
                ("mcp-param-region", "=?base64?SGVs!!!bG8=?="),
                ("mcp-param-priority", "42"),
            ],
            vec![("mcp-param-region", "Hello"), ("mcp-param-priority", "43")],
            vec![
                ("mcp-param-region", "Hello"),
                ("mcp-param-region", "Hello"),
                ("mcp-param-priority", "42"),
            ],
        ] {
            let e = check(&bad, &args).expect_err(&format!("{bad:?}"));
            assert_eq!(e.code, HEADER_MISMATCH, "{bad:?}");
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(status_for(None), StatusCode::OK);
        assert_eq!(status_for(Some(-32601)), StatusCode::NOT_FOUND);
        for code in [-32700, -32600, -32020, -32021, -32022] {
            assert_eq!(status_for(Some(code)), StatusCode::BAD_REQUEST);
        }
        assert_eq!(
            status_for(Some(toolwire_protocol::INVALID_PARAMS)),
            StatusCode::OK
        );
        assert_eq!(status_for(Some(-32603)), StatusCode::OK);
    }
}
