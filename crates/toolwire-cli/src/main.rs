//! `toolwire`: serve the example tools over stdio or Streamable HTTP, and discover, list, call
//! and watch the tools of any MCP server.

use clap::{Parser, Subcommand};

mod changes;
mod client;
mod config;
mod examples;
mod gateway;
mod host;
mod layers;
mod logs;
mod notes;
mod private;
mod reload;
mod sandbox;
mod serve;
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
    /// Serve the eleven built-in example tools (echo, add, word_count, count_slowly,
    /// current_time, greet and introduce, which ask the user, toggle_shout, and notes kept by
    /// handle: note_create, note_append, note_read) to
    /// 2026-07-28 clients and to legacy (2025-11-25) ones, with rate limits, deadlines, output
    /// sanitization and audit events on.
    ///
    /// On stdio the caller is who the environment says: TOOLWIRE_PRINCIPAL (binds its request
    /// state and tasks) and TOOLWIRE_SCOPES (space-separated; tools needing other scopes are
    /// hidden and refused).
    Serve(serve::ServeArgs),
    /// Serve the tools of the servers in an `mcpServers` file (stdio commands, HTTP servers,
    /// either protocol era) as one MCP server, named `prefix__tool`: with the downstream
    /// settings of the file's "gateway" object (those of `toolwire serve --config`, as JSON),
    /// an upstream's list changes passed on, a failed upstream retried while its last list is
    /// kept, and a tool whose definition changed withheld until `toolwire pins approve`.
    Gateway(gateway::GatewayArgs),
    /// Show what a local server would be allowed to read, write and reach in its sandbox, and
    /// how much of that this system enforces, without starting it.
    Sandbox(sandbox::SandboxArgs),
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
        /// Only the tools best matching a task described in words (or a tool's exact name),
        /// best first: ranked offline over each tool's name, server, title, description and
        /// parameters.
        #[arg(long, value_name = "QUERY")]
        search: Option<String>,
        /// With --search: how many tools at most, 1 to 20.
        #[arg(long, value_name = "N", default_value_t = toolwire_host::toolwire_search::DEFAULT_LIMIT, requires = "search")]
        limit: usize,
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
/// reported an error (`call`), the audit log was tampered with (`audit verify`) or no tool
/// matched (`tools --search`), 2 anything
/// else failed, 3 a call was refused, 128 + the signal's number when a client command was
/// interrupted (130 SIGINT, 143 SIGTERM, 129 SIGHUP) after stopping its server.
fn main() {
    // Started as a stdio server's sandbox launcher: confine, then become the server,
    // before any thread of the runtime exists.
    toolwire_sandbox::run_if_launcher();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the async runtime starts")
        .block_on(main_async());
}

async fn main_async() {
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
        terminal::error_note(&terminal::error_report(&error));
        std::process::exit(2);
    }
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (running, server_logs) = match &cli.command {
        Command::Serve(args) => (logs::Running::Server, Some(&args.logs)),
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
        Command::Serve(args) => serve::serve_command(args).await,
        Command::Gateway(args) => gateway::gateway(args).await,
        Command::Sandbox(args) => sandbox::show(&args),
        Command::Discover { target, json } => client::discover(&target, json).await,
        Command::Servers { host, json } => host::servers::servers(&host, json).await,
        Command::Tools {
            host,
            json,
            only,
            search,
            limit,
        } => {
            let search = search
                .as_deref()
                .map(|query| host::tools::Search { query, limit });
            host::tools::tools(&host, json, only.as_deref(), search).await
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
