//! `toolwire serve`: the example tools on stdio or Streamable HTTP, configured by a `--config`
//! file that a reload (SIGHUP, `--watch-config`) reads again, with metrics and health on the
//! HTTP address or an admin one.

use std::net::SocketAddr;

use anyhow::Context as _;
use toolwire_server::{http, stdio};

use crate::{config, examples, layers, notes, private, reload, store, terminal};

/// `toolwire serve`'s arguments.
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    pub(crate) http: Option<SocketAddr>,
    /// Extra Host names to accept besides localhost, e.g. when binding beyond loopback.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
    /// Serve the admin endpoints (GET /metrics in the Prometheus text format, /healthz,
    /// /readyz) on this address instead of the --http one (e.g. 127.0.0.1:9090); with
    /// stdio, the only way to have them. They need no token: keep it loopback or private.
    #[arg(long, value_name = "ADDR")]
    pub(crate) admin: Option<SocketAddr>,
    /// Keep no metrics (GET /metrics answers 404); /healthz and /readyz stay.
    #[arg(long)]
    pub(crate) no_metrics: bool,
    /// Refuse clients that start with the 2025-11-25 `initialize` handshake.
    #[arg(long)]
    pub(crate) modern_only: bool,
    /// A TOML file: `[auth]` (OAuth on HTTP: JWTs, introspection, scope hierarchy) and
    /// per-tool settings (`[tools.add] scopes = ["math"]`); see examples/serve.toml.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<std::path::PathBuf>,
    /// Reload --config when its content changes, as on SIGHUP: `[tools.NAME]` (scopes,
    /// quotas, deadlines, raw output), the tool quota and flood limit of `[limits]`,
    /// `[deadlines]` and `[output]`; `[auth]`, `[store]`, `[audit]`, `[handles]` and where
    /// the client address comes from need a restart.
    #[arg(long, requires = "config")]
    pub(crate) watch_config: bool,
    /// Where notes are kept (SQLite file handles.sqlite3, created if missing), so they
    /// survive a restart. Default: $XDG_DATA_HOME/toolwire, else ~/.local/share/toolwire.
    #[arg(long, value_name = "DIR", env = "TOOLWIRE_DATA_DIR")]
    pub(crate) data_dir: Option<std::path::PathBuf>,
    /// Where a relative `[audit] file` of --config goes, as the gateway's relative
    /// `gateway.audit.file` and the host's audit log do. Default: $XDG_STATE_HOME/toolwire,
    /// else ~/.local/state/toolwire.
    #[arg(long, value_name = "DIR", env = "TOOLWIRE_STATE_DIR")]
    pub(crate) state_dir: Option<std::path::PathBuf>,
    /// Keep the server's state in this Redis (or Valkey) instead of this process:
    /// redis://HOST:PORT[/DB], or rediss:// for TLS. Every instance given the same store
    /// answers any request: single-use request state and its key ring, tasks, legacy
    /// sessions, and the notes (kept there instead of --data-dir's SQLite file; how long
    /// they survive is Redis's persistence setting). Wins over `[store] url` of --config;
    /// read from TOOLWIRE_STORE when not given, which keeps a password out of `ps`.
    /// While the store is away, calls that need it fail with "try again"; others are
    /// served.
    #[arg(long, value_name = "URL", env = store::STORE_ENV, hide_env_values = true)]
    pub(crate) store: Option<String>,
    #[command(flatten)]
    pub(crate) logs: crate::logs::ServerLogs,
}

/// `toolwire serve`: reads `--config`, opens the store and the notes, and serves.
pub(crate) async fn serve_command(args: ServeArgs) -> anyhow::Result<()> {
    let listen = Listen {
        addr: args.http,
        allow_hosts: args.allow_hosts,
        admin: args.admin,
        metrics: !args.no_metrics,
        clients: if args.modern_only {
            examples::Clients::ModernOnly
        } else {
            examples::Clients::All
        },
    };
    let configured = args.config.map(|file| Configured {
        file,
        watch: args.watch_config,
    });
    let (data_dir, store) = (args.data_dir, args.store);
    let store = store.as_deref();
    let (config, started) = match &configured {
        Some(Configured { file, .. }) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("{}: cannot read", file.display()))?;
            (config::parse(&text, file)?, Some(text))
        }
        None => (config::ServeConfig::default(), None),
    };
    let reloads = configured.zip(started);
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
    let state_dir = match config.audit_is_relative() {
        true => Some(crate::signin::state_dir(args.state_dir.as_deref())?),
        false => None,
    };
    let audit = config.audit_file(state_dir.as_deref());
    serve(
        listen,
        config,
        audit,
        notes,
        store.map(|c| c.store),
        reloads,
    )
    .await
}

