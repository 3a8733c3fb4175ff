//! Where the terminal host's servers and state come from, and the host made from them: the
//! configuration file (or one server named on the command line), the state directory, and the
//! person at the terminal answering approvals and the servers' questions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use toolwire_host::{Host, HostConfig, HostOptions, Origin, ProjectFile};

use toolwire_client::auth::FileStore;

use super::{approve, project, questions};
use crate::signin;
use crate::target::{Connection, Named, names_a_server};
use crate::terminal::{Layout, note, shown, visible};
use crate::ui::Ui;

/// How long servers may take to start before the wait is said.
const SLOW_START: std::time::Duration = std::time::Duration::from_millis(1500);

/// What is being waited for when servers are slow to start.
fn starting_note(config: &HostConfig) -> String {
    let names: Vec<String> = config
        .servers
        .iter()
        .map(|s| server_name(&s.name))
        .collect();
    let downloads = config.servers.iter().any(|s| {
        matches!(&s.transport, toolwire_host::Transport::Stdio { command, .. }
            if ["npx", "uvx", "pipx", "bunx"].iter().any(|d| command.ends_with(d)))
    });
    format!(
        "toolwire: waiting for {} to start{}…",
        names.join(", "),
        if downloads {
            " (the first run of npx or uvx downloads the server)"
        } else {
            ""
        }
    )
}

/// Where the configuration is looked for, in this order, without `--config`.
pub(crate) const SEARCH_ORDER: [&str; 4] = [
    "./.mcp.json",
    "./.cursor/mcp.json",
    "./.vscode/mcp.json",
    "~/.config/toolwire/config.json",
];

/// Where the terminal host keeps its state: every command that reads or writes it. Global, so
/// that it may follow a subcommand (`toolwire audit show --state-dir DIR`).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct StateArgs {
    /// Where pins, "always" answers, the audit log (audit.jsonl), sign-in tokens and project
    /// trust decisions are kept. Default: $XDG_STATE_HOME/toolwire, else
    /// ~/.local/state/toolwire.
    #[arg(long, env = "TOOLWIRE_STATE_DIR", value_name = "DIR", global = true)]
    pub(crate) state_dir: Option<PathBuf>,
}

impl StateArgs {
    /// The state directory.
    pub(crate) fn dir(&self) -> anyhow::Result<PathBuf> {
        crate::signin::state_dir(self.state_dir.as_deref())
    }

    /// The audit log, for reading it: the state directory is not created.
    pub(crate) fn audit_log(&self) -> anyhow::Result<PathBuf> {
        Ok(crate::signin::state_dir_to_read(self.state_dir.as_deref())?.join("audit.jsonl"))
    }
}

/// Which configuration file, and the state kept for it: every command that reads it.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ConfigArgs {
    /// The servers' configuration: an `mcpServers` (Claude, Cursor) or `servers` (VS Code) JSON
    /// file. Without it, the first found of ./.mcp.json, ./.cursor/mcp.json, ./.vscode/mcp.json,
    /// ~/.config/toolwire/config.json ($XDG_CONFIG_HOME/toolwire/config.json).
    #[arg(
        long,
        short = 'c',
        env = "TOOLWIRE_CONFIG",
        value_name = "FILE",
        global = true
    )]
    pub(crate) config: Option<PathBuf>,
    /// Use the project configuration found here (./.mcp.json, ./.cursor/mcp.json or
    /// ./.vscode/mcp.json) for this command without being asked, and without remembering it:
    /// for a file you have read. `toolwire trust` remembers the decision instead.
    #[arg(long, global = true)]
    pub(crate) trust_project: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// The configured servers, connected to: `pins` and `login`, which take no server named on
/// the command line (or take it as their argument).
#[derive(Args, Debug, Clone)]
pub(crate) struct ConnectArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    #[command(flatten)]
    pub(crate) connection: Connection,
}

impl ConnectArgs {
    /// The same as the host's arguments, with no server named on the command line.
    pub(crate) fn host(&self) -> HostArgs {
        HostArgs {
            config: self.config.clone(),
            server: None,
            named: Named::default(),
            roots: Vec::new(),
            connection: self.connection.clone(),
            asks: Asks::default(),
            pin_store: None,
        }
    }
}

/// The servers of the terminal host — configured, or one named on the command line — and how
/// they are reached: `servers`, `tools`, `call` and `watch`.
#[derive(Args, Debug, Clone)]
pub(crate) struct HostArgs {
    #[command(flatten)]
    pub(crate) config: ConfigArgs,
    /// One server for this command instead of the configuration: an http(s):// URL or a
    /// command line that starts it on stdio. Its pins and "always" answers last for this
    /// command only.
    #[arg(long, value_name = "URL|COMMAND")]
    pub(crate) server: Option<String>,
    #[command(flatten)]
    pub(crate) named: Named,
    /// A directory the servers may work in (`roots`; repeatable). Default: the
    /// configuration's `roots`, else the current directory.
    #[arg(long = "root", value_name = "DIR")]
    pub(crate) roots: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) connection: Connection,
    /// How the servers' questions and log messages are met (set by `call`).
    #[arg(skip)]
    pub(crate) asks: Asks,
    /// Pins in a shared store rather than the state directory (`toolwire pins --store`).
    #[arg(skip)]
    pub(crate) pin_store: Option<Arc<toolwire_host::RedisPins>>,
}

