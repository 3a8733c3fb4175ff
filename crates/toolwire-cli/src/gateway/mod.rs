//! `toolwire gateway --config FILE`: the servers of an `mcpServers` file (the one hosts
//! already read) behind one endpoint, Streamable HTTP with `--http ADDR`, else stdio. The
//! file's top-level `"gateway"` object holds the downstream settings, those of `toolwire
//! serve --config` under the same names, as JSON (`tools` keyed by qualified names), and
//! `policy`: who may call what, as CEL rules (`{"rules": [{"deny": "…", "why": "…"}],
//! "default": "allow"}`), and `discovery`: what each caller's list holds, every tool it may use
//! or the search tools (`{"mode": "auto", "threshold": 100}`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use toolwire_gateway::console::ConsoleOptions;
use toolwire_gateway::discovery::{Discovery, DiscoveryConfig};
use toolwire_gateway::{Gateway, GatewayOptions, NoPerson, Rules, RulesConfig};
use toolwire_host::{HostOptions, ServerState};
use toolwire_server::{JsonlAuditSink, Server, http, stdio};

use crate::config::ServeConfig;
use crate::{examples, store, terminal};

mod checks;
mod file;

use checks::{check_settings, refuse_itself};
use file::{Downstream, Held, downstream_of, file_json, upstreams_of};

/// The top-level key of the downstream settings.
const GATEWAY_KEY: &str = "gateway";

/// `toolwire gateway`'s arguments.
#[derive(clap::Args)]
pub(crate) struct GatewayArgs {
    /// The `mcpServers` JSON file of the upstream servers (an existing .mcp.json works as
    /// is), with an optional top-level "gateway" object for the downstream side.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Extra Host names to accept besides localhost, e.g. when binding beyond loopback.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Serve the admin endpoints (GET /metrics in the Prometheus text format, /healthz,
    /// /readyz) on this address instead of the --http one (e.g. 127.0.0.1:9090); with
    /// stdio, the only way to have them. They need no token: keep it loopback or private.
    /// The console (/console: upstreams, tools, approvals, audit) is served there too, on a
    /// loopback address or with --console-token-env.
    #[arg(long, value_name = "ADDR")]
    admin: Option<SocketAddr>,
    /// Keep no metrics (GET /metrics answers 404); /healthz and /readyz stay.
    #[arg(long)]
    no_metrics: bool,
    /// The console (http://ADMIN/console: upstreams, tools, approvals, audit) asks for the
    /// token in this environment variable (at least 16 characters), on any --admin address.
    /// Without it the console is served only on a loopback --admin address.
    #[arg(long, value_name = "NAME")]
    console_token_env: Option<String>,
    /// Where the upstream tools' pins are kept, and a relative "gateway.audit.file". Default:
    /// $XDG_STATE_HOME/toolwire, else ~/.local/state/toolwire.
    #[arg(long, value_name = "DIR", env = "TOOLWIRE_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Keep the downstream state (single-use request state, legacy sessions, tool quotas,
    /// list fan-out) in this Redis, shared by every gateway instance given it:
    /// redis://HOST:PORT[/DB]; read from TOOLWIRE_STORE when not given.
    #[arg(long, value_name = "URL", env = store::STORE_ENV, hide_env_values = true)]
    store: Option<String>,
    /// Reload the file when its content changes, as on SIGHUP: upstreams, rules, held calls'
    /// bounds, limits, output guard and tool settings (the store, auth and audit file need a
    /// restart).
    #[arg(long)]
    watch_config: bool,
    /// Development only: the upstreams' OAuth (their own sign-in, and token exchange for
    /// callers) may use authorization servers over plain http anywhere, not only at the
    /// upstream's own origin. Link-local addresses stay refused.
    #[arg(long)]
    insecure_oauth_http: bool,
    #[command(flatten)]
    pub(crate) logs: crate::logs::ServerLogs,
}

