//! Legacy (2025-11-25, `initialize`-based) clients served from the same tools: the HTTP session
//! lifecycle, input requests put to the client on the reply stream, the session's GET stream,
//! bounds, expiry and principals; the same over stdio. Every message a legacy client receives
//! is checked against the official 2025-11-25 schema, and results must not carry the members
//! only 2026-07-28 clients use.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;
use toolwire_server::protocol::ResourceContents;
use toolwire_server::{
    Elicited, InputRequired, ManualClock, NoArgs, RequestContext, Resource, ServerBuilder,
    TaskSupport, Tool, ToolError, Viewer,
};

use crate::support::{self, StdioSession, TestServer, client, post_raw, request};

const LEGACY: &str = "2025-11-25";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

/// Asks for a name by elicitation, then greets.
pub fn greet() -> Tool {
    Tool::new("greet", |_: NoArgs, ctx: RequestContext| async move {
        match ctx.elicited::<Name>("name")? {
            Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!("Hello, {}!", n.name)),
            Some(_) => Ok("Hello, stranger!".to_owned()),
            None => Err(InputRequired::new()
                .elicit::<Name>("name", "What is your name?")
                .into()),
        }
    })
    .description("Greets after asking a name")
}

/// Asks for roots, then for a name, in two rounds: the server puts each to the client in turn.
fn two_rounds() -> Tool {
    Tool::new("two_rounds", |_: NoArgs, ctx: RequestContext| async move {
        let Some(roots) = ctx.listed_roots("roots")? else {
            return Err(InputRequired::new().list_roots("roots").state("r1").into());
        };
        let state: Option<String> = ctx.request_state()?;
        match ctx.elicited::<Name>("name")? {
            Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!(
                "{} with {} root(s), state {}",
                n.name,
                roots.len(),
                state.unwrap_or_default()
            )),
            _ => Err(InputRequired::new()
                .list_roots("roots")
                .elicit::<Name>("name", "And your name?")
                .state("r2")
                .into()),
        }
    })
    .description("Two rounds of input")
}

fn builder() -> ServerBuilder {
    support::builder()
        .tool(greet())
        .tool(two_rounds())
        .tool(
            Tool::new("slow_task", |_: NoArgs, _: RequestContext| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                "finished"
            })
            .description("May run as a task")
            .task_support(TaskSupport::Optional),
        )
        .resource(
            Resource::new("mem://notes/today", "today", |uri, _| async move {
                Ok::<_, ToolError>(ResourceContents::text(uri, "text/plain", "nothing yet"))
            })
            .description("Today's notes"),
        )
}

/// Checks a message a legacy client receives against the 2025-11-25 schema: a result of
/// `method` against its result type, a request or notification against its own.
fn legacy_check(method: &str, message: &Value) {
    fn schema() -> &'static Value {
        static SCHEMA: OnceLock<Value> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../toolwire-protocol/tests/fixtures/schema-2025-11-25.json"
            );
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        })
    }
    let (definition, instance) = if let Some(m) = message.get("method").and_then(Value::as_str) {
        let def = match m {
            "elicitation/create" => "ElicitRequest",
            "roots/list" => "ListRootsRequest",
            "sampling/createMessage" => "CreateMessageRequest",
            "notifications/tools/list_changed" => "ToolListChangedNotification",
            "notifications/resources/updated" => "ResourceUpdatedNotification",
            "notifications/resources/list_changed" => "ResourceListChangedNotification",
            "notifications/prompts/list_changed" => "PromptListChangedNotification",
            "notifications/progress" => "ProgressNotification",
            "notifications/message" => "LoggingMessageNotification",
            other => panic!("unexpected message {other}"),
        };
        (def, message.clone())
    } else if message.get("error").is_some() {
        ("JSONRPCErrorResponse", message.clone())
    } else {
        let def = match method {
            "initialize" => "InitializeResult",
            "tools/list" => "ListToolsResult",
            "tools/call" => "CallToolResult",
            "resources/list" => "ListResourcesResult",
            "resources/read" => "ReadResourceResult",
            "prompts/list" => "ListPromptsResult",
            _ => "EmptyResult",
        };
        let result = &message["result"];
        for modern in ["resultType", "ttlMs", "cacheScope"] {
            assert!(
                result.get(modern).is_none(),
                "{modern} in a legacy result: {message}"
            );
        }
        assert!(
            result["_meta"]
                .get("io.modelcontextprotocol/serverInfo")
                .is_none(),
            "serverInfo in a legacy result: {message}"
        );
        (def, result.clone())
    };
    let mut root = schema().clone();
    root.as_object_mut()
        .unwrap()
        .insert("$ref".into(), json!(format!("#/$defs/{definition}")));
    let validator = jsonschema::draft202012::options().build(&root).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{definition}: {errors:?} in {message}");
}

