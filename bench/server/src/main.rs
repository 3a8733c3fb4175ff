//! `toolwire-bench-server`: Toolwire's side of the benchmarks.
//!
//! Tools: `echo` (a `message` string; with `--schema realistic` a ten-field notice with a nested
//! object, enums, formats and ranges, validated like any Toolwire tool), `touch_tools` (adds or
//! removes a tool, so listen streams get `tools/list_changed`), and `--tools N` filler tools
//! for the `tools/list` scenario. `--auth-token-file FILE` turns OAuth on: the server starts a
//! small issuer of its own on 127.0.0.1 (metadata and a JWKS with a key made at start), accepts
//! its JWT access tokens for its `/mcp`, and writes one valid token (an hour) to FILE for the
//! load generator.
//!
//! `--layers` chooses the safety layers: `defaults` (as a server author gets them, with the rate
//! and flood limits raised so that one load generator on one address is never refused; every
//! check still runs), `all` (the same plus audit events to a JSON Lines file, `--audit-file`),
//! or `off` (no output guard, deadline, rate limit, flood limit or audit). `--metrics` keeps
//! Prometheus metrics as `toolwire serve` does (served at `/metrics`), to measure their cost.
//!
//! `--store redis://HOST:PORT` keeps its state in Redis, shared by every instance naming it;
//! `--state-tools` adds tools whose calls touch that state (see `state.rs`).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use clap::{Parser, ValueEnum};

mod auth;
mod state;
use schemars::JsonSchema;
use serde::Deserialize;
use toolwire_server::{
    JsonlAuditSink, NoArgs, OutputGuard, RateLimit, RequestContext, Server, Store, Tool, ToolError,
    http, stdio,
};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Layers {
    Defaults,
    All,
    Off,
}

/// A quota no benchmark reaches: the limiter runs, and never refuses.
const UNREACHED: RateLimit = RateLimit::per_second(100_000_000);

#[derive(Clone, Copy, ValueEnum)]
enum Schema {
    Simple,
    Realistic,
}

#[derive(Parser)]
struct Args {
    /// Serve Streamable HTTP at http://ADDR/mcp.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Serve stdio.
    #[arg(long)]
    stdio: bool,
    /// The argument schema of `echo`.
    #[arg(long, value_enum, default_value = "simple")]
    schema: Schema,
    /// Extra tools to register.
    #[arg(long, default_value_t = 0)]
    tools: usize,
    /// Turn OAuth on (HTTP only) and write a valid access token to this file.
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<std::path::PathBuf>,
    /// The safety layers: as defaults (limits raised), all (plus audit), or off.
    #[arg(long, value_enum, default_value = "defaults")]
    layers: Layers,
    /// Keep Prometheus metrics (operation durations, refusals, store calls) and serve them at
    /// `/metrics`, as `toolwire serve` does.
    #[arg(long)]
    metrics: bool,
    /// With `--layers all`: the JSON Lines file audit events go to.
    #[arg(long, value_name = "FILE")]
    audit_file: Option<std::path::PathBuf>,
    /// Keep the server's state in this Redis (`redis://HOST:PORT[/DB]`), shared with every
    /// instance that names it; in memory without it.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Also offer the tools whose calls touch state (`ask`, `wait`, `counter_new`,
    /// `counter_bump`).
    #[arg(long)]
    state_tools: bool,
}

#[derive(Deserialize, JsonSchema)]
struct Echo {
    message: String,
}

