//! How a [`Host`](super::Host) runs: who it says it is, where it keeps state, how long calls
//! may take, what reaches the model, and who answers servers' questions.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolwire_client::protocol::{
    CreateMessageParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitUrlParams,
    ListRootsResult, LoggingLevel,
};

use toolwire_client::auth::{Authorizer, CredentialStore, MemoryStore};

use super::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_RESULT_CHARS};
use crate::audit::Redaction;
use crate::names::DEFAULT_NAME_BUDGET;
use crate::policy::Approver;

pub(super) type Handler<P, R> =
    Arc<dyn Fn(String, P) -> BoxFuture<toolwire_client::Result<R>> + Send + Sync>;
type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// What answers servers' requests for input, each told which server asks.
#[derive(Clone, Default)]
pub(super) struct InputHandlers {
    pub(super) elicit: Option<Handler<ElicitRequestParams, ElicitResult>>,
    pub(super) elicit_url: Option<Handler<ElicitUrlParams, ElicitResult>>,
    pub(super) sample: Option<Handler<CreateMessageParams, CreateMessageResult>>,
    pub(super) roots: Option<Handler<(), ListRootsResult>>,
}

/// How a [`Host`](super::Host) runs.
#[derive(Clone)]
pub struct HostOptions {
    pub(super) client_name: String,
    pub(super) client_version: String,
    pub(super) name_budget: usize,
    pub(super) state_dir: Option<PathBuf>,
    pub(super) audit_log: Option<PathBuf>,
    pub(super) redaction: Option<Redaction>,
    pub(super) approver: Arc<dyn Approver>,
    pub(super) call_timeout: Duration,
    pub(super) max_result_chars: usize,
    pub(super) input: InputHandlers,
    pub(super) ca_files: Vec<PathBuf>,
    pub(super) probe_timeout: Option<Duration>,
    pub(super) clean_results: bool,
    pub(super) clean_offers: bool,
    pub(super) log_level: Option<LoggingLevel>,
    pub(super) credentials: Arc<dyn CredentialStore>,
    pub(super) authorizer: Option<AuthorizerFor>,
    pub(super) oauth_insecure_http: bool,
    pub(super) keep_last_list: bool,
    pub(super) hold_new: bool,
    pub(super) audit_each_call: bool,
    pub(super) pin_store: Option<Arc<dyn crate::PinStore>>,
    pub(super) sandbox_launcher: Option<PathBuf>,
}

/// Makes the [`Authorizer`] for one server, told its name (to say which server asks).
pub type AuthorizerFor = Arc<dyn Fn(&str) -> Arc<dyn Authorizer> + Send + Sync>;

impl std::fmt::Debug for HostOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostOptions")
            .field("client_name", &self.client_name)
            .field("name_budget", &self.name_budget)
            .field("state_dir", &self.state_dir)
            .field("audit_log", &self.audit_log)
            .field("call_timeout", &self.call_timeout)
            .field("max_result_chars", &self.max_result_chars)
            .field("pin_store", &self.pin_store.is_some())
            .finish_non_exhaustive()
    }
}

impl HostOptions {
    /// A host that asks `approver` about calls no rule decides, keeps pins and "allow always"
    /// answers in memory and writes no audit log until told where.
    pub fn new(approver: impl Approver + 'static) -> HostOptions {
        HostOptions {
            client_name: "toolwire-host".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            name_budget: DEFAULT_NAME_BUDGET,
            state_dir: None,
            audit_log: None,
            redaction: None,
            approver: Arc::new(approver),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            max_result_chars: DEFAULT_MAX_RESULT_CHARS,
            input: InputHandlers::default(),
            ca_files: Vec::new(),
            probe_timeout: None,
            clean_results: true,
            clean_offers: true,
            log_level: None,
            credentials: Arc::new(MemoryStore::new()),
            authorizer: None,
            oauth_insecure_http: false,
            keep_last_list: false,
            hold_new: false,
            audit_each_call: true,
            pin_store: None,
            sandbox_launcher: None,
        }
    }

    /// OAuth for HTTP servers that challenge (unless their entry says `"oauth": false` or sets
    /// an `Authorization` header): identities and tokens kept in `store` (default: memory, for
    /// this host only), and `authorizer` making the [`Authorizer`] that has a person sign in
    /// for a server, told its name. Without an authorizer, only kept tokens and client
    /// credentials are used.
    pub fn oauth(
        mut self,
        store: Arc<dyn CredentialStore>,
        authorizer: Option<AuthorizerFor>,
    ) -> Self {
        self.credentials = store;
        self.authorizer = authorizer;
        self
    }

    /// Development only: every server's OAuth may reach authorization servers and metadata on
    /// plain `http:` anywhere, not only at the server's own origin
    /// ([`OAuth::allow_insecure_http`](toolwire_client::auth::OAuth::allow_insecure_http)).
    /// The host's own choice, never a configuration file's.
    pub fn oauth_insecure_http(mut self) -> Self {
        self.oauth_insecure_http = true;
        self
    }

