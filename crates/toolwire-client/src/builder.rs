//! The client's configuration: who it says it is, timeouts, headers, handlers for the
//! server's input requests, limits, and the `_meta` every 2026-07-28 request carries (B-15,
//! B-17), built once. `connect.rs` turns a builder into a [`Client`](crate::Client).

use std::time::Duration;

use serde_json::json;
use toolwire_protocol::{
    ClientCapabilities, ElicitationCapability, Implementation, JsonObject, LoggingLevel,
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, PROTOCOL_VERSION, RootsCapability,
    SamplingCapability, TASKS_EXTENSION,
};

use crate::error::Result;

use crate::input::{
    InputHandlers, elicit_handler, elicit_url_handler, roots_handler, sample_handler,
};

/// The default of [`ClientBuilder::probe_timeout`].
const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds a [`Client`](crate::Client).
pub struct ClientBuilder {
    pub(crate) info: Implementation,
    pub(crate) send_client_info: bool,
    pub(crate) versions: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) max_timeout: Duration,
    pub(crate) reset_on_progress: bool,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer: Option<String>,
    pub(crate) oauth: Option<crate::auth::OAuth>,
    pub(crate) ca_files: Vec<std::path::PathBuf>,
    pub(crate) handlers: InputHandlers,
    pub(crate) max_rounds: usize,
    pub(crate) extensions: JsonObject,
    pub(crate) validate_output: bool,
    pub(crate) output_formats: toolwire_protocol::schema::FormatMode,
    pub(crate) legacy_fallback: bool,
    pub(crate) probe_timeout: Duration,
    pub(crate) log_level: Option<LoggingLevel>,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_list_items: usize,
    pub(crate) max_list_bytes: usize,
    pub(crate) list_timeout: Duration,
}

