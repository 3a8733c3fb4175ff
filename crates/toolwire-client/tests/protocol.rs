//! The client against a scripted HTTP server on 127.0.0.1 that answers what each test needs,
//! including what a correct server never sends: results without or with unknown `resultType`
//! (B-05, B-06), output that breaks its schema (C-04), broken SSE streams (H-27), comment lines
//! (H-28), odd cursors (K-12, K-14), HTTP errors, and endless input requests.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolwire_client::{ClientBuilder, Error};

/// What the scripted server answers.
enum Reply {
    /// A JSON-RPC result for the request's id.
    Result(Value),
    /// A JSON-RPC error for the request's id.
    Error(i64, &'static str, Option<Value>),
    /// A JSON-RPC error with this HTTP status.
    ErrorStatus(u16, i64, &'static str),
    /// An SSE body made of these raw chunks (the stream then ends).
    Sse(Vec<String>),
    /// A plain HTTP answer.
    Status(u16, &'static str),
}

type Script = dyn Fn(&Value, usize) -> Reply + Send + Sync;

/// One request as the scripted server received it.
#[derive(Clone)]
struct Seen {
    headers: HeaderMap,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The scripted server. It only records and answers: a check inside a handler would reach the
/// test as a transport error, which a test expecting an error would take for success. The
/// standard headers (H-22) of every request are checked in the test's own thread when the mock
/// is dropped.
struct Mock {
    requests: Arc<Mutex<Vec<Seen>>>,
    url: String,
}

impl Mock {
    async fn start(script: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> Mock {
        let requests: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let kept = requests.clone();
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let (kept, script) = (kept.clone(), script.clone());
                async move { answer(headers, &body, &kept, &*script) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Mock { requests, url }
    }

    /// Every request received, in order.
    fn all(&self) -> Vec<Seen> {
        self.requests.lock().unwrap().clone()
    }

    fn requests(&self, method: &str) -> Vec<Value> {
        self.all()
            .into_iter()
            .filter(|r| r.body["method"] == method)
            .map(|r| r.body)
            .collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            for seen in self.all() {
                assert_standard_headers(&seen);
            }
        }
    }
}

/// H-22: the standard headers match the body on every 2026-07-28 request.
fn assert_standard_headers(seen: &Seen) {
    let request = &seen.body;
    assert!(
        request.is_object(),
        "the client sent a body that is not a JSON object"
    );
    if request["method"] != "initialize" {
        assert_eq!(seen.header("mcp-method"), request["method"].as_str());
    }
    assert_eq!(
        seen.header("mcp-protocol-version"),
        request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str()
    );
    if request["method"] == "tools/call" {
        assert_eq!(seen.header("mcp-name"), request["params"]["name"].as_str());
    }
    let accept = seen.header("accept").unwrap_or_default();
    assert!(
        accept.contains("application/json") && accept.contains("text/event-stream"),
        "H-21: {accept:?}"
    );
}

fn answer(headers: HeaderMap, body: &str, kept: &Mutex<Vec<Seen>>, script: &Script) -> Response {
    let Ok(request) = serde_json::from_str::<Value>(body) else {
        // Recorded as null, so the test sees that the client sent something that is not JSON.
        kept.lock().unwrap().push(Seen {
            headers,
            body: Value::Null,
        });
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let attempt = {
        let mut kept = kept.lock().unwrap();
        kept.push(Seen {
            headers,
            body: request.clone(),
        });
        kept.iter()
            .filter(|r| r.body["method"] == request["method"])
            .count()
    };
    let id = request["id"].clone();
    match script(&request, attempt) {
        Reply::Result(result) => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        Reply::Error(code, message, data) => axum::Json(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": code, "message": message, "data": data}
        }))
        .into_response(),
        Reply::ErrorStatus(status, code, message) => (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
            ),
        )
            .into_response(),
        Reply::Sse(chunks) => {
            let chunks = chunks
                .into_iter()
                .map(move |c| c.replace("{ID}", &id.to_string()))
                .map(Ok::<_, std::convert::Infallible>);
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(futures::stream::iter(chunks)))
                .unwrap()
        }
        Reply::Status(status, text) => {
            (StatusCode::from_u16(status).unwrap(), text).into_response()
        }
    }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": name, "inputSchema": {"type": "object"}})
}

fn tools_page(names: &[&str], next: Option<&str>) -> Value {
    let mut page = json!({
        "resultType": "complete", "ttlMs": 60_000, "cacheScope": "private",
        "tools": names.iter().map(|n| tool(n)).collect::<Vec<_>>(),
    });
    if let Some(next) = next {
        page["nextCursor"] = json!(next);
    }
    page
}

fn client(url: &str) -> toolwire_client::Client {
    ClientBuilder::new("protocol-test", "1.0")
        .timeout(Duration::from_secs(5))
        .http(url)
        .unwrap()
}

#[tokio::test]
async fn result_type_absent_is_complete_and_unknown_is_refused() {
    let mock = Mock::start(|request, _| match request["params"]["name"].as_str() {
        Some("old") => Reply::Result(json!({"content": [{"type": "text", "text": "legacy"}]})),
        Some("odd") => Reply::Result(json!({"resultType": "partial", "content": []})),
        Some("number") => Reply::Result(json!({"resultType": 5, "content": []})),
        Some("list") => Reply::Result(json!([{"resultType": "complete", "content": []}])),
        _ => Reply::Result(tools_page(&["old", "odd", "number", "list"], None)),
    })
    .await;
    let client = client(&mock.url);
    let old = client.call_tool("old", json!({})).await.unwrap();
    assert!(!old.is_error());
    for name in ["odd", "number"] {
        let odd = client.call_tool(name, json!({})).await.unwrap_err();
        assert!(
            matches!(&odd, Error::InvalidResponse(m) if m.contains("unknown resultType")),
            "{name}: {odd}"
        );
    }
    let list = client.call_tool("list", json!({})).await.unwrap_err();
    assert!(
        matches!(&list, Error::InvalidResponse(m) if m.contains("not an object")),
        "{list}"
    );
}

#[tokio::test]
async fn structured_output_is_checked_against_the_output_schema() {
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("tools/list") => {
            let mut page = tools_page(&[], None);
            page["tools"] = json!([{
                "name": "sum", "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
            }, {
                "name": "sum_missing", "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"sum": {"type": "integer"}}}
            }]);
            Reply::Result(page)
        }
        _ if request["params"]["name"] == "sum" => Reply::Result(json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": "{\"sum\":\"forty-two\"}"}],
            "structuredContent": {"sum": "forty-two"}
        })),
        _ => Reply::Result(json!({"resultType": "complete", "content": []})),
    })
    .await;
    let client = client(&mock.url);
    let error = client.call_tool("sum", json!({})).await.unwrap_err();
    let Error::InvalidOutput(violations) = &error else {
        panic!("expected InvalidOutput, got {error}");
    };
    assert_eq!(violations[0].path, "/sum", "{violations:?}");
    let missing = client
        .call_tool("sum_missing", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::InvalidOutput(_)), "{missing}");
    // Switched off, the caller gets the result as sent.
    let lenient = ClientBuilder::new("protocol-test", "1.0")
        .validate_output(false)
        .http(&mock.url)
        .unwrap();
    assert!(lenient.call_tool("sum", json!({})).await.is_ok());
}

