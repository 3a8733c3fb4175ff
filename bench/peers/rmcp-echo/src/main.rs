//! rmcp-echo: a peer MCP server built only from the crates.io `rmcp` SDK.
//!
//! Serves a single tool `echo` over either rmcp's Streamable HTTP server
//! (stateless, JSON responses, path /mcp, on axum) or rmcp's stdio transport.
//!
//! Usage:
//!   rmcp-echo --http 127.0.0.1:8080 [--schema simple|realistic]
//!   rmcp-echo --stdio               [--schema simple|realistic]

use std::{net::SocketAddr, sync::Arc};

use rmcp::{
    ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde::Deserialize;

// ---------------------------------------------------------------- simple schema

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to echo back.
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct SimpleEcho {
    // Built once and shared: the stateless HTTP service calls the factory for
    // every POST, so the router must not be rebuilt per request.
    tool_router: Arc<ToolRouter<Self>>,
}

#[tool_router]
impl SimpleEcho {
    fn new() -> Self {
        Self { tool_router: Arc::new(Self::tool_router()) }
    }

    #[tool(description = "Echo the message back as text content")]
    fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        message
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SimpleEcho {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

// ------------------------------------------------------------- realistic schema

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    Normal,
    High,
    Urgent,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Email,
    Sms,
    Push,
    Webhook,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Address {
    /// Street and number.
    pub street: String,
    pub city: String,
    /// ISO 3166-1 alpha-2 country code.
    #[schemars(length(min = 2, max = 2))]
    pub country: String,
    #[serde(default)]
    pub postal_code: Option<String>,
}

/// A realistic tool argument: ~10 fields, nested object, enums, formats,
/// integer ranges and an optional array.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)] // Parsed to pay the same cost as a real tool; only `message` is echoed.
pub struct RealisticEchoArgs {
    /// The text to echo back.
    #[schemars(length(min = 1, max = 4096))]
    pub message: String,
    /// Recipient e-mail address.
    #[schemars(email)]
    pub recipient: String,
    /// When to deliver (RFC 3339 date-time).
    #[schemars(extend("format" = "date-time"))]
    pub send_at: String,
    pub priority: Priority,
    pub channel: Channel,
    /// How many times to retry delivery.
    #[schemars(range(min = 0, max = 10))]
    pub max_retries: u32,
    /// Time to live in seconds.
    #[schemars(range(min = 1, max = 86400))]
    pub ttl_seconds: u32,
    /// Delivery address.
    pub address: Address,
    /// Free-form tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Whether the recipient must acknowledge.
    #[serde(default)]
    pub require_ack: bool,
}

#[derive(Debug, Clone)]
pub struct RealisticEcho {
    // Built once and shared: the stateless HTTP service calls the factory for
    // every POST, so the router must not be rebuilt per request.
    tool_router: Arc<ToolRouter<Self>>,
}

#[tool_router]
impl RealisticEcho {
    fn new() -> Self {
        Self { tool_router: Arc::new(Self::tool_router()) }
    }

    #[tool(description = "Echo the message back as text content (realistic argument schema)")]
    fn echo(&self, Parameters(args): Parameters<RealisticEchoArgs>) -> String {
        // Every server in the benchmark answers with the message alone, so one check fits all.
        args.message
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RealisticEcho {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

// ------------------------------------------------------------------------ main

enum Mode {
    Http(SocketAddr),
    Stdio,
}

fn usage() -> ! {
    eprintln!("usage: rmcp-echo (--http ADDR | --stdio) [--schema simple|realistic]");
    std::process::exit(2);
}

fn parse_args() -> (Mode, bool) {
    let mut mode = None;
    let mut realistic = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => {
                let addr = args.next().unwrap_or_else(|| usage());
                mode = Some(Mode::Http(addr.parse().unwrap_or_else(|e| {
                    eprintln!("bad --http address {addr:?}: {e}");
                    std::process::exit(2)
                })));
            }
            "--stdio" => mode = Some(Mode::Stdio),
            "--schema" => match args.next().as_deref() {
                Some("realistic") => realistic = true,
                Some("simple") => realistic = false,
                _ => usage(),
            },
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    (mode.unwrap_or_else(|| usage()), realistic)
}

async fn serve_http<S>(addr: SocketAddr, prototype: S) -> std::io::Result<()>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let ct = tokio_util::sync::CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        // stateless: no Mcp-Session-Id, each POST is served on its own
        .with_legacy_session_mode(false)
        // application/json bodies instead of SSE for request/response calls
        .with_json_response(true)
        .with_sse_keep_alive(None)
        // a benchmark client may use any loopback spelling / port
        .disable_allowed_hosts()
        .with_cancellation_token(ct.child_token());
    let service: StreamableHttpService<S, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(prototype.clone()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!("rmcp-echo listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            ct.cancel();
        })
        .await
}

async fn serve_stdio<S>(handler: S) -> Result<(), Box<dyn std::error::Error>>
where
    S: ServerHandler + Send + 'static,
{
    let running = match handler.serve(rmcp::transport::stdio()).await {
        Ok(running) => running,
        // stdin closed before any valid request (e.g. a client that only sent
        // requests rmcp rejected): not an error for a benchmark peer.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    running.waiting().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mode, realistic) = parse_args();
    match (mode, realistic) {
        (Mode::Http(addr), false) => serve_http(addr, SimpleEcho::new()).await?,
        (Mode::Http(addr), true) => serve_http(addr, RealisticEcho::new()).await?,
        (Mode::Stdio, false) => serve_stdio(SimpleEcho::new()).await?,
        (Mode::Stdio, true) => serve_stdio(RealisticEcho::new()).await?,
    }
    Ok(())
}