/// `--config FILE` of `toolwire serve`, and whether to reload it when it changes.
struct Configured {
    file: std::path::PathBuf,
    watch: bool,
}

/// The `--config` sections read only at start: a reload that changes one is refused. The
/// sign-in settings and where the client's address comes from are the HTTP transport's,
/// built once; the store, the audit file and the notes' handles are opened once.
const RESTART_ONLY: &[&str] = &[
    "auth",
    "store",
    "audit",
    "handles",
    "limits.forwarded_header",
    "limits.trusted_proxies",
];

/// What a reload of `toolwire serve --config` reads and changes.
struct Reloading {
    server: toolwire_server::Server,
    /// The flood limit's handle, when serving HTTP.
    flood: Option<http::FloodControl>,
    examples: examples::Examples,
    file: std::path::PathBuf,
    /// The file's content as running, as JSON.
    running: serde_json::Value,
}

impl Reloading {
    /// A TOML file's content as JSON, for comparing sections.
    fn json_of(text: &str) -> serde_json::Value {
        toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|table| serde_json::to_value(table).ok())
            .unwrap_or_default()
    }
}

impl reload::Reload for Reloading {
    fn reload(&mut self, text: &[u8]) -> anyhow::Result<reload::Applied> {
        let shown = self.file.display();
        let text =
            std::str::from_utf8(text).map_err(|e| anyhow::anyhow!("{shown}: not UTF-8: {e}"))?;
        let settings = config::parse(text, &self.file)?;
        let value = Self::json_of(text);
        reload::needs_restart("", RESTART_ONLY, &self.running, &value)?;
        let tools = self.examples.tools(&settings.tools)?;
        // Checked before the server changes: a reload refused changed nothing.
        reload::check_flood_limit(&settings)?;
        self.server
            .reconfigure(examples::reconfigure(&settings).tools(tools))?;
        reload::set_flood_limit(self.flood.as_ref(), &settings)?;
        let mut applied = reload::Applied::default();
        for key in reload::changed_keys(Some(&self.running), Some(&value)) {
            if key == "tools" {
                let tools = reload::changed_keys(self.running.get("tools"), value.get("tools"));
                applied
                    .said
                    .push(format!("tools changed: {}", tools.join(", ")));
                applied
                    .keys
                    .extend(tools.iter().map(|t| format!("tools.{t}")));
            } else {
                applied.said.push(format!("{key} changed"));
                applied.keys.push(key);
            }
        }
        self.running = value;
        Ok(applied)
    }

    fn audit(&self, event: &toolwire_server::ReloadEvent) {
        self.server.audit_reload(event);
    }
}

