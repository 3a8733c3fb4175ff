//! Audit events end to end: every `tools/call` — completed, failed, unknown, timed out, asking
//! for input, refused for a missing scope — leaves one event with its principal, tool, digests,
//! outcome, latency and trace context, over HTTP and stdio, in a sink and in a JSON Lines file.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::{
    AuditEvent, AuditOutcome, AuditSink, Elicited, InputRequired, JsonlAuditSink, NoArgs,
    RequestContext, Server, Tool, ToolError,
};

use crate::support::*;

#[derive(Default)]
struct Collect(Mutex<Vec<AuditEvent>>);

impl AuditSink for Collect {
    fn record(&self, event: &AuditEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Msg {
    message: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

fn server(sink: Arc<dyn AuditSink>) -> Server {
    Server::builder("audited", "1")
        .tool(
            Tool::new("echo", |m: Msg, _: RequestContext| async move { m.message })
                .description("Echoes"),
        )
        .tool(
            Tool::new("fail", |_: NoArgs, _: RequestContext| async {
                Err::<String, _>(ToolError::failed("no"))
            })
            .description("Fails"),
        )
        .tool(
            Tool::new("slow", |_: NoArgs, _: RequestContext| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            })
            .description("Too slow")
            .timeout(Duration::from_millis(30)),
        )
        .tool(
            Tool::new("ask", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Name>("name")? {
                    Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(n.name),
                    _ => Err(InputRequired::new().elicit::<Name>("name", "Name?").into()),
                }
            })
            .description("Asks"),
        )
        .audit_sink(sink)
        .build()
        .unwrap()
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
}

#[tokio::test]
async fn every_call_leaves_an_event_over_http() {
    let sink = Arc::new(Collect::default());
    let s = TestServer::start(server(sink.clone())).await;
    let mut traced = call(1, "echo", json!({"message": "AKIAIOSFODNN7EXAMPLE hi"}));
    traced["params"]["_meta"]["traceparent"] =
        json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    post(&s.url, &traced).await;
    post(&s.url, &call(2, "fail", json!({}))).await;
    post(&s.url, &call(3, "nope", json!({}))).await;
    post(&s.url, &call(4, "slow", json!({}))).await;
    let mut ask = call(5, "ask", json!({}));
    ask["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    post(&s.url, &ask).await;
    post(&s.url, &request(6, "tools/list", json!({}))).await;

    let events = sink.0.lock().unwrap().clone();
    let seen: Vec<(&str, AuditOutcome, Option<i64>)> = events
        .iter()
        .map(|e| (e.tool.as_str(), e.outcome, e.error_code))
        .collect();
    assert_eq!(
        seen,
        [
            ("echo", AuditOutcome::Complete, None),
            ("fail", AuditOutcome::IsError, None),
            ("nope", AuditOutcome::Error, Some(-32602)),
            ("slow", AuditOutcome::TimedOut, None),
            ("ask", AuditOutcome::InputRequired, None),
        ],
        "one event per tools/call, none for tools/list"
    );
    let echo = &events[0];
    assert_eq!(echo.request_id, "1");
    assert_eq!(
        echo.trace_id.as_deref(),
        Some("0af7651916cd43dd8448eb211c80319c")
    );
    assert_eq!(echo.parent_span_id.as_deref(), Some("b7ad6b7169203331"));
    assert_eq!(echo.arguments_sha256.len(), 64);
    assert_eq!(
        echo.arguments_preview,
        r#"{"message":"[REDACTED:aws-access-key] hi"}"#
    );
    assert_eq!(echo.definition_sha256.as_ref().map(String::len), Some(64));
    assert!(events[2].definition_sha256.is_none(), "an unknown tool");
    assert!(events[3].latency_us >= 30_000, "{}", events[3].latency_us);
    assert!(echo.time.ends_with('Z'), "{}", echo.time);
    s.stop().await;
}

#[tokio::test]
async fn events_over_stdio_reach_a_jsonl_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let sink = Arc::new(JsonlAuditSink::open(&path).unwrap());
    let mut session = StdioSession::start(server(sink.clone()));
    session
        .send(&call(1, "echo", json!({"message": "a"})))
        .await;
    session.recv().await;
    session.send(&call(2, "fail", json!({}))).await;
    session.recv().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.lines().count() >= 2 || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["tool"], "echo");
    assert_eq!(events[0]["outcome"], "complete");
    assert_eq!(events[1]["outcome"], "is_error");
    assert_eq!(sink.dropped(), 0);
}

/// Events carry the calls' arguments: a new audit file is readable by its owner only, from
/// its creation. An existing file keeps the mode its operator gave it (a log shipper may read
/// it).
#[cfg(unix)]
#[test]
fn a_new_jsonl_file_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    drop(JsonlAuditSink::open(&path).unwrap());
    assert_eq!(mode(&path), 0o600);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    drop(JsonlAuditSink::open(&path).unwrap());
    assert_eq!(mode(&path), 0o640, "the operator's choice");
}

/// A call refused for a missing scope, before it runs, is audited too, with its principal.
#[tokio::test]
async fn a_refused_call_is_audited_with_its_principal() {
    use crate::auth::{SigningKey, start_issuer};
    use toolwire_server::http::{HttpConfig, OAuth};
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&key).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let resource = format!("http://{addr}/mcp");
    let sink = Arc::new(Collect::default());
    let server = Server::builder("audited", "1")
        .tool(
            Tool::new("echo", |m: Msg, _: RequestContext| async move { m.message })
                .description("Echoes, needs math")
                .scopes(["math"]),
        )
        .audit_sink(sink.clone())
        .build()
        .unwrap();
    let config = HttpConfig::default().oauth(OAuth::new(issuer.url.clone(), resource.clone()));
    let task = tokio::spawn(toolwire_server::http::serve(
        server.clone(),
        listener,
        config,
    ));
    let s = TestServer::from_parts(server, addr, task);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let token = key.sign(&json!({"iss": issuer.url, "sub": "alice", "aud": resource,
        "scope": "tools:read", "exp": now + 300}));
    let refused = post_with(&s.url, &call(1, "echo", json!({"message": "x"})), |h| {
        h.push(("authorization".into(), format!("Bearer {token}")));
    })
    .await;
    assert_eq!(refused.status, 403);
    let events = sink.0.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].outcome, AuditOutcome::Refused);
    assert_eq!(events[0].error_code, Some(-32600));
    assert_eq!(
        events[0].principal.as_deref(),
        Some(format!("{} alice", issuer.url).as_str())
    );
    s.stop().await;
}
