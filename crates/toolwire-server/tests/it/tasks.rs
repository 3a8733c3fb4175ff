//! The tasks extension over real HTTP.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;
use toolwire_server::{
    Elicited, InputRequired, ManualClock, NoArgs, RequestContext, Server, TaskSupport, Tool,
    ToolError,
};

use crate::support::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Wait {
    ms: u64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Ok_ {
    ok: bool,
}

fn server(clock: Option<ManualClock>) -> Server {
    let mut b = Server::builder("tasks", "1")
        .tool(
            Tool::new("wait", |w: Wait, ctx: RequestContext| async move {
                tokio::select! {
                    _ = ctx.cancellation().cancelled() => Err(ToolError::failed("cancelled")),
                    _ = tokio::time::sleep(Duration::from_millis(w.ms)) => Ok(format!("waited {}", w.ms)),
                }
            })
            .description("Waits")
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("confirm", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Ok_>("ok")? {
                    Some(Elicited::Accepted(o)) => Ok::<_, ToolError>(format!("confirmed {}", o.ok)),
                    _ => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Err(InputRequired::new().elicit::<Ok_>("ok", "OK?").into())
                    }
                }
            })
            .description("Asks inside a task")
            .task_support(TaskSupport::Required),
        )
        .tool(
            Tool::new("slow_confirm", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Ok_>("ok")? {
                    Some(Elicited::Accepted(o)) => Ok::<_, ToolError>(format!("confirmed {}", o.ok)),
                    _ => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        Err(InputRequired::new().elicit::<Ok_>("ok", "OK?").into())
                    }
                }
            })
            .description("Works a while, then asks")
            .task_support(TaskSupport::Required),
        );
    if let Some(clock) = clock {
        b = b.clock(clock).task_ttl(Duration::from_secs(60));
    }
    b.build().unwrap()
}

fn with_tasks(mut body: Value) -> Value {
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    body
}

fn task_request(id: i64, method: &str, task_id: &str, extra: Value) -> Value {
    let mut params = json!({"taskId": task_id});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    with_tasks(request(id, method, params))
}

async fn create(s: &TestServer, name: &str, args: Value) -> String {
    let reply = post(
        &s.url,
        &with_tasks(request(
            1,
            "tools/call",
            json!({"name": name, "arguments": args}),
        )),
    )
    .await;
    let result = &reply.last()["result"];
    assert_eq!(result["resultType"], "task", "{}", reply.body);
    for field in [
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
    ] {
        assert!(result.get(field).is_some(), "{field} in {result}");
    }
    result["taskId"].as_str().unwrap().to_owned()
}

async fn get(s: &TestServer, task_id: &str) -> Value {
    post(&s.url, &task_request(2, "tasks/get", task_id, json!({})))
        .await
        .last()
        .clone()
}

