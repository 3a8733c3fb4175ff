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
