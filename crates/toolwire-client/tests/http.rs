//! The HTTP transport against hostile servers on 127.0.0.1: redirects to another origin (which
//! would carry API keys, `Mcp-Param-*` headers and the body there) and error bodies without end.
//! Every server records what reached it; the tests assert on those records in their own thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Value, json};
use toolwire_client::{ClientBuilder, Error};
use toolwire_server::{Server, Tool, http};

/// Each request a server received: method, URI, credentials and body.
type Log = Arc<Mutex<Vec<String>>>;

/// Serves `app` on 127.0.0.1; returns its base URL (`http://127.0.0.1:PORT`).
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A server that records every request and answers it with `reply`.
async fn recording(reply: fn(&Value) -> Response) -> (String, Log) {
    let log: Log = Arc::default();
    let kept = log.clone();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: String| {
            let kept = kept.clone();
            async move {
                let request: Value = serde_json::from_str(&body).unwrap_or_default();
                let header = |name: &str| headers.get(name).cloned();
                kept.lock().unwrap().push(format!(
                    "{method} {uri} x-api-key={:?} authorization={:?} body={body}",
                    header("x-api-key"),
                    header("authorization"),
                ));
                reply(&request)
            }
        },
    );
    (serve(app).await, log)
}

/// A correct 2026-07-28 answer to whatever was asked.
fn modern_answer(request: &Value) -> Response {
    axum::Json(json!({
        "jsonrpc": "2.0", "id": request["id"],
        "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {},
            "serverInfo": {"name": "elsewhere", "version": "1"},
            "tools": [], "ttlMs": 0, "cacheScope": "public"
        }
    }))
    .into_response()
}

/// A server whose every answer is a redirect with `status` to `target`.
async fn redirecting(status: StatusCode, target: String) -> String {
    let app = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { (status, [(header::LOCATION, target)]).into_response() }
    });
    serve(app).await
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_and_nothing_reaches_it() {
    let (elsewhere, log) = recording(modern_answer).await;
    for status in [301, 302, 303, 307, 308] {
        let status = StatusCode::from_u16(status).unwrap();
        let origin = redirecting(status, format!("{elsewhere}/mcp")).await;
        let client = ClientBuilder::new("redirect-test", "1.0")
            .timeout(Duration::from_secs(5))
            .header("X-Api-Key", "k-123")
            .bearer_token("s3cret")
            .http(format!("{origin}/mcp"))
            .unwrap();
        let outcome = client.list_tools().await;
        let leaked = log.lock().unwrap().clone();
        assert!(
            leaked.is_empty(),
            "after a {status}, requests reached the other origin: {leaked:#?}"
        );
        let error = outcome.unwrap_err();
        assert!(
            matches!(&error, Error::Transport(m) if m.contains("redirected to another origin") && m.contains(&elsewhere)),
            "{status}: {error}"
        );
    }
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = echo_router().route(
        "/old",
        axum::routing::any(|| async {
            (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, "/mcp")]).into_response()
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    echoes(format!("{base}/old"), "same origin").await;
}

/// Calls `echo` at `endpoint` with `message` and checks that it comes back.
async fn echoes(endpoint: String, message: &str) {
    let client = ClientBuilder::new("http-test", "1.0")
        .timeout(Duration::from_secs(5))
        .http(endpoint)
        .unwrap();
    let result = client
        .call_tool("echo", json!({ "message": message }))
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        message
    );
}

/// How much of an endless error body a server produced before the client stopped reading.
async fn endless_error_body(produced: Arc<AtomicUsize>) -> String {
    let app = axum::Router::new().fallback(move |body: String| {
        let produced = produced.clone();
        async move {
            let request: Value = serde_json::from_str(&body).unwrap_or_default();
            match request["method"].as_str() {
                // Not a 2026-07-28 answer: the client tries the legacy handshake (V-12).
                Some("initialize") => axum::Json(json!({
                    "jsonrpc": "2.0", "id": request["id"],
                    "result": {"protocolVersion": "2025-11-25", "capabilities": {},
                               "serverInfo": {"name": "legacy", "version": "1"}}
                }))
                .into_response(),
                // The notification that ends the handshake: an error whose body never ends.
                Some("notifications/initialized") => {
                    let chunk = bytes::Bytes::from(vec![b'x'; 64 << 10]);
                    let chunks = futures::stream::repeat_with(move || {
                        produced.fetch_add(chunk.len(), Ordering::SeqCst);
                        Ok::<_, std::convert::Infallible>(chunk.clone())
                    })
                    .take(2048);
                    Response::builder()
                        .status(StatusCode::INTERNAL_SERVER_ERROR)
                        .body(Body::from_stream(chunks))
                        .unwrap()
                }
                _ => (StatusCode::BAD_REQUEST, "unknown").into_response(),
            }
        }
    });
    serve(app).await
}

