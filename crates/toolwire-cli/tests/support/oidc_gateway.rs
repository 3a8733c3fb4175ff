//! For the gateway's OAuth tests: the real authorization server (`interop/oidc`, through the
//! test binary's `launch` module) with a client of it, and a recording proxy in front of an
//! upstream that keeps every request's `Authorization` header and the request whole.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{Value, json};

/// How long any one step may take.
pub(crate) const STEP: Duration = Duration::from_secs(30);

/// A free port of 127.0.0.1, for a gateway's resource URI (the gateway must name the URI
/// callers ask tokens for before it listens).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What the recording proxy saw: for each request, its JSON-RPC method (or the HTTP method
/// when the body has none) and its `Authorization` header; and every request whole (its
/// headers and body), to look for a caller's token anywhere in it.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) seen: Mutex<Vec<(String, Option<String>)>>,
    pub(crate) whole: Mutex<Vec<String>>,
    /// `Authorization` header values the proxy refuses with 401 `invalid_token`, as an
    /// upstream that revoked the token would (recorded, not forwarded).
    pub(crate) revoked: Mutex<Vec<String>>,
    /// Whether every `tools/call` is refused so.
    pub(crate) refuse_calls: std::sync::atomic::AtomicBool,
}

/// The proxy. Where it forwards to may be set after it runs: an upstream that must know the
/// proxy's URL (its public one) before it starts.
pub(crate) struct Proxy {
    recorder: Arc<Recorder>,
    upstream: OnceLock<String>,
    http: reqwest::Client,
}

impl Proxy {
    /// Forwards from now on to `upstream` (an origin, `http://HOST:PORT`).
    pub(crate) fn forward_to(&self, upstream: String) {
        let _ = self.upstream.set(upstream);
    }
}

/// Starts a recording proxy into `recorder`: its origin, and the proxy to tell where to
/// forward ([`Proxy::forward_to`]).
pub(crate) async fn recording_proxy(recorder: Arc<Recorder>) -> (String, Arc<Proxy>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let proxy = Arc::new(Proxy {
        recorder,
        upstream: OnceLock::new(),
        http: reqwest::Client::new(),
    });
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (origin, proxy)
}

/// Records the request, then forwards it to the upstream and streams the reply back (or
/// refuses it, as [`Recorder::revoked`] and [`Recorder::refuse_calls`] say).
async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return status(413);
    };
    let method = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|m| m["method"].as_str().map(str::to_owned))
        .unwrap_or_else(|| parts.method.to_string());
    let method_seen = method.clone();
    let authorization = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    proxy
        .recorder
        .seen
        .lock()
        .unwrap()
        .push((method_seen, authorization.clone()));
    let mut whole = format!("{} {}\n", parts.method, parts.uri);
    for (name, value) in &parts.headers {
        whole.push_str(&format!(
            "{name}: {}\n",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    whole.push_str(&String::from_utf8_lossy(&body));
    proxy.recorder.whole.lock().unwrap().push(whole);
    let revoked = authorization
        .as_ref()
        .is_some_and(|a| proxy.recorder.revoked.lock().unwrap().contains(a));
    let refused = method == "tools/call"
        && proxy
            .recorder
            .refuse_calls
            .load(std::sync::atomic::Ordering::SeqCst);
    if revoked || refused {
        let mut response = status(401);
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static(r#"Bearer error="invalid_token""#),
        );
        return response;
    }
    let Some(upstream) = proxy.upstream.get() else {
        return status(503);
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = proxy
        .http
        .request(parts.method.clone(), format!("{upstream}{path}"))
        .body(body);
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    let Ok(reply) = out.send().await else {
        return status(502);
    };
    let mut response = Response::builder().status(reply.status());
    for (name, value) in reply.headers() {
        if name != http::header::CONTENT_LENGTH
            && name != http::header::TRANSFER_ENCODING
            && name != http::header::CONNECTION
        {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from_stream(reply.bytes_stream()))
        .unwrap_or_else(|_| status(502))
}

fn status(code: u16) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = http::StatusCode::from_u16(code).unwrap();
    response
}

/// The authorization server and a client of it.
pub(crate) struct Provider {
    launched: crate::launch::Launched,
    http: reqwest::Client,
}

impl Provider {
    /// Starts it (installing it on first use).
    pub(crate) async fn start() -> Provider {
        Provider {
            launched: tokio::task::spawn_blocking(|| crate::launch::launch(&[]))
                .await
                .unwrap(),
            http: reqwest::Client::new(),
        }
    }

    pub(crate) fn issuer(&self) -> String {
        self.launched.issuer()
    }

    /// Posts `body` to the provider's test-only `path` (`/__test/…`); its JSON reply.
    pub(crate) async fn post(&self, path: &str, body: Value) -> Value {
        self.http
            .post(format!("{}{path}", self.issuer()))
            .json(&body)
            .timeout(STEP)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A client-credentials token of `client` for `resource` with `scope`.
    pub(crate) async fn token(&self, client: (&str, &str), resource: &str, scope: &str) -> String {
        let reply: Value = self
            .http
            .post(self.launched.ready["token_endpoint"].as_str().unwrap())
            .basic_auth(client.0, Some(client.1))
            .form(&[
                ("grant_type", "client_credentials"),
                ("resource", resource),
                ("scope", scope),
            ])
            .timeout(STEP)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        reply["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {reply}"))
            .to_owned()
    }

    /// Makes the tokens for `resource` opaque (checked by introspection).
    pub(crate) async fn opaque_for(&self, resource: &str) {
        let reply = self
            .post(
                "/__test/resource",
                json!({"resource": resource, "format": "opaque"}),
            )
            .await;
        assert_eq!(reply["settings"]["format"], "opaque", "{reply}");
    }

    /// A JWT signed with the provider's current key (its test-only mint), with these claims
    /// over its defaults: a token its token endpoint never issued.
    pub(crate) async fn mint(&self, claims: Value) -> String {
        let reply = self.post("/__test/mint", json!({"claims": claims})).await;
        reply["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {reply}"))
            .to_owned()
    }

    /// How many token exchanges it issued and refused.
    pub(crate) async fn exchanges(&self) -> (u64, u64) {
        let state: Value = self
            .http
            .get(format!("{}/__test/state", self.issuer()))
            .timeout(STEP)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let counts = &state["token_exchanges"];
        (
            counts["issued"].as_u64().unwrap(),
            counts["refused"].as_u64().unwrap(),
        )
    }
}

/// An HTTP reply from the gateway: status, `WWW-Authenticate`, and its last JSON-RPC message.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) challenge: String,
    pub(crate) message: Value,
}

/// Sends one 2026-07-28 request to the gateway, with `token` as the bearer.
pub(crate) async fn send(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Reply {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "1"},
    });
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .timeout(STEP);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let reply = request
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let challenge = reply
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = reply.text().await.unwrap();
    let message = last_message(&text);
    Reply {
        status,
        challenge,
        message,
    }
}

/// The last JSON-RPC message of a reply's body: JSON, or the last `data:` line of SSE.
pub(crate) fn last_message(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| {
        text.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str(d.trim()).ok())
            .unwrap_or(Value::Null)
    })
}

/// The text of a call's result, and whether it is an error result.
pub(crate) async fn called(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    tool: &str,
    arguments: Value,
) -> (String, bool) {
    let reply = send(
        http,
        url,
        Some(token),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    assert_eq!(reply.status, 200, "{tool}: {}", reply.message);
    let result = &reply.message["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: a text result: {}", reply.message))
        .to_owned();
    (text, result["isError"] == json!(true))
}
