//! How the client commands reach a server: by URL (Streamable HTTP) or by a command line (a
//! stdio child process), with the headers, credentials, timeouts and answers they were given.

use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use toolwire_client::protocol::ElicitRequestParams;
use toolwire_client::{Client, ClientBuilder, StdioCommand};
use toolwire_host::{ServerConfig, Transport};

use crate::terminal::{Layout, note, visible};

/// How a server named on the command line is reached: a URL's headers and credentials, a
/// command's environment.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Named {
    /// An HTTP header for every request to a server named by URL, as NAME:VALUE (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME:VALUE")]
    pub(crate) headers: Vec<String>,
    /// A bearer token for a server named by URL (or set TOOLWIRE_BEARER_TOKEN).
    #[arg(
        long,
        env = "TOOLWIRE_BEARER_TOKEN",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub(crate) bearer: Option<String>,
    /// An environment variable for a server named by command line, as NAME=VALUE, or NAME to
    /// pass on this process's value (repeatable). Otherwise the server gets only HOME, LOGNAME,
    /// PATH, SHELL, TERM and USER from this environment.
    #[arg(long = "env", short = 'e', value_name = "NAME[=VALUE]")]
    pub(crate) env: Vec<String>,
    /// A server named by command line starts sandboxed on Linux anyway (it reads everything but
    /// your secrets and writes only its caches, its own directories and the directories its
    /// command names); this refuses to start it where the sandbox cannot be enforced. Implied by
    /// --allow-read, --allow-write and --network.
    #[arg(long)]
    pub(crate) sandbox: bool,
    /// Grants a sandboxed server more to read (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    pub(crate) allow_read: Vec<std::path::PathBuf>,
    /// Grants a sandboxed server more to write (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub(crate) allow_write: Vec<std::path::PathBuf>,
    /// A sandboxed server's network: any (the default), none, or tcp:PORT[,PORT…] (TCP to those
    /// ports only, no UDP and so no DNS).
    #[arg(long, value_name = "any|none|tcp:PORTS", value_parser = parse_network)]
    pub(crate) network: Option<toolwire_sandbox::Network>,
    /// Lets a sandboxed server reach HOST:PORT, through a filtering proxy from a network of its
    /// own (repeatable): nothing else, around the proxy or over UDP.
    #[arg(
        long = "allow-host",
        value_name = "HOST:PORT",
        conflicts_with = "network"
    )]
    pub(crate) allow_host: Vec<String>,
    /// Starts a server named by command line with all your rights, saying why.
    #[arg(long = "sandbox-off", value_name = "REASON", conflicts_with_all = ["sandbox", "allow_read", "allow_write", "network", "allow_host"])]
    pub(crate) sandbox_off: Option<String>,
}

/// The default of `--timeout`, in seconds.
const TIMEOUT_SECONDS: f64 = 60.0;
/// The default of `--probe-timeout`, in seconds.
const PROBE_TIMEOUT_SECONDS: f64 = 30.0;

/// How every server is reached: the CAs trusted, how long answers may take, the development
/// opt-in for OAuth on plain http. Global, so that they may follow a subcommand.
#[derive(Args, Debug, Clone)]
pub(crate) struct Connection {
    /// Trust the CA certificates in this PEM file for HTTPS, besides the system's (repeatable;
    /// SSL_CERT_FILE and SSL_CERT_DIR are honoured too).
    #[arg(long = "ca-file", value_name = "PEM", global = true)]
    pub(crate) ca_files: Vec<std::path::PathBuf>,
    /// Seconds to wait for each answer (progress restarts the wait).
    #[arg(long, default_value_t = TIMEOUT_SECONDS, value_name = "SECONDS", global = true)]
    pub(crate) timeout: f64,
    /// Seconds a stdio server may take to answer its first `server/discover` before it is
    /// spoken to as a 2025-11-25 server (slow starters: a first `npx -y`, a container, a JVM).
    /// The first request's --timeout bounds it too.
    #[arg(long, default_value_t = PROBE_TIMEOUT_SECONDS, value_name = "SECONDS", global = true)]
    pub(crate) probe_timeout: f64,
    /// Development only: let OAuth reach authorization servers and their metadata on plain
    /// http anywhere. Without it they are reached over https, and over plain http only at the
    /// server's own origin. Link-local addresses stay refused, and the sign-in page must still
    /// be https or on this machine.
    #[arg(long, global = true)]
    pub(crate) insecure_oauth_http: bool,
}