/// How the servers' questions and log messages are met: `call` sets them from its options;
/// other commands decline forms without a terminal, decline sampling and ask for no logs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Asks {
    /// The answer to every form (`--answer`).
    pub(crate) answer: Option<serde_json::Value>,
    /// The command that answers sampling requests (`--sampling-command`).
    pub(crate) sampling_command: Option<String>,
    /// The least severe server log message asked for (`--log-level`).
    pub(crate) log_level: Option<toolwire_client::protocol::LoggingLevel>,
}

impl ConfigArgs {
    /// The state directory.
    pub(crate) fn state_dir(&self) -> anyhow::Result<PathBuf> {
        self.state.dir()
    }

    /// The configuration file and who wrote it: `--config` (the person's, since they named
    /// it), else the first of [`SEARCH_ORDER`] that exists (a project's, but for the last).
    pub(crate) fn config_file(&self) -> anyhow::Result<(PathBuf, Origin)> {
        if let Some(file) = &self.config {
            return Ok((file.clone(), Origin::Own));
        }
        if let Some(file) = project_file() {
            return Ok((file, Origin::Project));
        }
        own_file()
            .map(|file| (file, Origin::Own))
            .with_context(|| {
                format!(
                    "no servers configured: pass --config FILE, create one of {}, or name one server with --server URL|COMMAND",
                    SEARCH_ORDER.join(", ")
                )
            })
    }

    /// The configuration file's servers. A project's file is used only if the person trusts
    /// it (asked at the terminal when they have not decided).
    pub(crate) async fn configured(&self, ui: &Ui) -> anyhow::Result<HostConfig> {
        let (file, origin) = self.config_file()?;
        let config = match origin {
            Origin::Own => HostConfig::load(&file)?,
            _ => {
                let own = own_file();
                let trust = if self.trust_project {
                    project::ForThisCommand::Trust
                } else {
                    project::ForThisCommand::Ask
                };
                project::load(&file, ui, &self.state_dir()?, trust, own).await?
            }
        };
        if !config.ignored.is_empty() {
            name_ignored_once(&config, &self.state_dir()?);
        }
        Ok(config)
    }
}

/// Whose servers a command opens: the configuration's, or the one named on the command line,
/// which is this command's only (its pins and "always" answers are not kept, and it is called
/// by its own tool names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Servers {
    /// The servers of the configuration file.
    Configured,
    /// One server named on the command line (`--server`, a URL or a command line).
    OneOff,
}

impl Servers {
    /// [`Servers::OneOff`] when a server was named on the command line.
    pub(crate) fn named(one_off: Option<&str>) -> Servers {
        match one_off {
            Some(_) => Servers::OneOff,
            None => Servers::Configured,
        }
    }
}

/// Whether a server that challenges may have a person sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignIn {
    /// In a browser, from a prompt at the terminal.
    Allowed,
    /// Never: the server's challenge is the command's error.
    Never,
}

impl SignIn {
    /// [`SignIn::Allowed`] when stderr is a terminal.
    pub(crate) fn here() -> SignIn {
        if signin::signs_in_here() {
            SignIn::Allowed
        } else {
            SignIn::Never
        }
    }
}

impl HostArgs {
    /// The one server named on the command line: `--server`, else `first` when it is a URL or
    /// a command line.
    pub(crate) fn one_off<'a>(&'a self, first: Option<&'a str>) -> Option<&'a str> {
        self.server
            .as_deref()
            .or(first.filter(|f| names_a_server(f)))
    }

    /// The state directory.
    pub(crate) fn state_dir(&self) -> anyhow::Result<PathBuf> {
        self.config.state_dir()
    }

    /// The configuration: the file's, or one server's (see [`ConfigArgs::configured`]).
    pub(crate) async fn configuration(
        &self,
        one_off: Option<&str>,
        ui: &Ui,
    ) -> anyhow::Result<HostConfig> {
        match one_off {
            Some(server) => Ok(HostConfig::one_server(
                self.named.server_config(server, &self.connection)?,
                "(the command line)",
            )),
            None => self.config.configured(ui).await,
        }
    }

    /// Connects to the servers, with `ui` answering approvals and the servers' questions.
    pub(crate) async fn open(&self, one_off: Option<&str>, ui: &Arc<Ui>) -> anyhow::Result<Host> {
        let config = self.configuration(one_off, ui).await?;
        self.open_config(&config, Servers::named(one_off), ui).await
    }

    /// [`HostArgs::open`] with the configuration already read. A server that challenges has
    /// the person sign in when stderr is a terminal.
    pub(crate) async fn open_config(
        &self,
        config: &HostConfig,
        servers: Servers,
        ui: &Arc<Ui>,
    ) -> anyhow::Result<Host> {
        self.open_with(config, servers, ui, SignIn::here()).await
    }

