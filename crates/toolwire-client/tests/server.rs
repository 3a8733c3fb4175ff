//! End to end over Streamable HTTP against a real Toolwire server on 127.0.0.1: tools, structured
//! output, MRTR rounds, progress with timeouts that reset (P-07), cancellation reaching the
//! handler (H-26), header mirroring and the re-list on -32020 (H-24, H-25), listen with cache
//! invalidation (K-09), stale lists on failure (K-07), and logs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolwire_client::protocol::{LoggingLevel, SubscriptionFilter};
use toolwire_client::{
    CallOptions, CancellationToken, ClientBuilder, Error, Notification, ServerEra,
};
use toolwire_server::{
    Elicited, InputRequired, NoArgs, RequestContext, Server, Structured, Tool, ToolError, http,
};

#[derive(Deserialize, schemars::JsonSchema)]
struct Echo {
    message: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Sum {
    sum: i64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Slow {
    /// Progress steps, 50 ms apart.
    steps: u32,
}

/// Whether the slow tool saw its request cancelled, and how many times it ran.
#[derive(Default)]
struct Observed {
    cancelled: AtomicBool,
    runs: AtomicUsize,
}

/// Records, when the handler ends, whether its request was cancelled.
struct SeesCancellation(Arc<Observed>, CancellationToken);

impl Drop for SeesCancellation {
    fn drop(&mut self) {
        if self.1.is_cancelled() {
            self.0.cancelled.store(true, Ordering::SeqCst);
        }
    }
}

fn region_tool(header: &str) -> Tool {
    Tool::raw(
        "deploy",
        json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": header}},
            "required": ["region"]
        }),
        |args: Value, _| async move {
            format!("deployed to {}", args["region"].as_str().unwrap_or("?"))
        },
    )
    .description("Deploys to a region")
}

fn server(observed: Arc<Observed>) -> Server {
    Server::builder("e2e", "1.0")
        .logging(true)
        .list_ttl(Duration::from_secs(60))
        .tool(
            Tool::new(
                "echo",
                |a: Echo, _: RequestContext| async move { a.message },
            )
            .description("Echoes"),
        )
        .tool(
            Tool::new("add", |a: Add, _: RequestContext| async move {
                Structured(Sum { sum: a.a + a.b })
            })
            .description("Adds"),
        )
        .tool(
            Tool::new("greet", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Name>("name")? {
                    Some(Elicited::Accepted(n)) => {
                        Ok::<_, ToolError>(format!("Hello, {}!", n.name))
                    }
                    Some(_) => Ok("Hello, stranger!".to_owned()),
                    None => Err(InputRequired::new()
                        .elicit::<Name>("name", "Your name?")
                        .state("round-1")
                        .into()),
                }
            })
            .description("Greets after asking the name"),
        )
        .tool(
            Tool::new("slow", move |a: Slow, ctx: RequestContext| {
                let observed = observed.clone();
                async move {
                    observed.runs.fetch_add(1, Ordering::SeqCst);
                    // The server drops a cancelled handler; the guard sees the token then.
                    let _seen = SeesCancellation(observed, ctx.cancellation().clone());
                    for step in 1..=a.steps {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ctx.progress(f64::from(step), Some(f64::from(a.steps)), None)
                            .await;
                    }
                    format!("done after {} steps", a.steps)
                }
            })
            .description("Reports progress every 50 ms"),
        )
        .tool(
            Tool::new("chatty", |_: NoArgs, ctx: RequestContext| async move {
                ctx.log(LoggingLevel::Debug, Some("e2e"), json!("debug detail"))
                    .await;
                ctx.log(LoggingLevel::Warning, Some("e2e"), json!("careful"))
                    .await;
                "said things"
            })
            .description("Logs twice"),
        )
        .tool(region_tool("Region"))
        .build()
        .expect("a valid server")
}

async fn start(server: Server) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(http::serve(server, listener, http::HttpConfig::default()));
    url
}