impl Default for Connection {
    fn default() -> Self {
        Connection {
            ca_files: Vec::new(),
            timeout: TIMEOUT_SECONDS,
            probe_timeout: PROBE_TIMEOUT_SECONDS,
            insecure_oauth_http: false,
        }
    }
}

/// A server named on the command line.
#[derive(Args, Debug)]
pub(crate) struct Target {
    /// The server: an http(s):// URL, or a command line that starts it on stdio (quoted, e.g.
    /// "toolwire serve" or "python server.py --stdio").
    #[arg(value_name = "SERVER")]
    pub(crate) server: String,
    #[command(flatten)]
    pub(crate) named: Named,
    #[command(flatten)]
    pub(crate) connection: Connection,
    /// Where sign-in tokens are read from (`toolwire login` keeps them there).
    #[command(flatten)]
    pub(crate) state: crate::host::StateArgs,
}

/// Whether a command-line argument names a server rather than a configured name: a URL, or a
/// command line with a space in it.
pub(crate) fn names_a_server(arg: &str) -> bool {
    arg.starts_with("http://") || arg.starts_with("https://") || arg.contains(char::is_whitespace)
}

impl Connection {
    /// `--timeout`, checked.
    pub(crate) fn timeout(&self) -> anyhow::Result<Duration> {
        Duration::try_from_secs_f64(self.timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .context("--timeout must be a positive number of seconds")
    }

    /// `--probe-timeout`, checked.
    pub(crate) fn probe_timeout(&self) -> anyhow::Result<Duration> {
        Duration::try_from_secs_f64(self.probe_timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .context("--probe-timeout must be a positive number of seconds")
    }
}

/// `--network`'s value.
fn parse_network(value: &str) -> Result<toolwire_sandbox::Network, String> {
    match value {
        "any" => Ok(toolwire_sandbox::Network::Any),
        "none" => Ok(toolwire_sandbox::Network::None),
        _ => {
            let ports = value
                .strip_prefix("tcp:")
                .ok_or("want any, none or tcp:PORT[,PORT…]")?;
            ports
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or(format!("{p:?} is not a port number from 1 to 65535"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(toolwire_sandbox::Network::Tcp)
        }
    }
}

impl Named {
    /// The profile of the one-off server `line` (split into `words`), or `None` when its sandbox
    /// is off: the directories its command names are in its arguments and its variables' values.
    pub(crate) fn sandbox_profile(
        &self,
        line: &str,
        words: &[String],
    ) -> Option<toolwire_sandbox::Profile> {
        let mut named = words[1..].to_vec();
        named.extend(
            self.env
                .iter()
                .filter_map(|p| Some(p.split_once('=')?.1.to_owned())),
        );
        self.sandbox_setting().profile(line, &named, None)
    }

    /// The sandbox of a server named by command line, from the flags.
    pub(crate) fn sandbox_setting(&self) -> toolwire_host::SandboxSetting {
        match &self.sandbox_off {
            Some(reason) => toolwire_host::SandboxSetting::Off {
                reason: reason.clone(),
            },
            None if !self.sandbox
                && self.allow_read.is_empty()
                && self.allow_write.is_empty()
                && self.network.is_none()
                && self.allow_host.is_empty() =>
            {
                toolwire_host::SandboxSetting::Unset
            }
            None => toolwire_host::SandboxSetting::On {
                read: self.allow_read.clone(),
                write: self.allow_write.clone(),
                network: if self.allow_host.is_empty() {
                    self.network.clone()
                } else {
                    Some(toolwire_sandbox::Network::Hosts(self.allow_host.clone()))
                },
            },
        }
    }

    /// `server` (a URL or a command line) as the one server of a host configuration.
    pub(crate) fn server_config(
        &self,
        server: &str,
        connection: &Connection,
    ) -> anyhow::Result<ServerConfig> {
        let transport = if is_url(server) {
            if !self.env.is_empty() {
                bail!("--env applies to stdio servers only");
            }
            let mut headers = std::collections::BTreeMap::new();
            for header in &self.headers {
                let (name, value) = header
                    .split_once(':')
                    .with_context(|| format!("--header {header:?} is not NAME:VALUE"))?;
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            if let Some(token) = &self.bearer {
                headers.insert("Authorization".into(), format!("Bearer {token}"));
            }
            let oauth = toolwire_host::OAuthSettings {
                disabled: self.bearer.is_some()
                    || headers
                        .keys()
                        .any(|h| h.eq_ignore_ascii_case("authorization")),
                ..Default::default()
            };
            Transport::Http {
                url: server.to_owned(),
                headers,
                oauth,
            }
        } else {
            let words = shlex::split(server)
                .filter(|w| !w.is_empty())
                .with_context(|| format!("cannot split the command line {server:?}"))?;
            let mut env = std::collections::BTreeMap::new();
            for pair in &self.env {
                match pair.split_once('=') {
                    Some((name, value)) => env.insert(name.to_owned(), value.to_owned()),
                    None => env.insert(pair.clone(), std::env::var(pair).unwrap_or_default()),
                };
            }
            Transport::Stdio {
                command: words[0].clone(),
                args: words[1..].to_vec(),
                env,
                cwd: None,
            }
        };
        Ok(ServerConfig {
            name: server.to_owned(),
            transport,
            prefix: String::new(),
            tools: Default::default(),
            trust: false,
            timeout: Some(connection.timeout()?),
            tool_timeouts: Default::default(),
            approval: Default::default(),
            sandbox: self.sandbox_setting(),
        })
    }
}

/// Whether `server` is a URL (else a command line).
pub(crate) fn is_url(server: &str) -> bool {
    server.starts_with("http://") || server.starts_with("https://")
}

impl Target {
    /// Whether the server is reached over HTTP (a URL), rather than started on stdio.
    pub(crate) fn is_http(&self) -> bool {
        is_url(&self.server)
    }

    /// Connects: HTTP for a URL, else a child process.
    pub(crate) async fn connect(&self) -> anyhow::Result<Client> {
        let mut builder = ClientBuilder::new("toolwire-cli", env!("CARGO_PKG_VERSION"))
            .timeout(self.connection.timeout()?)
            .probe_timeout(self.connection.probe_timeout()?);
        for header in &self.named.headers {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("--header {header:?} is not NAME:VALUE"))?;
            builder = builder.header(name.trim(), value.trim());
        }
        if let Some(token) = &self.named.bearer {
            builder = builder.bearer_token(token);
        }
        for path in &self.connection.ca_files {
            builder = builder.ca_file(path);
        }
        // Form mode only: only forms reach this handler, and URL mode is not declared (M-16).
        // These commands make no call, so a form is only shown and declined.
        builder = builder.on_elicit(move |request| async move {
            let question = match &request {
                ElicitRequestParams::Form(form) => visible(&form.message, Layout::Line),
                ElicitRequestParams::Url(_) => {
                    return Err(toolwire_client::Error::Input(
                        "URL-mode elicitation is not offered".into(),
                    ));
                }
            };
            note(&format!(
                "toolwire: the server asks: {question} -> declined"
            ));
            Ok(toolwire_client::declined())
        });
        if self.is_http() {
            if !self.named.env.is_empty() {
                bail!("--env applies to stdio servers only");
            }
            let authorization_header = self.named.headers.iter().any(|h| {
                h.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("authorization:")
            });
            if self.named.bearer.is_none() && !authorization_header {
                // The tokens `toolwire login` keeps; signing in here only at a terminal.
                let store = crate::signin::credentials_file(&self.state.dir()?);
                let mut oauth = toolwire_client::auth::OAuth::new()
                    .client_name("toolwire-cli")
                    .store(std::sync::Arc::new(toolwire_client::auth::FileStore::new(
                        store,
                    )));
                if self.connection.insecure_oauth_http {
                    oauth = oauth.allow_insecure_http();
                }
                if crate::signin::signs_in_here() {
                    let authorizer =
                        crate::signin::authorizer_for(&crate::ui::Ui::new(crate::ui::Consent::Ask));
                    oauth = oauth.authorizer(authorizer(&self.server));
                }
                builder = builder.oauth(oauth);
            }
            return Ok(builder.http(&self.server)?);
        }
        Ok(builder.spawn_command(self.stdio_command()?).await?)
    }

    /// The server's command line as a stdio command: its variables, and its sandbox.
    fn stdio_command(&self) -> anyhow::Result<StdioCommand> {
        let words = shlex::split(&self.server)
            .filter(|w| !w.is_empty())
            .with_context(|| format!("cannot split the command line {:?}", self.server))?;
        let mut command = StdioCommand::new(&words[0]).args(&words[1..]);
        if let Some(profile) = self.named.sandbox_profile(&self.server, &words) {
            command = command.sandboxed(toolwire_client::Sandbox::new(profile)?);
        }
        for pair in &self.named.env {
            command = match pair.split_once('=') {
                Some((name, value)) => command.env(name, value),
                None => command.inherit_env(pair),
            };
        }
        Ok(command)
    }
}