    /// [`HostArgs::open_config`], saying whether a person may be asked to sign in.
    pub(crate) async fn open_with(
        &self,
        config: &HostConfig,
        servers: Servers,
        ui: &Arc<Ui>,
        sign_in: SignIn,
    ) -> anyhow::Result<Host> {
        let state = self.state_dir()?;
        let mut options = HostOptions::new(approve::TerminalApprover::new(ui.clone()))
            .client_info("toolwire-cli", env!("CARGO_PKG_VERSION"))
            .audit_log(state.join("audit.jsonl"))
            .call_timeout(self.connection.timeout()?)
            .probe_timeout(self.connection.probe_timeout()?)
            // A person reads the results here, never a model: every control character the
            // server sent is shown (made visible by `terminal`), not silently dropped.
            .clean_results(false)
            // Tokens are kept across commands, also for a server named on the command line.
            .oauth(
                Arc::new(FileStore::new(signin::credentials_file(&state))),
                (sign_in == SignIn::Allowed).then(|| signin::authorizer_for(ui)),
            );
        // A server named on the command line is this command's only: its pins and "always"
        // answers are not kept.
        if servers == Servers::Configured {
            options = options.state_dir(&state);
        }
        if let Some(pins) = &self.pin_store {
            options = options.pin_store(pins.clone());
        }
        for file in &self.connection.ca_files {
            options = options.ca_file(file);
        }
        if self.connection.insecure_oauth_http {
            options = options.oauth_insecure_http();
        }
        if let Some(level) = self.asks.log_level {
            options = options.log_level(level);
        }
        let questions = questions::Questions::new(
            ui.clone(),
            self.asks.answer.clone(),
            self.roots(&config.roots)?,
            self.asks.sampling_command.clone(),
        );
        options = questions.install(options);
        let connecting = Host::connect(config, options);
        tokio::pin!(connecting);
        // A server that takes more than a moment to start (a first `npx -y` or `uvx` run
        // downloads it) is named, so that the wait is not silent.
        let host = tokio::select! {
            host = &mut connecting => host,
            () = tokio::time::sleep(SLOW_START) => {
                note(&starting_note(config));
                connecting.await
            }
        };
        Ok(host?)
    }

    /// `--root` directories, else the configuration's `roots`, else the current directory,
    /// as absolute paths.
    fn roots(&self, configured: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
        let dirs = if !self.roots.is_empty() {
            self.roots.clone()
        } else if !configured.is_empty() {
            configured.to_vec()
        } else {
            vec![std::env::current_dir().context("the current directory")?]
        };
        dirs.iter()
            .map(|d| std::path::absolute(d).with_context(|| format!("--root {}", d.display())))
            .collect()
    }
}

/// The first of the project files of [`SEARCH_ORDER`] found in the working directory.
pub(crate) fn project_file() -> Option<PathBuf> {
    SEARCH_ORDER[..3]
        .iter()
        .map(PathBuf::from)
        .find(|f| f.is_file())
}

/// The person's own configuration file, `$XDG_CONFIG_HOME/toolwire/config.json` (else under
/// `~/.config`), when it exists.
fn own_file() -> Option<PathBuf> {
    let home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(home.join("toolwire/config.json")).filter(|f| f.is_file())
}

/// Names the keys of other hosts' formats that `config` left alone, once for each version of
/// the file: kept in `STATE/noticed.json` by the file's path and hash.
fn name_ignored_once(config: &HostConfig, state_dir: &Path) {
    let Ok(file) = ProjectFile::read(&config.file) else {
        return;
    };
    let noticed = state_dir.join("noticed.json");
    let mut seen: std::collections::BTreeMap<PathBuf, String> = std::fs::read(&noticed)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    if seen.get(file.canonical()).map(String::as_str) == Some(file.sha256()) {
        return;
    }
    let keys: Vec<String> = config
        .ignored
        .iter()
        .map(|k| format!("  {}", visible(&k.to_string(), Layout::Line)))
        .collect();
    note(&format!(
        "toolwire: {} holds keys Toolwire does not read (said once for this version of the file):\n{}",
        shown(&config.file),
        keys.join("\n")
    ));
    seen.insert(file.canonical().to_owned(), file.sha256().to_owned());
    if let Ok(text) = serde_json::to_vec_pretty(&seen) {
        let _ = crate::private::dir(state_dir, crate::private::Chosen::ByPerson)
            .and_then(|()| crate::private::replace(&noticed, &text));
    }
}

/// A server's name for messages: made visible, and quoted when it is a command line (one
/// server named on the command line goes by it), so that it reads as one name.
pub(crate) fn server_name(name: &str) -> String {
    let name = visible(name, Layout::Line);
    if name.contains(char::is_whitespace) {
        format!("\"{name}\"")
    } else {
        name.into_owned()
    }
}

/// How a server failed, in words: a stdio server could not start, an HTTP one could not be
/// reached.
pub(crate) fn failed_how(config: &HostConfig, server: &str) -> &'static str {
    match config.server(server).map(|s| &s.transport) {
        Some(toolwire_host::Transport::Stdio { .. }) => "could not start",
        _ => "could not be reached",
    }
}
