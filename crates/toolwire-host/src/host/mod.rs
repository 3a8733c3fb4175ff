//! Many servers behind one tool list: connect to every configured server at once, list their
//! tools under qualified names, and call them through pins, the approval policy and the audit
//! log.

mod call;
mod listen;
mod options;
mod output;

pub use call::{Called, Outcome};
pub use listen::{ListChange, ListChanges};
pub use options::{AuthorizerFor, HostOptions};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolwire_client::protocol::Tool;
use toolwire_client::{Client, ClientBuilder, ServerEra, StdioCommand};

use crate::audit::{AuditError, AuditLog, Redaction};
use crate::config::{HostConfig, ServerConfig, Transport};
use crate::glob::Globs;
use crate::names::{NameError, Names};
use crate::pins::{FilePins, MemoryPins, PinReport, PinState, PinStore, Pins, definition_hash};
use crate::policy::{FileRemembered, MemoryRemembered, Policy};

/// The default time limit of a call when neither the server's configuration nor the tool
/// says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The default cap on the text a call returns to the model: about 25,000 tokens, the cap
/// hosts commonly use.
pub const DEFAULT_MAX_RESULT_CHARS: usize = 100_000;

/// Why a host could not start. A server that cannot be reached is not one of these: it is
/// reported in [`Host::servers`] and the others work.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The audit log cannot be opened (or does not verify).
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The audit log's redaction patterns do not compile.
    #[error("audit redaction: {0}")]
    Redaction(String),
    /// The policy's patterns do not compile.
    #[error("approval rules: {0}")]
    Policy(String),
    /// The name budget is out of range.
    #[error(transparent)]
    Names(#[from] NameError),
    /// Pins cannot be read or written.
    #[error(transparent)]
    Pins(#[from] crate::pins::PinStoreError),
}

/// How a configured server is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Connected; its tools are listed.
    Connected {
        /// How many of its tools the model sees.
        tools: usize,
    },
    /// It could not be reached or listed; its tools are left out.
    Failed {
        /// Why.
        error: String,
    },
}

/// One configured server.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// Its name in the configuration.
    pub name: String,
    /// How it is doing.
    pub state: ServerState,
    /// What its list looks like against its pins (new, changed, removed tools).
    pub pins: PinReport,
    /// The protocol era it speaks, once known.
    pub era: Option<ServerEra>,
    /// Tools it listed that the model does not see, with the reason.
    pub hidden: Vec<Hidden>,
    /// The OAuth authorization its client holds, if it asked for one.
    pub authorized: Option<toolwire_client::auth::Authorized>,
}

/// A listed tool the model does not see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// Its name on the server.
    pub tool: String,
    /// Why: the configuration's `tools.allow` / `tools.deny`, or a definition the client
    /// refused.
    pub reason: String,
}

/// A tool as the model sees it.
#[derive(Debug, Clone)]
pub struct HostTool {
    /// The qualified name, which the model calls.
    pub qualified: String,
    /// The server's name.
    pub server: String,
    /// The definition as the server lists it (under its own name).
    pub definition: Tool,
    /// The same as JSON: what the policy and the approver read.
    listed: Value,
}

impl HostTool {
    /// The definition to give the model: the server's, named by the qualified name.
    pub fn for_model(&self) -> Tool {
        Tool {
            name: self.qualified.clone(),
            ..self.definition.clone()
        }
    }
}

/// A connected server.
struct Connection {
    config: ServerConfig,
    client: Client,
    /// How many times its stdio process was started, when last looked at.
    starts: std::sync::atomic::AtomicU64,
}