fn text(result: &toolwire_client::protocol::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn tools_structured_output_and_mrtr() {
    let url = start(server(Arc::default())).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let client = ClientBuilder::new("e2e-client", "1.0")
        .on_elicit(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { toolwire_client::accepted(&json!({"name": "Grace"})) }
        })
        .http(&url)
        .unwrap();

    let discover = client.discover().await.unwrap();
    assert_eq!(discover.supported_versions, ["2026-07-28"]);
    assert_eq!(
        client.era(),
        Some(ServerEra::Modern {
            version: "2026-07-28".into()
        })
    );
    let tools = client.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "add", "greet", "slow", "chatty", "deploy"]);

    let echoed = client
        .call_tool("echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi");

    let sum = client
        .call_tool("add", json!({"a": 40, "b": 2}))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 42})));

    let greeting = client.call_tool("greet", json!({})).await.unwrap();
    assert_eq!(text(&greeting), "Hello, Grace!");
    assert_eq!(asked.load(Ordering::SeqCst), 1);

    // Invalid arguments are a tool error the model can read, not a protocol error.
    let invalid = client
        .call_tool("add", json!({"a": "forty"}))
        .await
        .unwrap();
    assert!(invalid.is_error());

    // An unknown tool is a server error, kept apart from local errors (E-06).
    let unknown = client.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(unknown.rpc().map(|e| e.code), Some(-32602), "{unknown}");
}

#[tokio::test]
async fn elicitation_without_a_handler_is_refused_by_the_server() {
    let url = start(server(Arc::default())).await;
    // No handler: elicitation is not declared, so the server answers -32021 (M-05).
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    let error = client.call_tool("greet", json!({})).await.unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code), Some(-32021), "{error}");
}

#[tokio::test]
async fn declined_elicitation_reaches_the_tool() {
    let url = start(server(Arc::default())).await;
    let client = ClientBuilder::new("e2e-client", "1.0")
        .on_elicit(|_| async { Ok(toolwire_client::declined()) })
        .http(&url)
        .unwrap();
    let greeting = client.call_tool("greet", json!({})).await.unwrap();
    assert_eq!(text(&greeting), "Hello, stranger!");
}

