//! The server: its identity, configuration, tool registry and change bus, and every public
//! method of [`Server`] but those of its prompts and resources (`offers.rs`). It is built in
//! `builder.rs`; the other modules reach its parts through
//! the narrow accessors at the end of this file.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CacheScope, Implementation, JsonObject, ListChangedCapability, ResourcesCapability, ResultMeta,
    ServerCapabilities, TASKS_EXTENSION,
};

use crate::clock::Clock;
use crate::error::Result;
use crate::request::context::Logging;
use crate::request::cursor::CursorCodec;
use crate::request::followed::Followers;
use crate::safety::audit::AuditSink;
use crate::state::request_keys::RequestKeys;
use crate::state::request_state::ReplayGuard;
use crate::state::task_store::Tasks;
use crate::tools::catalog::Catalog;
use crate::tools::offered::{Change, Offer};
use crate::tools::prompt::RegisteredPrompt;
use crate::tools::registry::ToolRegistry;
use crate::tools::resource::{RegisteredResource, RegisteredTemplate};
use crate::tools::tool::Tool;
use builder::ServerBuilder;
use toolwire_protocol::schema::{FormatMode, SchemaLimits};

pub(crate) mod builder;
pub(crate) mod call;
mod completion;
mod dispatch;
pub(crate) mod offers;
mod reconfigure;
pub(crate) mod subscriptions;
mod task_call;
pub(crate) mod task_watch;
pub(crate) mod tasks;
pub(crate) mod visibility;

pub use reconfigure::Reconfigure;

pub use crate::request::route::SUPPORTED_VERSIONS;

/// Tunables; every field has a sensible default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) page_size: usize,
    pub(crate) list_ttl_ms: u64,
    pub(crate) discover_ttl_ms: u64,
    pub(crate) cache_scope: CacheScope,
    pub(crate) logging: Logging,
    pub(crate) schema_limits: SchemaLimits,
    pub(crate) formats: FormatMode,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_json_depth: usize,
    pub(crate) read_ttl_ms: u64,
    pub(crate) read_cache_scope: CacheScope,
    /// Whether clients of the initialization-based revisions are served too.
    pub(crate) legacy: bool,
    /// Which tools each caller may see and call, beyond scopes.
    pub(crate) tool_visibility: Option<crate::tools::visibility::SharedVisibility>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page_size: 100,
            list_ttl_ms: 300_000,
            discover_ttl_ms: 300_000,
            cache_scope: CacheScope::Public,
            logging: Logging::Undeclared,
            schema_limits: SchemaLimits::default(),
            formats: FormatMode::Annotate,
            max_message_bytes: 4 * 1024 * 1024,
            max_json_depth: 64,
            read_ttl_ms: 300_000,
            read_cache_scope: CacheScope::Private,
            legacy: true,
            tool_visibility: None,
        }
    }
}

/// An MCP 2026-07-28 tool server. Cheap to clone; clones share the same tools.
///
/// Serve it with [`crate::stdio::serve`] or [`crate::http::serve`]; both may run at once.
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
}

/// How long a tool's handler may run per call unless the builder or the tool says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) struct ServerInner {
    info: Implementation,
    config: Config,
    /// A cap on `ttlMs` of list results set at runtime ([`Server::cap_list_ttl`]); `u64::MAX`:
    /// none.
    list_ttl_ms: std::sync::atomic::AtomicU64,
    registry: ToolRegistry,
    cursors: CursorCodec,
    /// Where changes go: this process's listeners and, with a shared store, every instance's.
    changes: Arc<dyn crate::state::fanout::ChangeFanOut>,
    /// The resources this instance's listeners follow.
    followers: Arc<Followers>,
    shutdown: CancellationToken,
    /// `_meta` put on every result: serverInfo unless turned off (B-18).
    result_meta: Option<ResultMeta>,
    /// The same as a JSON member, `,"_meta":{…}`, to splice into serialized results.
    result_meta_json: String,
    /// The `server/discover` result, serialized once: nothing in it changes at runtime.
    discover: Box<serde_json::value::RawValue>,
    prompts: Catalog<RegisteredPrompt>,
    resources: Catalog<RegisteredResource>,
    templates: Catalog<RegisteredTemplate>,
    /// The capabilities beside tools this server declared.
    offers: Offers,
    /// The tasks extension's state.
    tasks: Tasks,
    /// Request state sealing (M-06…M-08).
    request_state: RequestStateConfig,
    /// Wall-clock time for expiries.
    clock: Arc<dyn Clock>,
    /// The instructions of `server/discover` and of a legacy `initialize`.
    instructions: Option<String>,
    /// Where audit events go besides `tracing`.
    audit: Option<Arc<dyn AuditSink>>,
    /// The store every state lives in, if one was set (the HTTP transport's sessions).
    store: Option<crate::state::store::Store>,
    /// Tool rate limits shared with the other instances of a shared store.
    shared_limits: Option<crate::state::shared_limits::SharedLimits>,
    /// How legacy clients' answers and cancellations reach the instance running their
    /// request, with a shared store.
    session_relay: Option<Arc<dyn crate::state::relay::SessionRelay>>,
    /// Where operations, refusals and state are counted; `None`: nowhere (O-03).
    metrics: Option<crate::observe::Metrics>,
    /// The builder's readiness checks, beside the built-in ones.
    readiness: Vec<Arc<dyn crate::observe::Readiness>>,
}