fn initialize(id: i64, version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": capabilities,
        "clientInfo": {"name": "legacy-test", "version": "1.0"}
    }})
}

pub fn legacy_request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// What a 2025-11-25 client sends with a message: no `Mcp-Method`, and the session and
/// version headers once it has them.
fn legacy_headers(session: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
    ];
    if let Some(session) = session {
        h.push(("mcp-session-id".into(), session.into()));
        h.push(("mcp-protocol-version".into(), LEGACY.into()));
    }
    h
}

pub async fn legacy_post(url: &str, session: Option<&str>, body: &Value) -> support::Reply {
    let reply = post_raw(url, body.to_string(), &legacy_headers(session)).await;
    let method = body["method"].as_str().unwrap_or_default();
    for message in &reply.messages {
        legacy_check(method, message);
    }
    reply
}

/// Initializes a session; its id.
pub async fn open_session(url: &str, capabilities: Value) -> String {
    let reply = legacy_post(url, None, &initialize(0, LEGACY, capabilities)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = reply.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        legacy_post(url, Some(&session), &initialized).await.status,
        202
    );
    session
}

/// An SSE response read event by event, as a client reads a stream that stays open.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub async fn open(request: reqwest::RequestBuilder) -> SseReader {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        SseReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next message, within 5 s; `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(message) = support::sse_messages(&event).pop() {
                    return Some(message);
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.response.chunk())
                .await
                .expect("an event within 5 s")
                .unwrap()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

pub fn sse_post(url: &str, session: &str, body: &Value) -> reqwest::RequestBuilder {
    let mut request = client().post(url).body(body.to_string());
    for (k, v) in legacy_headers(Some(session)) {
        request = request.header(k, v);
    }
    request
}

#[tokio::test]
async fn an_http_session_from_initialize_to_delete() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let reply = legacy_post(&s.url, None, &initialize(1, "2025-06-18", json!({}))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.last()["result"];
    assert_eq!(
        result["protocolVersion"], "2025-06-18",
        "the client's version when supported"
    );
    assert_eq!(result["serverInfo"]["name"], "test-server");
    assert_eq!(result["instructions"], "Use the tools.");
    assert_eq!(
        result["capabilities"]["tools"],
        json!({"listChanged": true})
    );
    assert_eq!(
        result["capabilities"]["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    assert!(result["capabilities"].get("extensions").is_none());
    let session = reply.headers["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(session.len() >= 32, "unguessable: {session}");

    let other = legacy_post(&s.url, None, &initialize(1, "1999-01-01", json!({}))).await;
    assert_eq!(
        other.last()["result"]["protocolVersion"],
        LEGACY,
        "else ours"
    );
    assert_ne!(
        other.headers["mcp-session-id"],
        reply.headers["mcp-session-id"]
    );

    let list = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(2, "tools/list", json!({})),
    )
    .await;
    assert_eq!(list.status, 200);
    let names: Vec<&str> = list.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"greet") && names.contains(&"echo"),
        "{names:?}"
    );
    let call = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(
            3,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
        ),
    )
    .await;
    assert_eq!(
        call.last()["result"]["structuredContent"],
        json!({"total": 5})
    );
    let read = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(4, "resources/read", json!({"uri": "mem://notes/today"})),
    )
    .await;
    assert_eq!(read.last()["result"]["contents"][0]["text"], "nothing yet");
    let ping = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(5, "ping", json!({})),
    )
    .await;
    assert_eq!(ping.last()["result"], json!({}));
    let gone = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(6, "server/discover", json!({})),
    )
    .await;
    assert_eq!(
        gone.error_code(),
        Some(-32601),
        "2026-07-28 methods are not legacy ones"
    );

    let delete = client()
        .delete(&s.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 200);
    let after = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(7, "tools/list", json!({})),
    )
    .await;
    assert_eq!(after.status, 404, "{}", after.body);
    assert_eq!(after.error_code(), Some(-32001));
    assert_eq!(after.last()["id"], 7);
    let again = client()
        .delete(&s.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    s.stop().await;
}