/// Many servers behind one list of tools.
pub struct Host {
    options: HostOptions,
    /// Servers whose client could not be made (a stdio command that did not start).
    unstarted: Vec<ServerConfig>,
    connections: BTreeMap<String, Connection>,
    statuses: Vec<ServerStatus>,
    tools: Vec<HostTool>,
    names: Names,
    pins: Pins<Arc<dyn PinStore>>,
    /// Each listed tool's pin state by qualified name, decided when the list was checked
    /// against the pins (and changed by [`Host::approve_change`]), so a call reads no store.
    pin_states: std::sync::RwLock<HashMap<String, PinState>>,
    policy: Policy,
    audit: Option<AuditLog>,
    /// What the audit log keeps of arguments.
    redaction: Redaction,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("servers", &self.statuses)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Connects to every server of `config` at once and lists their tools. A server that
    /// fails is reported in [`Host::servers`]; the others work.
    pub async fn connect(config: &HostConfig, options: HostOptions) -> Result<Host, HostError> {
        let (pins, remembered): (Arc<dyn PinStore>, Arc<dyn crate::policy::Remembered>) =
            match options
                .state_dir
                .as_deref()
                .map(|dir| config.state_dir_in(dir))
            {
                Some(dir) => (
                    Arc::new(FilePins::new(&dir)),
                    Arc::new(FileRemembered::new(&dir)),
                ),
                None => (
                    Arc::new(MemoryPins::new()),
                    Arc::new(MemoryRemembered::new()),
                ),
            };
        let policy = Policy::new(config, remembered).map_err(HostError::Policy)?;
        let audit = options.audit_log.as_ref().map(AuditLog::open).transpose()?;
        let redaction = match &options.redaction {
            Some(redaction) => redaction.clone(),
            None => Redaction::new(&config.audit).map_err(HostError::Redaction)?,
        };
        Names::build(options.name_budget, std::iter::empty())?;
        let mut host = Host {
            options,
            unstarted: config.servers.clone(),
            connections: BTreeMap::new(),
            statuses: Vec::new(),
            tools: Vec::new(),
            names: Names::default(),
            pins: Pins::new(pins),
            pin_states: std::sync::RwLock::default(),
            policy,
            audit,
            redaction,
        };
        host.refresh().await?;
        Ok(host)
    }

    /// Starts the servers that could not be started yet (a stdio command that failed), at
    /// once; each failure is recorded and reported in [`Host::servers`].
    async fn start_servers(&mut self) {
        let unstarted = std::mem::take(&mut self.unstarted);
        let options = &self.options;
        let opened = futures::future::join_all(
            unstarted
                .into_iter()
                .map(|server| async { (open(&server, options).await, server) }),
        )
        .await;
        for (opened, server) in opened {
            match opened {
                Ok(client) => {
                    self.connections.insert(
                        server.name.clone(),
                        Connection {
                            config: server,
                            starts: client.server_starts().unwrap_or(0).into(),
                            client,
                        },
                    );
                }
                Err(error) => {
                    self.record(
                        "server_failed",
                        json!({"server": server.name, "error": error}),
                    );
                    self.statuses.push(ServerStatus {
                        name: server.name.clone(),
                        state: ServerState::Failed { error },
                        pins: PinReport::default(),
                        era: None,
                        authorized: None,
                        hidden: Vec::new(),
                    });
                    self.unstarted.push(server);
                }
            }
        }
    }