/// Reads the file, connects to the upstreams and serves their tools until stopped.
pub(crate) async fn gateway(args: GatewayArgs) -> anyhow::Result<()> {
    let shown = args.config.display();
    let started = std::fs::read(&args.config).with_context(|| format!("{shown}: cannot read"))?;
    let value = file_json(&started, &args.config)?;
    let Downstream {
        settings,
        policy,
        discovery,
        held,
        pins,
    } = downstream_of(&value, &args.config)?;
    let upstreams = upstreams_of(&started, &args.config)?;
    refuse_itself(&upstreams, args.http, &args.config)?;
    for ignored in &upstreams.ignored {
        terminal::note(&format!("toolwire: warning: {ignored}"));
    }
    let state_dir = crate::signin::state_dir(args.state_dir.as_deref())?;
    let store = store::open(args.store.as_deref(), settings.store.as_ref(), |name| {
        std::env::var(name).ok()
    })?;
    // What a reload of this file would refuse, the start refuses too.
    check_settings(None, &settings, &args.config)?;
    let (http_listener, admin) = take_addresses(&args, &settings, &state_dir).await?;
    let builder = downstream_builder(&args, &settings, &state_dir, store.as_ref())?;
    let options = gateway_options(
        &args.config,
        args.insecure_oauth_http,
        &settings,
        (policy, discovery),
        held,
    )?;
    let host = host_options(
        &state_dir,
        store.as_ref(),
        (args.insecure_oauth_http, pins.hold_new),
    );
    let gateway = Gateway::start(&upstreams, host, builder, options).await?;
    let server = gateway.server().clone();
    report(&gateway);
    let exchanging = gateway.exchanging();
    warn_of_sign_in(&args, &settings, &exchanging);
    server.shutdown_on_signal();
    let exchanges = !exchanging.is_empty();
    let http_config = http_config(args.allow_hosts.clone(), &settings, exchanges)
        // With sign-in, the endpoints that name upstreams and tools are not the MCP address's
        // (which anyone reaches): only --admin serves them then.
        .admin_endpoints(args.admin.is_none() && settings.auth.is_none());
    let reloading = Reloading {
        gateway: gateway.clone(),
        flood: args.http.map(|_| http_config.flood_control()),
        file: args.config.clone(),
        insecure_oauth_http: args.insecure_oauth_http,
        running: value,
    };
    crate::reload::follow(args.config.clone(), args.watch_config, started, reloading);
    if let Some((listener, console)) = admin {
        let routes = console_router(gateway.clone(), console)?;
        crate::serve::serve_admin_with(&server, listener, Some(routes))?;
    }
    let served = match http_listener {
        Some(listener) => serve_http(&server, listener, http_config, args.admin.is_none()).await,
        None => {
            let caller = stdio::StdioConfig::from_env().map_err(|e| anyhow::anyhow!(e))?;
            stdio::serve_with(server.clone(), caller)
                .await
                .context("stdio transport")
        }
    };
    server.flush_audit();
    gateway.close().await;
    served
}

/// What the flags ask for, checked, and the addresses taken, before any upstream starts: the
/// `--http` listener and the `--admin` one with the console's options.
async fn take_addresses(
    args: &GatewayArgs,
    settings: &ServeConfig,
    state_dir: &Path,
) -> anyhow::Result<(
    Option<tokio::net::TcpListener>,
    Option<(tokio::net::TcpListener, ConsoleOptions)>,
)> {
    if args.http.is_none() && settings.auth.is_some() {
        anyhow::bail!(
            "gateway.auth applies to Streamable HTTP only (stdio has no access tokens): add --http ADDR"
        );
    }
    let http = match args.http {
        Some(addr) => Some(crate::serve::bind(addr).await?),
        None => None,
    };
    let admin = match args.admin {
        Some(addr) => {
            let listener = crate::serve::bind_admin(addr).await?;
            let console = console_options(args, settings, state_dir)?(listener.local_addr()?);
            console.check().context("--console-token-env")?;
            Some((listener, console))
        }
        None => None,
    };
    Ok((http, admin))
}

/// The downstream server's builder: the `gateway` object's settings, its audit file (relative
/// to the state dir), the store, and metrics where they can be scraped.
fn downstream_builder(
    args: &GatewayArgs,
    settings: &ServeConfig,
    state_dir: &Path,
    store: Option<&store::Chosen>,
) -> anyhow::Result<toolwire_server::ServerBuilder> {
    let audit = match settings.audit_file(Some(state_dir)) {
        Some(file) => Some(Arc::new(
            JsonlAuditSink::open(&file)
                .with_context(|| format!("gateway.audit.file: cannot open {}", file.display()))?,
        ) as Arc<dyn toolwire_server::AuditSink>),
        None => None,
    };
    // The upstreams' prompts and resources are passed through (they come and go at runtime).
    let builder = Server::builder("toolwire-gateway", env!("CARGO_PKG_VERSION"))
        .title("Toolwire gateway")
        .offer_prompts()
        .offer_resources();
    // Kept only where they can be scraped: stdio has them only with --admin.
    let builder = if !args.no_metrics && (args.http.is_some() || args.admin.is_some()) {
        builder.metrics(toolwire_server::observe::Metrics::new())
    } else {
        builder
    };
    Ok(examples::configured_builder(
        builder,
        settings,
        audit,
        store.map(|s| &s.store),
    ))
}