impl ClientBuilder {
    /// A client that calls itself `name` at `version` (sent as clientInfo, B-17).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ClientBuilder {
            info: Implementation::new(name, version),
            send_client_info: true,
            versions: vec![PROTOCOL_VERSION.to_owned()],
            timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
            reset_on_progress: true,
            headers: Vec::new(),
            bearer: None,
            oauth: None,
            ca_files: Vec::new(),
            handlers: InputHandlers::default(),
            max_rounds: 8,
            extensions: JsonObject::new(),
            validate_output: true,
            output_formats: toolwire_protocol::schema::FormatMode::Annotate,
            legacy_fallback: true,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            log_level: None,
            shutdown_grace: Duration::from_secs(2),
            max_list_items: 100_000,
            max_list_bytes: 64 << 20,
            list_timeout: Duration::from_secs(120),
        }
    }

    /// Leaves clientInfo out of requests.
    pub fn without_client_info(mut self) -> Self {
        self.send_client_info = false;
        self
    }

    /// Protocol versions this client speaks, preferred first (default: 2026-07-28).
    pub fn protocol_versions(
        mut self,
        versions: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.versions = versions.into_iter().map(Into::into).collect();
        self
    }

    /// How long to wait for an answer (default 60 s). With progress resets (the default) each
    /// progress notification restarts the wait, up to the hard maximum.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest any request may take, whatever progress it reports (default 10 minutes).
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.max_timeout = max;
        self
    }

    /// Whether progress notifications restart the timeout (default true).
    pub fn reset_timeout_on_progress(mut self, reset: bool) -> Self {
        self.reset_on_progress = reset;
        self
    }

    /// Adds an HTTP header to every request (e.g. an API key).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sends `Authorization: Bearer <token>` with every HTTP request.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Authorizes with a protected HTTP server when it challenges (the 2026-07-28 authorization
    /// spec): discovery, an identity, a grant through `oauth`'s authorizer or client
    /// credentials, tokens kept in its store, refreshed and stepped up as the server asks. Its
    /// tokens take the place of [`bearer_token`](Self::bearer_token) once it has one.
    pub fn oauth(mut self, oauth: crate::auth::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Trusts the CA certificates in this PEM file for HTTPS, besides the platform's roots (a
    /// private deployment's CA; repeatable). `SSL_CERT_FILE` and `SSL_CERT_DIR`, when set, take
    /// the place of the platform's store, as with OpenSSL. A file that cannot be read or holds no
    /// usable certificate fails [`http`](Self::http) with an error naming it.
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_files.push(path.into());
        self
    }

    /// Answers form-mode elicitation requests (and declares `elicitation.form`). The handler
    /// should name the server, show the message and let the user edit, decline or cancel
    /// (M-16). URL-mode requests never reach it: they need [`on_elicit_url`](Self::on_elicit_url).
    pub fn on_elicit<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(toolwire_protocol::ElicitRequestParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<toolwire_protocol::ElicitResult>> + Send + 'static,
    {
        self.handlers.elicit = Some(elicit_handler(handler));
        self
    }

    /// Answers URL-mode elicitation requests (and declares `elicitation.url`). Give one only if
    /// it shows the user the full URL and why it is asked, opens it outside the client and the
    /// model, never before the user explicitly consents, and never fetches it itself (M-16);
    /// `accept` means the user agreed to open it. Without one, URL mode is not declared and a
    /// server asking for it anyway is refused.
    pub fn on_elicit_url<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(toolwire_protocol::ElicitUrlParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<toolwire_protocol::ElicitResult>> + Send + 'static,
    {
        self.handlers.elicit_url = Some(elicit_url_handler(handler));
        self
    }

    /// Answers sampling requests (and declares `sampling`).
    pub fn on_sample<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(toolwire_protocol::CreateMessageParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<toolwire_protocol::CreateMessageResult>>
            + Send
            + 'static,
    {
        self.handlers.sample = Some(sample_handler(handler));
        self
    }

    /// Answers roots requests (and declares `roots`).
    pub fn on_roots<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<toolwire_protocol::ListRootsResult>>
            + Send
            + 'static,
    {
        self.handlers.roots = Some(roots_handler(handler));
        self
    }

    /// At most this many `input_required` rounds per request (default 8).
    pub fn max_input_rounds(mut self, rounds: usize) -> Self {
        self.max_rounds = rounds;
        self
    }

    /// Declares the tasks extension on every request.
    pub fn with_tasks(mut self) -> Self {
        self.extensions.insert(TASKS_EXTENSION.into(), json!({}));
        self
    }

    /// Whether `structuredContent` is checked against `outputSchema` (default true; C-04).
    pub fn validate_output(mut self, validate: bool) -> Self {
        self.validate_output = validate;
        self
    }

    /// Whether output validation asserts `format` (`email`, `date-time`, `uri`, `uuid`, …).
    /// Off by default: in JSON Schema 2020-12 `format` is an annotation.
    pub fn assert_output_formats(mut self, assert: bool) -> Self {
        self.output_formats = if assert {
            toolwire_protocol::schema::FormatMode::Assert
        } else {
            toolwire_protocol::schema::FormatMode::Annotate
        };
        self
    }

    /// Whether a server that speaks only 2025-11-25 is spoken to with the `initialize` handshake
    /// (default true). Off, such a server fails with a clear error (V-11).
    pub fn legacy_fallback(mut self, fallback: bool) -> Self {
        self.legacy_fallback = fallback;
        self
    }

    /// How long a stdio server may take to answer the `server/discover` probe before it is taken
    /// for a legacy server (default 30 s, long enough for a first `npx -y`, a container or a JVM
    /// to start; V-09). A server the probe gave up on is still recognised as a 2026-07-28 one
    /// when it refuses `initialize` with -32020, -32021 or -32022. Settling the era counts
    /// against the first request's timeout.
    pub fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// Asks servers for log messages at `level` and above with every request (P-17); they reach
    /// [`CallOptions::on_log`](crate::CallOptions::on_log) or `tracing`. Without it, servers send
    /// none.
    pub fn log_level(mut self, level: LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }

    /// How long `close` waits for a stdio server after closing its stdin, and again after
    /// SIGTERM, before SIGKILL (default 2 s each; S-09).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The most items one paginated list (tools, prompts, resources, templates) may hold, all
    /// pages together (default 100,000); past it the listing fails with
    /// [`Error::ListTooLarge`](crate::Error::ListTooLarge).
    pub fn max_list_items(mut self, items: usize) -> Self {
        self.max_list_items = items;
        self
    }

    /// The most bytes of JSON one paginated list may take, all pages together (default 64 MiB);
    /// past it the listing fails with [`Error::ListTooLarge`](crate::Error::ListTooLarge).
    pub fn max_list_bytes(mut self, bytes: usize) -> Self {
        self.max_list_bytes = bytes;
        self
    }

    /// The longest one paginated list may take, all pages together (default 2 minutes; each
    /// page also has the request timeout); past it the listing fails with
    /// [`Error::ListTooLarge`](crate::Error::ListTooLarge).
    pub fn list_timeout(mut self, timeout: Duration) -> Self {
        self.list_timeout = timeout;
        self
    }

    /// The capabilities the handlers can answer, plus the declared extensions.
    pub(crate) fn declared_capabilities(&self) -> ClientCapabilities {
        ClientCapabilities {
            // A mode is declared only with a handler for it (M-15, M-16).
            elicitation: (self.handlers.elicit.is_some() || self.handlers.elicit_url.is_some())
                .then(|| ElicitationCapability {
                    form: self.handlers.elicit.as_ref().map(|_| JsonObject::new()),
                    url: self.handlers.elicit_url.as_ref().map(|_| JsonObject::new()),
                    ..Default::default()
                }),
            sampling: self
                .handlers
                .sample
                .as_ref()
                .map(|_| SamplingCapability::default()),
            roots: self
                .handlers
                .roots
                .as_ref()
                .map(|_| RootsCapability::default()),
            extensions: (!self.extensions.is_empty()).then(|| self.extensions.clone()),
            ..Default::default()
        }
    }

    /// The `_meta` of every 2026-07-28 request but the version, built once.
    pub(crate) fn request_meta(&self) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(
            META_CLIENT_CAPABILITIES.into(),
            json!(self.declared_capabilities()),
        );
        if self.send_client_info {
            meta.insert(META_CLIENT_INFO.into(), json!(self.info));
        }
        if let Some(level) = self.log_level {
            meta.insert(META_LOG_LEVEL.into(), json!(level));
        }
        meta
    }
}
