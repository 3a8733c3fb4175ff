//! `toolwire gateway` calling an upstream with RFC 8693 token exchange, against the real
//! authorization server (the npm `oidc-provider` of `interop/oidc`, whose token-exchange grant
//! `provider.mjs` adds for the client `gateway-exchanger`): callers present their own access
//! tokens for the gateway; the upstream — a real `toolwire serve --http` that is a resource
//! server of the same provider, behind a recording proxy that keeps every request's
//! `Authorization` header — gets, for each call, a token the gateway exchanged for the
//! caller's (the caller's `sub`, the upstream's audience, `act.sub` the gateway's client), and
//! never a caller's token.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use base64::Engine as _;
use serde_json::{Value, json};

#[path = "../../../interop/oidc/launch.rs"]
mod launch;

#[path = "support/gateway.rs"]
mod support;

use support::{Killed, toolwire};

/// How long any one step may take.
const STEP: Duration = Duration::from_secs(30);

/// The gateway's client at the provider (provider.mjs).
const EXCHANGER: (&str, &str) = ("gateway-exchanger", "gateway-exchanger-secret");

/// Starts `command` and waits for the stderr line with `needle`: the URL that follows it.
fn started(command: std::process::Command, needle: &str) -> (Killed, String) {
    let started = support::start(command, needle);
    let lines = started.lines;
    std::thread::spawn(move || while lines.recv().is_ok() {});
    (started.child, started.url)
}

/// What the recording proxy saw: each request's JSON-RPC method (or HTTP method) and its
/// `Authorization` header, and every request whole.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(String, Option<String>)>>,
    whole: Mutex<Vec<String>>,
}

/// The proxy: where it forwards to is set once the upstream runs (the upstream must know the
/// proxy's URL, its public one, before it starts).
struct Proxy {
    recorder: Arc<Recorder>,
    upstream: OnceLock<String>,
    http: reqwest::Client,
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let method = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|m| m["method"].as_str().map(str::to_owned))
        .unwrap_or_else(|| parts.method.to_string());
    let authorization = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    proxy
        .recorder
        .seen
        .lock()
        .unwrap()
        .push((method, authorization));
    let mut whole = format!("{} {}\n", parts.method, parts.uri);
    for (name, value) in &parts.headers {
        whole.push_str(&format!(
            "{name}: {}\n",
            String::from_utf8_lossy(value.as_bytes())
        ));
    }
    whole.push_str(&String::from_utf8_lossy(&body));
    proxy.recorder.whole.lock().unwrap().push(whole);
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let upstream = proxy.upstream.get().expect("the upstream runs");
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
        return Response::builder().status(502).body(Body::empty()).unwrap();
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
        .unwrap()
}

/// The provider and a client of it.
struct Provider {
    launched: launch::Launched,
    http: reqwest::Client,
}

impl Provider {
    fn issuer(&self) -> String {
        self.launched.issuer()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
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
    async fn token(&self, client: (&str, &str), resource: &str, scope: &str) -> String {
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

    /// How many exchanges it issued and refused.
    async fn exchanges(&self) -> (u64, u64) {
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

/// The claims of a JWT (unverified: the upstream verified it).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// A free port of 127.0.0.1, for the gateway's resource URI.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Calls `tool` through the gateway at `url` as the bearer of `token`: the result's text and
/// whether it is an error result.
async fn called(url: &str, token: &str, tool: &str, arguments: Value) -> (String, bool) {
    let params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "exchange-test", "version": "1"},
        },
    });
    let reply = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .bearer_auth(token)
        .timeout(STEP)
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let text = reply.text().await.unwrap();
    let message: Value = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .rev()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str(d.trim()).ok())
            .unwrap_or(Value::Null)
    });
    let result = &message["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: a text result: {message}"))
        .to_owned();
    (text, result["isError"] == json!(true))
}

/// The world: the provider, the recorded upstream (a resource server of the provider at the
/// proxy's URL), and the gateway exchanging callers' tokens for it.
struct Scene {
    provider: Provider,
    recorder: Arc<Recorder>,
    upstream_resource: String,
    gateway_resource: String,
    url: String,
    _processes: (Killed, Killed),
    _dir: tempfile::TempDir,
}