#[tokio::test]
async fn requests_outside_a_live_session_are_refused_and_modern_ones_stay_modern() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let list = legacy_request(1, "tools/list", json!({}));
    let mut headers = legacy_headers(None);
    headers.push(("mcp-protocol-version".into(), LEGACY.into()));
    let no_session = post_raw(&s.url, list.to_string(), &headers).await;
    assert_eq!(no_session.status, 400, "{}", no_session.body);
    let message = no_session.last()["error"]["message"].as_str().unwrap();
    assert!(message.contains("Mcp-Session-Id"), "{message}");

    let unknown = legacy_post(&s.url, Some("not-a-session"), &list).await;
    assert_eq!(unknown.status, 404);

    let session = open_session(&s.url, json!({})).await;
    let mut bad_version = legacy_headers(Some(&session));
    support::set_header(&mut bad_version, "mcp-protocol-version", Some("1999-01-01"));
    let refused = post_raw(&s.url, list.to_string(), &bad_version).await;
    assert_eq!(refused.status, 400, "{}", refused.body);

    // A 2026-07-28 request is stateless whatever session header it carries (V-07, H-16).
    let modern = request(2, "tools/list", json!({}));
    let reply = support::post_with(&s.url, &modern, |h| {
        h.push(("mcp-session-id".into(), session.clone()))
    })
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.last()["result"]["resultType"], "complete");
    s.stop().await;
}

#[tokio::test]
async fn a_handler_asks_a_legacy_client_for_input_on_the_reply_stream() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let session = open_session(&s.url, json!({"elicitation": {}, "roots": {}})).await;
    let call = legacy_request(
        7,
        "tools/call",
        json!({"name": "two_rounds", "arguments": {}}),
    );
    let mut stream = SseReader::open(sse_post(&s.url, &session, &call)).await;
    let mut asked = Vec::new();
    let result = loop {
        let message = stream
            .next()
            .await
            .expect("the stream ends with the result");
        legacy_check("tools/call", &message);
        if message.get("result").is_some() || message.get("error").is_some() {
            break message;
        }
        let method = message["method"].as_str().unwrap().to_owned();
        let answer = match method.as_str() {
            "roots/list" => json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
            "elicitation/create" => {
                assert_eq!(message["params"]["message"], "And your name?");
                json!({"action": "accept", "content": {"name": "Ada"}})
            }
            other => panic!("unexpected request {other}"),
        };
        asked.push(method);
        let response = json!({"jsonrpc": "2.0", "id": message["id"], "result": answer});
        let posted = legacy_post(&s.url, Some(&session), &response).await;
        assert_eq!(posted.status, 202);
    };
    assert_eq!(
        asked,
        ["roots/list", "elicitation/create", "roots/list"],
        "keys in order, per round"
    );
    assert_eq!(result["id"], 7);
    assert_eq!(
        result["result"]["content"][0]["text"], "Ada with 1 root(s), state r2",
        "the sealed state went round inside the server"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_client_that_refuses_or_lacks_the_capability_gets_a_clear_error() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let session = open_session(&s.url, json!({})).await;
    let call = legacy_request(1, "tools/call", json!({"name": "greet", "arguments": {}}));
    let reply = legacy_post(&s.url, Some(&session), &call).await;
    assert_eq!(reply.error_code(), Some(-32021), "{}", reply.body);
    assert_eq!(
        reply.last()["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {"form": {}}}),
        "the same error a 2026-07-28 client gets"
    );

    let session = open_session(&s.url, json!({"elicitation": {}})).await;
    let mut stream = SseReader::open(sse_post(&s.url, &session, &call)).await;
    let asked = stream.next().await.unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    let refusal =
        json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32603, "message": "no UI"}});
    assert_eq!(
        legacy_post(&s.url, Some(&session), &refusal).await.status,
        202
    );
    let result = stream.next().await.unwrap();
    assert_eq!(result["error"]["code"], -32603);
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("elicitation/create") && message.contains("no UI"),
        "{message}"
    );

    let json_only = client()
        .post(&s.url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", &session)
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let body: Value = json_only.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("text/event-stream"), "{message}");
    s.stop().await;
}