/// The directory `toolwire serve` keeps notes in: `given` (`--data-dir`), else the default
/// one; created private. None when the notes are kept in memory or in a store (`in_store`).
fn prepare_data_dir(
    config: &config::ServeConfig,
    given: Option<std::path::PathBuf>,
    in_store: bool,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    let in_memory = in_store || config.handles.as_ref().is_some_and(|h| h.in_memory);
    let data_dir = match given {
        _ if in_memory => None,
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
    /// `--admin ADDR`: where the admin endpoints are served instead of the MCP address.
    admin: Option<SocketAddr>,
    /// Whether metrics are kept (not `--no-metrics`).
    metrics: bool,
    /// `--modern-only` or not.
    clients: examples::Clients,
}

/// Says where `server`'s metrics (when it keeps them) and health endpoints are, at `addr`.
pub(crate) fn note_endpoints(server: &toolwire_server::Server, addr: SocketAddr) {
    terminal::note(&match server.metrics() {
        Some(_) => {
            format!("toolwire: metrics at http://{addr}/metrics, health at /healthz and /readyz")
        }
        None => format!("toolwire: health at http://{addr}/healthz and /readyz"),
    });
}

/// Serves the example tools on stdio or Streamable HTTP.
async fn serve(
    listen: Listen,
    settings: config::ServeConfig,
    audit_file: Option<std::path::PathBuf>,
    notes: notes::Notes,
    store: Option<toolwire_server::Store>,
    reloads: Option<(Configured, String)>,
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
        admin,
        metrics,
        clients,
    } = listen;
    // Kept only where they can be scraped: stdio has them only with --admin.
    let metrics = (metrics && (addr.is_some() || admin.is_some()))
        .then(toolwire_server::observe::Metrics::new);
    let (server, examples) =
        examples::server(clients, &settings, audit, &notes, store.as_ref(), metrics)?;
    if addr.is_none() && settings.auth.is_some() {
        anyhow::bail!(
            "[auth] applies to Streamable HTTP only (stdio has no access tokens): add --http ADDR"
        );
    }
    server.shutdown_on_signal();
    let config = http_config(allow_hosts, &settings).admin_endpoints(admin.is_none());
    if let Some((Configured { file, watch }, text)) = reloads {
        let reloading = Reloading {
            server: server.clone(),
            flood: addr.is_some().then(|| config.flood_control()),
            examples,
            file: file.clone(),
            running: Reloading::json_of(&text),
        };
        reload::follow(file, watch, text.into_bytes(), reloading);
    }
    if let Some(admin) = admin {
        serve_admin(&server, admin).await?;
    }
    let Some(addr) = addr else {
        // stdio has no access tokens: the caller is who the environment says (A-01).
        let caller = stdio::StdioConfig::from_env().map_err(|e| anyhow::anyhow!(e))?;
        tracing::info!(%caller, "serving the example tools on stdio");
        stdio::serve_with(server.clone(), caller)
            .await
            .context("stdio transport")?;
        server.flush_audit();
        crate::telemetry::shutdown().await;
        // Tokio's stdin reader may still be blocked in a read; do not wait for it.
        std::process::exit(0);
    };
    let listener = bind(addr).await?;
    let addr = listener.local_addr()?;
    terminal::note(&format!(
        "toolwire: serving the example tools at http://{addr}/mcp (Ctrl-C to stop)"
    ));
    if admin.is_none() {
        note_endpoints(&server, addr);
    }
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

/// Serves the admin endpoints on `--admin ADDR` in a task of their own, until the server
/// shuts down; says where, and warns when the address is reachable from other machines.
pub(crate) async fn serve_admin(
    server: &toolwire_server::Server,
    addr: SocketAddr,
) -> anyhow::Result<()> {
    serve_admin_with(server, bind_admin(addr).await?, None)
}

/// A listener on `--admin ADDR`, or an error that says what to do.
pub(crate) async fn bind_admin(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--admin {addr}: cannot listen there (port 0 picks a free one)"))
}

/// [`serve_admin`] on a bound `listener`, with the routes `more` (the gateway's console)
/// beside the admin endpoints.
pub(crate) fn serve_admin_with(
    server: &toolwire_server::Server,
    listener: tokio::net::TcpListener,
    more: Option<axum::Router>,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    terminal::note(&format!(
        "toolwire: admin endpoints at http://{addr}/metrics, /healthz and /readyz"
    ));
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "--admin {addr} is not a loopback address: /metrics and /readyz answer anyone who reaches it, without a token"
        );
    }
    let server = server.clone();
    tokio::spawn(async move {
        let served = match more {
            None => toolwire_server::observe::serve_admin(server, listener).await,
            Some(more) => {
                let shutdown = server.shutdown_token();
                let app = toolwire_server::observe::admin_router(server).merge(more);
                // With each client's address, which the console throttles sign-ins by.
                let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move { shutdown.cancelled().await })
                    .await
            }
        };
        if let Err(error) = served {
            tracing::error!(%error, "the admin endpoints stopped");
        }
    });
    Ok(())
}

/// A listener on `--http ADDR`, or an error that says what to do.
pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
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
pub(crate) fn http_config(
    allow_hosts: Vec<String>,
    settings: &config::ServeConfig,
) -> http::HttpConfig {
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
    // Behind a proxy the server reads the client's address from the proxy's header: a request
    // straight to the instance says where it comes from as the proxy would.
    let forwarded = settings
        .limits
        .as_ref()
        .and_then(|limits| limits.forwarded_header())
        .map(|name| match name.to_ascii_lowercase().as_str() {
            "forwarded" => format!(" -H '{name}: for=127.0.0.1'"),
            _ => format!(" -H '{name}: 127.0.0.1'"),
        })
        .unwrap_or_default();
    let curl = |auth: &str| {
        format!(
            "curl -s http://{addr}/mcp{auth}{forwarded} -H 'content-type: application/json' \
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