/// The console's options for the admin address it will be bound to: its token (from the
/// environment variable `--console-token-env` names) and the audit logs it shows.
fn console_options(
    args: &GatewayArgs,
    settings: &ServeConfig,
    state_dir: &Path,
) -> anyhow::Result<impl FnOnce(SocketAddr) -> ConsoleOptions + use<>> {
    let token = match &args.console_token_env {
        Some(name) => match std::env::var(name) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => anyhow::bail!(
                "--console-token-env {name}: the environment variable {name} is not set (or \
                 empty); set it to the console's token (e.g. `openssl rand -hex 32`)"
            ),
        },
        None => None,
    };
    let host_log = state_dir.join("audit.jsonl");
    let calls_log = settings.audit_file(Some(state_dir));
    Ok(move |bound: SocketAddr| {
        let mut options = ConsoleOptions::new(bound).host_audit_log(host_log);
        if let Some(calls) = calls_log {
            options = options.calls_audit_log(calls);
        }
        match token {
            Some(token) => options.token(token),
            None => options,
        }
    })
}

/// The console's routes on the admin address `options` names; says where it is, or why it is
/// refused there.
fn console_router(gateway: Gateway, options: ConsoleOptions) -> anyhow::Result<axum::Router> {
    let guarded = options.has_token();
    let addr = options.admin();
    let router =
        toolwire_gateway::console::router(gateway, options).context("--console-token-env")?;
    if guarded || addr.ip().is_loopback() {
        terminal::note(&format!("toolwire: console at http://{addr}/console"));
    } else {
        terminal::note(&format!(
            "toolwire: warning: the console is refused on --admin {addr}: it is not a loopback \
             address and no --console-token-env is given"
        ));
    }
    Ok(router)
}

/// The gateway's own settings: each served tool's settings from `gateway.tools`, the rules
/// and the discovery modes, the held calls' bounds.
fn gateway_options(
    file: &Path,
    insecure_oauth_http: bool,
    settings: &ServeConfig,
    (policy, discovery): (Option<RulesConfig>, Option<DiscoveryConfig>),
    held: Held,
) -> anyhow::Result<GatewayOptions> {
    let tools = settings.tools.clone();
    let mut options =
        GatewayOptions::new().tool_settings(move |tool, served| match tools.get(&tool.qualified) {
            Some(config) => examples::configured_tool(served, config),
            None => served,
        });
    if insecure_oauth_http {
        options = options.oauth_insecure_http();
    }
    if let Some(ttl_ms) = held.ttl_ms {
        options = options.hold_ttl(Duration::from_millis(ttl_ms));
    }
    if let Some(max) = held.max {
        options = options.max_held(max);
    }
    if let Some(policy) = policy {
        let rules = Rules::compile(&policy)
            // A rule's syntax error shows the rule and a caret under the place: its lines are
            // kept (the file is the operator's own).
            .map_err(|e| {
                crate::terminal::Lines(format!("{}: gateway.policy: {e}", file.display()))
            })?;
        options = options.rules(rules);
    }
    if let Some(discovery) = discovery {
        let discovery = Discovery::compile(&discovery)
            .map_err(|e| anyhow::anyhow!("{}: gateway.{e}", file.display()))?;
        options = options.discovery(discovery);
    }
    Ok(options)
}