    /// Starts the servers that could not be started before, lists every server's tools
    /// again, checks them against their pins and renames them. A server that failed (to
    /// start, or to list) is tried again here.
    pub async fn refresh(&mut self) -> Result<(), HostError> {
        self.statuses.clear();
        self.start_servers().await;
        let lists = self.connections.values().map(|c| async move {
            (
                c.config.name.clone(),
                c.client.refresh_tools().await.map_err(|e| e.to_string()),
            )
        });
        let lists = futures::future::join_all(lists).await;
        let mut kept: Vec<(String, Tool, Value)> = Vec::new();
        let mut states: HashMap<(String, String), PinState> = HashMap::new();
        for (server, listed) in lists {
            let config = &self.connections[&server].config;
            let (tools, mut hidden) = match listed {
                Ok(tools) => filter(tools, config),
                Err(error) => {
                    self.record("server_failed", json!({"server": server, "error": error}));
                    self.statuses.push(ServerStatus {
                        name: server,
                        state: ServerState::Failed { error },
                        pins: PinReport::default(),
                        era: None,
                        authorized: None,
                        hidden: Vec::new(),
                    });
                    continue;
                }
            };
            let mut definitions: BTreeMap<String, Value> = tools
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        serde_json::to_value(t).unwrap_or(Value::Null),
                    )
                })
                .collect();
            let report = self.pins.check(&server, &definitions)?;
            for (tool, definition) in &definitions {
                let state = match report.changed.iter().find(|c| &c.tool == tool) {
                    Some(c) => PinState::Changed {
                        pinned: c.pinned.clone(),
                        listed: c.listed.clone(),
                    },
                    None => PinState::Pinned(definition_hash(definition)),
                };
                states.insert((server.clone(), tool.clone()), state);
            }
            if report != PinReport::default() {
                let changed: Vec<Value> = report
                    .changed
                    .iter()
                    .map(|c| {
                        json!({"tool": c.tool, "pinned": c.pinned, "listed": c.listed,
                        "changes": c.changes.iter().map(ToString::to_string).collect::<Vec<_>>()})
                    })
                    .collect();
                self.record(
                    "tools_changed",
                    json!({"server": server, "new": report.new, "changed": changed, "removed": report.removed}),
                );
            }
            let version = self.connections[&server].client.protocol_version();
            self.record(
                "server_listed",
                json!({"server": server, "protocolVersion": version, "tools": tools.len()}),
            );
            let client = &self.connections[&server].client;
            hidden.extend(
                client
                    .dropped_tools()
                    .into_iter()
                    .map(|(tool, problem)| Hidden {
                        tool,
                        reason: format!("its definition is refused: {problem}"),
                    }),
            );
            self.statuses.push(ServerStatus {
                name: server.clone(),
                state: ServerState::Connected { tools: tools.len() },
                pins: report,
                era: client.era(),
                authorized: client.authorized(),
                hidden,
            });
            kept.extend(tools.into_iter().map(|t| {
                let listed = definitions.remove(&t.name).unwrap_or(Value::Null);
                (server.clone(), t, listed)
            }));
        }
        self.statuses.sort_by(|a, b| a.name.cmp(&b.name));
        let prefixes: BTreeMap<&str, &str> = self
            .connections
            .values()
            .map(|c| (c.config.name.as_str(), c.config.prefix.as_str()))
            .collect();
        self.names = Names::build(
            self.options.name_budget,
            kept.iter()
                .map(|(s, t, _)| (s.as_str(), prefixes[s.as_str()], t.name.as_str())),
        )?;
        let mut pin_states = HashMap::new();
        let mut tools: Vec<HostTool> = kept
            .into_iter()
            .filter_map(|(server, definition, listed)| {
                let qualified = self.names.qualified(&server, &definition.name)?.to_owned();
                if let Some(state) = states.remove(&(server.clone(), definition.name.clone())) {
                    pin_states.insert(qualified.clone(), state);
                }
                Some(HostTool {
                    qualified,
                    server,
                    definition,
                    listed,
                })
            })
            .collect();
        tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
        self.tools = tools;
        *self.pin_states.get_mut().unwrap_or_else(|e| e.into_inner()) = pin_states;
        Ok(())
    }

    /// Every configured server and how it is doing, by name.
    pub fn servers(&self) -> &[ServerStatus] {
        &self.statuses
    }

    /// The tools the model may see, by qualified name.
    pub fn tools(&self) -> &[HostTool] {
        &self.tools
    }

    /// The tool a qualified name stands for.
    pub fn tool(&self, qualified: &str) -> Option<&HostTool> {
        self.tools
            .binary_search_by(|t| t.qualified.as_str().cmp(qualified))
            .ok()
            .map(|i| &self.tools[i])
    }

    /// Whether a listed tool may be called as listed: pinned, or changed since it was pinned
    /// (calls are refused until [`Host::approve_change`]). `None` for a name not listed.
    pub fn pin_state(&self, qualified: &str) -> Option<PinState> {
        self.pin_states
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(qualified)
            .cloned()
    }

    /// Accepts a changed tool's listed definition as its new pin, after a person reviewed
    /// [`ServerStatus::pins`]. The audit log records it.
    pub fn approve_change(&self, qualified: &str) -> Result<bool, HostError> {
        let Some(tool) = self.tool(qualified) else {
            return Ok(false);
        };
        let hash = self
            .pins
            .approve(&tool.server, &tool.definition.name, &tool.listed)?;
        self.pin_states
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(qualified.to_owned(), PinState::Pinned(hash.clone()));
        self.record(
            "change_approved",
            json!({"server": tool.server, "tool": qualified, "hash": hash}),
        );
        Ok(true)
    }

    /// Closes every connection (stdio servers are stopped).
    pub async fn close(self) {
        for connection in self.connections.values() {
            connection.client.close().await;
        }
    }

    /// Appends an audit record, if there is a log. A record that cannot be written is logged
    /// at ERROR: the host keeps working.
    fn record(&self, event: &str, fields: Value) {
        let Some(log) = &self.audit else { return };
        let fields = match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        if let Err(e) = log.append(event, fields) {
            tracing::error!(
                event,
                "cannot write the host's audit log ({event} record): {e}"
            );
        }
    }
}

