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
use crate::target::{Connection, names_a_server};
use crate::terminal::{Layout, note, visible};
use crate::ui::Ui;

/// Where the configuration is looked for, in this order, without `--config`.
pub(crate) const SEARCH_ORDER: [&str; 4] = [
    "./.mcp.json",
    "./.cursor/mcp.json",
    "./.vscode/mcp.json",
    "~/.config/toolwire/config.json",
];

/// The servers and the state of the terminal host, shared by its commands.
#[derive(Args, Debug)]
pub(crate) struct HostArgs {
    /// The servers' configuration: an `mcpServers` (Claude, Cursor) or `servers` (VS Code) JSON
    /// file. Without it, the first found of ./.mcp.json, ./.cursor/mcp.json, ./.vscode/mcp.json,
    /// ~/.config/toolwire/config.json ($XDG_CONFIG_HOME/toolwire/config.json).
    #[arg(long, short = 'c', env = "TOOLWIRE_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where pins, "always" answers and the audit log (audit.jsonl) are kept. Default:
    /// $XDG_STATE_HOME/toolwire, else ~/.local/state/toolwire.
    #[arg(long, env = "TOOLWIRE_STATE_DIR", value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// One server for this command instead of the configuration: an http(s):// URL or a
    /// command line that starts it on stdio. Its pins and "always" answers last for this
    /// command only.
    #[arg(long, value_name = "URL|COMMAND")]
    pub(crate) server: Option<String>,
    /// A directory the servers may work in (`roots`; repeatable). Default: the
    /// configuration's `roots`, else the current directory.
    #[arg(long = "root", value_name = "DIR")]
    pub(crate) roots: Vec<PathBuf>,
    /// A command that answers servers' sampling requests: it gets the request as JSON on
    /// stdin and prints a `sampling/createMessage` result as JSON. Each request is shown and
    /// confirmed first. Without it, sampling requests are declined.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) sampling_command: Option<String>,
    /// The least severe server log messages shown during a call: debug, info, notice,
    /// warning, error, critical, alert, emergency; or off.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub(crate) log_level: String,
    /// Use the project configuration found here (./.mcp.json, ./.cursor/mcp.json or
    /// ./.vscode/mcp.json) for this command without being asked, and without remembering it:
    /// for a file you have read. `toolwire trust` remembers the decision instead.
    #[arg(long)]
    pub(crate) trust_project: bool,
    #[command(flatten)]
    pub(crate) connection: Connection,
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
        crate::signin::state_dir(self.state_dir.as_deref())
    }

    /// The audit log.
    pub(crate) fn audit_log(&self) -> anyhow::Result<PathBuf> {
        Ok(self.state_dir()?.join("audit.jsonl"))
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

    /// The configuration: the file's, or one server's. A project's file is used only if the
    /// person trusts it (asked at the terminal when they have not decided).
    pub(crate) async fn configuration(
        &self,
        one_off: Option<&str>,
        ui: &Ui,
    ) -> anyhow::Result<HostConfig> {
        if let Some(server) = one_off {
            return Ok(HostConfig::one_server(
                self.connection.server_config(server)?,
                "(the command line)",
            ));
        }
        let (file, origin) = self.config_file()?;
        let config = match origin {
            Origin::Own => HostConfig::load(&file)?,
            _ => {
                let own = own_file();
                project::load(&file, ui, &self.state_dir()?, self.trust_project, own).await?
            }
        };
        if !config.ignored.is_empty() {
            name_ignored_once(&config, &self.state_dir()?);
        }
        Ok(config)
    }

    /// Connects to the servers, with `ui` answering approvals and the servers' questions.
    pub(crate) async fn open(&self, one_off: Option<&str>, ui: &Arc<Ui>) -> anyhow::Result<Host> {
        let config = self.configuration(one_off, ui).await?;
        self.open_config(&config, one_off.is_some(), ui).await
    }

    /// [`HostArgs::open`] with the configuration already read. A server that challenges has
    /// the person sign in when stderr is a terminal.
    pub(crate) async fn open_config(
        &self,
        config: &HostConfig,
        one_off: bool,
        ui: &Arc<Ui>,
    ) -> anyhow::Result<Host> {
        self.open_with(config, one_off, ui, signin::signs_in_here())
            .await
    }

    /// [`HostArgs::open_config`], saying whether a person may be asked to sign in.
    pub(crate) async fn open_with(
        &self,
        config: &HostConfig,
        one_off: bool,
        ui: &Arc<Ui>,
        sign_in: bool,
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
                sign_in.then(|| signin::authorizer_for(ui)),
            );
        // A server named on the command line is this command's only: its pins and "always"
        // answers are not kept.
        if !one_off {
            options = options.state_dir(&state);
        }
        for file in &self.connection.ca_files {
            options = options.ca_file(file);
        }
        if self.connection.insecure_oauth_http {
            options = options.oauth_insecure_http();
        }
        if self.log_level != "off" {
            let level = serde_json::from_value(serde_json::Value::String(self.log_level.clone()))
                .with_context(|| {
                    format!(
                        "--log-level {:?}: one of debug, info, notice, warning, error, critical, alert, emergency, off",
                        self.log_level
                    )
                })?;
            options = options.log_level(level);
        }
        let questions = questions::Questions::new(
            ui.clone(),
            self.connection.answer()?,
            self.roots(&config.roots)?,
            self.sampling_command.clone(),
        );
        options = questions.install(options);
        Ok(Host::connect(config, options).await?)
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
        let _ = crate::private::dir(state_dir, false)
            .and_then(|()| crate::private::replace(&noticed, &text));
    }
}

/// A path for messages, with `~` for the home directory.
pub(crate) fn shown(path: &Path) -> String {
    if let Some(home) = std::env::var_os("HOME") {
        if let Ok(rest) = path.strip_prefix(&home) {
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}
