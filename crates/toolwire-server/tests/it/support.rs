//! Test support: a fixture server with tools for every path, HTTP and stdio clients, and a
//! check of every received message against the official 2026-07-28 JSON Schema.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolwire_server::protocol::{CallToolResult, ContentBlock, LoggingLevel};
use toolwire_server::{
    NoArgs, RequestContext, Server, ServerBuilder, Structured, Tool, ToolError, http,
};

pub const VERSION: &str = "2026-07-28";

/// How many handlers saw their cancellation token fire.
pub static CANCELLED: AtomicUsize = AtomicUsize::new(0);

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Person {
    pub name: String,
    pub age: u8,
    pub address: Address,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Address {
    pub city: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Sum {
    pub total: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Pair {
    pub a: i64,
    pub b: i64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Sleep {
    pub ms: u64,
    #[serde(default)]
    pub progress: bool,
}

/// Tools covering every outcome a call can have.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new("echo", |p: Person, _: RequestContext| async move {
            format!("{} ({}) from {}", p.name, p.age, p.address.city)
        })
        .description("Echoes a person"),
        Tool::new("add", |p: Pair, _: RequestContext| async move { Structured(Sum { total: p.a + p.b }) })
            .description("Adds two integers, structured"),
        Tool::raw(
            "bad_output",
            json!({"type": "object"}),
            |_, _| async { toolwire_server::structured_result(json!({"total": "not a number"})) },
        )
        .output_schema(json!({"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}))
        .description("Returns structured output that breaks its own outputSchema"),
        Tool::new("panics", |_: NoArgs, _: RequestContext| async {
            if true {
                panic!("secret internal detail");
            }
            "unreachable"
        })
        .description("Panics"),
        Tool::new("internal", |_: NoArgs, _: RequestContext| async {
            Err::<String, _>(ToolError::internal("database password is hunter2"))
        })
        .description("Fails internally"),
        Tool::new("fails", |_: NoArgs, _: RequestContext| async {
            Err::<String, _>(ToolError::failed("the date must be in the future"))
        })
        .description("Fails with a message for the model"),
        Tool::new("needs_sampling", |_: NoArgs, ctx: RequestContext| async move {
            ctx.require_sampling()?;
            Ok::<_, ToolError>("sampling declared")
        })
        .description("Needs sampling"),
        Tool::new("sleep", |s: Sleep, ctx: RequestContext| async move {
            let token = ctx.cancellation().clone();
            let _count = scopeguard(move || {
                if token.is_cancelled() {
                    CANCELLED.fetch_add(1, Ordering::SeqCst);
                }
            });
            if s.progress {
                ctx.progress(0.0, None, Some("started")).await;
            }
            tokio::time::sleep(Duration::from_millis(s.ms)).await;
            format!("slept {} ms", s.ms)
        })
        .description("Sleeps, optionally reporting progress first"),
        Tool::new("progress", |_: NoArgs, ctx: RequestContext| async move {
            for p in [1.0, 1.0, 2.0, 3.0] {
                ctx.progress(p, Some(3.0), None).await;
            }
            "done"
        })
        .description("Reports progress 1, 1 (dropped), 2, 3"),
        Tool::new("logs", |_: NoArgs, ctx: RequestContext| async move {
            for level in [LoggingLevel::Debug, LoggingLevel::Info, LoggingLevel::Error] {
                ctx.log(level, Some("test"), json!({"level": format!("{level:?}")})).await;
            }
            "logged"
        })
        .description("Logs at debug, info and error"),
        Tool::raw(
            "headers",
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "debug": {"type": "boolean", "x-mcp-header": "Debug"}
            }}),
            |args, _| async move { CallToolResult::new(vec![ContentBlock::text(args.to_string())]) },
        )
        .description("Mirrors parameters into headers"),
    ]
}

/// Calls `f` when dropped.
pub fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f()
            }
        }
    }
    Guard(Some(f))
}

pub fn builder() -> ServerBuilder {
    Server::builder("test-server", "1.2.3")
        .instructions("Use the tools.")
        .logging(true)
        .tools(tools())
}

/// A running HTTP server on 127.0.0.1 port 0.
pub struct TestServer {
    pub server: Server,
    pub url: String,
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub async fn start(server: Server) -> TestServer {
        Self::start_with(server, http::HttpConfig::default()).await
    }

