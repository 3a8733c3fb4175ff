//! The server: its identity, configuration, tool registry and change bus. It is built in
//! `builder.rs`.

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
use crate::request::cursor::CursorCodec;
use crate::state::request_state::{ReplayGuard, RequestStateKeys};
use crate::state::task_store::Tasks;
use crate::tools::catalog::Catalog;
use crate::tools::prompt::RegisteredPrompt;
use crate::tools::registry::ToolRegistry;
use crate::tools::resource::{RegisteredResource, RegisteredTemplate};
use crate::tools::tool::Tool;
use toolwire_protocol::schema::{FormatMode, SchemaLimits};

pub use crate::request::route::SUPPORTED_VERSIONS;

/// A change that listen streams may be told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The tool set changed.
    Tools,
    /// The prompt set changed.
    Prompts,
    /// The resource or template set changed.
    Resources,
    /// A resource's contents changed.
    ResourceUpdated(Arc<str>),
}

/// Tunables; every field has a sensible default.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) page_size: usize,
    pub(crate) list_ttl_ms: u64,
    pub(crate) discover_ttl_ms: u64,
    pub(crate) cache_scope: CacheScope,
    pub(crate) logging: bool,
    pub(crate) schema_limits: SchemaLimits,
    pub(crate) formats: FormatMode,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_json_depth: usize,
    pub(crate) read_ttl_ms: u64,
    pub(crate) read_cache_scope: CacheScope,
    /// Whether clients of the initialization-based revisions are served too.
    pub(crate) legacy: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page_size: 100,
            list_ttl_ms: 300_000,
            discover_ttl_ms: 300_000,
            cache_scope: CacheScope::Public,
            logging: false,
            schema_limits: SchemaLimits::default(),
            formats: FormatMode::Annotate,
            max_message_bytes: 4 * 1024 * 1024,
            max_json_depth: 64,
            read_ttl_ms: 300_000,
            read_cache_scope: CacheScope::Private,
            legacy: true,
        }
    }
}

/// An MCP 2026-07-28 tool server. Cheap to clone; clones share the same tools.
///
/// Serve it with [`crate::stdio::serve`] or [`crate::http::serve`]; both may run at once.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<ServerInner>,
}

/// How long a tool's handler may run per call unless the builder or the tool says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) struct ServerInner {
    pub(crate) info: Implementation,
    pub(crate) config: Config,
    pub(crate) registry: ToolRegistry,
    pub(crate) cursors: CursorCodec,
    pub(crate) changes: broadcast::Sender<Change>,
    pub(crate) shutdown: CancellationToken,
    /// `_meta` put on every result: serverInfo unless turned off (B-18).
    pub(crate) result_meta: Option<ResultMeta>,
    /// The same as a JSON member, `,"_meta":{…}`, to splice into serialized results.
    pub(crate) result_meta_json: String,
    /// The `server/discover` result, serialized once: nothing in it changes at runtime.
    pub(crate) discover: Box<serde_json::value::RawValue>,
    pub(crate) prompts: Catalog<RegisteredPrompt>,
    pub(crate) resources: Catalog<RegisteredResource>,
    pub(crate) templates: Catalog<RegisteredTemplate>,
    /// The capabilities beside tools this server declared.
    pub(crate) offers: Offers,
    /// The tasks extension's state.
    pub(crate) tasks: Tasks,
    /// Request state sealing (M-06…M-08).
    pub(crate) request_state: RequestStateConfig,
    /// Wall-clock time for expiries.
    pub(crate) clock: Arc<dyn Clock>,
    /// The instructions of `server/discover` and of a legacy `initialize`.
    pub(crate) instructions: Option<String>,
    /// What every tool result goes through, unless its tool has its own (T-15).
    pub(crate) output_guard: Arc<crate::safety::output::CompiledGuard>,
    /// Where audit events go besides `tracing`.
    pub(crate) audit: Option<Arc<dyn crate::safety::audit::AuditSink>>,
}

/// Which capabilities beside tools the server declares.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Offers {
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
    pub(crate) tasks: bool,
}

/// How request state is sealed and checked.
pub(crate) struct RequestStateConfig {
    pub(crate) keys: RequestStateKeys,
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
    /// Registers a tool at runtime; listen streams that asked are told the list changed (T-17).
    pub fn add_tool(&self, tool: Tool) -> Result<()> {
        self.add_tools([tool])
    }

    /// Registers several tools at once: all or none.
    pub fn add_tools(&self, tools: impl IntoIterator<Item = Tool>) -> Result<()> {
        self.inner.registry.add_all(tools.into_iter().collect())?;
        let _ = self.inner.changes.send(Change::Tools);
        Ok(())
    }

    /// Removes a tool at runtime.
    pub fn remove_tool(&self, name: &str) -> Result<()> {
        self.inner.registry.remove(name)?;
        let _ = self.inner.changes.send(Change::Tools);
        Ok(())
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

/// The capabilities a server with these offers declares.
pub(crate) fn capabilities_of(offers: Offers, logging: bool) -> ServerCapabilities {
    ServerCapabilities {
        tools: Some(ListChangedCapability {
            list_changed: Some(true),
        }),
        logging: logging.then(JsonObject::new),
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
