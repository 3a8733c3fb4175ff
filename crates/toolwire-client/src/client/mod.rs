//! The client itself: one connection to one server, cheap to clone. [`Client`] and its
//! accessors are here; its public methods are in this folder, one file per concern:
//!
//! - `methods.rs`: the methods that are one request each (`server/discover`, `resources/read`,
//!   `prompts/get`, `completion/complete`): where a new request method goes;
//! - `pages.rs`: the paginated lists (resources, templates, prompts) and the walk under a budget;
//! - `tools.rs` and `tool_cache.rs`: tools listed, cached, called, their output checked;
//! - `listen/`: subscriptions (`subscriptions/listen`, or a legacy server's notifications);
//! - `rpc.rs`: the request path every method goes through (`_meta`, ids, timeouts, retries);
//! - `rounds.rs`: `input_required` rounds answered by the handlers;
//! - `era.rs`: which era the server speaks (2026-07-28 or a legacy session), settled once;
//! - `incoming.rs`: messages the server starts.
//!
//! Its configuration is in `builder.rs` and the connection in `connect.rs`, beside this folder.

mod answer;
mod envelope;
mod era;
pub(crate) mod incoming;
pub(crate) mod listen;
mod methods;
mod pages;
pub(crate) mod rounds;
pub(crate) mod rpc;
pub(crate) mod tasks;
mod tool_cache;
pub(crate) mod tools;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ClientCapabilities, JsonObject, LoggingMessageParams, PROTOCOL_VERSION, ProgressParams,
};

use crate::builder::ClientBuilder;
use crate::client::tool_cache::ToolCache;
use crate::state::{Era, State};
use crate::transport::Transport;

/// Called with each progress notification of a request.
pub type ProgressFn = Arc<dyn Fn(&ProgressParams) + Send + Sync>;
/// Called with each log message the server sends while answering a request.
pub type LogFn = Arc<dyn Fn(&LoggingMessageParams) + Send + Sync>;

/// Told each request as it is sent ([`CallOptions::on_request`](crate::CallOptions::on_request)).
pub type RequestIdFn = Arc<dyn Fn(crate::input::Sent) + Send + Sync>;

/// The connections made so far in this process, numbering the next.
static CONNECTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A connection to one MCP server. Cheap to clone; clones share the connection and caches.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// What the clones of a client share. Its fields are private to this folder: the files here are
/// the client's concerns, everything else goes through `Client`'s methods.
struct Inner {
    transport: Transport,
    config: ClientBuilder,
    next_id: AtomicI64,
    /// This connection's number in the process ([`Client::connection`]).
    connection: u64,
    state: Mutex<State>,
    /// Held while the era is being settled (probe, initialize), so it happens once.
    establish: tokio::sync::Mutex<()>,
    tools: Mutex<Option<ToolCache>>,
    /// Bumped by every invalidation, so a list fetched across a change is not kept as fresh.
    tools_epoch: std::sync::atomic::AtomicU64,
    /// Notifications that belong to no request (legacy servers), for legacy subscriptions.
    events: broadcast::Sender<Value>,
    /// The legacy HTTP server's standalone GET stream, while one is open.
    legacy_stream: Mutex<Option<tokio::task::AbortHandle>>,
    /// `_meta` for 2026-07-28 requests, less the version (B-15, B-17).
    request_meta: JsonObject,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .legacy_stream
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.inner.transport)
            .finish_non_exhaustive()
    }
}

/// Per-request options of the core request path.
#[derive(Default, Clone)]
pub(crate) struct RpcOptions {
    /// The `Mcp-Name` value.
    pub(crate) name: Option<String>,
    /// `Mcp-Param-*` headers.
    pub(crate) mirrored: Vec<(String, String)>,
    /// The answers to the previous round, sent with the first request (a relayed retry).
    pub(crate) answers: Option<crate::client::rounds::RoundAnswers>,
    /// Return an `input_required` result as it came instead of answering it.
    pub(crate) relay: bool,
    /// The capabilities declared for the server's questions, instead of the client's own.
    pub(crate) input_capabilities: Option<toolwire_protocol::ClientCapabilities>,
    /// This request's bearer token, instead of the configured one or the OAuth flow's.
    pub(crate) bearer: Option<std::sync::Arc<str>>,
    /// Declares the tasks extension on this request, and takes a task for a result.
    pub(crate) tasks: bool,
    pub(crate) progress: Option<ProgressFn>,
    pub(crate) log: Option<LogFn>,
    /// Told the id of each request sent for this one (a new id on each attempt).
    pub(crate) on_request: Option<RequestIdFn>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: Option<CancellationToken>,
}