/// Which capabilities beside tools the server declares.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Offers {
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
    pub(crate) tasks: bool,
}

impl Offers {
    /// Whether the server declared the capability.
    pub(crate) fn has(self, offer: Offer) -> bool {
        match offer {
            Offer::Prompts => self.prompts,
            Offer::Resources => self.resources,
        }
    }
}

/// How request state is sealed and checked.
pub(crate) struct RequestStateConfig {
    pub(crate) keys: RequestKeys,
    pub(crate) ttl_ms: u64,
    /// Set in single-use mode (M-08).
    pub(crate) replay_guard: Option<Arc<dyn ReplayGuard>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("tools", &self.tool_names())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Starts building a server that calls itself `name` at `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }

    /// Registers a tool at runtime; listen streams that asked are told the list changed (T-17).
    pub fn add_tool(&self, tool: Tool) -> Result<()> {
        self.add_tools([tool])
    }

    /// Registers several tools at once: all or none.
    pub fn add_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<()> {
        self.inner.registry.add_all(tools.into_iter().collect())?;
        self.notify(Change::Tools);
        Ok(())
    }

    /// Removes a tool at runtime.
    pub fn remove_tool(&self, name: &str) -> Result<()> {
        self.inner.registry.remove(name)?;
        self.notify(Change::Tools);
        Ok(())
    }

    /// Removes several tools at once (one change for listen streams); names that are not
    /// registered are left alone. How many were removed.
    pub fn remove_tools<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> usize {
        let names: std::collections::HashSet<&str> = names.into_iter().collect();
        let removed = self.inner.registry.remove_all(&names);
        if removed > 0 {
            self.notify(Change::Tools);
        }
        removed
    }

    /// Removes the named tools and registers `tools` in one step: a list request sees the
    /// tools before or after, never without a tool that is replaced under its own name (a
    /// gateway updating an upstream's definition). All or nothing: a tool that is refused, or
    /// whose name stays taken, changes nothing. One change for listen streams.
    pub fn replace_tools<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
        tools: impl IntoIterator<Item = Tool>,
    ) -> Result<()> {
        let names: std::collections::HashSet<&str> = names.into_iter().collect();
        let tools: Vec<Tool> = tools.into_iter().collect();
        let added = !tools.is_empty();
        let removed = self.inner.registry.replace_all(&names, tools)?;
        if removed > 0 || added {
            self.notify(Change::Tools);
        }
        Ok(())
    }

    /// Caps `ttlMs` of list results from now on, under the configured one
    /// ([`ServerBuilder::list_ttl`]): a gateway keeps its lists no fresher than its upstreams'.
    /// `None` lifts the cap.
    pub fn cap_list_ttl(&self, ttl: Option<Duration>) {
        let ms = ttl.map_or(u64::MAX, |t| t.as_millis().min(u128::from(u64::MAX)) as u64);
        self.inner
            .list_ttl_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The registered tool names in listing order.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner
            .registry
            .snapshot()
            .items
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Processes one JSON-RPC message in memory, as the stdio transport would, and returns what
    /// would be written: the request's notifications and then its response. A notification
    /// yields nothing; `subscriptions/listen` runs until the server shuts down.
    ///
    /// Handy for tests, benchmarks and embedding Toolwire behind a transport of your own.
    pub async fn handle_message(&self, message: &[u8]) -> Vec<String> {
        self.handle_in_memory(message).await
    }

    /// Makes the audit events recorded so far durable (see [`crate::AuditSink::flush`]): call
    /// it before the process exits.
    pub fn flush_audit(&self) {
        if let Some(sink) = &self.inner.audit {
            sink.flush();
        }
    }

    /// How many tasks this process is running (working or waiting for input); each ends when
    /// it finishes, is cancelled, reaches its TTL, or the server shuts down.
    pub fn running_tasks(&self) -> usize {
        self.inner.tasks.running().len()
    }

    /// Waits until changes made on other instances sharing this server's store reach its
    /// listeners (at once without a shared store): for a readiness check, or a test. While
    /// the store is away it waits until it is back; bound it with a timeout.
    pub async fn changes_connected(&self) {
        self.inner.changes.connected().await;
    }

    /// The server's self-description.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// What `server/discover` reports.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.offered_capabilities()
    }

    /// The capabilities this server declares.
    pub(crate) fn offered_capabilities(&self) -> ServerCapabilities {
        capabilities_of(self.inner.offers, self.inner.config.logging)
    }

    /// Begins a graceful shutdown: listen streams end with their closing result (L-10) and the
    /// transports stop accepting work.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Shuts the server down gracefully on the first SIGINT or SIGTERM, and exits the process on
    /// the second (for binaries; needs a Tokio runtime).
    pub fn shutdown_on_signal(&self) {
        let server = self.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down; a second signal exits at once");
            server.shutdown();
            wait_for_signal().await;
            std::process::exit(130);
        });
    }

    /// A token that fires when [`Server::shutdown`] is called.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }
}

/// Narrow access for the rest of the crate: each module reads the part it serves, and only this
/// module changes what the server holds.
impl Server {
    /// Tells listen streams (and legacy sessions) about a change; nobody listening is fine.
    pub(crate) fn notify(&self, change: Change) {
        self.inner.changes.publish(change);
    }

    /// The changes from now on, for a listen stream or a legacy session.
    pub(crate) fn subscribe_changes(&self) -> broadcast::Receiver<Change> {
        self.inner.changes.subscribe()
    }

    /// The resources this instance's listeners follow, for a listener to add its own to.
    pub(crate) fn followers(&self) -> &Arc<Followers> {
        &self.inner.followers
    }

    /// A handle on the server that does not keep it alive (for its background work).
    pub(crate) fn downgrade(&self) -> std::sync::Weak<ServerInner> {
        Arc::downgrade(&self.inner)
    }

    /// The server, if it is still alive.
    pub(crate) fn from_inner(inner: &std::sync::Weak<ServerInner>) -> Option<Server> {
        inner.upgrade().map(|inner| Server { inner })
    }

    /// Whether [`Server::shutdown`] was called.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    /// `ttlMs` of list results: the configured one, under the cap set at runtime.
    pub(crate) fn list_ttl_ms(&self) -> u64 {
        let cap = self
            .inner
            .list_ttl_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        self.inner.config.list_ttl_ms.min(cap)
    }

    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.inner.registry
    }

    pub(crate) fn cursors(&self) -> &CursorCodec {
        &self.inner.cursors
    }

    /// `_meta` put on every result: serverInfo unless turned off (B-18).
    pub(crate) fn result_meta(&self) -> Option<&ResultMeta> {
        self.inner.result_meta.as_ref()
    }

    /// [`Server::result_meta`] as a JSON member, `,"_meta":{…}`, to splice into results.
    pub(crate) fn result_meta_json(&self) -> &str {
        &self.inner.result_meta_json
    }

    /// The `server/discover` result, serialized once.
    pub(crate) fn discover(&self) -> &serde_json::value::RawValue {
        &self.inner.discover
    }

    pub(crate) fn prompts(&self) -> &Catalog<RegisteredPrompt> {
        &self.inner.prompts
    }

    pub(crate) fn resources(&self) -> &Catalog<RegisteredResource> {
        &self.inner.resources
    }

    pub(crate) fn templates(&self) -> &Catalog<RegisteredTemplate> {
        &self.inner.templates
    }

    /// The capabilities beside tools this server declared.
    pub(crate) fn offers(&self) -> Offers {
        self.inner.offers
    }

    pub(crate) fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    /// Asks every readiness check: the built-in ones (at least one tool registered; the shared
    /// store, if there is one, answers a ping within its timeout) and the builder's
    /// ([`ServerBuilder::readiness`]); returns the parts that are not ready, none of them
    /// [`blocking`](crate::NotReady::blocking) when the server is ready (O-06).
    pub async fn readiness(&self) -> Vec<crate::observe::NotReady> {
        let mut not_ready = Vec::new();
        if self.tool_names().is_empty() {
            not_ready.push(crate::observe::NotReady::new(
                "tools",
                "no tool is registered; a caller would find nothing to call",
            ));
        }
        if let Some(store) = self.store() {
            if let Err(error) = store.ping().await {
                not_ready.push(crate::observe::NotReady::new(
                    "store",
                    format!("the shared state store does not answer: {error}"),
                ));
            }
        }
        let checks = self.readiness_checks().iter().map(|c| c.check());
        not_ready.extend(
            futures::future::join_all(checks)
                .await
                .into_iter()
                .flatten(),
        );
        not_ready
    }

    /// The metrics set with [`ServerBuilder::metrics`], if any.
    pub fn metrics(&self) -> Option<&crate::observe::Metrics> {
        self.inner.metrics.as_ref()
    }

    /// Counts a refusal, with metrics.
    pub(crate) fn count_refusal(&self, reason: crate::observe::RefusalReason) {
        if let Some(metrics) = &self.inner.metrics {
            metrics.count_refusal(reason);
        }
    }

    /// The builder's readiness checks.
    pub(crate) fn readiness_checks(&self) -> &[Arc<dyn crate::observe::Readiness>] {
        &self.inner.readiness
    }

    /// The store set with [`ServerBuilder::store`], if any.
    pub(crate) fn store(&self) -> Option<&crate::state::store::Store> {
        self.inner.store.as_ref()
    }

    /// The relay to the other instances of a shared store, for legacy sessions, if any.
    pub(crate) fn session_relay(&self) -> Option<&Arc<dyn crate::state::relay::SessionRelay>> {
        self.inner.session_relay.as_ref()
    }

    /// Tool rate limits shared with the other instances of a shared store, if any.
    pub(crate) fn shared_limits(&self) -> Option<&crate::state::shared_limits::SharedLimits> {
        self.inner.shared_limits.as_ref()
    }

    pub(crate) fn request_state(&self) -> &RequestStateConfig {
        &self.inner.request_state
    }

    pub(crate) fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// The instructions of `server/discover` and of a legacy `initialize`.
    pub(crate) fn instructions(&self) -> Option<&str> {
        self.inner.instructions.as_deref()
    }

    /// Where audit events go besides `tracing`.
    pub(crate) fn audit(&self) -> Option<&Arc<dyn AuditSink>> {
        self.inner.audit.as_ref()
    }
}

/// The capabilities a server with these offers declares.
pub(crate) fn capabilities_of(offers: Offers, logging: Logging) -> ServerCapabilities {
    ServerCapabilities {
        tools: Some(ListChangedCapability {
            list_changed: Some(true),
        }),
        logging: (logging == Logging::Declared).then(JsonObject::new),
        prompts: offers.prompts.then_some(ListChangedCapability {
            list_changed: Some(true),
        }),
        resources: offers.resources.then_some(ResourcesCapability {
            subscribe: Some(true),
            list_changed: Some(true),
        }),
        completions: (offers.prompts || offers.resources).then(JsonObject::new),
        extensions: offers
            .tasks
            .then(|| JsonObject::from_iter([(TASKS_EXTENSION.to_owned(), serde_json::json!({}))])),
        ..Default::default()
    }
}

/// The next SIGINT or SIGTERM (Ctrl-C elsewhere).
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// What the admin endpoints read of a server (`/metrics`, `/readyz`, and the end of serving).
impl crate::observe::Observed for Server {
    fn metrics(&self) -> Option<&crate::observe::Metrics> {
        Server::metrics(self)
    }

    fn not_ready(&self) -> futures::future::BoxFuture<'_, Vec<crate::observe::NotReady>> {
        Box::pin(self.readiness())
    }

    fn shutdown_token(&self) -> CancellationToken {
        Server::shutdown_token(self)
    }
}