/// How the gateway's host reaches the upstreams: its state, audit and pins (in the shared
/// store when there is one), and plain-http authorization servers with `insecure_oauth_http`.
fn host_options(
    state_dir: &Path,
    store: Option<&store::Chosen>,
    (insecure_oauth_http, hold_new): (bool, bool),
) -> HostOptions {
    let host = HostOptions::new(NoPerson)
        .hold_new_names(hold_new)
        .client_info("toolwire-gateway", env!("CARGO_PKG_VERSION"))
        .state_dir(state_dir)
        // What happens upstream (servers failing, tools changing, with the diff against their
        // pins, changes approved, calls that failed upstream), hash-chained: the log the
        // terminal host keeps, which `toolwire audit verify` checks.
        .audit_log(state_dir.join("audit.jsonl"))
        // Each call is in the server's audit, with its caller: one synced write per call here
        // would cost more than the call.
        .audit_each_call(false)
        // The downstream output guard cleans and caps the tool results callers get; it never
        // sees prompts and resources, which the host cleans (`clean_offers`, on by default).
        .clean_results(false)
        .max_result_chars(usize::MAX);
    // With a shared store, the pins are there: every instance withholds and serves alike, and
    // `toolwire pins approve --store` approves for all.
    let host = if insecure_oauth_http {
        host.oauth_insecure_http()
    } else {
        host
    };
    match store {
        Some(chosen) => host.pin_store(chosen.pins.clone()),
        None => host,
    }
}

/// The shared store a gateway file's `gateway.store` names, if any (for `toolwire pins`).
pub(crate) fn store_settings(file: &Path) -> anyhow::Result<Option<crate::store::StoreConfig>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read", file.display()))?;
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        // Not JSON: the configuration's own reading says why.
        return Ok(None);
    };
    if value.get(GATEWAY_KEY).is_none() {
        return Ok(None);
    }
    Ok(downstream_of(&value, file)?.settings.store)
}

/// The keys of the `"gateway"` object read only at start: a reload that changes one is
/// refused. The store and the audit file are opened once; the sign-in settings and where the
/// client's address comes from are the HTTP transport's, which is built once.
const RESTART_ONLY: &[&str] = &[
    "store",
    "auth",
    "audit",
    "pins",
    "limits.forwarded_header",
    "limits.trusted_proxies",
];

/// What a reload of the gateway's file reads and changes.
struct Reloading {
    gateway: Gateway,
    /// The flood limit's handle, when serving HTTP.
    flood: Option<http::FloodControl>,
    file: PathBuf,
    insecure_oauth_http: bool,
    /// The file's content as running.
    running: serde_json::Value,
}

impl crate::reload::Reload for Reloading {
    fn reload(&mut self, text: &[u8]) -> anyhow::Result<crate::reload::Applied> {
        let value = file_json(text, &self.file)?;
        let Downstream {
            settings,
            policy,
            discovery,
            held,
            pins: _,
        } = downstream_of(&value, &self.file)?;
        let upstreams = upstreams_of(text, &self.file)?;
        let empty = serde_json::Value::Object(Default::default());
        let (was, is) = (
            self.running.get(GATEWAY_KEY).unwrap_or(&empty),
            value.get(GATEWAY_KEY).unwrap_or(&empty),
        );
        crate::reload::needs_restart("gateway.", RESTART_ONLY, was, is)?;
        let options = gateway_options(
            &self.file,
            self.insecure_oauth_http,
            &settings,
            (policy, discovery),
            held,
        )?;
        let server = examples::reconfigure(&settings);
        check_settings(Some(self.gateway.server()), &settings, &self.file)?;
        crate::reload::check_flood_limit(&settings)?;
        // Everything checked; the gateway's reload checks the server's settings against the
        // served tools, then changes every part, or, refused, none.
        let reloaded = self
            .gateway
            .reload_with(&upstreams, options, Some(server))?;
        crate::reload::set_flood_limit(self.flood.as_ref(), &settings)?;
        for ignored in &upstreams.ignored {
            terminal::note(&format!("toolwire: warning: {ignored}"));
        }
        let applied = summary(was, is, reloaded.upstreams);
        self.running = value;
        Ok(applied)
    }

    fn audit(&self, event: &toolwire_server::ReloadEvent) {
        self.gateway.server().audit_reload(event);
        let changes: Vec<String> = event
            .upstreams_added
            .iter()
            .map(|u| format!("upstream added: {u}"))
            .chain(
                event
                    .upstreams_removed
                    .iter()
                    .map(|u| format!("upstream removed: {u}")),
            )
            .chain(
                event
                    .upstreams_changed
                    .iter()
                    .map(|u| format!("upstream changed: {u}")),
            )
            .chain(event.changed.iter().cloned())
            .collect();
        self.gateway
            .host()
            .record_reload(&event.file_sha256, &changes, event.reason.as_deref());
    }
}