/// `format` in an `outputSchema` is an annotation unless the client asserts it: JSON Schema
/// 2020-12 makes format assertion opt-in.
#[tokio::test]
async fn output_formats_are_asserted_when_asked() {
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("tools/list") => {
            let mut page = tools_page(&[], None);
            page["tools"] = json!([{
                "name": "who", "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
            }]);
            Reply::Result(page)
        }
        _ => Reply::Result(json!({
            "resultType": "complete",
            "content": [{"type": "text", "text": "{\"email\":\"nobody\"}"}],
            "structuredContent": {"email": "nobody"}
        })),
    })
    .await;
    assert!(client(&mock.url).call_tool("who", json!({})).await.is_ok());
    let strict = ClientBuilder::new("protocol-test", "1.0")
        .assert_output_formats(true)
        .http(&mock.url)
        .unwrap();
    let error = strict.call_tool("who", json!({})).await.unwrap_err();
    let Error::InvalidOutput(violations) = &error else {
        panic!("expected InvalidOutput, got {error}");
    };
    assert_eq!(violations[0].path, "/email", "{violations:?}");
}

#[tokio::test]
async fn a_broken_stream_is_reissued_with_a_new_id() {
    let mock = Mock::start(|request, attempt| match request["method"].as_str() {
        Some("tools/list") => Reply::Result(tools_page(&["flaky"], None)),
        _ if attempt == 1 => Reply::Sse(vec![
            ": a comment line is ignored (H-28)\n\n".into(),
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",".into(),
            "\"params\":{\"progressToken\":{ID},\"progress\":1}}\n\n".into(),
        ]),
        _ => Reply::Sse(vec![
            ": keep-alive\n\n".into(),
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":{ID},\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"second time lucky\"}]}}\n\n".into(),
        ]),
    })
    .await;
    let client = client(&mock.url);
    let result = client.call_tool("flaky", json!({})).await.unwrap();
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "second time lucky"
    );
    let calls = mock.requests("tools/call");
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0]["id"], calls[1]["id"], "H-27: a new id");
    assert_eq!(calls[0]["params"]["name"], calls[1]["params"]["name"]);
}