#[tokio::test]
async fn progress_resets_the_timeout_up_to_the_hard_cap() {
    let observed = Arc::new(Observed::default());
    let url = start(server(observed.clone())).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();

    // 8 steps of 50 ms = 400 ms, with a 200 ms timeout that every progress resets.
    let client = ClientBuilder::new("e2e-client", "1.0")
        .timeout(Duration::from_millis(200))
        .http(&url)
        .unwrap();
    let done = client
        .call_tool_with(
            "slow",
            json!({"steps": 8}),
            CallOptions::default().on_progress(move |p| record.lock().unwrap().push(p.progress)),
        )
        .await
        .unwrap();
    assert_eq!(text(&done), "done after 8 steps");
    assert_eq!(seen.lock().unwrap().len(), 8);

    // The hard cap wins over progress.
    let capped = ClientBuilder::new("e2e-client", "1.0")
        .timeout(Duration::from_millis(200))
        .max_timeout(Duration::from_millis(300))
        .http(&url)
        .unwrap();
    let error = capped
        .call_tool_with(
            "slow",
            json!({"steps": 40}),
            CallOptions::default().on_progress(|_| {}),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Timeout(_)), "{error}");

    // Without resets, the plain timeout applies; the server sees the request cancelled (H-26).
    let strict = ClientBuilder::new("e2e-client", "1.0")
        .timeout(Duration::from_millis(200))
        .reset_timeout_on_progress(false)
        .http(&url)
        .unwrap();
    let error = strict
        .call_tool_with(
            "slow",
            json!({"steps": 40}),
            CallOptions::default().on_progress(|_| {}),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Timeout(_)), "{error}");
    for _ in 0..100 {
        if observed.cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(observed.cancelled.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_cancellation_token_cancels_the_call_on_the_server() {
    let observed = Arc::new(Observed::default());
    let url = start(server(observed.clone())).await;
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        cancel.cancel();
    });
    let error = client
        .call_tool_with(
            "slow",
            json!({"steps": 100}),
            CallOptions::default().on_progress(|_| {}).cancel_on(token),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Cancelled), "{error}");
    for _ in 0..100 {
        if observed.cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(observed.cancelled.load(Ordering::SeqCst));
    assert_eq!(observed.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn log_messages_reach_the_caller_at_the_declared_level() {
    let url = start(server(Arc::default())).await;
    let client = ClientBuilder::new("e2e-client", "1.0")
        .log_level(LoggingLevel::Info)
        .http(&url)
        .unwrap();
    let logs = Arc::new(Mutex::new(Vec::new()));
    let record = logs.clone();
    client
        .call_tool_with(
            "chatty",
            json!({}),
            CallOptions::default().on_log(move |log| {
                record.lock().unwrap().push((log.level, log.data.clone()));
            }),
        )
        .await
        .unwrap();
    // The debug message is below the level the client asked for (P-17).
    assert_eq!(
        *logs.lock().unwrap(),
        [(LoggingLevel::Warning, json!("careful"))]
    );
}

#[tokio::test]
async fn mirrored_headers_follow_a_changed_declaration() {
    let server = server(Arc::default());
    let url = start(server.clone()).await;
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    let deployed = client
        .call_tool("deploy", json!({"region": "eu-west-1"}))
        .await
        .unwrap();
    assert_eq!(text(&deployed), "deployed to eu-west-1");

    // The server renames the header; the client's cached declaration is stale, the server
    // answers -32020, and the client lists again and retries (H-25).
    server.remove_tool("deploy").unwrap();
    server.add_tool(region_tool("Zone")).unwrap();
    let deployed = client
        .call_tool("deploy", json!({"region": "日本"}))
        .await
        .unwrap();
    assert_eq!(text(&deployed), "deployed to 日本");
}

#[tokio::test]
async fn listen_delivers_changes_and_invalidates_the_tool_cache() {
    let server = server(Arc::default());
    let url = start(server.clone()).await;
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    assert_eq!(client.list_tools().await.unwrap().len(), 6);

    let mut subscription = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            resources_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    // The server offers no resources, so it does not honour that part (L-04, L-05).
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    assert_ne!(
        subscription.acknowledged().resources_list_changed,
        Some(true)
    );

    server
        .add_tool(
            Tool::new("later", |_: NoArgs, _: RequestContext| async { "late" })
                .description("Added later"),
        )
        .unwrap();
    let notification = tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("a notification within 5 s")
        .expect("the stream is open")
        .unwrap();
    assert_eq!(notification, Notification::ToolsListChanged);
    // The cache was invalidated: the list is fresh although its TTL (60 s) has not run out.
    assert_eq!(client.list_tools().await.unwrap().len(), 7);

    // A graceful shutdown ends the subscription (L-10).
    server.shutdown();
    let end = tokio::time::timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("the end within 5 s");
    assert!(end.is_none(), "{end:?}");
}

#[tokio::test]
async fn a_stale_tool_list_is_served_when_the_server_is_gone() {
    let server = Server::builder("e2e", "1.0")
        .list_ttl(Duration::ZERO)
        .tool(
            Tool::new(
                "echo",
                |a: Echo, _: RequestContext| async move { a.message },
            )
            .description("Echoes"),
        )
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serving = tokio::spawn(http::serve(
        server.clone(),
        listener,
        http::HttpConfig::default(),
    ));
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    assert_eq!(client.list_tools().await.unwrap().len(), 1);

    server.shutdown();
    serving.await.unwrap().unwrap();
    // ttlMs 0: the list is stale at once, the re-fetch fails, the old list is served (K-07).
    assert_eq!(client.list_tools().await.unwrap().len(), 1);
    // A forced refresh reports the failure as a transport error.
    let error = client.refresh_tools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error}");
}

/// Any method the protocol crate types can be sent by its type, without its name as a string:
/// the params without `_meta` (the client writes it), the result typed.
#[tokio::test]
async fn a_typed_protocol_method_is_sent_by_its_type() {
    use toolwire_client::protocol::PaginatedParams;
    use toolwire_client::protocol::methods::{CallTool, ListTools};

    let url = start(server(Arc::default())).await;
    let client = ClientBuilder::new("e2e-client", "1.0").http(&url).unwrap();
    let page = client
        .send::<ListTools>(&PaginatedParams::default())
        .await
        .unwrap();
    let names: Vec<_> = page.items.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "add", "greet", "slow", "chatty", "deploy"]);
    let params = toolwire_client::protocol::CallToolParams {
        name: "echo".into(),
        arguments: json!({"message": "typed"}).as_object().cloned(),
        ..Default::default()
    };
    let echoed = client.send::<CallTool>(&params).await.unwrap();
    assert_eq!(text(&echoed), "typed");
}