async fn until(s: &TestServer, task_id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reply = get(s, task_id).await;
        if reply["result"]["status"] == status {
            return reply["result"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {status}: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_call_that_waits_becomes_a_task() {
    let s = TestServer::start(server(None)).await;
    let caps = post(&s.url, &request(1, "server/discover", json!({})))
        .await
        .last()["result"]["capabilities"]
        .clone();
    assert_eq!(
        caps["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}})
    );
    // Without the extension the same tool runs as a plain call.
    let plain = post(
        &s.url,
        &request(
            1,
            "tools/call",
            json!({"name": "wait", "arguments": {"ms": 50}}),
        ),
    )
    .await;
    assert_eq!(plain.last()["result"]["content"][0]["text"], "waited 50");
    let task_id = create(&s, "wait", json!({"ms": 200})).await;
    assert_eq!(
        get(&s, &task_id).await["result"]["status"],
        "working",
        "resolvable at once"
    );
    let done = until(&s, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "waited 200");
    assert_eq!(done["resultType"], "complete");
    assert!(done.get("error").is_none() && done.get("inputRequests").is_none());
    s.stop().await;
}

#[tokio::test]
async fn tasks_ask_for_input_through_updates() {
    let s = TestServer::start(server(None)).await;
    let task_id = create(&s, "confirm", json!({})).await;
    let waiting = until(&s, &task_id, "input_required").await;
    assert_eq!(
        waiting["inputRequests"]["ok"]["method"],
        "elicitation/create"
    );
    let ack = post(
        &s.url,
        &task_request(
            3,
            "tasks/update",
            &task_id,
            json!({"inputResponses": {
        "ok": {"action": "accept", "content": {"ok": true}}, "junk": {"whatever": 1}}}),
        ),
    )
    .await;
    assert_eq!(ack.last()["result"]["resultType"], "complete");
    let done = until(&s, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "confirmed true");
    s.stop().await;
}

#[tokio::test]
async fn refusals_and_cancellation() {
    let s = TestServer::start(server(None)).await;
    // A task-only tool, and the tasks methods, need the extension (-32021).
    let reply = post(
        &s.url,
        &request(1, "tools/call", json!({"name": "confirm"})),
    )
    .await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32021)));
    assert_eq!(
        reply.last()["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    let mut no_ext = task_request(2, "tasks/get", "x", json!({}));
    no_ext["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    assert_eq!(post(&s.url, &no_ext).await.error_code(), Some(-32021));
    assert_eq!(
        post(&s.url, &task_request(3, "tasks/get", "unknown", json!({})))
            .await
            .error_code(),
        Some(-32602)
    );
    let removed = post(&s.url, &task_request(4, "tasks/list", "x", json!({}))).await;
    assert_eq!((removed.status, removed.error_code()), (404, Some(-32601)));
    // Mcp-Name carries the task id.
    let task_id = create(&s, "wait", json!({"ms": 10_000})).await;
    let wrong = post_with(
        &s.url,
        &task_request(5, "tasks/get", &task_id, json!({})),
        |h| set_header(h, "mcp-name", Some("other")),
    )
    .await;
    assert_eq!((wrong.status, wrong.error_code()), (400, Some(-32020)));
    for _ in 0..2 {
        let ack = post(
            &s.url,
            &task_request(6, "tasks/cancel", &task_id, json!({})),
        )
        .await;
        assert_eq!(ack.last()["result"]["resultType"], "complete", "idempotent");
    }
    assert_eq!(get(&s, &task_id).await["result"]["status"], "cancelled");
    s.stop().await;
}

#[tokio::test]
async fn tasks_belong_to_their_principal_and_expire() {
    let clock = ManualClock::new(1_000_000);
    let config = HttpConfig::default().principal(|h| {
        h.get("x-user")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    let s = TestServer::start_with(server(Some(clock.clone())), config).await;
    let call = with_tasks(request(
        1,
        "tools/call",
        json!({"name": "wait", "arguments": {"ms": 50}}),
    ));
    let reply = post_with(&s.url, &call, |h| h.push(("x-user".into(), "alice".into()))).await;
    let task_id = reply.last()["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let as_user = |user: &'static str| {
        move |h: &mut Vec<(String, String)>| h.push(("x-user".into(), user.into()))
    };
    let mine = post_with(
        &s.url,
        &task_request(2, "tasks/get", &task_id, json!({})),
        as_user("alice"),
    )
    .await;
    assert!(mine.last().get("result").is_some());
    let theirs = post_with(
        &s.url,
        &task_request(3, "tasks/get", &task_id, json!({})),
        as_user("mallory"),
    )
    .await;
    assert_eq!(
        theirs.error_code(),
        Some(-32602),
        "someone else's task is unknown"
    );
    clock.advance(60_000);
    let expired = post_with(
        &s.url,
        &task_request(4, "tasks/get", &task_id, json!({})),
        as_user("alice"),
    )
    .await;
    assert_eq!(expired.error_code(), Some(-32602), "gone after its TTL");
    s.stop().await;
}

/// One message through the server in memory (no transport), its last reply.
async fn send(server: &Server, body: &Value) -> Value {
    let replies = server.handle_message(body.to_string().as_bytes()).await;
    serde_json::from_str(replies.last().expect("a reply")).unwrap()
}

async fn start_in_memory(server: &Server, name: &str, args: Value) -> String {
    let reply = send(
        server,
        &with_tasks(request(
            1,
            "tools/call",
            json!({"name": name, "arguments": args}),
        )),
    )
    .await;
    assert_eq!(reply["result"]["resultType"], "task", "{reply}");
    reply["result"]["taskId"].as_str().unwrap().to_owned()
}

/// Polls `tasks/get` in (virtual) time until the task reaches `status`.
async fn until_in_memory(server: &Server, task_id: &str, status: &str) -> Value {
    for _ in 0..1000 {
        let reply = send(server, &task_request(2, "tasks/get", task_id, json!({}))).await;
        if reply["result"]["status"] == status {
            return reply["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {task_id} never became {status}");
}

/// A task parked in `input_required` that nobody answers once waited forever, holding a Tokio
/// task, its arguments and metadata: its TTL now ends it.
#[tokio::test(start_paused = true)]
async fn an_unanswered_task_ends_at_its_ttl() {
    let clock = ManualClock::new(1_000_000);
    let server = server(Some(clock.clone()));
    let task_id = start_in_memory(&server, "confirm", json!({})).await;
    until_in_memory(&server, &task_id, "input_required").await;
    assert_eq!(server.running_tasks(), 1);
    clock.advance(60_000);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(server.running_tasks(), 0, "the parked task is gone");
    let gone = send(&server, &task_request(3, "tasks/get", &task_id, json!({}))).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
}

/// A working handler is stopped at the task's TTL too: its cancellation fires.
#[tokio::test(start_paused = true)]
async fn a_working_task_is_stopped_at_its_ttl() {
    let clock = ManualClock::new(1_000_000);
    let server = server(Some(clock.clone()));
    start_in_memory(&server, "wait", json!({"ms": 3_600_000})).await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(server.running_tasks(), 1, "still within its TTL");
    clock.advance(60_000);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.running_tasks(), 0);
}

/// Shutting the server down stops its tasks; a record that outlives the process (a shared
/// store) says why the task failed instead of `working` forever.
#[tokio::test(start_paused = true)]
async fn shutdown_stops_running_tasks() {
    let server = server(None);
    let task_id = start_in_memory(&server, "wait", json!({"ms": 3_600_000})).await;
    let parked = start_in_memory(&server, "confirm", json!({})).await;
    until_in_memory(&server, &parked, "input_required").await;
    assert_eq!(server.running_tasks(), 2);
    server.shutdown();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(server.running_tasks(), 0);
    for id in [&task_id, &parked] {
        let record = send(&server, &task_request(3, "tasks/get", id, json!({}))).await;
        assert_eq!(record["result"]["status"], "failed", "{record}");
        let message = record["result"]["error"]["message"].as_str().unwrap();
        assert!(message.contains("shut down"), "{message}");
    }
}

/// `tasks/update` while the task is working was queued without bound and later answered
/// questions the client had not seen yet: it is acknowledged and dropped.
#[tokio::test(start_paused = true)]
async fn updates_to_a_working_task_are_not_queued() {
    let server = server(None);
    let task_id = start_in_memory(&server, "slow_confirm", json!({})).await;
    let early = json!({"inputResponses": {"ok": {"action": "accept", "content": {"ok": true}}}});
    for i in 0..1000 {
        let ack = send(
            &server,
            &task_request(10 + i, "tasks/update", &task_id, early.clone()),
        )
        .await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    }
    let waiting = until_in_memory(&server, &task_id, "input_required").await;
    assert_eq!(
        waiting["inputRequests"]["ok"]["method"],
        "elicitation/create"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let still = send(&server, &task_request(3, "tasks/get", &task_id, json!({}))).await;
    assert_eq!(
        still["result"]["status"], "input_required",
        "no stale answer applied"
    );
    let answer = json!({"inputResponses": {"ok": {"action": "accept", "content": {"ok": false}}}});
    send(&server, &task_request(4, "tasks/update", &task_id, answer)).await;
    let done = until_in_memory(&server, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "confirmed false");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Defer {
    /// Whether the handler makes the call a task before it waits.
    task: bool,
    ms: u64,
}

/// A deferred task is made only when its handler asks: a handler that waits without asking
/// answers as a plain call, even for a client that declared the extension; one that asks
/// makes it a task at once, and the task ends with the handler's result.
#[tokio::test]
async fn a_deferred_task_is_made_only_when_its_handler_asks() {
    let server = Server::builder("deferred", "1")
        .tool(
            Tool::new("defer", |d: Defer, ctx: RequestContext| async move {
                if d.task {
                    assert!(ctx.start_task(), "a deferred call may become a task");
                }
                tokio::time::sleep(Duration::from_millis(d.ms)).await;
                format!("slept {}", d.ms)
            })
            .task_support(TaskSupport::Optional)
            .deferred_task(),
        )
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let plain = post(
        &s.url,
        &with_tasks(request(
            1,
            "tools/call",
            json!({"name": "defer", "arguments": {"task": false, "ms": 30}}),
        )),
    )
    .await;
    let result = &plain.last()["result"];
    assert_eq!(result["resultType"], "complete", "{}", plain.body);
    assert_eq!(result["content"][0]["text"], "slept 30");
    let task_id = create(&s, "defer", json!({"task": true, "ms": 30})).await;
    let done = until(&s, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 30");
}

/// Task records in memory, each change written only after a while, as a store across the
/// network writes them.
struct SlowWrites(toolwire_server::MemoryTaskStore);

impl toolwire_server::TaskStore for SlowWrites {
    fn insert(
        &self,
        record: toolwire_server::TaskRecord,
    ) -> futures::future::BoxFuture<'_, Result<(), toolwire_server::StoreError>> {
        self.0.insert(record)
    }

    fn get<'a>(
        &'a self,
        task_id: &'a str,
        now_ms: u64,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<toolwire_server::TaskRecord>, toolwire_server::StoreError>,
    > {
        self.0.get(task_id, now_ms)
    }

    fn replace(
        &self,
        record: toolwire_server::TaskRecord,
    ) -> futures::future::BoxFuture<'_, Result<bool, toolwire_server::StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.0.replace(record).await
        })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Named {
    name: String,
}

/// A `tasks/get` right after `tasks/update` is acknowledged sees the answers taken, however
/// slowly the store writes: the request answered is no longer open, and once none is, the task
/// works on. (A task whose record still showed the answered requests was asked again: a
/// gateway following it relayed them as a new round, and the caller waited for an end that
/// never came.)
#[tokio::test]
async fn a_task_read_after_an_update_shows_the_answers_taken() {
    let server = Server::builder("pair", "1")
        .task_store(SlowWrites(toolwire_server::MemoryTaskStore::default()))
        .tool(
            Tool::new("pair", |_: NoArgs, ctx: RequestContext| async move {
                let first = ctx.elicited::<Named>("first")?;
                let second = ctx.elicited::<Named>("second")?;
                match (first, second) {
                    (Some(Elicited::Accepted(a)), Some(Elicited::Accepted(b))) => {
                        Ok::<_, ToolError>(format!("{} and {}", a.name, b.name))
                    }
                    _ => {
                        // A while first, so that the call becomes a task.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Err(InputRequired::new()
                            .elicit::<Named>("first", "First?")
                            .elicit::<Named>("second", "Second?")
                            .into())
                    }
                }
            })
            .description("Asks two questions at once")
            .task_support(TaskSupport::Required),
        )
        .build()
        .unwrap();
    let task_id = start_in_memory(&server, "pair", json!({})).await;
    until_in_memory(&server, &task_id, "input_required").await;
    let answer = |key: &str, name: &str| json!({"inputResponses": {key: {"action": "accept", "content": {"name": name}}}});
    let ack = send(
        &server,
        &task_request(3, "tasks/update", &task_id, answer("first", "Ada")),
    )
    .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let after_one = send(&server, &task_request(4, "tasks/get", &task_id, json!({}))).await;
    let open: Vec<&String> = after_one["result"]["inputRequests"]
        .as_object()
        .map(|open| open.keys().collect())
        .unwrap_or_default();
    assert_eq!(
        after_one["result"]["status"], "input_required",
        "{after_one}"
    );
    assert_eq!(open, ["second"], "only the unanswered request is open");
    send(
        &server,
        &task_request(5, "tasks/update", &task_id, answer("second", "Grace")),
    )
    .await;
    let after_both = send(&server, &task_request(6, "tasks/get", &task_id, json!({}))).await;
    assert_ne!(
        after_both["result"]["status"], "input_required",
        "both answered, the task is not asking again: {after_both}"
    );
    let done = until_in_memory(&server, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada and Grace");
}
