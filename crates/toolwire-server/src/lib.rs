//! Serve tools to any MCP 2026-07-28 client over stdio and Streamable HTTP.
//!
//! A [`Tool`] is a value: a definition plus an async handler. Typed tools derive their input
//! schema from a `serde` + `schemars` type; the server checks every definition at registration,
//! compiles its schemas once, validates arguments and structured output, and answers every
//! protocol rule of 2026-07-28 (stateless `_meta`, `server/discover`, pagination with cache
//! hints, `subscriptions/listen`, header validation).
//!
//! ```
//! use toolwire_server::{RequestContext, Server, Tool};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Add { a: i64, b: i64 }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::builder("calculator", "1.0.0")
//!     .tool(Tool::new("add", |x: Add, _ctx: RequestContext| async move { (x.a + x.b).to_string() })
//!         .description("Adds two integers"))
//!     .build()?;
//!
//! // Serve over an in-memory pipe, as a child process would over stdin/stdout.
//! let (client, server_end) = tokio::io::duplex(4096);
//! let (server_read, server_write) = tokio::io::split(server_end);
//! tokio::spawn(toolwire_server::stdio::serve_io(server, server_read, server_write));
//! let (client_read, mut client_write) = tokio::io::split(client);
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
//! client_write.write_all(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}
//! "#).await?;
//! let mut reply = String::new();
//! tokio::io::BufReader::new(client_read).read_line(&mut reply).await?;
//! let reply: serde_json::Value = serde_json::from_str(&reply)?;
//! assert_eq!(reply["result"]["content"][0]["text"], "5");
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod clock;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
mod legacy;
pub mod memory;
pub mod observe;
mod request;
mod safety;
mod server;
mod state;
pub mod stdio;
mod tools;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, Result, SchemaRole, ToolRule};
pub use observe::{Metrics, NotReady, Readiness};
pub use request::context::RequestContext;
pub use request::followed::FollowedResources;
pub use request::mrtr::{Elicited, InputRequired, ToolError};
pub use safety::audit::{AuditEvent, AuditOutcome, AuditSink, JsonlAuditSink};
pub use safety::deadline::TIMED_OUT_META_KEY;
pub use safety::limits::{
    CALLER_BUCKETS, DEFAULT_TOOL_RATE_LIMIT, RATE_LIMIT_META_KEY, RATE_LIMITED_META_KEY, RateLimit,
};
pub use safety::output::{
    DEFAULT_LINK_SCHEMES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_SECRET_PATTERNS, OutputGuard,
};
pub use safety::reload::{ReloadEvent, ReloadOutcome};
pub use server::builder::ServerBuilder;
pub use server::{DEFAULT_TOOL_TIMEOUT, Reconfigure, SUPPORTED_VERSIONS, Server};
#[cfg(any(test, feature = "contract-tests"))]
pub use state::contract;
pub use state::fanout::{Change, ChangeFanOut, MemoryFanOut};
pub use state::handles;
pub use state::handles::{HandleError, HandleRetention, HandleStore};
pub use state::request_state::{MemoryReplayGuard, ReplayGuard, RequestStateKeys};
pub use state::sessions::{
    MemorySessionStore, SessionChange, SessionRecord, SessionStore, SessionStoreError,
};
pub use state::store::{DEFAULT_KEY_PREFIX, DEFAULT_STORE_TIMEOUT, Store};
pub use state::store_url::StoreUrlError;
pub use state::task_store::{DEFAULT_TASK_HEARTBEAT, MemoryTaskStore, TaskRecord, TaskStore};
pub use state::{BoxError, StoreError};
pub use tools::prompt::{Completer, CompletionAsk, Prompt, PromptArgs, PromptOutput};
pub use tools::resource::{Resource, ResourceOutput, ResourceTemplate, TemplateVars};
pub use tools::tool::{
    NoArgs, Structured, TIMEOUT_META_KEY, TaskSupport, Tool, ToolOutput, structured_result,
};
pub use tools::visibility::{OfferKind, ToolCheck, ToolVisibility, Viewer};
pub use toolwire_protocol::schema::{FormatMode, SchemaLimits, Violation, Violations};

/// The protocol types this crate speaks, re-exported.
pub use toolwire_protocol as protocol;
