//! Many servers behind one tool list: connect to every configured server at once, list their
//! tools under qualified names, and call them through pins, the approval policy and the audit
//! log; their prompts, resources and resource templates beside them, under names that map
//! back to their server.

mod approve;
mod call;
mod connect;
mod event;
mod list;
mod listen;
mod offer_pins;
mod offers;
mod options;
mod output;
mod read;
mod reconfigure;
mod record;
mod refresh;
mod rounds;
mod search;
mod view;

pub use call::{Called, Outcome};
pub use event::{HostEvent, SentCall};
pub use listen::{ListChange, ListChanges};
pub use offer_pins::{OfferKind, OfferPins};
pub use offers::{HostPrompt, HostResource, HostTemplate};
pub use options::{AuthorizerFor, HostOptions};
pub use read::OfferError;
pub use reconfigure::{RETIRE_WAIT, Reconfiguration, ServerChanges};
pub use search::FoundTool;
pub use view::{Prompts, ResourceTemplates, Resources, Tools};

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::ServerEra;
use toolwire_client::protocol::{
    CallToolResult, CompleteResult, CompletionArgument, CompletionContext, CompletionReference,
    GetPromptResult, ReadResourceResult, Tool,
};

use self::view::View;
use crate::audit::{AuditError, AuditLog, Redaction, RedactionError};
use crate::config::HostConfig;
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
    /// What its prompts, resources and templates look like against theirs: a changed one is
    /// withheld until [`Host::approve_offer`].
    pub offer_pins: OfferPins,
    /// The protocol era it speaks, once known.
    pub era: Option<ServerEra>,
    /// Tools it listed that the model does not see, with the reason.
    pub hidden: Vec<Hidden>,
    /// The OAuth authorization its client holds, if it asked for one.
    pub authorized: Option<toolwire_client::auth::Authorized>,
    /// How long its last tool list said it stays fresh (`ttlMs`); `None` before a list.
    pub list_ttl: Option<Duration>,
    /// When its tools were last listed; `None` if they never were. A failed server whose
    /// tools are still offered ([`HostOptions::keep_last_list`]) offers this list.
    pub listed_at: Option<SystemTime>,
    /// How its sandbox stands.
    pub sandbox: crate::config::SandboxStatus,
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
    /// The definition as the server lists it (under its own name), shared with the host's
    /// view.
    pub definition: Arc<Tool>,
    /// The same as JSON: what the policy and the approver read.
    listed: Arc<Value>,
}

impl HostTool {
    /// The definition to give the model: the server's, named by the qualified name.
    pub fn for_model(&self) -> Tool {
        Tool {
            name: self.qualified.clone(),
            ..(*self.definition).clone()
        }
    }
}

