//! Building a [`Server`]: its tools, prompts, resources, stores, policies and limits, each
//! checked when the server is built.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolwire_protocol::{CacheScope, Implementation};

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::request::context::Logging;
use crate::request::cursor::CursorCodec;
use crate::server::{
    Config, DEFAULT_TOOL_TIMEOUT, Offers, RequestStateConfig, Server, ServerInner,
};
use crate::state::fanout::{ChangeFanOut, MemoryFanOut};
use crate::state::request_state::{ReplayGuard, RequestStateKeys};
use crate::state::store::Store;
use crate::state::task_store::{TaskStore, Tasks};
use crate::tools::catalog::Catalog;
use crate::tools::offered::register_all;
use crate::tools::prompt::Prompt;
use crate::tools::registry::{ToolDefaults, ToolRegistry};
use crate::tools::resource::{Resource, ResourceTemplate};
use crate::tools::tool::Tool;
use toolwire_protocol::schema::{FormatMode, SchemaLimits};

mod assemble;

/// Builds a [`Server`].
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<Tool>,
    prompts: Vec<Prompt>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    offers: Offers,
    config: Config,
    cursor_key: Option<[u8; 32]>,
    server_info_in_results: bool,
    state_keys: Option<RequestStateKeys>,
    state_ttl: Duration,
    replay_guard: Option<Arc<dyn ReplayGuard>>,
    clock: Arc<dyn Clock>,
    task_store: Option<Arc<dyn TaskStore>>,
    task_ttl: Duration,
    task_heartbeat: Duration,
    output_guard: crate::safety::output::OutputGuard,
    tool_timeout: Option<Duration>,
    rate_limit: Option<crate::safety::limits::RateLimit>,
    audit: Option<Arc<dyn crate::safety::audit::AuditSink>>,
    store: Option<Store>,
    fan_out: Option<Arc<dyn ChangeFanOut>>,
    metrics: Option<crate::observe::Metrics>,
    readiness: Vec<Arc<dyn crate::observe::Readiness>>,
}