/// Says what the sign-in settings leave out: upstreams that exchange callers' tokens with no
/// tokens checked (their calls are refused), and the operator's endpoints off the MCP address.
fn warn_of_sign_in(args: &GatewayArgs, settings: &ServeConfig, exchanging: &[String]) {
    if !exchanging.is_empty() && (args.http.is_none() || settings.auth.is_none()) {
        terminal::note(&format!(
            "toolwire: warning: {} exchange each caller's access token for their own, and this \
             gateway checks no tokens (it needs --http and gateway.auth): every call of their \
             tools will be refused",
            exchanging.join(", ")
        ));
    }
    if settings.auth.is_some() && args.http.is_some() && args.admin.is_none() {
        terminal::note(
            "toolwire: gateway.auth is on: /metrics, /healthz and /readyz, which name upstreams \
             and tools, are not served on the MCP address; pass --admin ADDR to have them",
        );
    }
}

/// What a reload changed, in words and by key.
fn summary(
    was: &serde_json::Value,
    is: &serde_json::Value,
    upstreams: toolwire_host::ServerChanges,
) -> crate::reload::Applied {
    let mut said = Vec::new();
    for (what, names) in [
        ("upstreams added", &upstreams.added),
        ("upstreams removed", &upstreams.removed),
        ("upstreams changed", &upstreams.changed),
    ] {
        if !names.is_empty() {
            said.push(format!("{what}: {}", names.join(", ")));
        }
    }
    let mut keys = Vec::new();
    for key in crate::reload::changed_keys(Some(was), Some(is)) {
        if key == "tools" {
            let tools = crate::reload::changed_keys(was.get("tools"), is.get("tools"));
            said.push(format!("tools changed: {}", tools.join(", ")));
            keys.extend(tools.iter().map(|t| format!("{GATEWAY_KEY}.tools.{t}")));
        } else {
            said.push(format!("{GATEWAY_KEY}.{key} changed"));
            keys.push(format!("{GATEWAY_KEY}.{key}"));
        }
    }
    crate::reload::Applied {
        said,
        keys,
        upstreams,
    }
}

/// Says on stderr how each upstream is doing.
fn report(gateway: &Gateway) {
    let starting = gateway.starting();
    for status in gateway.host().servers() {
        let line = match &status.state {
            ServerState::Connected { tools } => {
                let tools = terminal::counted(*tools, "tool", "tools");
                format!("toolwire: upstream {}: {tools}", status.name)
            }
            ServerState::Failed { .. } if starting.contains(&status.name) => format!(
                "toolwire: warning: upstream {} has not answered yet; its tools are served once it does",
                status.name
            ),
            ServerState::Failed { error } => format!(
                "toolwire: warning: upstream {} failed ({error}); retrying in the background",
                status.name
            ),
        };
        terminal::note(&terminal::visible(&line, terminal::Layout::Line));
    }
}

/// The HTTP settings of the gateway: those of `toolwire serve`, and with `exchanges` (an
/// upstream exchanges callers' tokens) each caller's token handed to the gateway's handlers.
fn http_config(
    allow_hosts: Vec<String>,
    settings: &ServeConfig,
    exchanges: bool,
) -> http::HttpConfig {
    let config = crate::serve::http_config(allow_hosts, settings);
    // An upstream that exchanges callers' tokens needs each caller's: handed to the gateway's
    // handlers, never further.
    match (exchanges, settings.oauth()) {
        (true, Some(oauth)) => config.oauth(oauth.token_to_handlers()),
        _ => config,
    }
}

/// Serves `server` at `addr` with `config` until it shuts down; `endpoints_here`: metrics and
/// health are served there too (no --admin).
async fn serve_http(
    server: &Server,
    listener: tokio::net::TcpListener,
    config: http::HttpConfig,
    endpoints_here: bool,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    terminal::note(&format!(
        "toolwire: the gateway serves at http://{addr}/mcp (Ctrl-C to stop)"
    ));
    if endpoints_here {
        crate::serve::note_endpoints(server, addr);
    }
    http::serve(server.clone(), listener, config)
        .await
        .context("HTTP transport")
}
