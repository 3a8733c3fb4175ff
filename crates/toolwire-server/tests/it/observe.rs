//! Metrics and health end to end, as an operator meets them: `/metrics` scraped over HTTP after
//! real calls (labels, refusals, the cardinality bound), `/healthz`, and `/readyz` with a store
//! that goes away and comes back. Prometheus's own checker reads a real scrape of
//! `toolwire serve` in the CLI's tests/system_parts/metrics.rs.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;
use toolwire_server::observe::{Metrics, admin_router};
use toolwire_server::{NoArgs, RateLimit, RequestContext, Server, Tool};

use crate::support::*;

/// A server with metrics, its admin endpoints on the MCP address.
async fn observed(builder: toolwire_server::ServerBuilder) -> TestServer {
    let server = builder.metrics(Metrics::new()).build().unwrap();
    TestServer::start_with(server, HttpConfig::default().admin_endpoints(true)).await
}

/// `GET path` on the test server: status, content type and body.
async fn get(server: &TestServer, path: &str) -> (u16, String, String) {
    let response = client()
        .get(format!("http://{}{path}", server.addr))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.text().await.unwrap())
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

/// The value of the sample `line` starts with (name and labels), if it is there.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

const ADD_OK: &str = r#"mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="add",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp"}"#;

#[tokio::test]
async fn a_call_is_counted_under_its_method_tool_error_and_transport() {
    let server = observed(builder()).await;
    for id in 1..=3 {
        let reply = post(&server.url, &call(id, "add", json!({"a": 2, "b": 3}))).await;
        assert_eq!(reply.error_code(), None, "{:?}", reply.last());
    }
    post(&server.url, &call(4, "fails", json!({}))).await;
    post(&server.url, &call(5, "no such tool", json!({}))).await;
    post(&server.url, &request(6, "tools/list", json!({}))).await;
    let (status, content_type, text) = get(&server, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(sample(&text, ADD_OK), Some(3.0), "{text}");
    let failed = r#"mcp_server_operation_duration_seconds_count{error_type="tool_error",gen_ai_tool_name="fails",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp"}"#;
    assert_eq!(sample(&text, failed), Some(1.0), "{text}");
    let unknown = r#"mcp_server_operation_duration_seconds_count{error_type="-32602",gen_ai_tool_name="_unknown",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp"}"#;
    assert_eq!(sample(&text, unknown), Some(1.0), "{text}");
    let listed = r#"mcp_server_operation_duration_seconds_count{error_type="",gen_ai_tool_name="",mcp_method_name="tools/list",mcp_protocol_version="2026-07-28",network_transport="tcp"}"#;
    assert_eq!(sample(&text, listed), Some(1.0), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn a_call_over_stdio_is_counted_as_pipe() {
    let server = builder().metrics(Metrics::new()).build().unwrap();
    let mut session = StdioSession::start(server.clone());
    session.send(&call(1, "add", json!({"a": 1, "b": 1}))).await;
    session.recv().await;
    let text = server.metrics().unwrap().encode();
    let series = ADD_OK.replace("\"tcp\"", "\"pipe\"");
    assert_eq!(sample(&text, &series), Some(1.0), "{text}");
}

#[tokio::test]
async fn a_refused_call_is_counted_under_its_reason() {
    let scarce = Tool::new("scarce", |_: NoArgs, _: RequestContext| async { "pong" })
        .rate_limit(RateLimit::per_minute(1));
    let server = observed(Server::builder("limited", "1").tool(scarce)).await;
    post(&server.url, &call(1, "scarce", json!({}))).await;
    let refused = post(&server.url, &call(2, "scarce", json!({}))).await;
    assert_eq!(refused.last()["result"]["isError"], true);
    let (_, _, text) = get(&server, "/metrics").await;
    let line = r#"toolwire_refusals_total{reason="rate_limit"}"#;
    assert_eq!(sample(&text, line), Some(1.0), "{text}");
    let limited = r#"mcp_server_operation_duration_seconds_count{error_type="tool_error",gen_ai_tool_name="scarce""#;
    assert!(text.contains(limited), "{text}");
    server.stop().await;
}

/// A call of a tool the server's visibility hides from the caller, and a prompt it hides, are
/// counted as refused by policy.
#[tokio::test]
async fn a_visibility_refusal_is_counted_as_policy() {
    struct Hidden;
    impl toolwire_server::ToolVisibility for Hidden {
        fn check<'a>(&'a self, _: toolwire_server::Viewer<'a>) -> toolwire_server::ToolCheck<'a> {
            Box::new(|tool| (tool == "secret").then(|| "not yours".to_owned()))
        }
        fn check_offers<'a>(
            &'a self,
            _: toolwire_server::Viewer<'a>,
            _: toolwire_server::OfferKind,
        ) -> toolwire_server::ToolCheck<'a> {
            Box::new(|key| (key == "playbook").then(|| "not yours".to_owned()))
        }
    }
    let secret = Tool::new("secret", |_: NoArgs, _: RequestContext| async { "s3cret" });
    let playbook = toolwire_server::Prompt::new("playbook", |_, _: RequestContext| async {
        Ok::<_, toolwire_server::ToolError>("steps".to_owned())
    });
    let server = observed(
        Server::builder("hiding", "1")
            .tool(secret)
            .prompt(playbook)
            .tool_visibility(Hidden),
    )
    .await;
    let refused = post(&server.url, &call(1, "secret", json!({}))).await;
    assert_eq!(refused.error_code(), Some(-32602));
    let got = post(
        &server.url,
        &request(2, "prompts/get", json!({"name": "playbook"})),
    )
    .await;
    assert_eq!(got.error_code(), Some(-32602));
    let (_, _, text) = get(&server, "/metrics").await;
    let line = r#"toolwire_refusals_total{reason="policy"}"#;
    assert_eq!(sample(&text, line), Some(2.0), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn a_flood_is_counted_under_its_reason() {
    let server = builder().metrics(Metrics::new()).build().unwrap();
    let config = HttpConfig::default()
        .admin_endpoints(true)
        .flood_limit(RateLimit::per_minute(2));
    let server = TestServer::start_with(server, config).await;
    for id in 1..=3 {
        post(&server.url, &request(id, "tools/list", json!({}))).await;
    }
    let text = server.server.metrics().unwrap().encode();
    assert_eq!(
        sample(&text, r#"toolwire_refusals_total{reason="flood"}"#),
        Some(1.0),
        "{text}"
    );
    server.stop().await;
}

/// Caller-chosen tool names never become label values: 1,000 random names make one series.
#[tokio::test]
async fn a_thousand_random_tool_names_add_one_series() {
    let server = builder().metrics(Metrics::new()).build().unwrap();
    let before = series_count(&server);
    for n in 0..1_000u32 {
        let name = format!("tool-{:08x}", n.wrapping_mul(2_654_435_761));
        let message = call(i64::from(n), &name, json!({}));
        server.handle_message(message.to_string().as_bytes()).await;
    }
    let text = server.metrics().unwrap().encode();
    assert_eq!(series_count(&server), before + 1, "{text}");
    let unknown = r#"mcp_server_operation_duration_seconds_count{error_type="-32602",gen_ai_tool_name="_unknown",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="pipe"}"#;
    assert_eq!(sample(&text, unknown), Some(1000.0), "{text}");
    assert!(!text.contains("tool-"), "a caller's name became a label");
}

fn series_count(server: &Server) -> usize {
    server
        .metrics()
        .unwrap()
        .encode()
        .lines()
        .filter(|l| l.starts_with("mcp_server_operation_duration_seconds_count"))
        .count()
}

#[tokio::test]
async fn healthz_is_ok_and_the_endpoints_are_off_unless_asked() {
    let server = observed(builder()).await;
    assert_eq!(
        get(&server, "/healthz").await,
        (200, "text/plain; charset=utf-8".into(), "ok".into())
    );
    server.stop().await;
    let plain = TestServer::start(builder().metrics(Metrics::new()).build().unwrap()).await;
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(get(&plain, path).await.0, 404, "{path}");
    }
    plain.stop().await;
}

#[tokio::test]
async fn readyz_says_which_part_is_not_ready() {
    let server = observed(Server::builder("empty", "1")).await;
    let (status, content_type, body) = get(&server, "/readyz").await;
    assert_eq!((status, content_type.as_str()), (503, "application/json"));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["notReady"][0]["part"], "tools");
    server
        .server
        .add_tool(Tool::new("ping", |_: NoArgs, _: RequestContext| async {
            "pong"
        }))
        .unwrap();
    let (status, _, body) = get(&server, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, r#"{"ready":true}"#));
    server.stop().await;
}

#[tokio::test]
async fn the_admin_router_serves_on_an_address_of_its_own() {
    let server = builder().metrics(Metrics::new()).build().unwrap();
    let message = call(1, "add", json!({"a": 2, "b": 3})).to_string();
    server.handle_message(message.as_bytes()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admin = tokio::spawn(axum::serve(listener, admin_router(server.clone())).into_future());
    let body = client()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("# TYPE mcp_server_operation_duration_seconds histogram"),
        "{body}"
    );
    admin.abort();
}

#[cfg(all(feature = "redis", feature = "contract-tests"))]
#[tokio::test]
async fn readyz_is_503_with_the_store_gone_and_200_when_it_is_back() {
    use toolwire_testkit::RedisServer;
    let mut redis = RedisServer::start();
    let store = toolwire_server::Store::redis(&redis.url)
        .unwrap()
        .timeout(Duration::from_millis(500));
    let server = observed(builder().store(store)).await;
    let (status, _, body) = get(&server, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, r#"{"ready":true}"#));
    redis.stop();
    let (status, _, body) = get(&server, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let parsed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(parsed["notReady"][0]["part"], "store", "{body}");
    assert!(!body.contains("redis://"), "the store's URL in {body}");
    assert!(
        parsed["notReady"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("the shared state store does not answer"),
        "{body}"
    );
    redis.restart();
    // The connection is made again by the next calls after the one that finds it broken.
    let mut answers = Vec::new();
    for _ in 0..20 {
        let (status, _, body) = get(&server, "/readyz").await;
        if status == 200 {
            assert_eq!(body, r#"{"ready":true}"#);
            break;
        }
        answers.push(body);
    }
    assert!(answers.len() < 20, "still not ready: {answers:?}");
    let text = server.server.metrics().unwrap().encode();
    assert!(
        sample(&text, r#"toolwire_store_failures_total{operation="ping"}"#) >= Some(1.0),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn what_the_output_guard_changes_is_counted_by_kind() {
    let loud = Tool::new("loud", |_: NoArgs, _: RequestContext| async {
        "\u{1b}[31mred\u{1b}[0m"
    });
    let server = Server::builder("guarded", "1")
        .tool(loud)
        .metrics(Metrics::new())
        .build()
        .unwrap();
    let message = call(1, "loud", json!({})).to_string();
    server.handle_message(message.as_bytes()).await;
    let text = server.metrics().unwrap().encode();
    let line = r#"toolwire_output_guard_actions_total{action="controls_removed"}"#;
    assert_eq!(sample(&text, line), Some(1.0), "{text}");
    let line = r#"toolwire_output_guard_actions_total{action="secrets_redacted"}"#;
    assert_eq!(sample(&text, line), Some(0.0), "{text}");
}