#[tokio::test]
async fn pages_are_walked_with_opaque_cursors() {
    // "" is a valid cursor (K-14); the walk ends only when nextCursor is absent.
    let mock = Mock::start(|request, _| match request["params"]["cursor"].as_str() {
        None => Reply::Result(tools_page(&["a", "b"], Some(""))),
        Some("") => Reply::Result(tools_page(&["c"], Some("opaque/+=="))),
        Some("opaque/+==") => Reply::Result(tools_page(&["d"], None)),
        Some(_) => Reply::Status(400, "unexpected cursor"),
    })
    .await;
    let names: Vec<String> = client(&mock.url)
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn a_repeated_cursor_stops_the_walk() {
    let mock = Mock::start(|_, _| Reply::Result(tools_page(&["a"], Some("same")))).await;
    let error = client(&mock.url).list_tools().await.unwrap_err();
    assert!(
        matches!(&error, Error::InvalidResponse(m) if m.contains("repeated a cursor")),
        "{error}"
    );
    assert_eq!(mock.requests("tools/list").len(), 2);
}

#[tokio::test]
async fn an_invalid_cursor_restarts_from_the_first_page() {
    let refused = Arc::new(AtomicUsize::new(0));
    let count = refused.clone();
    let mock = Mock::start(
        move |request, _| match request["params"]["cursor"].as_str() {
            None => Reply::Result(tools_page(&["a"], Some("expired"))),
            Some("expired") if count.fetch_add(1, Ordering::SeqCst) == 0 => {
                Reply::Error(-32602, "Invalid cursor", None)
            }
            Some(_) => Reply::Result(tools_page(&["b"], None)),
        },
    )
    .await;
    let names: Vec<String> = client(&mock.url)
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        mock.requests("tools/list").len(),
        4,
        "restarted once (K-12)"
    );
}

#[tokio::test]
async fn fresh_lists_come_from_the_cache() {
    let mock = Mock::start(|_, _| Reply::Result(tools_page(&["a"], None))).await;
    let client = client(&mock.url);
    client.list_tools().await.unwrap();
    client.list_tools().await.unwrap();
    // The script answers the call with a page, which has no content: refused as malformed.
    let error = client.call_tool("a", json!({})).await.unwrap_err();
    assert!(
        matches!(&error, Error::InvalidResponse(m) if m.contains("tools/call")),
        "{error}"
    );
    assert_eq!(mock.requests("tools/list").len(), 1, "ttlMs 60000 (K-05)");
    client.invalidate_tools();
    client.list_tools().await.unwrap();
    assert_eq!(mock.requests("tools/list").len(), 2);
}

