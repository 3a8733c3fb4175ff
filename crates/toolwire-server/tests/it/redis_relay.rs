//! A legacy client behind a round-robin balancer: its request runs on one server, and what it
//! sends about that request (the answer to the server's elicitation, its cancellation, the end
//! of its session) reaches another, which relays it through the shared Redis store.

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use toolwire_server::{NoArgs, RequestContext, Server, Store, Tool};

use crate::legacy::{SseReader, greet, legacy_post, legacy_request, open_session, sse_post};
use crate::support::*;
use toolwire_testkit::{RedisServer, fresh_prefix};

/// How long anything that crosses servers may take before a test gives up.
const DEADLINE: Duration = Duration::from_secs(10);

fn store(redis: &RedisServer, test: &str) -> Store {
    Store::redis(&redis.url)
        .expect("a redis URL")
        .key_prefix(fresh_prefix(test))
        .timeout(Duration::from_millis(500))
}

/// Tells `started` it runs, then waits until stopped, telling `stopped` when it is.
fn endless(started: mpsc::UnboundedSender<()>, stopped: mpsc::UnboundedSender<()>) -> Tool {
    Tool::new("endless", move |_: NoArgs, _: RequestContext| {
        let (started, stopped) = (started.clone(), stopped.clone());
        async move {
            struct Stopped(mpsc::UnboundedSender<()>);
            impl Drop for Stopped {
                fn drop(&mut self) {
                    let _ = self.0.send(());
                }
            }
            let _stopped = Stopped(stopped);
            let _ = started.send(());
            std::future::pending::<()>().await;
            "never"
        }
    })
    .description("Runs until cancelled")
}

/// Two servers on one store, each with `greet` and `endless`; the receivers of A's `endless`.
async fn pair(
    shared: &Store,
) -> (
    TestServer,
    TestServer,
    mpsc::UnboundedReceiver<()>,
    mpsc::UnboundedReceiver<()>,
) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (stopped_tx, stopped) = mpsc::unbounded_channel();
    let server = |tool: Tool| -> Server {
        Server::builder("relay", "1")
            .tool(greet())
            .tool(tool)
            .store(shared.clone())
            .build()
            .expect("a server")
    };
    let a = TestServer::start(server(endless(started_tx.clone(), stopped_tx.clone()))).await;
    let (unused_tx, _) = mpsc::unbounded_channel();
    let b = TestServer::start(server(endless(unused_tx.clone(), unused_tx))).await;
    for s in [&a, &b] {
        tokio::time::timeout(DEADLINE, s.server.changes_connected())
            .await
            .expect("the relay subscribes");
    }
    (a, b, started, stopped)
}

/// POSTs `call` to `url` in `session` in the background.
fn spawn_call(url: &str, session: &str, call: serde_json::Value) -> tokio::task::JoinHandle<Reply> {
    let (url, session) = (url.to_owned(), session.to_owned());
    tokio::spawn(async move { legacy_post(&url, Some(&session), &call).await })
}

async fn within<T>(what: &str, f: impl Future<Output = Option<T>>) -> T {
    tokio::time::timeout(DEADLINE, f)
        .await
        .unwrap_or_else(|_| panic!("{what} within {DEADLINE:?}"))
        .unwrap_or_else(|| panic!("{what}: the channel closed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_posted_to_another_server_reaches_the_elicitation_waiting_on_the_first() {
    let redis = RedisServer::start();
    let (a, b, _, _) = pair(&store(&redis, "relay-answer")).await;
    let session = open_session(&a.url, json!({"elicitation": {}})).await;
    let call = legacy_request(1, "tools/call", json!({"name": "greet", "arguments": {}}));
    let mut stream = SseReader::open(sse_post(&a.url, &session, &call)).await;
    let asked = stream.next().await.expect("an elicitation");
    assert_eq!(asked["method"], "elicitation/create");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}}});
    let posted = legacy_post(&b.url, Some(&session), &answer).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let result = stream.next().await.expect("the call's result");
    assert_eq!(result["id"], 1);
    assert_eq!(
        result["result"]["content"][0]["text"], "Hello, Ada!",
        "the answer given through B: {result}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_or_a_delete_posted_to_another_server_stops_the_request_on_the_first() {
    let redis = RedisServer::start();
    let (a, b, mut started, mut stopped) = pair(&store(&redis, "relay-cancel")).await;
    let session = open_session(&a.url, json!({})).await;
    let call = legacy_request(5, "tools/call", json!({"name": "endless", "arguments": {}}));
    let running = spawn_call(&a.url, &session, call);
    within("the request starts on A", started.recv()).await;
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "enough"}});
    let posted = legacy_post(&b.url, Some(&session), &cancelled).await;
    assert_eq!(posted.status, 202, "{}", posted.body);
    within("the cancellation posted to B stops it on A", stopped.recv()).await;
    running.abort();

    let call = legacy_request(6, "tools/call", json!({"name": "endless", "arguments": {}}));
    let running = spawn_call(&a.url, &session, call);
    within("the second request starts on A", started.recv()).await;
    let ended = client()
        .delete(&b.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    within("the session ended on B stops it on A", stopped.recv()).await;
    running.abort();
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_asking_one_session_at_once_each_get_their_own_answer() {
    let redis = RedisServer::start();
    let (a, b, _, _) = pair(&store(&redis, "relay-ids")).await;
    let session = open_session(&a.url, json!({"elicitation": {}})).await;
    let call =
        |id: i64| legacy_request(id, "tools/call", json!({"name": "greet", "arguments": {}}));
    let mut on_a = SseReader::open(sse_post(&a.url, &session, &call(1))).await;
    let mut on_b = SseReader::open(sse_post(&b.url, &session, &call(2))).await;
    let asked_a = on_a.next().await.expect("A's elicitation");
    let asked_b = on_b.next().await.expect("B's elicitation");
    assert_ne!(asked_a["id"], asked_b["id"], "one client, one id space");
    // Each answer goes to the other server, as a balancer may send it.
    for (asked, name, to) in [(&asked_a, "Ada", &b.url), (&asked_b, "Bob", &a.url)] {
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {"name": name}}});
        let posted = legacy_post(to, Some(&session), &answer).await;
        assert_eq!(posted.status, 202, "{}", posted.body);
    }
    let result_a = on_a.next().await.expect("A's result");
    let result_b = on_b.next().await.expect("B's result");
    assert_eq!(result_a["result"]["content"][0]["text"], "Hello, Ada!");
    assert_eq!(result_b["result"]["content"][0]["text"], "Hello, Bob!");
    a.stop().await;
    b.stop().await;
}