#[tokio::test]
async fn the_session_stream_tells_of_tool_changes_only_those_the_session_sees() {
    // Tools named admin_* are seen only by the client named "console".
    let server = builder()
        .tool_visibility(|viewer: &Viewer<'_>, tool: &str| {
            let console = viewer.client.is_some_and(|c| c.name == "console");
            (tool.starts_with("admin_") && !console).then(|| "for the console only".to_owned())
        })
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let session = open_session(&s.url, json!({})).await;
    let get = client()
        .get(&s.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session);
    let mut stream = SseReader::open(get).await;
    let subscribe = legacy_request(
        1,
        "resources/subscribe",
        json!({"uri": "mem://notes/today"}),
    );
    legacy_post(&s.url, Some(&session), &subscribe).await;
    // Give the stream's task a moment to be waiting on the change bus.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let tool = |name: &str| {
        Tool::new(name, |_: NoArgs, _: RequestContext| async { "x" }).description("Added late")
    };
    // A tool the session cannot see, then an update it follows: the update comes first.
    s.server.add_tool(tool("admin_reset")).unwrap();
    s.server.notify_resource_updated("mem://notes/today");
    let next = stream.next().await.unwrap();
    assert_eq!(
        next["method"], "notifications/resources/updated",
        "told of a tool it cannot see"
    );
    // A tool it sees: told.
    s.server.add_tool(tool("shared")).unwrap();
    let next = stream.next().await.unwrap();
    assert_eq!(next["method"], "notifications/tools/list_changed");
    s.stop().await;
}

#[tokio::test]
async fn the_session_stream_carries_list_changes_and_subscribed_updates() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let session = open_session(&s.url, json!({})).await;
    let get = || {
        client()
            .get(&s.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
    };
    let mut followed = s.server.followed_resources();
    let mut stream = SseReader::open(get()).await;
    let second = get().send().await.unwrap();
    assert_eq!(second.status(), 409, "one stream per session");

    let subscribe = legacy_request(
        1,
        "resources/subscribe",
        json!({"uri": "mem://notes/today"}),
    );
    assert_eq!(
        legacy_post(&s.url, Some(&session), &subscribe).await.last()["result"],
        json!({})
    );
    // While its stream is open here, what the session subscribed to is followed here.
    crate::http_listen::until_followed(&mut followed, &["mem://notes/today"]).await;
    // Give the stream's task a moment to be waiting on the change bus.
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.server.notify_resource_updated("mem://notes/other");
    s.server.notify_resource_updated("mem://notes/today");
    s.server
        .add_tool(
            Tool::new("late", |_: NoArgs, _: RequestContext| async { "late" })
                .description("Added late"),
        )
        .unwrap();
    let updated = stream.next().await.unwrap();
    legacy_check("", &updated);
    assert_eq!(updated["method"], "notifications/resources/updated");
    assert_eq!(
        updated["params"],
        json!({"uri": "mem://notes/today"}),
        "only what it subscribed to"
    );
    let changed = stream.next().await.unwrap();
    legacy_check("", &changed);
    assert_eq!(changed["method"], "notifications/tools/list_changed");

    let unsubscribe = legacy_request(
        2,
        "resources/unsubscribe",
        json!({"uri": "mem://notes/today"}),
    );
    legacy_post(&s.url, Some(&session), &unsubscribe).await;
    crate::http_listen::until_followed(&mut followed, &[]).await;
    s.server.notify_resource_updated("mem://notes/today");
    s.server.remove_tool("late").unwrap();
    let next = stream.next().await.unwrap();
    assert_eq!(
        next["method"], "notifications/tools/list_changed",
        "no update after unsubscribe"
    );

    // DELETE ends the stream, and the following of what the session subscribed to.
    legacy_post(&s.url, Some(&session), &subscribe).await;
    crate::http_listen::until_followed(&mut followed, &["mem://notes/today"]).await;
    client()
        .delete(&s.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.next().await, None);
    crate::http_listen::until_followed(&mut followed, &[]).await;
    s.stop().await;
}

