//! A state store that goes away and comes back, through the real request path: a retry whose
//! requestState cannot be checked for reuse, a task that cannot be read, started or cancelled,
//! and a legacy session the store cannot find are all refused with a clear error saying the
//! store is unavailable (-32603; 503 for sessions), never served as if the store had said yes
//! and never reported as "unknown"; once the store is back, the same requests succeed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;
use toolwire_server::{
    Elicited, InputRequired, MemoryReplayGuard, MemorySessionStore, MemoryTaskStore, NoArgs,
    ReplayGuard, RequestContext, Server, SessionChange, SessionRecord, SessionStore,
    SessionStoreError, StoreError, TaskRecord, TaskStore, TaskSupport, Tool, ToolError,
};

use crate::support::*;

/// Whether the store is away; shared by a test and the store it switches.
#[derive(Clone, Default)]
struct Switch(Arc<AtomicBool>);

impl Switch {
    fn set_away(&self, away: bool) {
        self.0.store(away, Ordering::SeqCst);
    }

    fn away(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// An in-memory store that fails as unavailable while its switch says so.
struct Flaky<S> {
    inner: S,
    switch: Switch,
}

fn refused<T: Send + 'static>() -> BoxFuture<'static, Result<T, StoreError>> {
    Box::pin(std::future::ready(Err(StoreError::unavailable(
        "connection refused by 10.1.2.3:6379",
    ))))
}

impl ReplayGuard for Flaky<MemoryReplayGuard> {
    fn redeem(
        &self,
        token_id: [u8; 12],
        expires_ms: u64,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.redeem(token_id, expires_ms, now_ms)
    }
}

impl TaskStore for Flaky<MemoryTaskStore> {
    fn insert(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.insert(record)
    }

    fn get<'a>(
        &'a self,
        task_id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.get(task_id, now_ms)
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.replace(record)
    }
}

impl SessionStore for Flaky<MemorySessionStore> {
    fn create(
        &self,
        record: SessionRecord,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        if self.switch.away() {
            let error = StoreError::unavailable("connection refused by 10.1.2.3:6379");
            return Box::pin(std::future::ready(Err(error.into())));
        }
        self.inner.create(record, now_ms)
    }

    fn touch<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.touch(id, now_ms)
    }

    fn update<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        change: SessionChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.update(id, now_ms, change)
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        if self.switch.away() {
            return refused();
        }
        self.inner.remove(id)
    }
}

/// The error a request refused because the store is away must carry: -32603, a sentence
/// that says the store is unavailable and to try again, and nothing of the cause (which
/// names a host).
fn assert_store_unavailable(error: &Value) {
    assert_eq!(error["code"], -32603, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("state store is unavailable; try again"),
        "{message}"
    );
    assert!(
        !message.contains("10.1.2.3"),
        "the cause stays in the logs: {message}"
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

/// Asks a name, with sealed state, then greets.
fn ask() -> Tool {
    Tool::new("ask", |_: NoArgs, ctx: RequestContext| async move {
        match ctx.elicited::<Name>("who")? {
            Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(format!("hello {}", n.name)),
            _ => Err(InputRequired::new()
                .elicit::<Name>("who", "Who?")
                .state("asked")
                .into()),
        }
    })
    .description("Asks who, with sealed state")
}

fn ask_call(id: i64, state: Option<&str>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {}});
    if let Some(state) = state {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({"who": {"action": "accept", "content": {"name": "Ada"}}});
    }
    let mut body = request(id, "tools/call", params);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    body
}

#[tokio::test]
async fn a_retry_whose_state_cannot_be_checked_for_reuse_is_refused_until_the_store_is_back() {
    let switch = Switch::default();
    let guard = Flaky {
        inner: MemoryReplayGuard::default(),
        switch: switch.clone(),
    };
    let server = Server::builder("state", "1")
        .tool(ask())
        .single_use_request_state(guard)
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let first = post(&s.url, &ask_call(1, None)).await;
    let state = first.last()["result"]["requestState"]
        .as_str()
        .expect("sealed state")
        .to_owned();
    switch.set_away(true);
    for id in 2..4 {
        let refused = post(&s.url, &ask_call(id, Some(&state))).await;
        assert!(refused.last().get("result").is_none(), "{}", refused.body);
        assert_store_unavailable(&refused.last()["error"]);
    }
    switch.set_away(false);
    let served = post(&s.url, &ask_call(4, Some(&state))).await;
    assert_eq!(
        served.last()["result"]["content"][0]["text"],
        "hello Ada",
        "a refused redemption did not spend the state: {}",
        served.body
    );
    let replayed = post(&s.url, &ask_call(5, Some(&state))).await;
    assert_eq!(replayed.error_code(), Some(-32602), "{}", replayed.body);
    s.stop().await;
}