/// The OAuth flow of an HTTP server: the host's store and authorizer, the entry's settings.
fn oauth_for(
    name: &str,
    settings: &crate::config::OAuthSettings,
    options: &HostOptions,
) -> toolwire_client::auth::OAuth {
    let mut oauth = toolwire_client::auth::OAuth::new()
        .store(options.credentials.clone())
        .client_name(options.client_name.clone());
    if let Some(authorizer) = &options.authorizer {
        oauth = oauth.authorizer(authorizer(name));
    }
    if let Some(client_id) = &settings.client_id {
        oauth = oauth.client(
            settings.issuer.clone(),
            client_id,
            settings.client_secret.clone(),
        );
    }
    if let Some(scope) = &settings.scope {
        oauth = oauth.scope(scope);
    }
    if settings.client_credentials {
        oauth = oauth.client_credentials();
    }
    if options.oauth_insecure_http {
        oauth = oauth.allow_insecure_http();
    }
    oauth
}

/// A client for `server` (a stdio server is started; an HTTP one is first reached when its
/// tools are listed).
async fn open(server: &ServerConfig, options: &HostOptions) -> Result<Client, String> {
    let timeout = server.timeout.unwrap_or(options.call_timeout);
    // The hard cap must leave room for the longest limit of a single tool.
    let longest = server
        .tool_timeouts
        .values()
        .copied()
        .fold(timeout, Duration::max);
    let mut builder = ClientBuilder::new(&options.client_name, &options.client_version)
        .timeout(timeout)
        .max_timeout(longest);
    if let Some(probe) = options.probe_timeout {
        builder = builder.probe_timeout(probe);
    }
    if let Some(level) = options.log_level {
        builder = builder.log_level(level);
    }
    for path in &options.ca_files {
        builder = builder.ca_file(path);
    }
    // Each handler is told which server asks.
    if let Some(handler) = options.input.elicit.clone() {
        let name = server.name.clone();
        builder = builder.on_elicit(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.elicit_url.clone() {
        let name = server.name.clone();
        builder = builder.on_elicit_url(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.sample.clone() {
        let name = server.name.clone();
        builder = builder.on_sample(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.roots.clone() {
        let name = server.name.clone();
        builder = builder.on_roots(move || handler(name.clone(), ()));
    }
    let client = match &server.transport {
        Transport::Http {
            url,
            headers,
            oauth,
        } => {
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            if !oauth.disabled {
                builder = builder.oauth(oauth_for(&server.name, oauth, options));
            }
            builder.http(url).map_err(|e| e.to_string())?
        }
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut stdio = StdioCommand::new(command).args(args);
            for (name, value) in env {
                stdio = stdio.env(name, value);
            }
            if let Some(cwd) = cwd {
                stdio = stdio.current_dir(cwd);
            }
            builder
                .spawn_command(stdio)
                .await
                .map_err(|e| e.to_string())?
        }
    };
    Ok(client)
}

/// The tools of `server`'s list that its `tools.allow` / `tools.deny` let through, and the
/// others with the reason.
fn filter(tools: Vec<Tool>, server: &ServerConfig) -> (Vec<Tool>, Vec<Hidden>) {
    // The configuration checked the patterns; a pattern that fails here keeps nothing.
    let allow = Globs::new(&server.tools.allow).ok();
    let deny = Globs::new(&server.tools.deny).ok();
    let mut hidden = Vec::new();
    let kept = tools
        .into_iter()
        .filter(|t| {
            let reason = match (&allow, &deny) {
                (Some(a), _) if !a.is_empty() && !a.matches(&t.name) => {
                    "not in the configuration's tools.allow".to_owned()
                }
                (Some(_), Some(d)) => match d.first_match(&t.name) {
                    Some(pattern) => {
                        format!("matches {pattern:?} of the configuration's tools.deny")
                    }
                    None => return true,
                },
                _ => "the configuration's tool patterns do not compile".to_owned(),
            };
            hidden.push(Hidden {
                tool: t.name.clone(),
                reason,
            });
            false
        })
        .collect();
    (kept, hidden)
}