impl ServerBuilder {
    /// A builder with every default, for [`Server::builder`].
    pub(crate) fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ServerBuilder {
            info: Implementation::new(name, version),
            instructions: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            offers: Offers::default(),
            config: Config::default(),
            cursor_key: None,
            server_info_in_results: true,
            state_keys: None,
            state_ttl: Duration::from_secs(300),
            replay_guard: None,
            clock: Arc::new(SystemClock),
            task_store: None,
            task_ttl: Duration::from_secs(300),
            task_heartbeat: crate::state::task_store::DEFAULT_TASK_HEARTBEAT,
            output_guard: crate::safety::output::OutputGuard::default(),
            tool_timeout: Some(DEFAULT_TOOL_TIMEOUT),
            rate_limit: Some(crate::safety::limits::DEFAULT_TOOL_RATE_LIMIT),
            audit: None,
            store: None,
            fan_out: None,
            metrics: None,
            readiness: Vec::new(),
        }
    }

    /// Sets the display name in serverInfo.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }

    /// Sets the description in serverInfo.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.info.description = Some(description.into());
        self
    }

    /// Sets the `instructions` of `server/discover`.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Adds a tool; definitions are checked by [`ServerBuilder::build`].
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds several tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a prompt; the server then offers prompts.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self.offers.prompts = true;
        self
    }

    /// Adds several prompts.
    pub fn prompts(mut self, prompts: impl IntoIterator<Item = Prompt>) -> Self {
        self.prompts.extend(prompts);
        self.offers.prompts = true;
        self
    }

    /// Adds a resource; the server then offers resources.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self.offers.resources = true;
        self
    }

    /// Adds several resources.
    pub fn resources(mut self, resources: impl IntoIterator<Item = Resource>) -> Self {
        self.resources.extend(resources);
        self.offers.resources = true;
        self
    }

    /// Adds a resource template; the server then offers resources.
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.templates.push(template);
        self.offers.resources = true;
        self
    }

    /// Declares the `prompts` capability even with no prompt yet (they may come at runtime).
    pub fn offer_prompts(mut self) -> Self {
        self.offers.prompts = true;
        self
    }

    /// Declares the `resources` capability even with no resource yet.
    pub fn offer_resources(mut self) -> Self {
        self.offers.resources = true;
        self
    }

    /// `ttlMs` and `cacheScope` of `resources/read` results (default 5 minutes, private).
    pub fn read_cache(mut self, ttl: Duration, scope: CacheScope) -> Self {
        self.config.read_ttl_ms = ttl.as_millis() as u64;
        self.config.read_cache_scope = scope;
        self
    }

    /// Items per page of `tools/list` (default 100, at least 1).
    pub fn page_size(mut self, size: usize) -> Self {
        self.config.page_size = size.max(1);
        self
    }

    /// `ttlMs` of list results (default 5 minutes; K-01).
    pub fn list_ttl(mut self, ttl: Duration) -> Self {
        self.config.list_ttl_ms = ttl.as_millis() as u64;
        self
    }

    /// `ttlMs` of `server/discover` (default 5 minutes).
    pub fn discover_ttl(mut self, ttl: Duration) -> Self {
        self.config.discover_ttl_ms = ttl.as_millis() as u64;
        self
    }

    /// Decides which tools each caller may see and call, on top of their scopes (see
    /// [`ToolVisibility`](crate::ToolVisibility)): `tools/list` pages are then private to the
    /// caller.
    pub fn tool_visibility(
        mut self,
        visibility: impl crate::tools::visibility::ToolVisibility,
    ) -> Self {
        self.config.tool_visibility = Some(crate::tools::visibility::SharedVisibility(
            std::sync::Arc::new(visibility),
        ));
        self
    }

    /// `cacheScope` of every cacheable result (default public; K-10). Choose private when
    /// results depend on the caller's authorization.
    pub fn cache_scope(mut self, scope: CacheScope) -> Self {
        self.config.cache_scope = scope;
        self
    }

    /// Declares the (deprecated) `logging` capability so handlers may send log messages to
    /// clients that ask with `io.modelcontextprotocol/logLevel` (P-16, P-17). Off by default.
    pub fn logging(mut self, enabled: bool) -> Self {
        self.config.logging = if enabled {
            Logging::Declared
        } else {
            Logging::Undeclared
        };
        self
    }

    /// Refuses clients of the initialization-based revisions (2025-11-25 and earlier): a
    /// legacy `initialize` gets -32022 naming 2026-07-28, and HTTP keeps no sessions. By default
    /// a server answers both eras from the same tools.
    pub fn modern_only(mut self) -> Self {
        self.config.legacy = false;
        self
    }

    /// Bounds on tool schemas (J-08).
    pub fn schema_limits(mut self, limits: SchemaLimits) -> Self {
        self.config.schema_limits = limits;
        self
    }

    /// Asserts `format` in tool schemas (`email`, `date-time`, `uri`, `uuid`, `ipv4`, …):
    /// arguments and structured output must match the formats they declare. Off by default,
    /// because JSON Schema 2020-12 makes `format` an annotation, so `format: email` accepts any
    /// string unless this is on. Unknown formats stay annotations.
    pub fn assert_formats(mut self, assert: bool) -> Self {
        self.config.formats = if assert {
            FormatMode::Assert
        } else {
            FormatMode::Annotate
        };
        self
    }

    /// Largest accepted message, in bytes (default 4 MiB): HTTP answers 413 beyond it, stdio
    /// answers -32600 and skips the line.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.config.max_message_bytes = bytes;
        self
    }

    /// Deepest accepted JSON nesting of a message (default 64).
    pub fn max_json_depth(mut self, depth: usize) -> Self {
        self.config.max_json_depth = depth;
        self
    }

    /// The key that seals pagination cursors. Give replicas behind one endpoint the same key;
    /// by default each server draws a random one.
    pub fn cursor_key(mut self, key: [u8; 32]) -> Self {
        self.cursor_key = Some(key);
        self
    }

    /// Whether results carry `_meta.io.modelcontextprotocol/serverInfo` (default true; B-18).
    pub fn server_info_in_results(mut self, enabled: bool) -> Self {
        self.server_info_in_results = enabled;
        self
    }

    /// The keys that seal `requestState` (default: a random key per server; replicas behind
    /// one endpoint must share a ring). Rotate with [`RequestStateKeys::rotate`].
    pub fn request_state_keys(mut self, keys: RequestStateKeys) -> Self {
        self.state_keys = Some(keys);
        self
    }

    /// How long a sealed `requestState` stays valid (default 5 minutes; M-07).
    pub fn request_state_ttl(mut self, ttl: Duration) -> Self {
        self.state_ttl = ttl;
        self
    }

    /// Refuses a second redemption of the same `requestState` (M-08), remembered by `guard`
    /// (a [`crate::MemoryReplayGuard`] for one process).
    pub fn single_use_request_state(mut self, guard: impl ReplayGuard) -> Self {
        self.replay_guard = Some(Arc::new(guard));
        self
    }

    /// Declares the tasks extension (`io.modelcontextprotocol/tasks`) even with no task-capable
    /// tool yet; it is declared anyway when a tool has [`crate::TaskSupport`].
    pub fn offer_tasks(mut self) -> Self {
        self.offers.tasks = true;
        self
    }

    /// Where every state lives (default [`Store::memory`]): with `Store::redis` (feature `redis`), every
    /// instance built with the same store serves every request (a round's `requestState`,
    /// a task, a legacy session, a handle made on another instance). It sets, unless set on
    /// their own (which wins, whatever the order):
    /// - single-use request state (M-08) with the store's replay guard: a redeemed
    ///   `requestState` is refused on every instance;
    /// - in a shared store and unless [`ServerBuilder::request_state_keys`] is given, the
    ///   request-state key ring kept in the store (created by the first instance, read at
    ///   start and every 30 seconds; see [`Store::rotate_request_state_key`]);
    /// - the task store ([`ServerBuilder::task_store`]);
    /// - the change fan-out ([`ServerBuilder::change_fan_out`]): a change on any instance
    ///   reaches the listeners of every instance;
    /// - the legacy session store of the HTTP transport, unless its config names one
    ///   (`HttpConfig::session_store`), bounded by its `max_sessions` and idle timeout.
    ///
    /// Handles belong to tools: give them [`Store::handle_backend`].
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// How changes (tools, prompts and resources that changed, resources updated) reach
    /// listen streams and legacy session streams: by default this process's own
    /// [`MemoryFanOut`], or the store's ([`Store::change_fan_out`]) when one is set, which
    /// carries them to every instance sharing it.
    pub fn change_fan_out(mut self, fan_out: impl ChangeFanOut) -> Self {
        self.fan_out = Some(Arc::new(fan_out));
        self
    }

    /// Where task records live (default: in memory).
    pub fn task_store(mut self, store: impl TaskStore) -> Self {
        self.task_store = Some(Arc::new(store));
        self
    }

    /// How every tool's results are sanitized before they leave (default: every check on; see
    /// [`crate::OutputGuard`]). A tool can override it with [`crate::Tool::output_guard`].
    pub fn output_guard(mut self, guard: crate::safety::output::OutputGuard) -> Self {
        self.output_guard = guard;
        self
    }

    /// Sends every `tools/call` audit event to `sink` as well as to `tracing` (target
    /// `toolwire::audit`); e.g. a [`crate::JsonlAuditSink`].
    pub fn audit_sink(mut self, sink: Arc<dyn crate::safety::audit::AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// How long a tool's handler may run per call (default 60 s, [`DEFAULT_TOOL_TIMEOUT`]);
    /// a tool can set its own with [`crate::Tool::timeout`].
    pub fn tool_timeout(mut self, limit: Duration) -> Self {
        self.tool_timeout = Some(limit);
        self
    }

    /// No time limit for tools that set none, for the stated reason (logged).
    pub fn no_tool_timeout(mut self, reason: impl Into<String>) -> Self {
        tracing::warn!(reason = %reason.into(), "tools have no time limit");
        self.tool_timeout = None;
        self
    }

    /// How often each caller (its principal, else its client address) may call each tool
    /// (default [`crate::DEFAULT_TOOL_RATE_LIMIT`], 300 per minute); a tool can set its own
    /// with [`crate::Tool::rate_limit`] and a cost per call with [`crate::Tool::cost`].
    pub fn rate_limit(mut self, limit: crate::safety::limits::RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// No rate limit for tools that set none, for the stated reason (logged at build).
    pub fn no_rate_limit(mut self, reason: impl Into<String>) -> Self {
        tracing::warn!(reason = %reason.into(), "tools have no rate limit unless they set one");
        self.rate_limit = None;
        self
    }

    /// How long a task is kept after it is created (default 5 minutes).
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.task_ttl = ttl;
        self
    }

    /// How often this server tells a shared task store that it is alive (default
    /// [`DEFAULT_TASK_HEARTBEAT`](crate::DEFAULT_TASK_HEARTBEAT), 5 s; at least 10 ms). Its
    /// heartbeat lives three times as long: a task this server runs is ended as failed ("the
    /// instance running it stopped") by any instance that reads it once three beats were
    /// missed. The same beat bounds how late a cancellation or an answer given on another
    /// instance reaches the handler if its notice (through the change fan-out) was lost.
    pub fn task_heartbeat(mut self, every: Duration) -> Self {
        self.task_heartbeat = every;
        self
    }

    /// The clock for expiries (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Records the server's operations, refusals and state in `metrics` (O-01): off unless
    /// set, so that a server that is not scraped pays nothing. Serve them with
    /// [`crate::observe::admin_router`] or
    /// [`HttpConfig::admin_endpoints`](crate::http::HttpConfig::admin_endpoints).
    pub fn metrics(mut self, metrics: crate::observe::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Adds a readiness check to the built-in ones ([`Server::readiness`], `/readyz`).
    pub fn readiness(mut self, check: impl crate::observe::Readiness) -> Self {
        self.readiness.push(Arc::new(check));
        self
    }

    /// Checks every tool and builds the server.
    pub fn build(mut self) -> Result<Server> {
        let output_guard = self.checked_policies()?;
        let registry = ToolRegistry::new(
            self.config.schema_limits,
            self.config.formats,
            ToolDefaults {
                timeout: self.tool_timeout,
                rate_limit: self.rate_limit,
                output_guard,
            },
        );
        let tasks_offered = self.tools.iter().any(|t| t.task_support.is_some());
        registry.add_all(std::mem::take(&mut self.tools))?;
        let key = self.cursor_key.unwrap_or_else(rand::random);
        // A fan-out of its own replaces the store's, not the store's session relay.
        let (store_fan_out, session_relay) = match &self.store {
            Some(store) => {
                let (fan_out, relay) = store.fan_out_and_relay();
                (Some(fan_out), relay)
            }
            None => (None, None),
        };
        let changes = self
            .fan_out
            .take()
            .or(store_fan_out)
            .unwrap_or_else(|| Arc::new(MemoryFanOut::default()));
        let (result_meta, result_meta_json) = self.result_meta()?;
        let mut offers = self.offers;
        offers.tasks |= tasks_offered;
        let prompts = Catalog::default();
        register_all(&prompts, std::mem::take(&mut self.prompts))?;
        let resources = Catalog::default();
        register_all(&resources, std::mem::take(&mut self.resources))?;
        let templates = Catalog::default();
        register_all(&templates, std::mem::take(&mut self.templates))?;
        let discover = self.discover(offers, result_meta.clone())?;
        let shutdown = CancellationToken::new();
        let (keys, replay_guard, task_store) = self.state_stores(&shutdown);
        if let (Some(store), Some(metrics)) = (&self.store, &self.metrics) {
            store.count_calls_in(metrics);
        }
        Ok(Server {
            inner: Arc::new(ServerInner {
                list_ttl_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
                audit: self.audit,
                prompts,
                resources,
                templates,
                offers,
                tasks: Tasks::new(
                    task_store,
                    self.task_ttl.as_millis() as u64,
                    self.task_heartbeat,
                ),
                request_state: RequestStateConfig {
                    keys,
                    ttl_ms: self.state_ttl.as_millis() as u64,
                    replay_guard,
                },
                shared_limits: self.store.as_ref().and_then(Store::shared_limits),
                session_relay,
                store: self.store,
                clock: self.clock,
                instructions: self.instructions,
                result_meta_json,
                discover,
                info: self.info,
                config: self.config,
                registry,
                cursors: CursorCodec::new(key),
                changes,
                followers: Arc::default(),
                shutdown,
                result_meta,
                metrics: self.metrics,
                readiness: self.readiness,
            }),
        })
    }
}
