//! Call any MCP 2026-07-28 server's tools from Rust, over Streamable HTTP or a child process on
//! stdio, with the client-side rules handled: `_meta` on every request, version negotiation,
//! timeouts, `input_required` rounds answered by your handlers, `x-mcp-header` mirroring,
//! cached tool lists, validated structured output, and OAuth for protected servers
//! ([`ClientBuilder::oauth`], [`auth`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use toolwire_client::ClientBuilder;
//! # let server = toolwire_server::Server::builder("demo", "1")
//! #     .tool(toolwire_server::Tool::new("echo", |a: Echo, _: toolwire_server::RequestContext| async move { a.message }))
//! #     .build()?;
//! # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Echo { message: String }
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}/mcp", listener.local_addr()?);
//! # tokio::spawn(toolwire_server::http::serve(server, listener, Default::default()));
//! let client = ClientBuilder::new("my-agent", "1.0").http(url)?;
//! let tools = client.list_tools().await?;
//! assert_eq!(tools[0].name, "echo");
//! let result = client.call_tool("echo", serde_json::json!({"message": "hi"})).await?;
//! assert!(!result.is_error());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod auth;
mod builder;
mod client;
mod connect;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod input;
mod shown;
mod sse;
mod state;
mod trace;
mod transport;

pub use builder::ClientBuilder;
pub use client::listen::{Notification, Subscription};
pub use client::rounds::{CallRound, RoundAnswers};
pub use client::tasks::{ResumeTask, TaskFn};
pub use client::tools::CallOptions;
pub use client::{Client, LogFn, ProgressFn, RequestIdFn};
pub use error::{Error, ListLimit, Result};
pub use input::{Asked, Sent, accepted, cancelled, declined};
pub use state::{LEGACY_VERSIONS, ServerEra};
pub use tokio_util::sync::CancellationToken;
pub use transport::command::{DEFAULT_INHERITED_ENV, Sandbox, StdioCommand};

/// The protocol types, re-exported.
pub use toolwire_protocol as protocol;