/// The realistic argument type, the same as the peers' (`bench/peers/README.md`): ten fields, a
/// nested object, enums, formats, ranges and an optional array.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)] // Parsed to pay the same cost as a real tool; only `message` is echoed.
struct Notice {
    /// The text to echo back.
    #[schemars(length(min = 1, max = 4096))]
    message: String,
    /// Recipient e-mail address.
    #[schemars(email)]
    recipient: String,
    /// When to deliver (RFC 3339 date-time).
    #[schemars(extend("format" = "date-time"))]
    send_at: String,
    priority: Priority,
    channel: Channel,
    /// How many times to retry delivery.
    #[schemars(range(min = 0, max = 10))]
    max_retries: u32,
    /// Time to live in seconds.
    #[schemars(range(min = 1, max = 86400))]
    ttl_seconds: u32,
    /// Delivery address.
    address: Address,
    /// Free-form tags.
    #[serde(default)]
    tags: Option<Vec<String>>,
    /// Whether the recipient must acknowledge.
    #[serde(default)]
    require_ack: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Priority {
    Low,
    Normal,
    High,
    Urgent,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Channel {
    Email,
    Sms,
    Push,
    Webhook,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Address {
    /// Street and number.
    street: String,
    city: String,
    /// ISO 3166-1 alpha-2 country code.
    #[schemars(length(min = 2, max = 2))]
    country: String,
    #[serde(default)]
    postal_code: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct Filler {
    /// A value.
    value: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = build(&args)?;
    add_touch_tools(&server)?;
    server.shutdown_on_signal();
    match (args.http, args.stdio) {
        (Some(addr), _) => {
            serve_http(&server, addr, &args).await?;
            server.flush_audit();
        }
        (None, true) => {
            stdio::serve(server).await?;
            std::process::exit(0);
        }
        (None, false) => anyhow::bail!("pass --http ADDR or --stdio"),
    }
    Ok(())
}

/// The server: `echo` with the chosen schema, the filler tools, and the chosen layers.
fn build(args: &Args) -> anyhow::Result<Server> {
    let echo = match args.schema {
        Schema::Simple => Tool::new(
            "echo",
            |a: Echo, _: RequestContext| async move { a.message },
        ),
        Schema::Realistic => Tool::new(
            "echo",
            |n: Notice, _: RequestContext| async move { n.message },
        ),
    };
    let fillers = (0..args.tools).map(|i| {
        Tool::new(
            format!("tool_{i:05}"),
            |f: Filler, _: RequestContext| async move { f.value.unwrap_or_default() },
        )
        .description(format!(
            "Filler tool number {i} for the tools/list benchmark"
        ))
    });
    let store = match &args.store {
        Some(url) => Store::redis(url)?,
        None => Store::memory(),
    };
    let mut builder = Server::builder("toolwire-bench", env!("CARGO_PKG_VERSION"))
        .tool(echo.description("Echoes the message"))
        .tools(fillers)
        // Single-use request state, shared through the store when there is one.
        .store(store.clone());
    if args.state_tools {
        builder = builder.tools(state::tools(store.handle_backend())?);
    }
    builder = match args.layers {
        Layers::Off => builder
            .output_guard(OutputGuard::off("benchmark: every layer off"))
            .no_tool_timeout("benchmark: every layer off")
            .no_rate_limit("benchmark: every layer off"),
        Layers::Defaults | Layers::All => builder.rate_limit(UNREACHED),
    };
    if args.layers == Layers::All {
        let file = args
            .audit_file
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("--layers all needs --audit-file FILE"))?;
        builder = builder.audit_sink(Arc::new(JsonlAuditSink::open(file)?));
    }
    if args.metrics {
        builder = builder.metrics(toolwire_server::observe::Metrics::new());
    }
    Ok(builder.build()?)
}

/// `touch_tools`: adds or removes a tool, so the list changes.
fn add_touch_tools(server: &Server) -> anyhow::Result<()> {
    let this = Arc::new(OnceLock::<Server>::new());
    let _ = this.set(server.clone());
    server.add_tool(
        Tool::new("touch_tools", move |_: NoArgs, _: RequestContext| {
            let this = this.clone();
            async move {
                let server = this.get().ok_or_else(|| ToolError::internal("not ready"))?;
                let name = "touched";
                if server.tool_names().iter().any(|n| n == name) {
                    server.remove_tool(name).map_err(ToolError::internal)?;
                } else {
                    let tool = Tool::new(name, |_: NoArgs, _: RequestContext| async { "x" })
                        .description("touched");
                    server.add_tool(tool).map_err(ToolError::internal)?;
                }
                Ok::<_, ToolError>("touched")
            }
        })
        .description("Adds or removes a tool"),
    )?;
    Ok(())
}

/// Serves HTTP on `addr` with the chosen layers, and OAuth when a token file is asked for.
async fn serve_http(server: &Server, addr: SocketAddr, args: &Args) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let mut config = match args.layers {
        Layers::Off => http::HttpConfig::default().no_flood_limit("benchmark: every layer off"),
        Layers::Defaults | Layers::All => http::HttpConfig::default().flood_limit(UNREACHED),
    }
    .admin_endpoints(args.metrics);
    if let Some(file) = &args.auth_token_file {
        let resource = format!("http://{local}/mcp");
        let (issuer, token) = auth::start_issuer(&resource).await?;
        std::fs::write(file, token)?;
        config = config.oauth(http::OAuth::new(issuer, resource));
    }
    eprintln!("toolwire-bench-server: listening on http://{local}/mcp");
    http::serve(server.clone(), listener, config).await?;
    Ok(())
}