async fn scene() -> Scene {
    let provider = Provider {
        launched: tokio::task::spawn_blocking(|| launch::launch(&[]))
            .await
            .unwrap(),
        http: reqwest::Client::new(),
    };
    let issuer = provider.issuer();
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let proxy = Arc::new(Proxy {
        recorder: recorder.clone(),
        upstream: OnceLock::new(),
        http: reqwest::Client::new(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_resource = format!("http://{}/mcp", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .fallback(forward)
        .with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The upstream: a resource server of the provider, known by the proxy's URL.
    let serve = dir.path().join("serve.toml");
    std::fs::write(
        &serve,
        format!("[auth]\nissuer = \"{issuer}\"\nresource = \"{upstream_resource}\"\n"),
    )
    .unwrap();
    let mut upstream = toolwire(&dir);
    upstream
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&serve);
    let (upstream, upstream_url) =
        tokio::task::spawn_blocking(move || started(upstream, "serving the example tools at "))
            .await
            .unwrap();
    let _ = proxy
        .upstream
        .set(upstream_url.trim_end_matches("/mcp").to_owned());

    let port = free_port();
    let gateway_resource = format!("http://127.0.0.1:{port}/mcp");
    let config = json!({
        "mcpServers": {"upstream": {
            "url": upstream_resource,
            "prefix": "up",
            "oauth": {
                "clientId": EXCHANGER.0,
                "clientSecret": "${EXCHANGER_SECRET}",
                "issuer": issuer,
                // The gateway's own requests (listing) in its own name.
                "grant": "client_credentials",
                "tokenExchange": true,
            },
        }},
        "gateway": {"auth": {"issuer": issuer, "resource": gateway_resource}},
    });
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .env("EXCHANGER_SECRET", EXCHANGER.1)
        .args(["gateway", "--insecure-oauth-http", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(&file);
    let (gateway, url) =
        tokio::task::spawn_blocking(move || started(gateway, "the gateway serves at "))
            .await
            .unwrap();
    Scene {
        provider,
        recorder,
        upstream_resource,
        gateway_resource,
        url,
        _processes: (upstream, gateway),
        _dir: dir,
    }
}

impl Scene {
    /// A caller's token of `client` for the gateway.
    async fn caller(&self, client: (&str, &str)) -> String {
        self.provider
            .token(client, &self.gateway_resource, "tools:read")
            .await
    }

    /// The bearer tokens of the upstream's tools/call requests so far.
    fn call_tokens(&self) -> Vec<String> {
        self.recorder
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(method, _)| method == "tools/call")
            .map(|(_, authorization)| {
                let value = authorization.clone().expect("a call with a credential");
                value.strip_prefix("Bearer ").expect("a bearer").to_owned()
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_is_called_upstream_with_a_token_exchanged_for_its_own() {
    let scene = scene().await;
    let a = scene.caller(("rs-test", "rs-secret")).await;
    let b = scene.caller(("rs-test-2", "rs-secret-2")).await;

    // Three calls of A, one of B: the upstream accepts each exchanged token.
    for n in 0..3 {
        let (echoed, error) = called(
            &scene.url,
            &a,
            "up__echo",
            json!({"message": format!("a{n}")}),
        )
        .await;
        assert!(!error && echoed.contains(&format!("a{n}")), "{echoed}");
    }
    let (echoed, error) = called(&scene.url, &b, "up__echo", json!({"message": "b"})).await;
    assert!(!error && echoed.contains('b'), "{echoed}");

    // One exchange per caller: A's three calls used the one token.
    assert_eq!(scene.provider.exchanges().await, (2, 0));
    let tokens = scene.call_tokens();
    assert_eq!(tokens.len(), 4, "{tokens:?}");
    assert!(tokens[0] == tokens[1] && tokens[1] == tokens[2]);
    assert_ne!(tokens[0], tokens[3], "each caller its own upstream token");
    for (token, sub) in [(&tokens[0], "rs-test"), (&tokens[3], "rs-test-2")] {
        let claims = claims(token);
        assert_eq!(claims["sub"], json!(sub), "{claims}");
        assert_eq!(claims["aud"], json!(scene.upstream_resource), "{claims}");
        assert_eq!(claims["act"]["sub"], json!(EXCHANGER.0), "{claims}");
    }

    // The gateway's own requests (initialize, listing) went in its own name: its client's
    // client-credentials token, acting for nobody.
    let seen = scene.recorder.seen.lock().unwrap().clone();
    for (method, authorization) in seen.iter().filter(|(m, _)| m != "tools/call") {
        if let Some(token) = authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
        {
            let claims = claims(token);
            assert_eq!(claims["sub"], json!(EXCHANGER.0), "{method}: {claims}");
            assert!(claims.get("act").is_none(), "{method}: {claims}");
        }
    }
    // Three calls of a new caller at once wait for one exchange.
    let c = scene
        .provider
        .token(
            ("rs-test", "rs-secret"),
            &scene.gateway_resource,
            "tools:read math",
        )
        .await;
    let one = |n: u32| {
        called(
            &scene.url,
            &c,
            "up__echo",
            json!({"message": format!("c{n}")}),
        )
    };
    let (one, two, three) = tokio::join!(one(0), one(1), one(2));
    for (text, error) in [one, two, three] {
        assert!(!error, "{text}");
    }
    assert_eq!(scene.provider.exchanges().await, (3, 0));

    // No caller's token anywhere in what the upstream got.
    let whole = scene.recorder.whole.lock().unwrap().clone();
    for token in [&a, &b, &c] {
        assert!(
            !whole.iter().any(|request| request.contains(token.as_str())),
            "a caller's token reached the upstream"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_exchange_is_the_callers_error_and_nothing_goes_upstream() {
    let scene = scene().await;
    // A token the gateway accepts (signed by the provider's key, for the gateway) that the
    // provider's token endpoint never issued: the exchange is refused.
    let minted = scene
        .provider
        .post(
            "/__test/mint",
            json!({"claims": {"aud": scene.gateway_resource, "scope": "tools:read"}}),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 0..2 {
        let (text, error) = called(&scene.url, &minted, "up__echo", json!({"message": "x"})).await;
        assert!(error, "{text}");
        assert!(
            text.contains("upstream") && text.contains("invalid_grant"),
            "names the upstream and the server's error: {text}"
        );
    }
    // A resource this client may not have tokens for.
    scene
        .provider
        .post(
            "/__test/resource",
            json!({"resource": scene.upstream_resource, "exchange": false}),
        )
        .await;
    let a = scene.caller(("rs-test", "rs-secret")).await;
    let (text, error) = called(&scene.url, &a, "up__echo", json!({"message": "x"})).await;
    assert!(error && text.contains("invalid_target"), "{text}");
    // A refusal is not cached as a success: each was asked again.
    assert_eq!(scene.provider.exchanges().await, (0, 3));
    assert!(
        scene.call_tokens().is_empty(),
        "no call reached the upstream"
    );
}