#[tokio::test]
async fn sessions_are_bounded_expire_when_idle_and_belong_to_their_principal() {
    let clock = ManualClock::new(1_000_000);
    let config = HttpConfig::default()
        .max_sessions(2)
        .session_idle_timeout(Duration::from_secs(60))
        .principal(|h| {
            h.get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
    let s = TestServer::start_with(builder().clock(clock.clone()).build().unwrap(), config).await;
    let as_user = |user: &'static str, session: Option<String>, body: Value| {
        let url = s.url.clone();
        async move {
            let mut headers = legacy_headers(session.as_deref());
            headers.push(("x-user".into(), user.into()));
            post_raw(&url, body.to_string(), &headers).await
        }
    };
    let alice = as_user("alice", None, initialize(1, LEGACY, json!({}))).await;
    let alice = alice.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let list = legacy_request(2, "tools/list", json!({}));
    let bob = as_user("bob", Some(alice.clone()), list.clone()).await;
    assert_eq!(
        bob.status, 404,
        "another principal's session is unknown to them"
    );
    assert_eq!(
        as_user("alice", Some(alice.clone()), list.clone())
            .await
            .status,
        200
    );

    as_user("bob", None, initialize(1, LEGACY, json!({}))).await;
    let full = as_user("carol", None, initialize(1, LEGACY, json!({}))).await;
    assert_eq!(full.status, 503, "{}", full.body);
    assert!(full.headers.contains_key("retry-after"));

    clock.advance(59_000);
    assert_eq!(
        as_user("alice", Some(alice.clone()), list.clone())
            .await
            .status,
        200,
        "activity"
    );
    clock.advance(61_000);
    assert_eq!(
        as_user("alice", Some(alice.clone()), list.clone())
            .await
            .status,
        404,
        "idle"
    );
    let room = as_user("carol", None, initialize(1, LEGACY, json!({}))).await;
    assert_eq!(room.status, 200, "expired sessions made room");
    s.stop().await;
}

/// The MCP Inspector declares the 2026-07-28 tasks extension in `initialize`; a legacy session
/// cannot poll `tasks/get`, so a task-capable tool must answer with its result.
#[tokio::test]
async fn a_task_capable_tool_answers_a_legacy_client_with_its_result() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let caps = json!({"roots": {"listChanged": true}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let session = open_session(&s.url, caps).await;
    let call = legacy_request(
        1,
        "tools/call",
        json!({"name": "slow_task", "arguments": {}}),
    );
    let reply = legacy_post(&s.url, Some(&session), &call).await;
    assert_eq!(
        reply.last()["result"]["content"][0]["text"],
        "finished",
        "{}",
        reply.body
    );
    let tasks = legacy_post(
        &s.url,
        Some(&session),
        &legacy_request(2, "tasks/get", json!({"taskId": "x"})),
    )
    .await;
    assert_eq!(tasks.error_code(), Some(-32601));
    s.stop().await;
}

#[tokio::test]
async fn a_modern_only_server_refuses_legacy_clients() {
    let s = TestServer::start(builder().modern_only().build().unwrap()).await;
    let reply = legacy_post(&s.url, None, &initialize(1, LEGACY, json!({}))).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, Some(-32022)),
        "{}",
        reply.body
    );
    assert!(reply.headers.get("mcp-session-id").is_none());
    let get = client()
        .get(&s.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", "x")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);

    let mut stdio = StdioSession::start(builder().modern_only().build().unwrap());
    stdio
        .send_line(&initialize(1, LEGACY, json!({})).to_string())
        .await;
    let refused = stdio.recv().await;
    assert_eq!(refused["error"]["code"], -32022);
    s.stop().await;
}

/// A legacy stdio client: sends lines, reads lines, each checked against 2025-11-25.
struct LegacyStdio {
    session: StdioSession,
}

impl LegacyStdio {
    async fn send(&mut self, message: &Value) {
        self.session.send_line(&message.to_string()).await;
    }

    async fn recv(&mut self, method: &str) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.session.reader.next_line())
            .await
            .expect("a message within 5 s")
            .unwrap()
            .expect("open");
        let message: Value = serde_json::from_str(&line).unwrap();
        legacy_check(method, &message);
        message
    }
}