    pub async fn start_with(server: Server, config: http::HttpConfig) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(http::serve(server.clone(), listener, config));
        TestServer {
            server,
            url: format!("http://{addr}/mcp"),
            addr,
            task,
        }
    }

    /// A server already started on `addr` by `task`.
    pub fn from_parts(
        server: Server,
        addr: std::net::SocketAddr,
        task: tokio::task::JoinHandle<std::io::Result<()>>,
    ) -> TestServer {
        TestServer {
            server,
            url: format!("http://{addr}/mcp"),
            addr,
            task,
        }
    }

    /// Shuts the server down and waits for it to stop.
    pub async fn stop(self) {
        self.server.shutdown();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("server stops")
            .unwrap()
            .unwrap();
    }
}

pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolwire-tests", "version": "0"},
    })
}

/// A request with standard `_meta` merged into `params`.
pub fn request(id: i64, method: &str, params: Value) -> Value {
    let mut params = params;
    let obj = params.as_object_mut().expect("params object");
    let mut m = meta();
    if let Some(Value::Object(extra)) = obj.remove("_meta") {
        m.as_object_mut().unwrap().extend(extra);
    }
    obj.insert("_meta".into(), m);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The standard headers for a request body (H-22).
pub fn standard_headers(body: &Value) -> Vec<(String, String)> {
    let method = body["method"].as_str().unwrap_or_default();
    let mut h = vec![
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("mcp-protocol-version".into(), VERSION.into()),
        ("mcp-method".into(), method.into()),
    ];
    let params = &body["params"];
    let name = match method {
        "resources/read" => params["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => params["taskId"].as_str(),
        _ => params["name"].as_str(),
    };
    if let Some(name) = name {
        h.push(("mcp-name".into(), name.into()));
    }
    h
}

/// An HTTP reply: status, headers, and the messages it carried (JSON or SSE).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
    pub messages: Vec<Value>,
}

impl Reply {
    pub fn is_sse(&self) -> bool {
        self.headers
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"))
    }

    /// The last message (the response).
    pub fn last(&self) -> &Value {
        self.messages.last().expect("a message")
    }

    pub fn error_code(&self) -> Option<i64> {
        self.last()["error"]["code"].as_i64()
    }
}

pub fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(reqwest::Client::new)
}

/// POSTs raw bytes with the given headers.
pub async fn post_raw(
    url: &str,
    body: impl Into<reqwest::Body>,
    headers: &[(String, String)],
) -> Reply {
    let mut req = client().post(url).body(body);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap();
    let is_sse = headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    let messages = if is_sse {
        sse_messages(&body)
    } else if body.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON body ({e}): {body}"))]
    };
    Reply {
        status,
        headers,
        body,
        messages,
    }
}

/// POSTs a message with standard headers adjusted by `edit`, and checks every message received
/// against the official schema.
pub async fn post_with(
    url: &str,
    body: &Value,
    edit: impl FnOnce(&mut Vec<(String, String)>),
) -> Reply {
    let mut headers = standard_headers(body);
    edit(&mut headers);
    let reply = post_raw(url, body.to_string(), &headers).await;
    let method = body["method"].as_str().unwrap_or_default();
    for message in &reply.messages {
        wire::check(method, message);
    }
    reply
}

/// POSTs a message with standard headers.
pub async fn post(url: &str, body: &Value) -> Reply {
    post_with(url, body, |_| {}).await
}

/// Replaces (or with `None` removes) a header.
pub fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: Option<&str>) {
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    if let Some(v) = value {
        headers.push((name.to_owned(), v.to_owned()));
    }
}

/// The `data:` payloads of an SSE body, parsed. Comment lines are skipped.
pub fn sse_messages(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                })
                .collect();
            (!data.is_empty())
                .then(|| serde_json::from_str(&data.join("\n")).expect("SSE data is JSON"))
        })
        .collect()
}

/// A stdio session over an in-memory pipe with `serve_io` on the other end.
/// A stdio connection in memory. Every message received is checked against the official
/// schema, for the method of the request it answers or accompanies.
pub struct StdioSession {
    pub writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    pub reader: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    pub task: tokio::task::JoinHandle<toolwire_server::Result<()>>,
    /// The methods of the requests sent and not yet answered, by id (as JSON text), oldest
    /// first: a duplicate id in flight is refused with an error, so a result answers the oldest.
    methods: std::collections::HashMap<String, std::collections::VecDeque<String>>,
}

impl StdioSession {
    pub fn start(server: Server) -> StdioSession {
        let (client, server_end) = tokio::io::duplex(64 * 1024);
        let (sr, sw) = tokio::io::split(server_end);
        let task = tokio::spawn(toolwire_server::stdio::serve_io(server, sr, sw));
        let (cr, cw) = tokio::io::split(client);
        StdioSession {
            writer: cw,
            reader: BufReader::new(cr).lines(),
            task,
            methods: Default::default(),
        }
    }

