//! `toolwire`: serve the example tools over stdio or Streamable HTTP, and discover, list, call
//! and watch the tools of any MCP server.

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use toolwire_server::{http, stdio};

mod client;
mod config;
mod examples;
mod gateway;
mod host;
mod layers;
mod logs;
mod notes;
mod private;
mod session;
mod signin;
mod store;
mod target;
mod telemetry;
mod terminal;
mod ui;

#[derive(Parser)]
#[command(
    name = "toolwire",
    version,
    about = "MCP 2026-07-28 tools: serve them, call them"
)]
struct Cli {
    /// Show the libraries' log lines on stderr, with their time and source: -v from info,
    /// -vv debug, -vvv trace (RUST_LOG, when set, says instead). Without it only what needs
    /// your attention is said.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, display_order = 1000)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the built-in example tools (echo, add, word_count, count_slowly, current_time,
    /// greet, toggle_shout, and notes kept by handle: note_create, note_append, note_read) to
    /// 2026-07-28 clients and to legacy (2025-11-25) ones, with rate limits, deadlines, output
    /// sanitization and audit events on.
    ///
    /// On stdio the caller is who the environment says: TOOLWIRE_PRINCIPAL (binds its request
    /// state and tasks) and TOOLWIRE_SCOPES (space-separated; tools needing other scopes are
    /// hidden and refused).
    Serve {
        /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
        /// Extra Host names to accept besides localhost, e.g. when binding beyond loopback.
        #[arg(long = "allow-host", value_name = "HOST")]
        allow_hosts: Vec<String>,
        /// Refuse clients that start with the 2025-11-25 `initialize` handshake.
        #[arg(long)]
        modern_only: bool,
        /// A TOML file: `[auth]` (OAuth on HTTP: JWTs, introspection, scope hierarchy) and
        /// per-tool settings (`[tools.add] scopes = ["math"]`); see examples/serve.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
        /// Where notes are kept (SQLite file handles.sqlite3, created if missing), so they
        /// survive a restart, and a relative `[audit] file` of --config. Default:
        /// $XDG_DATA_HOME/toolwire, else ~/.local/share/toolwire.
        #[arg(long, value_name = "DIR", env = "TOOLWIRE_DATA_DIR")]
        data_dir: Option<std::path::PathBuf>,
        /// Keep the server's state in this Redis (or Valkey) instead of this process:
        /// redis://HOST:PORT[/DB], or rediss:// for TLS. Every instance given the same store
        /// answers any request: single-use request state and its key ring, tasks, legacy
        /// sessions, and the notes (kept there instead of --data-dir's SQLite file; how long
        /// they survive is Redis's persistence setting). Wins over `[store] url` of --config;
        /// read from TOOLWIRE_STORE when not given, which keeps a password out of `ps`.
        /// While the store is away, calls that need it fail with "try again"; others are
        /// served.
        #[arg(long, value_name = "URL", env = store::STORE_ENV, hide_env_values = true)]
        store: Option<String>,
        #[command(flatten)]
        logs: logs::ServerLogs,
    },
    /// Serve the tools of the servers in an `mcpServers` file (stdio commands, HTTP servers,
    /// either protocol era) as one MCP server, named `prefix__tool`: with the downstream
    /// settings of the file's "gateway" object (those of `toolwire serve --config`, as JSON),
    /// an upstream's list changes passed on, a failed upstream retried while its last list is
    /// kept, and a tool whose definition changed withheld until `toolwire pins approve`.
    Gateway(gateway::GatewayArgs),
    /// Show a server's era, protocol version, identity and capabilities.
    Discover {
        #[command(flatten)]
        target: target::Target,
        /// Print the server's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The configured servers: how each is reached, its protocol era, whether it is connected
    /// and how many tools the model sees.
    Servers {
        #[command(flatten)]
        host: host::HostArgs,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The tools a model could use: qualified name, title, description, annotations (marked
    /// untrusted unless the server is trusted) and pin state; then the hidden ones and why.
    Tools {
        #[command(flatten)]
        host: host::HostArgs,
        /// Print the definitions as JSON.
        #[arg(long)]
        json: bool,
        /// Only this configured server's tools; or one server for this command, as an
        /// http(s):// URL or a command line (e.g. "uvx mcp-server-time").
        #[arg(value_name = "SERVER")]
        only: Option<String>,
    },
    /// Call a tool: shown with its arguments exactly as they will be sent, and asked about
    /// unless a rule allows it (yes / no / always). Exit status: 0 done, 1 the tool reported
    /// an error, 2 it could not be made (bad arguments, no such tool, a server that could not
    /// be reached or started), 3 refused, 130 cancelled with Ctrl-C.
    ///
    /// NAME is a qualified name from `toolwire tools`. For one server without a
    /// configuration: `toolwire call URL|"COMMAND LINE" TOOL ARGS…`. ARGS are one JSON object,
    /// or key=value pairs typed by the tool's input schema (key:=JSON for a JSON value);
    /// required arguments left out are asked for at a terminal.
    Call {
        #[command(flatten)]
        host: host::HostArgs,
        #[command(flatten)]
        call: host::call::CallArgs,
        /// The tool's qualified name (or a server, then the tool's name).
        name: String,
        /// The arguments: a JSON object, or key=value pairs.
        arguments: Vec<String>,
    },
    /// Print list changes as they happen: of every configured server (or the one named), or
    /// of one server given as a URL or command line.
    Watch {
        #[command(flatten)]
        host: host::HostArgs,
        /// A configured server's name, or one server as a URL or command line.
        #[arg(value_name = "SERVER")]
        only: Option<String>,
        /// Also watch this resource for updates (repeatable; one server given by URL or
        /// command line only).
        #[arg(long = "resource", value_name = "URI")]
        resources: Vec<String>,
    },
    /// The approved tool definitions (pins) of the configured servers: list, diff, approve,
    /// forget.
    Pins {
        #[command(flatten)]
        host: host::ConnectArgs,
        /// The pins of gateways sharing this Redis store (`redis://HOST:PORT[/DB]`) rather than
        /// the state directory's; a gateway file's `gateway.store` is used without it.
        #[arg(long, value_name = "URL", env = store::STORE_ENV, hide_env_values = true)]
        store: Option<String>,
        #[command(subcommand)]
        action: host::pins::PinsAction,
    },
    /// The host's hash-chained audit log: show, verify.
    Audit {
        #[command(flatten)]
        state: host::StateArgs,
        #[command(subcommand)]
        action: host::audit::AuditAction,
    },
    /// Trust the project configuration found here (./.mcp.json, ./.cursor/mcp.json or
    /// ./.vscode/mcp.json), or FILE, after seeing what it would start, where it would connect
    /// and which of your environment variables it would send. A project's file is never used
    /// until trusted, and is asked about again when it changes; its rules may only narrow
    /// yours (its approval "allow" rules and "trust" are set aside).
    Trust(host::trust::TrustArgs),
    /// Sign in to a protected HTTP server (OAuth): its authorization server's address is
    /// printed and opened in a browser ($BROWSER, else the desktop's opener), and the browser
    /// comes back to 127.0.0.1. Tokens are kept in the state directory (credentials.json,
    /// readable by you only) and renewed when they can be. Other commands sign in too when a
    /// server asks and stderr is a terminal.
    Login {
        #[command(flatten)]
        host: host::ConnectArgs,
        /// A configured server's name, or an http(s):// URL.
        #[arg(value_name = "SERVER")]
        name: String,
    },
    /// Forget the tokens kept for a server (the next command that needs them signs in again).
    Logout {
        #[command(flatten)]
        config: host::ConfigArgs,
        /// A configured server's name, or an http(s):// URL.
        #[arg(value_name = "SERVER")]
        name: String,
    },
}

/// mimalloc rather than glibc's allocator: a gateway call allocates and frees a few hundred
/// small blocks across threads (two JSON documents, two HTTP messages), where glibc's arenas
/// spent a fifth of the gateway's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit statuses: 0 done (also when stdout was closed early, as by `| head -1`), 1 the tool
/// reported an error (`call`) or the audit log was tampered with (`audit verify`), 2 anything
/// else failed, 3 a call was refused, 128 + the signal's number when a client command was
/// interrupted (130 SIGINT, 143 SIGTERM, 129 SIGHUP) after stopping its server.
#[tokio::main]
async fn main() {
    if let Err(error) = run().await {
        if let Some(interrupted) = error.downcast_ref::<session::Interrupted>() {
            std::process::exit(interrupted.status);
        }
        if let Some(host::Ended(status)) = error.downcast_ref::<host::Ended>() {
            std::process::exit(*status);
        }
        if terminal::is_broken_pipe(&error) {
            // Whoever read stdout has seen enough, as `head` has: end quietly.
            std::process::exit(0);
        }
        // Error messages may carry a server's text: shown safe (see `error_report`).
        terminal::note(&terminal::error_report(&error));
        std::process::exit(2);
    }
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (running, server_logs) = match &cli.command {
        Command::Serve { logs, .. } => (logs::Running::Server, Some(logs)),
        Command::Gateway(args) => (logs::Running::Gateway, Some(&args.logs)),
        _ => (logs::Running::Command, None),
    };
    logs::init(running, cli.verbose, server_logs)?;
    let done = command(cli.command).await;
    // The spans still batched are sent before the process ends.
    telemetry::shutdown().await;
    done
}

/// Runs one command.
async fn command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve {
            http,
            allow_hosts,
            modern_only,
            config,
            data_dir,
            store,
            logs: _,
        } => {
            let listen = Listen {
                addr: http,
                allow_hosts,
                clients: if modern_only {
                    examples::Clients::ModernOnly
                } else {
                    examples::Clients::All
                },
            };
            serve_command(listen, config.as_deref(), data_dir, store.as_deref()).await
        }
        Command::Gateway(args) => gateway::gateway(args).await,
        Command::Discover { target, json } => client::discover(&target, json).await,
        Command::Servers { host, json } => host::servers::servers(&host, json).await,
        Command::Tools { host, json, only } => {
            host::tools::tools(&host, json, only.as_deref()).await
        }
        Command::Call {
            host,
            call,
            name,
            arguments,
        } => host::call::call(&host, &call, &name, &arguments).await,
        Command::Watch {
            host,
            only,
            resources,
        } => match host.one_off(only.as_deref()) {
            Some(one) => {
                let target = target::Target {
                    server: one.to_owned(),
                    named: host.named.clone(),
                    connection: host.connection.clone(),
                    state: host.config.state.clone(),
                };
                client::watch(&target, resources).await
            }
            None if !resources.is_empty() => anyhow::bail!(
                "--resource needs one server given as a URL or command line (--server)"
            ),
            None => host::watch::watch(&host, only.as_deref()).await,
        },
        Command::Pins {
            host,
            store,
            action,
        } => host::pins::pins(&host, store.as_deref(), &action).await,
        Command::Audit { state, action } => host::audit::audit(&state, &action),
        Command::Trust(args) => host::trust::trust(&args).await,
        Command::Login { host, name } => host::login::login(&host.host(), &name).await,
        Command::Logout { config, name } => host::login::logout(&config, &name).await,
    }
}

/// `toolwire serve`: reads `--config`, opens the store and the notes, and serves.
async fn serve_command(
    listen: Listen,
    config: Option<&std::path::Path>,
    data_dir: Option<std::path::PathBuf>,
    store: Option<&str>,
) -> anyhow::Result<()> {
    let config = match config {
        Some(path) => config::load(path)?,
        None => config::ServeConfig::default(),
    };
    let store = store::open(store, config.store.as_ref(), |name| {
        std::env::var(name).ok()
    })?;
    let handles = config.handles.as_ref();
    let in_memory = handles.is_some_and(|h| h.in_memory);
    if in_memory && store.is_some() {
        anyhow::bail!(
            "[handles] in_memory = true and a store together: with a store the notes are kept in it; drop one"
        );
    }
    let data_dir = prepare_data_dir(&config, data_dir, store.is_some())?;
    let lifetimes = handles
        .map(layers::HandlesConfig::lifetimes)
        .unwrap_or_else(|| layers::HandlesConfig::default().lifetimes());
    let kept = match (&store, data_dir.as_deref()) {
        (Some(chosen), _) => notes::Kept::Store(&chosen.store),
        (None, Some(dir)) if !in_memory => notes::Kept::Dir(dir),
        (None, _) => notes::Kept::Memory,
    };
    let notes = notes::store(kept, lifetimes)?;
    if let Some(chosen) = &store {
        terminal::note(&format!(
            "toolwire: state and notes are kept in the store at {}",
            chosen.shown
        ));
    }
    let audit = config.audit_file(data_dir.as_deref());
    serve(listen, config, audit, notes, store.map(|c| c.store)).await
}

/// The directory `toolwire serve` keeps notes (and a relative audit file) in: `given`
/// (`--data-dir`), else the default one; created private. None when the notes are kept in
/// memory or in a store (`in_store`) and the audit file needs no directory.
fn prepare_data_dir(
    config: &config::ServeConfig,
    given: Option<std::path::PathBuf>,
    in_store: bool,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    let in_memory = in_store || config.handles.as_ref().is_some_and(|h| h.in_memory);
    let data_dir = match given {
        _ if in_memory && !config.audit_in_data_dir() => None,
        Some(dir) => Some((dir, private::Chosen::ByPerson)),
        None => Some((default_data_dir()?, private::Chosen::ByToolwire)),
    };
    if let Some((dir, chosen)) = &data_dir {
        private::dir(dir, *chosen).with_context(|| {
            format!(
                "--data-dir: cannot create {} (pass another directory)",
                dir.display()
            )
        })?;
    }
    Ok(data_dir.map(|(dir, _)| dir))
}

/// `$XDG_DATA_HOME/toolwire`, else `~/.local/share/toolwire`.
fn default_data_dir() -> anyhow::Result<std::path::PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(data) = var("XDG_DATA_HOME") {
        return Ok(std::path::PathBuf::from(data).join("toolwire"));
    }
    match var("HOME") {
        Some(home) => Ok(std::path::PathBuf::from(home).join(".local/share/toolwire")),
        None => anyhow::bail!(
            "no HOME or XDG_DATA_HOME to keep notes in: pass --data-dir DIR (or [handles] in_memory = true)"
        ),
    }
}