/// Many servers behind one list of tools. Every method takes `&self`: a host may be shared
/// (in an `Arc`) by calls in flight and the task that refreshes it.
pub struct Host {
    options: HostOptions,
    /// Every server and tool at one moment, swapped whole by a refresh; each listed tool's
    /// pin state in it was decided when its list was checked against the pins (and changed
    /// by [`Host::approve_change`]), so a call reads no store.
    view: ArcSwap<View>,
    /// Held while the view is rebuilt, one change at a time.
    merging: Mutex<()>,
    /// Held while a server is started.
    starting: tokio::sync::Mutex<()>,
    pins: Pins<Arc<dyn PinStore>>,
    /// Whether the pins outlive this host (a state directory or a pin store): with pins in
    /// memory, every tool of a server's first listing is new to it, and that is no change
    /// worth a record in the audit log.
    pins_kept: bool,
    /// The approval rules, swapped whole by [`Host::apply`]: a call decides under the rules
    /// it read.
    policy: ArcSwap<Policy>,
    /// The answers a person asked to be remembered, kept across reconfigurations.
    remembered: Arc<dyn crate::policy::Remembered>,
    audit: Option<Arc<AuditLog>>,
    /// The file's top-level approval rules and audit settings, as last applied.
    top: ArcSwap<reconfigure::TopSettings>,
    /// What the audit log keeps of arguments, swapped whole by [`Host::apply`].
    redaction: ArcSwap<Redaction>,
    /// Approvals by a person waiting for the next round of their call.
    rounds: rounds::Rounds,
    /// The index of the tools for [`Host::search_tools`], made again when they change.
    search: search::SearchCache,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let view = self.view.load();
        f.debug_struct("Host")
            .field("servers", &view.servers.keys())
            .field("tools", &view.tools.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Connects to every server of `config` at once and lists their tools. A server that
    /// fails is reported in [`Host::servers`]; the others work.
    pub async fn connect(config: &HostConfig, options: HostOptions) -> Result<Host, HostError> {
        let host = Host::new(config, options)?;
        host.refresh().await?;
        Ok(host)
    }

    /// A host of the servers of `config` with none of them started yet: [`Host::refresh`]
    /// or [`Host::refresh_server`] starts them, so that a caller that must not wait for the
    /// slowest (a gateway) can start each on its own. Fails only on the host's own state (its
    /// audit log, pins and rules), as [`Host::connect`] does.
    pub fn new(config: &HostConfig, options: HostOptions) -> Result<Host, HostError> {
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
        let pins_kept = options.state_dir.is_some() || options.pin_store.is_some();
        let pins = options.pin_store.clone().unwrap_or(pins);
        let policy = Policy::new(config, remembered.clone())?;
        let audit = options
            .audit_log
            .as_ref()
            .map(AuditLog::open)
            .transpose()?
            .map(Arc::new);
        let redaction = match &options.redaction {
            Some(redaction) => redaction.clone(),
            None => Redaction::new(&config.audit)?,
        };
        Names::build(options.name_budget, std::iter::empty())?;
        crate::names::check_prefixes(
            config
                .servers
                .iter()
                .map(|s| (s.name.as_str(), s.prefix.as_str())),
        )?;
        let servers = config
            .servers
            .iter()
            .map(|server| (server.name.clone(), refresh::unrefreshed(server.clone())))
            .collect();
        let host = Host {
            view: ArcSwap::from_pointee(View::of(servers, options.name_budget)?),
            options,
            merging: Mutex::new(()),
            starting: tokio::sync::Mutex::new(()),
            pins: Pins::new(pins),
            pins_kept,
            policy: ArcSwap::from_pointee(policy),
            remembered,
            top: ArcSwap::from_pointee((config.approval.clone(), config.audit.clone())),
            audit,
            redaction: ArcSwap::from_pointee(redaction),
            rounds: rounds::Rounds::default(),
            search: search::SearchCache::default(),
        };
        Ok(host)
    }

    /// Starts the servers that could not be started before, lists every server's tools
    /// again, checks them against their pins and renames them. A server that failed (to
    /// start, or to list) is tried again here. The servers are refreshed at once, each put in
    /// the view as soon as its list is in.
    pub async fn refresh(&self) -> Result<(), HostError> {
        let names: Vec<String> = self.view.load().servers.keys().cloned().collect();
        let refreshed =
            futures::future::join_all(names.iter().map(|name| self.refresh_one(name))).await;
        refreshed.into_iter().collect()
    }

    /// [`Host::refresh`] of one server; `false` if no server has this name.
    pub async fn refresh_server(&self, server: &str) -> Result<bool, HostError> {
        if !self.view.load().servers.contains_key(server) {
            return Ok(false);
        }
        self.refresh_one(server).await?;
        Ok(true)
    }

    /// Every configured server and how it is doing, by name.
    pub fn servers(&self) -> Vec<ServerStatus> {
        let view = self.view.load();
        view.servers.values().map(|e| e.status.clone()).collect()
    }

    /// The tools the model may see, by qualified name, as of now: a refresh meanwhile does
    /// not change them.
    pub fn tools(&self) -> Tools {
        Tools(self.view.load_full())
    }

    /// The tool a qualified name stands for.
    pub fn tool(&self, qualified: &str) -> Option<HostTool> {
        self.view.load().tool(qualified).cloned()
    }

    /// The prompts the model may get, by qualified name (`prefix__name`), as of now.
    pub fn prompts(&self) -> Prompts {
        Prompts(self.view.load_full())
    }

    /// The prompt a qualified name stands for.
    pub fn prompt(&self, qualified: &str) -> Option<HostPrompt> {
        self.view.load().prompt(qualified).cloned()
    }

    /// The resources the model may read, by the URI the host offers each under
    /// (`toolwire://PREFIX/URI`, see [`crate::uris`]), as of now.
    pub fn resources(&self) -> Resources {
        Resources(self.view.load_full())
    }

    /// The resource templates, each under the template the host offers it by
    /// (`toolwire://PREFIX/TEMPLATE`), as of now: [`Host::read_resource`] reads any of their
    /// expansions.
    pub fn resource_templates(&self) -> ResourceTemplates {
        ResourceTemplates(self.view.load_full())
    }

    /// Gets the prompt the model named `qualified`, with `arguments` (an object of strings),
    /// from its server. The result is cleaned (see [`HostOptions::clean_offers`]) and the
    /// resources its messages link or embed are under the host's URIs. Recorded in the audit
    /// log (the arguments redacted as a call's are).
    pub async fn get_prompt(
        &self,
        qualified: &str,
        arguments: Value,
    ) -> Result<GetPromptResult, OfferError> {
        read::get_prompt(self, qualified, arguments, CallOptions::default()).await
    }

    /// [`Host::get_prompt`] with the caller's options: a time limit, a cancellation, and for
    /// a relay one round only ([`CallOptions::relay_input`]: a server's questions come back
    /// as [`OfferError::Server`] with [`toolwire_client::Error::InputRequired`]) or the
    /// answers to the previous round ([`CallOptions::answers`]).
    pub async fn get_prompt_with(
        &self,
        qualified: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<GetPromptResult, OfferError> {
        read::get_prompt(self, qualified, arguments, options).await
    }

    /// Reads a resource by the URI the host offers it under (`toolwire://PREFIX/URI`) from the
    /// server whose prefix it names, as that server's `URI`: a listed resource, an expansion
    /// of a listed template, or any other URI of that server (one a tool's result linked).
    /// The contents are cleaned (see [`HostOptions::clean_offers`]) and under the host's URIs.
    /// Recorded in the audit log.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, OfferError> {
        read::read_resource(self, uri, CallOptions::default()).await
    }

    /// [`Host::read_resource`] with the caller's options, as [`Host::get_prompt_with`].
    pub async fn read_resource_with(
        &self,
        uri: &str,
        options: CallOptions,
    ) -> Result<ReadResourceResult, OfferError> {
        read::read_resource(self, uri, options).await
    }

    /// Completion values for an argument of a prompt (by its qualified name) or a variable of
    /// a resource template (by the host's template), asked of its server.
    pub async fn complete(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
    ) -> Result<CompleteResult, OfferError> {
        read::complete(self, reference, argument, None, CallOptions::default()).await
    }

    /// [`Host::complete`] with the other arguments' values already given (`context`) and the
    /// caller's options (a time limit, a cancellation, a bearer token for this request).
    pub async fn complete_with(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
        context: Option<CompletionContext>,
        options: CallOptions,
    ) -> Result<CompleteResult, OfferError> {
        read::complete(self, reference, argument, context, options).await
    }

    /// Whether a listed tool may be called as listed: pinned, or changed since it was pinned
    /// (calls are refused until [`Host::approve_change`]). `None` for a name not listed.
    pub fn pin_state(&self, qualified: &str) -> Option<PinState> {
        self.view.load().pin_states.get(qualified).cloned()
    }

    /// Reads the pins of every tool whose definition changed since it was pinned again, without
    /// listing any server: a change approved elsewhere (another process on the same state
    /// directory, `toolwire pins approve`) takes effect here. Returns the qualified names
    /// whose change is now approved.
    pub fn recheck_pins(&self) -> Result<Vec<String>, HostError> {
        let view = self.view.load_full();
        let mut approved: Vec<(String, String, String, String)> = Vec::new();
        for tool in &view.tools {
            if !matches!(
                view.pin_states.get(&tool.qualified),
                Some(PinState::Changed { .. })
            ) {
                continue;
            }
            if let PinState::Pinned(hash) =
                self.pins
                    .state(&tool.server, &tool.definition.name, &tool.listed)?
            {
                approved.push((
                    tool.qualified.clone(),
                    tool.server.clone(),
                    tool.definition.name.clone(),
                    hash,
                ));
            }
        }
        for (_, server, name, hash) in &approved {
            let pinned = PinState::Pinned(hash.clone());
            self.update(server, |entry| {
                for listed in Arc::make_mut(&mut entry.listed) {
                    if &listed.definition.name == name && listed.pin.is_some() {
                        listed.pin = Some(pinned.clone());
                    }
                }
            })?;
        }
        Ok(approved
            .into_iter()
            .map(|(qualified, ..)| qualified)
            .collect())
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

    /// Subscribes to every connected server's tool-, prompt- and resource-list changes (its
    /// `subscriptions/listen` stream, or a legacy server's notifications) and merges them. A stream that fails ends
    /// with a [`Notification::Reconnected`](toolwire_client::Notification::Reconnected) from
    /// that server, so the host refreshes.
    pub async fn list_changes(&self) -> ListChanges {
        let connections = self.connections();
        listen::list_changes(connections.iter().map(|c| &**c), None).await
    }

    /// [`Host::list_changes`] of one server (of none if it is not connected).
    pub async fn list_changes_of(&self, server: &str) -> ListChanges {
        self.changes_of(server, &[]).await
    }

    /// [`Host::list_changes_of`], and updates of the resources `uris` (the host's URIs, as
    /// [`Host::resources`] gives them; those of other servers are left out): the server is
    /// asked to follow its own URIs for them (its listen stream's `resourceSubscriptions`, or
    /// a legacy server's `resources/subscribe` when it declares `resources.subscribe`), and
    /// each update comes as a [`Notification::ResourceUpdated`](toolwire_client::Notification::ResourceUpdated)
    /// under the host's URI. Those the server does not follow are in
    /// [`ListChanges::unfollowed`]. Following ends when the stream is dropped.
    pub async fn changes_of(&self, server: &str, uris: &[String]) -> ListChanges {
        let connection = self.connection(server);
        let view = self.view.load();
        let uris = uris
            .iter()
            .filter_map(|uri| match read::server_of(&view, uri) {
                Ok((of, own)) if of == server => Some((own.to_owned(), uri.clone())),
                _ => None,
            })
            .collect();
        drop(view);
        let following = listen::Following {
            server: server.to_owned(),
            uris,
        };
        listen::list_changes(connection.iter().map(|c| &**c), Some(following)).await
    }

    /// The name of the server whose resource the host's URI `uri` is, if it is one's.
    pub fn server_of_uri(&self, uri: &str) -> Option<String> {
        let view = self.view.load();
        read::server_of(&view, uri)
            .ok()
            .map(|(server, _)| server.to_owned())
    }

    /// Closes every connection (stdio servers are stopped).
    pub async fn close(&self) {
        for connection in self.connections() {
            connection.client.close().await;
        }
    }

    /// Every connected server's connection.
    fn connections(&self) -> Vec<Arc<connect::Connection>> {
        let view = self.view.load();
        view.servers
            .values()
            .filter_map(|e| e.connection.clone())
            .collect()
    }

    /// The policy's decision on `call`, asking the host's approver when the rules leave it
    /// to a person.
    async fn authorize(&self, call: &Call<'_>) -> Result<Approved, Refusal> {
        self.policy
            .load_full()
            .authorize(call, self.options.approver.as_ref())
            .await
    }

    /// The connection to a configured server, if it has one.
    fn connection(&self, server: &str) -> Option<Arc<connect::Connection>> {
        self.view.load().servers.get(server)?.connection.clone()
    }

    /// How a call runs: its time limit and what reaches the model.
    fn options(&self) -> &HostOptions {
        &self.options
    }
}