#[tokio::test]
async fn http_errors_and_silence_are_local_errors() {
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("tools/list") => Reply::Status(500, "upstream exploded"),
        _ => Reply::Sse(vec![": never answers\n\n".into()]),
    })
    .await;
    let client = client(&mock.url);
    let error = client.list_tools().await.unwrap_err();
    assert!(
        matches!(&error, Error::Http { status: 500, body } if body == "upstream exploded"),
        "{error}"
    );
    assert!(error.rpc().is_none(), "not a server JSON-RPC error (E-06)");
    let refused = ClientBuilder::new("protocol-test", "1.0")
        .http("http://127.0.0.1:9/mcp")
        .unwrap()
        .list_tools()
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, Error::Transport(m) if m.contains("onnect")),
        "{refused}"
    );
}

#[tokio::test]
async fn unsupported_version_without_a_mutual_one_is_surfaced() {
    let mock = Mock::start(|_, _| {
        Reply::Error(
            -32022,
            "Unsupported protocol version",
            Some(json!({"supported": ["2099-01-01"], "requested": "2026-07-28"})),
        )
    })
    .await;
    let error = client(&mock.url).discover().await.unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code), Some(-32022), "{error}");
    assert_eq!(mock.requests("server/discover").len(), 1);
}

#[tokio::test]
async fn input_rounds_are_bounded() {
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("tools/list") => Reply::Result(tools_page(&["needy"], None)),
        _ => Reply::Result(json!({
            "resultType": "input_required",
            "inputRequests": {"again": {"method": "elicitation/create", "params": {
                "message": "more?", "requestedSchema": {"type": "object", "properties": {}}
            }}},
            "requestState": "s"
        })),
    })
    .await;
    let client = ClientBuilder::new("protocol-test", "1.0")
        .max_input_rounds(3)
        .on_elicit(|_| async { Ok(toolwire_client::cancelled()) })
        .http(&mock.url)
        .unwrap();
    let error = client.call_tool("needy", json!({})).await.unwrap_err();
    assert!(matches!(error, Error::TooManyRounds(3)), "{error}");
    let calls = mock.requests("tools/call");
    assert_eq!(calls.len(), 4);
    // Every retry: a new id, the original arguments, the answers and the state (M-12, M-13).
    let mut ids: Vec<String> = calls.iter().map(|c| c["id"].to_string()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    assert!(calls[0]["params"].get("requestState").is_none());
    assert_eq!(calls[3]["params"]["requestState"], "s");
    assert_eq!(
        calls[3]["params"]["inputResponses"]["again"]["action"],
        "cancel"
    );
}

#[tokio::test]
async fn a_modern_400_is_not_taken_for_a_legacy_server() {
    // A 400 whose body is not a modern error looks legacy (V-12); the client tries initialize,
    // which this 2026-07-28 server refuses (404, -32601), so the original error stands.
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("initialize") => Reply::ErrorStatus(404, -32601, "Method not found"),
        Some("tools/list") => Reply::ErrorStatus(400, -32602, "Invalid params"),
        _ => Reply::Result(json!({"resultType": "complete", "content": []})),
    })
    .await;
    let client = client(&mock.url);
    let error = client.list_tools().await.unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code), Some(-32602), "{error}");
    assert_eq!(mock.requests("initialize").len(), 1);
    assert!(matches!(
        client.era(),
        Some(toolwire_client::ServerEra::Modern { .. })
    ));
    // Settled: no second initialize.
    let again = client.list_tools().await.unwrap_err();
    assert_eq!(again.rpc().map(|e| e.code), Some(-32602), "{again}");
    assert_eq!(mock.requests("initialize").len(), 1);
}