/// A server whose `wait` tool waits for `gate` (so it becomes a task when the client lets it)
/// and, with `ask: true`, then asks for a name inside its task.
fn task_server(gate: Arc<tokio::sync::Notify>) -> Server {
    #[derive(Deserialize, schemars::JsonSchema)]
    struct Wait {
        ask: bool,
    }
    Server::builder("tasks", "1")
        .tool(
            Tool::new("wait", move |w: Wait, ctx: RequestContext| {
                let gate = gate.clone();
                async move {
                    match ctx.elicited::<Name>("name")? {
                        Some(Elicited::Accepted(n)) => {
                            Ok::<_, ToolError>(format!("Hello, {}!", n.name))
                        }
                        Some(_) => Ok("Hello!".to_owned()),
                        None => {
                            gate.notified().await;
                            if !w.ask {
                                return Ok("waited".to_owned());
                            }
                            Err(InputRequired::new()
                                .elicit::<Name>("name", "Your name?")
                                .into())
                        }
                    }
                }
            })
            .task_support(toolwire_server::TaskSupport::Optional),
        )
        .build()
        .expect("a valid server")
}

/// A call the server makes a task is followed to its end (`tasks/get`), its question inside
/// the task answered by the client's handler (`tasks/update`); the task methods, sent by their
/// types, carry the task's id as `Mcp-Name`.
#[tokio::test]
async fn a_call_the_server_makes_a_task_is_followed_to_its_result() {
    use toolwire_client::protocol::methods::GetTask;
    use toolwire_client::protocol::{RequestMeta, TaskParams, TaskStatus};

    let gate = Arc::new(tokio::sync::Notify::new());
    let url = start(task_server(gate.clone())).await;
    let client = ClientBuilder::new("e2e-client", "1.0")
        .on_elicit(|_| async { toolwire_client::accepted(&json!({"name": "Ada"})) })
        .http(&url)
        .unwrap();
    for (ask, want) in [(false, "waited"), (true, "Hello, Ada!")] {
        let task_id = Arc::new(Mutex::new(None));
        let (seen, opened) = (task_id.clone(), gate.clone());
        let options = CallOptions::default().tasks().on_task(move |created| {
            *seen.lock().unwrap() = Some(created.task.task_id.clone());
            opened.notify_one();
        });
        let result = tokio::time::timeout(
            Duration::from_secs(20),
            client.call_tool_with("wait", json!({"ask": ask}), options),
        )
        .await
        .expect("in time")
        .expect("the task's result");
        assert_eq!(text(&result), want);
        let task_id = task_id
            .lock()
            .unwrap()
            .clone()
            .expect("the call became a task");
        let tasks = ClientBuilder::new("e2e-client", "1.0")
            .with_tasks()
            .http(&url)
            .unwrap();
        let got = tasks
            .send::<GetTask>(&TaskParams {
                meta: RequestMeta::default(),
                task_id,
            })
            .await
            .expect("tasks/get by its type");
        assert_eq!(got.task.status, TaskStatus::Completed);
    }
}
