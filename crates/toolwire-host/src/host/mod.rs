//! Many servers behind one tool list: connect to every configured server at once, list their
//! tools under qualified names, and call them through pins, the approval policy and the audit
//! log.

mod call;
mod connect;
mod event;
mod list;
mod listen;
mod options;
mod output;

pub use call::{Called, Outcome};
pub use event::{HostEvent, SentCall};
pub use listen::{ListChange, ListChanges};
pub use options::{AuthorizerFor, HostOptions};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::ServerEra;
use toolwire_client::protocol::{CallToolResult, Tool};

use self::connect::Connection;
use self::list::Listing;
use crate::audit::{AuditError, AuditLog, Redaction, RedactionError};
use crate::config::{HostConfig, ServerConfig};
use crate::names::{NameError, Names};
use crate::pins::{FilePins, MemoryPins, PinReport, PinState, PinStore, Pins};
use crate::policy::{
    Approved, Call, FileRemembered, MemoryRemembered, Policy, PolicyError, Refusal,
};

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
    Redaction(#[from] RedactionError),
    /// The policy's patterns do not compile.
    #[error("approval rules: {0}")]
    Policy(#[from] PolicyError),
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
        let policy = Policy::new(config, remembered)?;
        let audit = options.audit_log.as_ref().map(AuditLog::open).transpose()?;
        let redaction = match &options.redaction {
            Some(redaction) => redaction.clone(),
            None => Redaction::new(&config.audit)?,
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
                .map(|server| async { (connect::open(&server, options).await, server) }),
        )
        .await;
        for (opened, server) in opened {
            match opened {
                Ok(client) => {
                    let name = server.name.clone();
                    self.connections
                        .insert(name, Connection::new(server, client));
                }
                Err(error) => {
                    self.server_failed(server.name.clone(), error.to_string());
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
        let lists = futures::future::join_all(
            self.connections
                .values()
                .map(|c| async move { (c.config.name.clone(), c.client.refresh_tools().await) }),
        )
        .await;
        let mut listed = Vec::new();
        for (server, tools) in lists {
            match tools {
                Ok(tools) => {
                    let listing = list::check(tools, &self.connections[&server], &self.pins)?;
                    listed.extend(self.listed(server, listing));
                }
                Err(error) => self.server_failed(server, error.to_string()),
            }
        }
        self.statuses.sort_by(|a, b| a.name.cmp(&b.name));
        let named = list::name(listed, self.connections.values(), self.options.name_budget)?;
        self.names = named.names;
        self.tools = named.tools;
        *self.pin_states.get_mut().unwrap_or_else(|e| e.into_inner()) = named.pin_states;
        Ok(())
    }

    /// Records a server that could not be started or listed, and reports it.
    fn server_failed(&mut self, server: String, error: String) {
        self.record(HostEvent::ServerFailed {
            server: &server,
            error: &error,
        });
        self.statuses.push(ServerStatus {
            name: server,
            state: ServerState::Failed { error },
            pins: PinReport::default(),
            era: None,
            authorized: None,
            hidden: Vec::new(),
        });
    }

    /// Records a server's list (and how it differs from its pins), reports the server
    /// connected, and hands on its tools.
    fn listed(&mut self, server: String, listing: Listing) -> Vec<list::Listed> {
        let Listing {
            tools,
            hidden,
            report,
        } = listing;
        if report != PinReport::default() {
            self.record(HostEvent::tools_changed(&server, &report));
        }
        let client = &self.connections[&server].client;
        self.record(HostEvent::ServerListed {
            server: &server,
            protocol_version: &client.protocol_version(),
            tools: tools.len(),
        });
        self.statuses.push(ServerStatus {
            state: ServerState::Connected { tools: tools.len() },
            pins: report,
            era: client.era(),
            authorized: client.authorized(),
            hidden,
            name: server,
        });
        tools
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
        self.record(HostEvent::ChangeApproved {
            server: &tool.server,
            tool: qualified,
            hash: &hash,
        });
        Ok(true)
    }

    /// Calls the tool the model named `qualified` with `arguments`. Whatever happens, the model
    /// gets a result: a refusal, an unknown tool, a failed server or a timeout is an `isError`
    /// result that says so.
    pub async fn call(&self, qualified: &str, arguments: Value) -> CallToolResult {
        self.call_with(qualified, arguments, CallOptions::default())
            .await
            .result
    }

    /// [`Host::call`] with the caller's options: progress and log callbacks and a cancellation
    /// token. Its time limit is the host's (see [`HostOptions`]) unless `options` sets a
    /// shorter one. Says what became of the call besides the result.
    pub async fn call_with(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Called {
        call::call(self, qualified, arguments, options).await
    }

    /// Subscribes to every connected server's tool-list changes (its `subscriptions/listen`
    /// stream, or a legacy server's notifications) and merges them. A stream that fails ends
    /// with a [`Notification::Reconnected`](toolwire_client::Notification::Reconnected) from
    /// that server, so the host refreshes.
    pub async fn list_changes(&self) -> ListChanges {
        listen::list_changes(self.connections.values()).await
    }

    /// Closes every connection (stdio servers are stopped).
    pub async fn close(self) {
        for connection in self.connections.values() {
            connection.client.close().await;
        }
    }

    /// Appends an audit record, if there is a log. A record that cannot be written is logged
    /// at ERROR: the host keeps working.
    fn record(&self, event: HostEvent<'_>) {
        let Some(log) = &self.audit else { return };
        let event_name = event.name();
        let written = match event.fields() {
            Ok(fields) => log
                .append(event_name, fields)
                .map(drop)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = written {
            tracing::error!(
                event = event_name,
                "cannot write the host's audit log ({event_name} record): {e}"
            );
        }
    }

    /// The policy's decision on `call`, asking the host's approver when the rules leave it
    /// to a person.
    async fn authorize(&self, call: &Call<'_>) -> Result<Approved, Refusal> {
        self.policy
            .authorize(call, self.options.approver.as_ref())
            .await
    }

    /// The arguments as the audit log keeps them, and how many values were redacted; nothing
    /// is computed without a log.
    fn logged(&self, arguments: &Value) -> (Value, usize) {
        if self.audit.is_none() {
            return (Value::Null, 0);
        }
        self.redaction.apply(arguments)
    }

    /// The connection to a configured server.
    fn connection(&self, server: &str) -> &Connection {
        &self.connections[server]
    }

    /// How a call runs: its time limit and what reaches the model.
    fn options(&self) -> &HostOptions {
        &self.options
    }
}