#[tokio::test]
async fn an_error_body_is_read_only_up_to_a_bound() {
    let produced = Arc::new(AtomicUsize::new(0));
    let base = endless_error_body(produced.clone()).await;
    let client = ClientBuilder::new("error-body-test", "1.0")
        .timeout(Duration::from_secs(5))
        .http(format!("{base}/mcp"))
        .unwrap();
    // The handshake fails on its last step, so the first answer (400) stands.
    let error = client.discover().await.unwrap_err();
    assert!(matches!(&error, Error::Http { status: 400, .. }), "{error}");
    // 128 MiB were on offer; the client read a few KiB and closed the connection (what the
    // server produced beyond that sat in socket buffers).
    let produced = produced.load(Ordering::SeqCst);
    assert!(
        produced < 32 << 20,
        "the client read {produced} bytes of an error body"
    );
}

#[tokio::test(start_paused = true)]
async fn a_notification_the_server_never_answers_times_out() {
    // A legacy server that takes the handshake's last notification and never answers it.
    let app = axum::Router::new().fallback(|body: String| async move {
        let request: Value = serde_json::from_str(&body).unwrap_or_default();
        match request["method"].as_str() {
            Some("initialize") => axum::Json(json!({
                "jsonrpc": "2.0", "id": request["id"],
                "result": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "serverInfo": {"name": "legacy", "version": "1"}}
            }))
            .into_response(),
            Some("notifications/initialized") => std::future::pending().await,
            _ => (StatusCode::BAD_REQUEST, "unknown").into_response(),
        }
    });
    let base = serve(app).await;
    let client = ClientBuilder::new("silent-test", "1.0")
        .timeout(Duration::from_secs(5))
        .http(format!("{base}/mcp"))
        .unwrap();
    // Virtual time: the runtime is idle while it waits, so the clock jumps to the next timer.
    let outcome = tokio::time::timeout(Duration::from_secs(600), client.discover()).await;
    let error = outcome.expect("the handshake hung").unwrap_err();
    // The handshake failed on its last step, so the first answer (400) stands.
    assert!(matches!(&error, Error::Http { status: 400, .. }), "{error}");
}

/// Set in the child process of [`an_endpoint_behind_a_proxy_is_reached_through_it`]: the
/// endpoint it calls, with `HTTP_PROXY` naming the parent's proxy.
const PROXIED_ENDPOINT: &str = "TOOLWIRE_TEST_PROXIED_ENDPOINT";

/// The router of a server with one tool, `echo`.
fn echo_router() -> axum::Router {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Echo {
        message: String,
    }
    let server = Server::builder("echo", "1")
        .tool(Tool::new(
            "echo",
            |a: Echo, _: toolwire_server::RequestContext| async move { a.message },
        ))
        .build()
        .unwrap();
    http::router(server, http::HttpConfig::default())
}

#[tokio::test]
async fn an_endpoint_behind_a_proxy_is_reached_through_it() {
    if let Ok(endpoint) = std::env::var(PROXIED_ENDPOINT) {
        echoes(endpoint, "through the proxy").await;
        return;
    }
    let base = serve(echo_router()).await;
    // A forward proxy for plain HTTP: requests arrive in absolute form and are passed on.
    let log: Log = Arc::default();
    let kept = log.clone();
    let forward = reqwest::Client::builder().no_proxy().build().unwrap();
    let proxy = serve(axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: bytes::Bytes| {
            let (kept, forward) = (kept.clone(), forward.clone());
            async move {
                kept.lock().unwrap().push(format!("{method} {uri}"));
                let mut request = forward.request(method, uri.to_string()).body(body);
                for (name, value) in &headers {
                    if name != header::HOST {
                        request = request.header(name, value);
                    }
                }
                let answer = request.send().await.unwrap();
                let status = answer.status();
                let content_type = answer.headers()[header::CONTENT_TYPE].clone();
                let body = answer.bytes().await.unwrap();
                (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
            }
        },
    ))
    .await;
    // The client reads the proxy settings of its process, so the call runs in a child.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "an_endpoint_behind_a_proxy_is_reached_through_it",
        ])
        .env(PROXIED_ENDPOINT, format!("{base}/mcp"))
        .env("HTTP_PROXY", &proxy)
        .env("http_proxy", &proxy);
    for unset in [
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
        "REQUEST_METHOD",
    ] {
        child.env_remove(unset);
    }
    let output = child.output().await.unwrap();
    assert!(
        output.status.success(),
        "the child failed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let seen = log.lock().unwrap().clone();
    assert!(
        !seen.is_empty() && seen.iter().all(|line| line == &format!("POST {base}/mcp")),
        "{seen:#?}"
    );
}