    /// Answers servers' form-mode elicitation requests, told which server asks (show its
    /// name with the message, M-16). Without it, servers are told elicitation is unsupported.
    ///
    /// A legacy (2025-11-25) server's request during a call also says which request of the
    /// host's client it came during: read
    /// [`Asked::current`](toolwire_client::Asked::current) in the handler (and
    /// [`CallOptions::on_request`](toolwire_client::CallOptions::on_request) tells a call's
    /// request ids). The same holds for the other handlers below.
    pub fn on_elicit<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(String, ElicitRequestParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = toolwire_client::Result<ElicitResult>> + Send + 'static,
    {
        self.input.elicit = Some(Arc::new(move |server, params| {
            Box::pin(handler(server, params))
        }));
        self
    }

    /// Answers servers' URL-mode elicitation requests, told which server asks: show the full
    /// URL and its domain, and open it only with the person's consent (M-16). Without it,
    /// servers are told URL elicitation is unsupported.
    pub fn on_elicit_url<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(String, ElicitUrlParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = toolwire_client::Result<ElicitResult>> + Send + 'static,
    {
        self.input.elicit_url = Some(Arc::new(move |server, params| {
            Box::pin(handler(server, params))
        }));
        self
    }

    /// Answers servers' sampling requests, told which server asks.
    pub fn on_sample<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(String, CreateMessageParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = toolwire_client::Result<CreateMessageResult>>
            + Send
            + 'static,
    {
        self.input.sample = Some(Arc::new(move |server, params| {
            Box::pin(handler(server, params))
        }));
        self
    }

    /// Answers servers' roots requests, told which server asks (a host may give each server
    /// its own roots).
    pub fn on_roots<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut:
            std::future::Future<Output = toolwire_client::Result<ListRootsResult>> + Send + 'static,
    {
        self.input.roots = Some(Arc::new(move |server, ()| Box::pin(handler(server))));
        self
    }

    /// The name and version the host gives servers (`clientInfo`).
    pub fn client_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_name = name.into();
        self.client_version = version.into();
        self
    }

    /// The longest qualified name (48 to 128; default 64).
    pub fn name_budget(mut self, budget: usize) -> Self {
        self.name_budget = budget;
        self
    }

    /// Keeps pins (`DIR/pins/`) and "allow always" answers (`DIR/approvals.json`) in `dir`;
    /// those of a project's configuration in a directory of its own under it
    /// ([`HostConfig::state_dir_in`](crate::HostConfig::state_dir_in)).
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Keeps pins in `store` rather than in memory or the state directory: a store shared by
    /// several processes (`RedisPins`, feature `redis`) makes them withhold and serve
    /// changed tools alike, and an approval by one holds for all.
    pub fn pin_store(mut self, store: Arc<dyn crate::PinStore>) -> Self {
        self.pin_store = Some(store);
        self
    }

    /// Writes the hash-chained audit log to `path`.
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_log = Some(path.into());
        self
    }

    /// What the audit log keeps of arguments, instead of what the configuration's `audit`
    /// key says (by default: redacted with the default keys and secret patterns).
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = Some(redaction);
        self
    }

    /// The time limit of calls to servers without a `timeoutMs` (default 60 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Asks every server for its log messages at `level` and above; they reach a call's
    /// [`CallOptions::on_log`](toolwire_client::CallOptions::on_log) (or `tracing`). Without
    /// it, servers send none.
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// Whether escape sequences and control characters are removed from results (default
    /// true). A host that shows results to a person only, and makes control characters
    /// visible itself (as a terminal host can: `^[[2J`), may keep them to show what the
    /// server sent; results for a model should always be cleaned.
    pub fn clean_results(mut self, clean: bool) -> Self {
        self.clean_results = clean;
        self
    }

    /// Whether escape sequences, control characters and hidden format characters are removed
    /// from prompts got and resources read (default true), as [`HostOptions::clean_results`]
    /// does for tool results. Apart from it, so that a gateway, whose server's output guard
    /// cleans tool results but never sees prompts or resources, turns off only the first.
    pub fn clean_offers(mut self, clean: bool) -> Self {
        self.clean_offers = clean;
        self
    }

    /// The program that confines each stdio server and then executes it: one whose
    /// `main` calls `toolwire_sandbox::run_if_launcher` first, such as the `toolwire-sandbox`
    /// binary. Default: this program itself, as in the `toolwire` binary.
    pub fn sandbox_launcher(mut self, launcher: impl Into<PathBuf>) -> Self {
        self.sandbox_launcher = Some(launcher.into());
        self
    }

    /// Trusts the CA certificates in this PEM file for every HTTPS server, besides the
    /// system's.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_files.push(path.into());
        self
    }

    /// How long a stdio server may take to answer its first `server/discover` before it is
    /// spoken to as a 2025-11-25 server (the client's default is 30 s).
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = Some(timeout);
        self
    }

    /// Whether each call that goes through gets its records in the audit log — who allowed it,
    /// and its answer — (default yes). A host whose calls are audited elsewhere — a gateway,
    /// whose server records each call with its caller — turns it off, so that the log keeps
    /// what happens upstream (failures, refusals, changes, approvals of changes) without
    /// synced writes per call.
    pub fn audit_each_call(mut self, audit: bool) -> Self {
        self.audit_each_call = audit;
        self
    }

    /// Keeps offering a server's last good list while it fails (to start, or to list), with
    /// its status saying so ([`ServerStatus::listed_at`](super::ServerStatus::listed_at)):
    /// one failed server then never empties a long-running host's list; calls to its tools
    /// fail with the reason until it is back. Off by default: a failed server's tools leave
    /// the list.
    pub fn keep_last_list(mut self, keep: bool) -> Self {
        self.keep_last_list = keep;
        self
    }

    /// Holds a tool, prompt, resource or template seen for the first time from a server that
    /// already has pins (a new name from a known server) until a person approves it, as a
    /// changed one is, instead of pinning it on first sight. A server's first list is pinned
    /// as it is either way. Off by default: a server adding a tool is routine, and a policy
    /// that allows by upstream or denies by default covers new names; turn it on where names
    /// are what access is decided by (a deny rule naming `dangerous` does not stop a new
    /// `Dangerous`).
    pub fn hold_new_names(mut self, hold: bool) -> Self {
        self.hold_new = hold;
        self
    }

    /// The most characters of text a call returns to the model (default 100,000).
    pub fn max_result_chars(mut self, chars: usize) -> Self {
        self.max_result_chars = chars.max(1);
        self
    }
}
