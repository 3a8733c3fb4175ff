//! Tasks across servers sharing one Redis store: cancelled and answered through another
//! server than the one running the handler, and ended as failed by another server when the
//! one running it dies.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_server::{
    Elicited, InputRequired, NoArgs, RequestContext, Server, Store, TaskSupport, Tool, ToolError,
};

use crate::support::*;
use toolwire_testkit::{RedisServer, fresh_prefix};

const DEADLINE: Duration = Duration::from_secs(10);

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Ok_ {
    ok: bool,
}

/// A server on `prefix` of `redis` with a task that waits until cancelled and one that asks
/// for input, beating every 100 ms.
fn instance(redis: &RedisServer, prefix: &str) -> Server {
    let store = Store::redis(&redis.url)
        .expect("a redis URL")
        .key_prefix(prefix)
        .timeout(Duration::from_millis(500));
    Server::builder("tasks", "1")
        .tool(
            Tool::new("waits", |_: NoArgs, ctx: RequestContext| async move {
                ctx.cancellation().cancelled().await;
                Err::<String, _>(ToolError::failed("cancelled"))
            })
            .description("Waits until cancelled")
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("confirm", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Ok_>("ok")? {
                    Some(Elicited::Accepted(o)) => {
                        Ok::<_, ToolError>(format!("confirmed {}", o.ok))
                    }
                    _ => {
                        tokio::task::yield_now().await;
                        Err(InputRequired::new().elicit::<Ok_>("ok", "OK?").into())
                    }
                }
            })
            .description("Asks inside a task")
            .task_support(TaskSupport::Required),
        )
        .store(store)
        .task_heartbeat(Duration::from_millis(100))
        .build()
        .expect("a server")
}

fn task_call(id: i64, method: &str, params: Value) -> Value {
    let mut body = request(id, method, params);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    body
}

async fn create(server: &TestServer, tool: &str) -> String {
    let created = post(
        &server.url,
        &task_call(1, "tools/call", json!({"name": tool, "arguments": {}})),
    )
    .await;
    created.last()["result"]["task"]["taskId"]
        .as_str()
        .or_else(|| created.last()["result"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned()
}

/// `tasks/get` on `server` until the task's status is `status`, within [`DEADLINE`].
async fn until(server: &str, task_id: &str, status: &str) -> Value {
    let start = Instant::now();
    let mut poll = tokio::time::interval(Duration::from_millis(20));
    loop {
        poll.tick().await;
        let got = post(
            server,
            &task_call(2, "tasks/get", json!({"taskId": task_id})),
        )
        .await;
        let result = got.last()["result"].clone();
        if result["status"] == status {
            return result;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the task is not {status} within {DEADLINE:?}: {}",
            got.body
        );
    }
}

/// `condition` polled until true, within [`DEADLINE`].
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "{what} within {DEADLINE:?}");
        poll.tick().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cancelled_on_another_server_stops_its_handler() {
    let redis = RedisServer::start();
    let prefix = fresh_prefix("task-cancel");
    let a = TestServer::start(instance(&redis, &prefix)).await;
    let b = TestServer::start(instance(&redis, &prefix)).await;
    a.server.changes_connected().await;
    let task_id = create(&a, "waits").await;
    assert_eq!(a.server.running_tasks(), 1);
    let cancelled = post(
        &b.url,
        &task_call(3, "tasks/cancel", json!({"taskId": task_id})),
    )
    .await;
    assert!(
        cancelled.last().get("result").is_some(),
        "{}",
        cancelled.body
    );
    eventually("the handler on A stopped", || a.server.running_tasks() == 0).await;
    assert_eq!(
        until(&a.url, &task_id, "cancelled").await["status"],
        "cancelled"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_answered_on_another_server_reaches_the_handler() {
    let redis = RedisServer::start();
    let prefix = fresh_prefix("task-input");
    let a = TestServer::start(instance(&redis, &prefix)).await;
    let b = TestServer::start(instance(&redis, &prefix)).await;
    a.server.changes_connected().await;
    let task_id = create(&a, "confirm").await;
    let waiting = until(&b.url, &task_id, "input_required").await;
    assert_eq!(
        waiting["inputRequests"]["ok"]["method"],
        "elicitation/create"
    );
    let answer = json!({"taskId": task_id, "inputResponses": {
        "ok": {"action": "accept", "content": {"ok": true}}}});
    let ack = post(&b.url, &task_call(4, "tasks/update", answer)).await;
    assert_eq!(
        ack.last()["result"]["resultType"],
        "complete",
        "{}",
        ack.body
    );
    let done = until(&b.url, &task_id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "confirmed true");
    a.stop().await;
    b.stop().await;
}

/// Server A runs on a runtime of its own, on a thread of its own, so that the test can end
/// every piece of it at once, as a killed process ends.
struct Doomed {
    url: String,
    kill: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    fn start(redis: &RedisServer, prefix: &str) -> Doomed {
        let server = instance(redis, prefix);
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let (kill, killed) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            let test_server = runtime.block_on(TestServer::start(server));
            url_tx
                .send(test_server.url.clone())
                .expect("the test waits");
            let _ = killed.recv();
            // No task of the runtime runs again: no heartbeat, no record written.
            runtime.shutdown_background();
            std::mem::forget(test_server);
        });
        let url = url_rx.recv_timeout(DEADLINE).expect("A started");
        Doomed { url, kill, thread }
    }

    fn kill(self) {
        let _ = self.kill.send(());
        self.thread.join().expect("A's thread ends");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_server_dies_ends_failed_on_another() {
    let redis = RedisServer::start();
    let prefix = fresh_prefix("task-death");
    let a = Doomed::start(&redis, &prefix);
    let b = TestServer::start(instance(&redis, &prefix)).await;
    let created = post(
        &a.url,
        &task_call(1, "tools/call", json!({"name": "waits", "arguments": {}})),
    )
    .await;
    let task_id = created.last()["result"]["task"]["taskId"]
        .as_str()
        .or_else(|| created.last()["result"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned();
    assert_eq!(
        until(&b.url, &task_id, "working").await["status"],
        "working"
    );
    a.kill();
    let failed = until(&b.url, &task_id, "failed").await;
    let message = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the instance running it stopped"),
        "{failed}"
    );
    b.stop().await;
}