/// Where `toolwire serve` listens and whom it answers.
struct Listen {
    /// `--http ADDR`; stdio without it.
    addr: Option<SocketAddr>,
    /// `--allow-host`: Host names accepted besides localhost.
    allow_hosts: Vec<String>,
    /// `--modern-only` or not.
    clients: examples::Clients,
}

/// Serves the example tools on stdio or Streamable HTTP.
async fn serve(
    listen: Listen,
    settings: config::ServeConfig,
    audit_file: Option<std::path::PathBuf>,
    notes: notes::Notes,
    store: Option<toolwire_server::Store>,
) -> anyhow::Result<()> {
    let audit = match &audit_file {
        Some(file) => Some(std::sync::Arc::new(
            toolwire_server::JsonlAuditSink::open(file)
                .with_context(|| format!("audit.file: cannot open {}", file.display()))?,
        ) as std::sync::Arc<dyn toolwire_server::AuditSink>),
        None => None,
    };
    let Listen {
        addr,
        allow_hosts,
        clients,
    } = listen;
    let server = examples::server(clients, &settings, audit, &notes, store.as_ref())?;
    if addr.is_none() && settings.auth.is_some() {
        anyhow::bail!(
            "[auth] applies to Streamable HTTP only (stdio has no access tokens, A-01): add --http ADDR"
        );
    }
    server.shutdown_on_signal();
    let Some(addr) = addr else {
        // stdio has no access tokens: the caller is who the environment says (A-01).
        let caller = stdio::StdioConfig::from_env().map_err(|e| anyhow::anyhow!(e))?;
        tracing::info!(%caller, "serving the example tools on stdio");
        stdio::serve_with(server.clone(), caller)
            .await
            .context("stdio transport")?;
        server.flush_audit();
        telemetry::shutdown().await;
        // Tokio's stdin reader may still be blocked in a read; do not wait for it.
        std::process::exit(0);
    };
    let listener = bind(addr).await?;
    let addr = listener.local_addr()?;
    let config = http_config(allow_hosts, &settings);
    terminal::note(&format!(
        "toolwire: serving the example tools at http://{addr}/mcp (Ctrl-C to stop)"
    ));
    if let Some(file) = &audit_file {
        terminal::note(&format!("toolwire: audit events go to {}", file.display()));
    }
    for line in try_it(addr, &settings) {
        terminal::note(&line);
    }
    let served = http::serve(server.clone(), listener, config)
        .await
        .context("HTTP transport");
    server.flush_audit();
    served
}

