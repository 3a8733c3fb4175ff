//! Deadlines end to end: a tool that runs past its limit is cancelled through its token and the
//! model gets an `isError` result saying so (with the limit in `_meta`), over HTTP and stdio,
//! for plain calls and task steps; the limit is advertised in the tool's definition.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::{NoArgs, RequestContext, Server, TaskSupport, Tool};

use crate::support::*;

/// Sleeps 5 s unless its token fires first, and records that it did.
fn sleepy(name: &str, stopped: Arc<AtomicBool>) -> Tool {
    Tool::new(name, move |_: NoArgs, ctx: RequestContext| {
        let stopped = stopped.clone();
        async move {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => "slept".to_owned(),
                _ = ctx.cancellation().cancelled() => {
                    stopped.store(true, Ordering::SeqCst);
                    "stopped".to_owned()
                }
            }
        }
    })
    .description("Sleeps 5 s")
}

fn server(stopped: &Arc<AtomicBool>) -> Server {
    Server::builder("deadlines", "1")
        .tool(sleepy("sleepy", stopped.clone()).timeout(Duration::from_millis(50)))
        .tool(sleepy("server_limit", stopped.clone()))
        .tool(sleepy("patient", stopped.clone()).no_timeout("waits for a person on purpose"))
        .tool(
            sleepy("task_step", stopped.clone())
                .timeout(Duration::from_millis(80))
                .task_support(TaskSupport::Optional),
        )
        .tool_timeout(Duration::from_millis(120))
        .build()
        .unwrap()
}

fn call(id: i64, name: &str) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}}))
}

fn assert_timed_out(reply: &Value, name: &str, limit_ms: u64) {
    let result = &reply["result"];
    assert_eq!(result["isError"], true, "{reply}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("The tool {name} did not finish within")),
        "{text}"
    );
    assert_eq!(
        result["_meta"]["dev.toolwire/timedOut"]["limitMs"], limit_ms,
        "{reply}"
    );
    assert!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(),
        "{reply}"
    );
}

#[tokio::test]
async fn a_slow_tool_is_stopped_over_http_and_its_limit_is_advertised() {
    let stopped = Arc::new(AtomicBool::new(false));
    let s = TestServer::start(server(&stopped)).await;
    let listed = post(&s.url, &request(1, "tools/list", json!({}))).await;
    let limits: Vec<Value> = listed.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["_meta"]["dev.toolwire/timeoutMs"].clone())
        .collect();
    assert_eq!(limits, [json!(50), json!(120), Value::Null, json!(80)]);

    let started = std::time::Instant::now();
    let reply = post(&s.url, &call(2, "sleepy")).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_timed_out(reply.last(), "sleepy", 50);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(stopped.load(Ordering::SeqCst), "the handler's token fired");

    assert_timed_out(
        post(&s.url, &call(3, "server_limit")).await.last(),
        "server_limit",
        120,
    );
    s.stop().await;
}

#[tokio::test]
async fn a_slow_tool_is_stopped_over_stdio_and_the_answer_still_arrives() {
    let stopped = Arc::new(AtomicBool::new(false));
    let mut session = StdioSession::start(server(&stopped));
    session.send(&call(1, "sleepy")).await;
    assert_timed_out(&session.recv().await, "sleepy", 50);
    assert!(stopped.load(Ordering::SeqCst));
    // The connection goes on.
    session.send(&request(2, "tools/list", json!({}))).await;
    assert!(session.recv().await["result"]["tools"].is_array());
}

#[tokio::test]
async fn a_task_step_that_runs_out_of_time_completes_with_the_error() {
    let stopped = Arc::new(AtomicBool::new(false));
    let s = TestServer::start(server(&stopped)).await;
    let with_tasks = |mut body: Value| {
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        body
    };
    let created = post(&s.url, &with_tasks(call(1, "task_step"))).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_owned();
    let get = with_tasks(request(2, "tasks/get", json!({"taskId": task_id})));
    let mut done = Value::Null;
    for _ in 0..100 {
        done = post(&s.url, &get).await.last()["result"].clone();
        if done["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(done["status"], "completed", "not cancelled: {done}");
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert!(stopped.load(Ordering::SeqCst));
    s.stop().await;
}