/// Typed params as the request path takes them: without `_meta`, which the request path writes
/// for each attempt (B-15; the version may change between two attempts, V-03).
pub(crate) fn params<P: serde::Serialize>(params: &P) -> Value {
    let mut value =
        serde_json::to_value(params).unwrap_or_else(|_| Value::Object(JsonObject::new()));
    if let Some(object) = value.as_object_mut() {
        object.remove(toolwire_protocol::META_FIELD);
    }
    value
}

/// The codes that only a 2026-07-28 server sends: such an error proves the era.
pub(crate) fn is_modern_error(code: i64) -> bool {
    matches!(code, -32022..=-32020)
}

impl Client {
    pub(crate) fn new(config: ClientBuilder, transport: Transport) -> Self {
        let version = config
            .versions
            .first()
            .cloned()
            .unwrap_or_else(|| PROTOCOL_VERSION.to_owned());
        let (events, _) = broadcast::channel(256);
        let request_meta = config.request_meta();
        Client {
            inner: Arc::new(Inner {
                request_meta,
                transport,
                config,
                next_id: AtomicI64::new(1),
                connection: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
                state: Mutex::new(State::new(version)),
                establish: tokio::sync::Mutex::new(()),
                tools: Mutex::new(None),
                tools_epoch: std::sync::atomic::AtomicU64::new(0),
                events,
                legacy_stream: Mutex::new(None),
            }),
        }
    }

    /// The capabilities declared on every request: those the handlers can answer (B-20).
    pub fn capabilities(&self) -> ClientCapabilities {
        self.inner.config.declared_capabilities()
    }

    /// The OAuth authorization the client holds (with [`ClientBuilder::oauth`], once a
    /// challenge was answered): its issuer, resource, scopes and expiry.
    pub fn authorized(&self) -> Option<crate::auth::Authorized> {
        self.inner
            .transport
            .auth()
            .and_then(|flow| flow.authorized())
    }

    /// The protocol version requests are sent with (after any negotiation or fallback).
    pub fn protocol_version(&self) -> String {
        let state = self.state();
        match &state.era {
            Era::Legacy(session) => session.version.clone(),
            _ => state.version.clone(),
        }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This connection's number, unique in the process: its requests' ids are its own (a new
    /// connection to the same server starts them again), and with this number they are
    /// unique ([`Sent`](crate::Sent), [`Asked`](crate::Asked)).
    pub fn connection(&self) -> u64 {
        self.inner.connection
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_http(&self) -> bool {
        self.inner.transport.is_http()
    }

    /// Whether [`close`](Client::close) was called on a stdio client.
    pub fn is_closed(&self) -> bool {
        match &self.inner.transport {
            Transport::Stdio(t) => t.is_closed(),
            Transport::Http(_) => false,
        }
    }

    /// The process id of a stdio server, while it runs.
    pub async fn server_pid(&self) -> Option<u32> {
        match &self.inner.transport {
            Transport::Stdio(t) => t.pid().await,
            Transport::Http(_) => None,
        }
    }

    /// How many times the stdio server was started: 1, then one more each time it was found
    /// dead and started again (S-11). `None` over HTTP.
    pub fn server_starts(&self) -> Option<u64> {
        match &self.inner.transport {
            Transport::Stdio(t) => Some(t.generation()),
            Transport::Http(_) => None,
        }
    }

    /// Closes the connection: for a child process, stdin, then SIGTERM, then SIGKILL (S-09).
    pub async fn close(&self) {
        if let Transport::Stdio(t) = &self.inner.transport {
            t.close(self.inner.config.shutdown_grace).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolwire_protocol::{PaginatedParams, ReadResourceParams};

    use super::*;

    #[test]
    fn typed_params_leave_meta_to_the_request_path() {
        let first = params(&PaginatedParams::default());
        assert_eq!(first, json!({}));
        let read = params(&ReadResourceParams {
            uri: "file:///a".into(),
            ..Default::default()
        });
        assert_eq!(read, json!({"uri": "file:///a"}));
    }
}
