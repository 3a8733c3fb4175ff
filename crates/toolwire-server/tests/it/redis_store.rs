//! The Redis store (feature `redis`) against a `redis-server` of each test's own: the same
//! contract suites as the in-memory backends, what a call does while Redis is away and after it
//! is back, and two servers sharing one store through the real HTTP path.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_server::{
    Elicited, HandleStore, InputRequired, NoArgs, RequestContext, Server, Store, StoreError,
    TaskSupport, Tool, ToolError, contract,
};

use crate::support::*;
use toolwire_testkit::{RedisServer, fresh_prefix};

/// A store on `redis` under a prefix of its own.
fn store(redis: &RedisServer, test: &str) -> Store {
    Store::redis(&redis.url)
        .expect("a redis URL")
        .key_prefix(fresh_prefix(test))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_replay_guard_keeps_the_contract() {
    let redis = RedisServer::start();
    contract::replay_guard(|| store(&redis, "replay").replay_guard()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_task_store_keeps_the_contract() {
    let redis = RedisServer::start();
    contract::task_store(|| store(&redis, "tasks").task_store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_session_store_keeps_the_contract() {
    let redis = RedisServer::start();
    contract::session_store(|idle| store(&redis, "sessions").session_store(100, idle)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_handle_backend_keeps_the_contract() {
    let redis = RedisServer::start();
    contract::handle_backend(|| store(&redis, "handles").handle_backend()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_bound_holds_across_instances_sharing_a_store() {
    let redis = RedisServer::start();
    let shared = store(&redis, "bound");
    let (a, b) = (
        shared.session_store(2, Duration::from_secs(60)),
        shared.session_store(2, Duration::from_secs(60)),
    );
    let record = |id: &str| {
        toolwire_server::SessionRecord::new(
            id.to_owned(),
            "2025-11-25",
            Default::default(),
            None,
            None,
        )
    };
    a.create(record("s1"), 1_000).await.expect("room");
    b.create(record("s2"), 1_000).await.expect("room");
    let full = a.create(record("s3"), 1_001).await;
    assert!(
        matches!(full, Err(toolwire_server::SessionStoreError::Full(2))),
        "{full:?}"
    );
    assert!(b.remove("s1").await.expect("answers"));
    a.create(record("s3"), 1_002).await.expect("room again");
}

/// The time a call took, and its outcome.
async fn timed<T>(call: impl Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let out = call.await;
    (start.elapsed(), out)
}

fn assert_unavailable<T: std::fmt::Debug>(what: &str, outcome: Result<T, StoreError>) {
    assert!(
        matches!(outcome, Err(StoreError::Unavailable(_))),
        "{what} while Redis is away: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_goes_away_is_unavailable_within_its_timeout_and_serves_again_once_back() {
    let mut redis = RedisServer::start();
    let limit = Duration::from_millis(500);
    let shared = store(&redis, "away").timeout(limit);
    let (guard, tasks, handles) = (
        shared.replay_guard(),
        shared.task_store(),
        shared.handle_backend(),
    );
    let sessions = shared.session_store(10, Duration::from_secs(60));
    assert!(guard.redeem([1; 12], u64::MAX / 2, 0).await.expect("up"));

    redis.stop();
    let (took, outcome) = timed(guard.redeem([2; 12], u64::MAX / 2, 0)).await;
    assert_unavailable("a redemption", outcome);
    assert!(took < limit * 3, "refused after {took:?}");
    assert_unavailable("a task read", tasks.get("t", 0).await);
    assert_unavailable("a session touch", sessions.touch("s", 0).await);
    let handle = handles.get("note_x").await.expect_err("away");
    assert!(
        matches!(
            handle.downcast_ref::<StoreError>(),
            Some(StoreError::Unavailable(_))
        ),
        "{handle}"
    );

    redis.restart();
    // The first call may meet the connection Redis dropped; the store connects again by
    // itself, without being built again.
    let mut answered = None;
    for _ in 0..5 {
        if let Ok(first) = guard.redeem([3; 12], u64::MAX / 2, 0).await {
            answered = Some(first);
            break;
        }
    }
    assert_eq!(answered, Some(true), "served again once Redis is back");
    assert_eq!(tasks.get("t", 0).await.expect("up"), None);
    assert!(sessions.touch("s", 0).await.expect("up").is_none());
    assert_eq!(handles.get("note_x").await.expect("up"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_store_is_unavailable_within_its_timeout_not_a_hang() {
    let redis = RedisServer::start();
    let limit = Duration::from_millis(400);
    let shared = store(&redis, "hung").timeout(limit);
    let tasks = shared.task_store();
    assert_eq!(tasks.get("t", 0).await.expect("up"), None);
    redis.pause();
    let (took, outcome) = timed(tasks.get("t", 0)).await;
    redis.resume();
    assert_unavailable("a task read", outcome);
    assert!(took >= limit && took < limit * 3, "refused after {took:?}");
    let mut answered = false;
    for _ in 0..5 {
        if tasks.get("t", 0).await.is_ok() {
            answered = true;
            break;
        }
    }
    assert!(answered, "served again once Redis answers");
}

#[tokio::test]
async fn a_store_that_never_answered_is_unavailable_not_a_hang() {
    // A port nobody listens on.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let shared = Store::redis(&format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .timeout(Duration::from_millis(300));
    let (took, outcome) = timed(shared.task_store().get("t", 0)).await;
    assert_unavailable("a task read", outcome);
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Note {
    note: String,
}

/// A server with a two-round tool, a task tool and notes, all its state in `store`.
fn instance(store: &Store) -> Server {
    let notes: HandleStore<String> =
        HandleStore::new("note", store.handle_backend()).expect("a kind");
    let (reader, described) = (notes.clone(), notes.clone());
    Server::builder("shared", "1")
        .tool(
            Tool::new("ask", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Name>("who")? {
                    Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!("hello {}", n.name)),
                    _ => Err(InputRequired::new()
                        .elicit::<Name>("who", "Who?")
                        .state("asked")
                        .into()),
                }
            })
            .description("Asks who, with sealed state"),
        )
        .tool(
            Tool::new("waits", |_: NoArgs, ctx: RequestContext| async move {
                ctx.cancellation().cancelled().await;
                Err::<String, _>(ToolError::failed("cancelled"))
            })
            .description("Waits until cancelled")
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("write", move |t: Text, ctx: RequestContext| {
                let notes = notes.clone();
                async move { Ok::<_, ToolError>(notes.create(&ctx, &t.text).await?) }
            })
            .description("Writes a note")
            .creates_handles(&described),
        )
        .tool(
            Tool::new("read", move |n: Note, ctx: RequestContext| {
                let notes = reader.clone();
                async move { Ok::<_, ToolError>(notes.get(&ctx, &n.note).await?) }
            })
            .description("Reads a note"),
        )
        .store(store.clone())
        .build()
        .expect("a server")
}

fn ask_call(id: i64, state: Option<&str>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {}});
    if let Some(state) = state {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({"who": {"action": "accept", "content": {"name": "Ada"}}});
    }
    let mut body = request(id, "tools/call", params);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    body
}

fn task_call(id: i64, method: &str, params: Value) -> Value {
    let mut body = request(id, method, params);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    body
}

fn text(reply: &Reply) -> String {
    reply.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {}", reply.body))
        .to_owned()
}

/// A round begun on `first` and ended on `second` completes; the state replayed on `first`
/// is refused.
async fn a_round_crosses(first: &TestServer, second: &TestServer, id: i64) {
    let asked = post(&first.url, &ask_call(id, None)).await;
    let state = asked.last()["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("sealed state: {}", asked.body))
        .to_owned();
    let answered = post(&second.url, &ask_call(id + 1, Some(&state))).await;
    assert_eq!(text(&answered), "hello Ada");
    let replayed = post(&first.url, &ask_call(id + 2, Some(&state))).await;
    assert_eq!(replayed.error_code(), Some(-32602), "{}", replayed.body);
    let message = replayed.last()["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("already used"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_serve_each_others_rounds_tasks_and_notes() {
    let redis = RedisServer::start();
    let shared = store(&redis, "two");
    let a = TestServer::start(instance(&shared)).await;
    let b = TestServer::start(instance(&shared)).await;

    a_round_crosses(&a, &b, 1).await;
    a_round_crosses(&b, &a, 10).await;

    let call = task_call(20, "tools/call", json!({"name": "waits", "arguments": {}}));
    let created = post(&a.url, &call).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned();
    let got = post(
        &b.url,
        &task_call(21, "tasks/get", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(got.last()["result"]["status"], "working", "{}", got.body);
    let cancelled = post(
        &b.url,
        &task_call(22, "tasks/cancel", json!({"taskId": task_id})),
    )
    .await;
    assert!(
        cancelled.last().get("result").is_some(),
        "{}",
        cancelled.body
    );
    let got = post(
        &a.url,
        &task_call(23, "tasks/get", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(got.last()["result"]["status"], "cancelled", "{}", got.body);

    let write = request(
        30,
        "tools/call",
        json!({"name": "write", "arguments": {"text": "kept"}}),
    );
    let note = text(&post(&a.url, &write).await);
    let read = request(
        31,
        "tools/call",
        json!({"name": "read", "arguments": {"note": note}}),
    );
    assert_eq!(text(&post(&b.url, &read).await), "kept");
    a.stop().await;
    b.stop().await;
}

fn legacy_headers(session: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        (
            "accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
    ];
    if let Some(session) = session {
        headers.push(("mcp-session-id".to_owned(), session.to_owned()));
        headers.push(("mcp-protocol-version".to_owned(), "2025-11-25".to_owned()));
    }
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_opened_on_one_server_is_served_and_ended_by_another() {
    let redis = RedisServer::start();
    let shared = store(&redis, "legacy");
    let a = TestServer::start(instance(&shared)).await;
    let b = TestServer::start(instance(&shared)).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}
    }});
    let opened = post_raw(&a.url, initialize.to_string(), &legacy_headers(None)).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let listed = post_raw(&b.url, list.to_string(), &legacy_headers(Some(&session))).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(
        listed.last()["result"]["tools"].is_array(),
        "{}",
        listed.body
    );
    let ended = client()
        .delete(&b.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let gone = post_raw(&a.url, list.to_string(), &legacy_headers(Some(&session))).await;
    assert_eq!(gone.status, 404, "ended on the other server: {}", gone.body);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_of_the_shared_key_ring_keeps_rounds_in_flight() {
    let redis = RedisServer::start();
    let shared = store(&redis, "rotation");
    let a = TestServer::start(instance(&shared)).await;
    let before = post(&a.url, &ask_call(1, None)).await;
    let old_state = before.last()["result"]["requestState"]
        .as_str()
        .expect("sealed")
        .to_owned();
    let rotated = shared.rotate_request_state_key().await.expect("rotated");
    assert_eq!(rotated, Some(1));
    // A server started after the rotation seals with the new key; the one started before
    // opens that at once, and the new one opens what the old key sealed.
    let c = TestServer::start(instance(&shared)).await;
    a_round_crosses(&c, &a, 10).await;
    let answered = post(&c.url, &ask_call(20, Some(&old_state))).await;
    assert_eq!(text(&answered), "hello Ada");
    a.stop().await;
    c.stop().await;
}

/// The time of one call of each backend operation against a local Redis, median of many,
/// printed for the record (and bounded loosely, so a pathological slowness fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_of_each_operation_takes_well_under_a_millisecond_or_so() {
    let redis = RedisServer::start();
    let shared = store(&redis, "latency");
    let mut report = Vec::new();
    for (name, median) in crate::redis_latency::medians(&shared).await {
        report.push(format!("{name}: {median:?}"));
        assert!(median < Duration::from_millis(20), "{name}: {median:?}");
    }
    eprintln!(
        "Redis store, one call each (median of 200): {}",
        report.join(", ")
    );
}