#[tokio::test]
async fn a_legacy_client_over_stdio() {
    let server = builder().build().unwrap();
    let mut c = LegacyStdio {
        session: StdioSession::start(server.clone()),
    };
    c.send(&legacy_request(1, "tools/list", json!({}))).await;
    assert_eq!(
        c.recv("").await["error"]["code"],
        -32602,
        "nothing before initialize"
    );

    c.send(&initialize(2, "2025-03-26", json!({"elicitation": {}})))
        .await;
    let init = c.recv("initialize").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    c.send(&initialize(3, LEGACY, json!({}))).await;
    assert_eq!(
        c.recv("").await["error"]["code"],
        -32600,
        "initialized once"
    );

    c.send(&legacy_request(4, "tools/list", json!({}))).await;
    assert!(c.recv("tools/list").await["result"]["tools"].is_array());

    c.send(&legacy_request(
        5,
        "tools/call",
        json!({"name": "greet", "arguments": {}}),
    ))
    .await;
    let asked = c.recv("").await;
    assert_eq!(asked["method"], "elicitation/create");
    c.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Grace"}}}))
        .await;
    let greeted = c.recv("tools/call").await;
    assert_eq!(greeted["result"]["content"][0]["text"], "Hello, Grace!");

    c.send(&legacy_request(
        6,
        "logging/setLevel",
        json!({"level": "info"}),
    ))
    .await;
    assert_eq!(c.recv("").await["result"], json!({}));
    c.send(&legacy_request(
        7,
        "tools/call",
        json!({"name": "logs", "arguments": {}}),
    ))
    .await;
    let info = c.recv("").await;
    assert_eq!(
        (info["method"].as_str(), info["params"]["level"].as_str()),
        (Some("notifications/message"), Some("info"))
    );
    assert_eq!(
        c.recv("").await["params"]["level"],
        "error",
        "debug was below the level set"
    );
    assert_eq!(
        c.recv("tools/call").await["result"]["content"][0]["text"],
        "logged"
    );

    c.send(&legacy_request(
        8,
        "resources/subscribe",
        json!({"uri": "mem://notes/today"}),
    ))
    .await;
    assert_eq!(c.recv("").await["result"], json!({}));
    let followed = server.followed_resources().current();
    assert_eq!(
        followed.iter().collect::<Vec<_>>(),
        ["mem://notes/today"],
        "what a legacy connection subscribed to is followed"
    );
    server.notify_resource_updated("mem://notes/today");
    assert_eq!(
        c.recv("").await["method"],
        "notifications/resources/updated"
    );
    server.remove_tool("echo").unwrap();
    assert_eq!(
        c.recv("").await["method"],
        "notifications/tools/list_changed"
    );

    c.send(&legacy_request(
        9,
        "tools/call",
        json!({"name": "progress", "arguments": {}, "_meta": {"progressToken": "p"}}),
    ))
    .await;
    for expected in [1.0, 2.0, 3.0] {
        let progress = c.recv("").await;
        assert_eq!(progress["params"]["progressToken"], "p");
        assert_eq!(progress["params"]["progress"], expected);
    }
    assert_eq!(
        c.recv("tools/call").await["result"]["content"][0]["text"],
        "done"
    );

    c.send(&legacy_request(10, "ping", json!({}))).await;
    assert_eq!(c.recv("").await["result"], json!({}));
    // A 2026-07-28 request on the same connection is served statelessly (V-07).
    c.session.send(&request(11, "tools/list", json!({}))).await;
    assert_eq!(c.session.recv().await["result"]["resultType"], "complete");

    // Cancelling a legacy request: nothing more is written for it.
    c.send(&legacy_request(
        12,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 5000}}),
    ))
    .await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12}}))
        .await;
    assert!(
        c.session.silent_for(300).await,
        "no answer to a cancelled request"
    );
}

#[tokio::test]
async fn a_legacy_server_request_waits_no_longer_than_the_state_lives() {
    let server = builder()
        .request_state_ttl(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut c = LegacyStdio {
        session: StdioSession::start(server),
    };
    c.send(&initialize(1, LEGACY, json!({"elicitation": {}})))
        .await;
    c.recv("initialize").await;
    c.send(&legacy_request(
        2,
        "tools/call",
        json!({"name": "greet", "arguments": {}}),
    ))
    .await;
    assert_eq!(c.recv("").await["method"], "elicitation/create");
    let timed_out = c.recv("tools/call").await;
    let message = timed_out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not answer elicitation/create"),
        "{message}"
    );
}