    pub async fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
    }

    pub async fn send(&mut self, message: &Value) {
        if let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) {
            let pending = self.methods.entry(id.to_string()).or_default();
            pending.push_back(method.to_owned());
        }
        self.send_line(&message.to_string()).await;
    }

    /// The next message, within 5 s, checked against the official schema.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.reader.next_line())
            .await
            .expect("a message within 5 s")
            .unwrap()
            .expect("the stream is open");
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        // Notifications are checked by their own method; responses by their request's.
        let pending = message
            .get("id")
            .and_then(|id| self.methods.get_mut(&id.to_string()));
        let method = match pending {
            Some(pending) if message.get("error").is_some() => pending.pop_back(),
            Some(pending) => pending.pop_front(),
            None => None,
        };
        wire::check(method.as_deref().unwrap_or(""), &message);
        message
    }

    /// Whether nothing arrives within `ms`.
    pub async fn silent_for(&mut self, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), self.reader.next_line())
            .await
            .is_err()
    }
}

/// Validation against the official schema of 2026-07-28.
pub mod wire {
    use super::*;

    fn schema() -> &'static Value {
        static SCHEMA: OnceLock<Value> = OnceLock::new();
        SCHEMA.get_or_init(|| {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../toolwire-protocol/tests/fixtures/schema-2026-07-28.json"
            );
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
        })
    }

    fn validator(def: &str) -> Arc<jsonschema::Validator> {
        static CACHE: OnceLock<
            std::sync::Mutex<std::collections::HashMap<String, Arc<jsonschema::Validator>>>,
        > = OnceLock::new();
        let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
        cache
            .entry(def.to_owned())
            .or_insert_with(|| {
                let mut root = schema().clone();
                root.as_object_mut()
                    .unwrap()
                    .insert("$ref".into(), json!(format!("#/$defs/{def}")));
                Arc::new(jsonschema::draft202012::options().build(&root).unwrap())
            })
            .clone()
    }

    /// The schema definition a message answering or accompanying `method` must satisfy.
    fn definition(method: &str, message: &Value) -> &'static str {
        if let Some(m) = message.get("method").and_then(Value::as_str) {
            return match m {
                "notifications/progress" => "ProgressNotification",
                "notifications/message" => "LoggingMessageNotification",
                "notifications/tools/list_changed" => "ToolListChangedNotification",
                "notifications/subscriptions/acknowledged" => {
                    "SubscriptionsAcknowledgedNotification"
                }
                "notifications/cancelled" => "CancelledNotification",
                "notifications/prompts/list_changed" => "PromptListChangedNotification",
                "notifications/resources/list_changed" => "ResourceListChangedNotification",
                "notifications/resources/updated" => "ResourceUpdatedNotification",
                other => panic!("unexpected notification {other}"),
            };
        }
        if let Some(code) = message["error"]["code"].as_i64() {
            return match code {
                -32020 => "HeaderMismatchError",
                -32021 => "MissingRequiredClientCapabilityError",
                -32022 => "UnsupportedProtocolVersionError",
                _ => "JSONRPCErrorResponse",
            };
        }
        match method {
            "server/discover" => "DiscoverResultResponse",
            "tools/list" => "ListToolsResultResponse",
            "tools/call" => "CallToolResultResponse",
            "subscriptions/listen" => "SubscriptionsListenResultResponse",
            "prompts/list" => "ListPromptsResultResponse",
            "prompts/get" => "GetPromptResultResponse",
            "resources/list" => "ListResourcesResultResponse",
            "resources/templates/list" => "ListResourceTemplatesResultResponse",
            "resources/read" => "ReadResourceResultResponse",
            "completion/complete" => "CompleteResultResponse",
            _ => "JSONRPCResultResponse",
        }
    }

    /// Panics unless `message` is valid for its kind.
    pub fn check(method: &str, message: &Value) {
        let def = definition(method, message);
        let errors: Vec<String> = validator(def)
            .iter_errors(message)
            .map(|e| format!("{} at {}", e, e.instance_path().as_str()))
            .collect();
        assert!(errors.is_empty(), "{def} invalid: {errors:?}\n{message}");
        if message.get("result").is_some() {
            assert!(
                message["result"]["resultType"].is_string(),
                "resultType on every result (B-04): {message}"
            );
        }
    }
}