#[tokio::test]
async fn tool_arguments_must_be_an_object() {
    let mock = Mock::start(|_, _| Reply::Result(tools_page(&["a"], None))).await;
    let error = client(&mock.url)
        .call_tool("a", json!([1, 2]))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidArguments(_)), "{error}");
    assert!(mock.requests("tools/call").is_empty(), "nothing was sent");
}

#[tokio::test]
async fn credentials_travel_with_every_request() {
    let mock = Mock::start(|request, _| match request["method"].as_str() {
        Some("tools/list") => Reply::Result(tools_page(&["a"], None)),
        _ => Reply::Result(json!({"resultType": "complete", "content": []})),
    })
    .await;
    let client = ClientBuilder::new("with-credentials", "1.0")
        .bearer_token("s3cret")
        .header("X-Api-Key", "k-123")
        .http(&mock.url)
        .unwrap();
    client.call_tool("a", json!({})).await.unwrap();
    let seen = mock.all();
    let methods: Vec<&str> = seen
        .iter()
        .map(|s| s.body["method"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(methods, ["tools/list", "tools/call"]);
    for request in &seen {
        assert_eq!(request.header("authorization"), Some("Bearer s3cret"));
        assert_eq!(request.header("x-api-key"), Some("k-123"));
    }
    // A header that cannot be sent is refused up front.
    let bad = ClientBuilder::new("x", "1")
        .header("bad header", "v")
        .http(&mock.url);
    assert!(
        matches!(&bad, Err(Error::Transport(m)) if m.contains("bad header name")),
        "{bad:?}"
    );
}

#[tokio::test]
async fn a_dropped_listen_stream_reconnects() {
    // The first listen stream is acknowledged, carries one change, then ends without a result
    // (an unexpected drop, L-11); the second one carries two, which merge while waiting (the
    // subscriber re-lists once for both), and ends too.
    let mock = Mock::start(|request, attempt| {
        let ack = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":{ID}},\"notifications\":{\"toolsListChanged\":true}}}\n\n";
        let changed = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":{ID}}}}\n\n";
        match (request["method"].as_str(), attempt) {
            (Some("subscriptions/listen"), 1) => Reply::Sse(vec![ack.into(), changed.into()]),
            (Some("subscriptions/listen"), _) => Reply::Sse(vec![ack.into(), changed.into(), changed.into()]),
            _ => Reply::Result(json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": true}}, "ttlMs": 0, "cacheScope": "public"
            })),
        }
    })
    .await;
    let client = client(&mock.url);
    let mut subscription = client
        .listen(toolwire_client::protocol::SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let next = tokio::time::timeout(Duration::from_secs(5), subscription.next())
            .await
            .expect("within 5 s")
            .expect("open")
            .unwrap();
        seen.push(next);
    }
    use toolwire_client::Notification::{Reconnected, ToolsListChanged};
    assert_eq!(seen, [ToolsListChanged, Reconnected, ToolsListChanged]);
    let listens = mock.requests("subscriptions/listen");
    assert!(listens.len() >= 2);
    assert_ne!(listens[0]["id"], listens[1]["id"]);
    assert_eq!(
        listens[1]["params"]["notifications"]["toolsListChanged"],
        true
    );
}

#[tokio::test]
async fn close_escalates_to_sigterm_and_sigkill() {
    // A "server" that ignores both the end of its stdin and SIGTERM (S-09).
    let client = ClientBuilder::new("x", "1")
        .shutdown_grace(Duration::from_millis(200))
        .spawn("sh", ["-c", "trap '' TERM; while :; do sleep 0.05; done"])
        .await
        .unwrap();
    let pid = client.server_pid().await.expect("running");
    let started = std::time::Instant::now();
    client.close().await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "waited twice"
    );
    assert_eq!(client.server_pid().await, None);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "killed and reaped"
    );
}