/// A listener on `--http ADDR`, or an error that says what to do.
async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        let what_to_do = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "; another program listens there: stop it, or pass another --http ADDR (port 0 picks a free one)"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "; this machine has no such address: pass one of its own, e.g. 127.0.0.1:8080"
            }
            std::io::ErrorKind::PermissionDenied => {
                "; ports below 1024 need privileges: pass a higher one, e.g. 127.0.0.1:8080"
            }
            _ => "",
        };
        anyhow::anyhow!("--http {addr}: cannot listen there: {e}{what_to_do}")
    })
}

/// The HTTP settings of `--allow-host` and a `--config` file: OAuth and the flood limit.
fn http_config(allow_hosts: Vec<String>, settings: &config::ServeConfig) -> http::HttpConfig {
    let mut config = allow_hosts
        .into_iter()
        .fold(http::HttpConfig::default(), |c, h| c.allow_host(h));
    if let Some(oauth) = settings.oauth() {
        config = config.oauth(oauth);
    }
    if let Some(limits) = &settings.limits {
        config = limits.apply_http(config);
    }
    config
}

/// What to try on the running server: a curl command that calls `add`, presenting the access
/// token it needs when `[auth]` asks for one (and saying which token that is), since without
/// one it would only get 401.
fn try_it(addr: SocketAddr, settings: &config::ServeConfig) -> Vec<String> {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let curl = |auth: &str| {
        format!(
            "curl -s http://{addr}/mcp{auth} -H 'content-type: application/json' \
             -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2026-07-28' \
             -H 'mcp-method: tools/call' -H 'mcp-name: add' -d '{body}'"
        )
    };
    let Some(token) = settings.token_for("add") else {
        return vec![format!("try: {}", curl(""))];
    };
    let scopes = match token.scopes.as_slice() {
        [] => String::new(),
        [one] => format!(" with the scope {one}"),
        many => format!(" with the scopes {}", many.join(" ")),
    };
    vec![
        format!(
            "toolwire: calls need an access token from {} for {}; add needs one{scopes}",
            token.issuer, token.resource
        ),
        format!(
            "try, with the token in $TOKEN: {}",
            curl(r#" -H "authorization: Bearer $TOKEN""#)
        ),
    ]
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