fn with_tasks(mut body: Value) -> Value {
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    body
}

fn task_request(id: i64, method: &str, task_id: &str) -> Value {
    with_tasks(request(id, method, json!({"taskId": task_id})))
}

/// Waits until cancelled: a call that always becomes a task.
fn waits() -> Tool {
    Tool::new("waits", |_: NoArgs, ctx: RequestContext| async move {
        ctx.cancellation().cancelled().await;
        Err::<String, _>(ToolError::failed("cancelled"))
    })
    .description("Waits until cancelled")
    .task_support(TaskSupport::Optional)
}

#[tokio::test]
async fn tasks_fail_closed_while_the_store_is_away() {
    let switch = Switch::default();
    let store = Flaky {
        inner: MemoryTaskStore::default(),
        switch: switch.clone(),
    };
    let server = Server::builder("state", "1")
        .tool(waits())
        .task_store(store)
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let call = with_tasks(request(
        1,
        "tools/call",
        json!({"name": "waits", "arguments": {}}),
    ));
    let created = post(&s.url, &call).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.body))
        .to_owned();

    switch.set_away(true);
    let started = post(&s.url, &call).await;
    assert_store_unavailable(&started.last()["error"]);
    assert!(
        started.last()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("The task could not be started"))
    );
    for method in ["tasks/get", "tasks/cancel"] {
        let refused = post(&s.url, &task_request(2, method, &task_id)).await;
        assert_store_unavailable(&refused.last()["error"]);
    }
    let unknown = post(&s.url, &task_request(3, "tasks/get", "no-such-task")).await;
    assert_store_unavailable(&unknown.last()["error"]);

    switch.set_away(false);
    let got = post(&s.url, &task_request(4, "tasks/get", &task_id)).await;
    assert_eq!(got.last()["result"]["status"], "working", "{}", got.body);
    let cancelled = post(&s.url, &task_request(5, "tasks/cancel", &task_id)).await;
    assert!(
        cancelled.last().get("result").is_some(),
        "{}",
        cancelled.body
    );
    let got = post(&s.url, &task_request(6, "tasks/get", &task_id)).await;
    assert_eq!(got.last()["result"]["status"], "cancelled", "{}", got.body);
    s.stop().await;
}

fn legacy(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

async fn legacy_post(url: &str, session: Option<&str>, body: &Value) -> Reply {
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
    post_raw(url, body.to_string(), &headers).await
}

/// 503 with `Retry-After` and a -32603 that says the store is away: not 404 "session not
/// found", which would make the client drop a session that still exists.
fn assert_session_store_unavailable(reply: &Reply) {
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert!(reply.headers.contains_key("retry-after"));
    assert_store_unavailable(&reply.last()["error"]);
}

#[tokio::test]
async fn a_session_the_store_cannot_read_is_unavailable_not_unknown() {
    let switch = Switch::default();
    let store = Flaky {
        inner: MemorySessionStore::default(),
        switch: switch.clone(),
    };
    let server = Server::builder("state", "1").tool(ask()).build().unwrap();
    let s = TestServer::start_with(server, HttpConfig::default().session_store(store)).await;
    let initialize = legacy(
        0,
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "legacy", "version": "1"}
        }),
    );
    let opened = legacy_post(&s.url, None, &initialize).await;
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();

    switch.set_away(true);
    assert_session_store_unavailable(&legacy_post(&s.url, None, &initialize).await);
    let ping = legacy(1, "ping", json!({}));
    assert_session_store_unavailable(&legacy_post(&s.url, Some(&session), &ping).await);
    let deleted = client()
        .delete(&s.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 503);

    switch.set_away(false);
    let pong = legacy_post(&s.url, Some(&session), &ping).await;
    assert_eq!(
        pong.status, 200,
        "the session outlived the outage: {}",
        pong.body
    );
    assert!(pong.last().get("result").is_some(), "{}", pong.body);
    s.stop().await;
}
