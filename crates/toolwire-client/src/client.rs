//! The client: configuration, `_meta` on every request (B-15, B-17), unique ids (B-03),
//! timeouts that may reset on progress under a hard cap (P-07), cancellation, version
//! negotiation on -32022 (V-03), `resultType` checks (B-05, B-06), and re-issue of a request
//! whose stream or process was lost (H-27, S-11). The era (2026-07-28 or a legacy 2025-11-25
//! session) is settled in `era.rs`; messages the server starts are answered in `incoming.rs`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ClientCapabilities, CompleteResult, CompletionArgument, CompletionReference, DiscoverResult,
    ElicitationCapability, ErrorObject, GetPromptResult, Implementation, JsonObject, LoggingLevel,
    LoggingMessageParams, PROTOCOL_VERSION, ProgressParams, ReadResourceResult, RootsCapability,
    SamplingCapability, TASKS_EXTENSION, UNSUPPORTED_PROTOCOL_VERSION,
};

use crate::era::{Era, State};
use crate::error::{Error, Result};
use crate::input::{
    InputHandlers, elicit_handler, elicit_url_handler, roots_handler, sample_handler,
};
use crate::tools::ToolCache;
use crate::transport::http::HttpTransport;
use crate::transport::stdio::{StdioCommand, StdioTransport};
use crate::transport::{Failure, Outgoing, Reply, Transport};

/// Called with each progress notification of a request.
pub type ProgressFn = Arc<dyn Fn(&ProgressParams) + Send + Sync>;
/// Called with each log message the server sends while answering a request.
pub type LogFn = Arc<dyn Fn(&LoggingMessageParams) + Send + Sync>;

/// The default of [`ClientBuilder::probe_timeout`].
const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds a [`Client`].
pub struct ClientBuilder {
    pub(crate) info: Implementation,
    pub(crate) send_client_info: bool,
    pub(crate) versions: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) max_timeout: Duration,
    pub(crate) reset_on_progress: bool,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) bearer: Option<String>,
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
    /// [`Error::ListTooLarge`].
    pub fn max_list_items(mut self, items: usize) -> Self {
        self.max_list_items = items;
        self
    }

    /// The most bytes of JSON one paginated list may take, all pages together (default 64 MiB);
    /// past it the listing fails with [`Error::ListTooLarge`].
    pub fn max_list_bytes(mut self, bytes: usize) -> Self {
        self.max_list_bytes = bytes;
        self
    }

    /// The longest one paginated list may take, all pages together (default 2 minutes; each
    /// page also has the request timeout); past it the listing fails with
    /// [`Error::ListTooLarge`].
    pub fn list_timeout(mut self, timeout: Duration) -> Self {
        self.list_timeout = timeout;
        self
    }

    /// The capabilities the handlers can answer, plus the declared extensions.
    fn declared_capabilities(&self) -> ClientCapabilities {
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
    fn request_meta(&self) -> JsonObject {
        let mut meta = JsonObject::new();
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            json!(self.declared_capabilities()),
        );
        if self.send_client_info {
            meta.insert(
                "io.modelcontextprotocol/clientInfo".into(),
                json!(self.info),
            );
        }
        if let Some(level) = self.log_level {
            meta.insert("io.modelcontextprotocol/logLevel".into(), json!(level));
        }
        meta
    }

    /// A client for the Streamable HTTP endpoint at `url`.
    pub fn http(self, url: impl Into<String>) -> Result<Client> {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Transport(format!("bad header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| Error::Transport(format!("bad value for header {name}")))?;
            headers.append(name, value);
        }
        let transport = HttpTransport::new(
            url.into(),
            headers,
            self.bearer.as_deref(),
            &self.ca_files,
            self.timeout,
        )?;
        Ok(Client::new(self, Transport::Http(transport)))
    }

    /// A client for a server run as a child process speaking stdio: `program` with `args`.
    pub async fn spawn(
        self,
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Client> {
        self.spawn_command(StdioCommand::new(program).args(args))
            .await
    }

    /// A client for a server run as a child process, with environment and working directory.
    pub async fn spawn_command(self, command: StdioCommand) -> Result<Client> {
        let (transport, incoming) = StdioTransport::spawn(command)?;
        let client = Client::new(self, Transport::Stdio(Box::new(transport)));
        crate::incoming::serve_stdio(&client, incoming);
        Ok(client)
    }
}

/// A connection to one MCP server. Cheap to clone; clones share the connection and caches.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) transport: Transport,
    pub(crate) config: ClientBuilder,
    next_id: AtomicI64,
    pub(crate) state: Mutex<State>,
    /// Held while the era is being settled (probe, initialize), so it happens once.
    pub(crate) establish: tokio::sync::Mutex<()>,
    pub(crate) tools: Mutex<Option<ToolCache>>,
    /// Bumped by every invalidation, so a list fetched across a change is not kept as fresh.
    pub(crate) tools_epoch: std::sync::atomic::AtomicU64,
    /// Notifications that belong to no request (legacy servers), for legacy subscriptions.
    pub(crate) events: broadcast::Sender<Value>,
    /// The legacy HTTP server's standalone GET stream, while one is open.
    pub(crate) legacy_stream: Mutex<Option<tokio::task::AbortHandle>>,
    /// `_meta` for 2026-07-28 requests, less the version (B-15, B-17).
    request_meta: JsonObject,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .legacy_stream
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.inner.transport)
            .finish_non_exhaustive()
    }
}

/// Per-request options of the core request path.
#[derive(Default, Clone)]
pub(crate) struct RpcOptions {
    /// The `Mcp-Name` value.
    pub(crate) name: Option<String>,
    /// `Mcp-Param-*` headers.
    pub(crate) mirrored: Vec<(String, String)>,
    pub(crate) progress: Option<ProgressFn>,
    pub(crate) log: Option<LogFn>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: Option<CancellationToken>,
}

/// The codes that only a 2026-07-28 server sends: such an error proves the era.
pub(crate) fn is_modern_error(code: i64) -> bool {
    matches!(code, -32022..=-32020)
}

impl Client {
    fn new(config: ClientBuilder, transport: Transport) -> Self {
        let version = config
            .versions
            .first()
            .cloned()
            .unwrap_or_else(|| PROTOCOL_VERSION.to_owned());
        let (events, _) = broadcast::channel(256);
        let request_meta = config.request_meta();
        Client {
            inner: Arc::new(Inner {
                request_meta,
                transport,
                config,
                next_id: AtomicI64::new(1),
                state: Mutex::new(State::new(version)),
                establish: tokio::sync::Mutex::new(()),
                tools: Mutex::new(None),
                tools_epoch: std::sync::atomic::AtomicU64::new(0),
                events,
                legacy_stream: Mutex::new(None),
            }),
        }
    }

    /// The capabilities declared on every request: those the handlers can answer (B-20).
    pub fn capabilities(&self) -> ClientCapabilities {
        self.inner.config.declared_capabilities()
    }

    /// The protocol version requests are sent with (after any negotiation or fallback).
    pub fn protocol_version(&self) -> String {
        let state = self.state();
        match &state.era {
            Era::Legacy(session) => session.version.clone(),
            _ => state.version.clone(),
        }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_http(&self) -> bool {
        self.inner.transport.is_http()
    }

    /// The body of a request in `era`: modern requests carry the full `_meta` (B-15), legacy
    /// ones only a progress token.
    pub(crate) fn envelope(
        &self,
        era: &Era,
        id: i64,
        method: &str,
        params: &Value,
        progress: bool,
    ) -> Result<String> {
        let mut params = params.clone();
        let object = params
            .as_object_mut()
            .ok_or_else(|| Error::InvalidResponse("params must be an object".into()))?;
        let mut meta = JsonObject::new();
        if !matches!(era, Era::Legacy(_)) {
            meta = self.inner.request_meta.clone();
            meta.insert(
                "io.modelcontextprotocol/protocolVersion".into(),
                Value::String(self.state().version.clone()),
            );
        }
        if progress {
            meta.insert("progressToken".into(), json!(id));
        }
        if !meta.is_empty() {
            object.insert("_meta".into(), Value::Object(meta));
        }
        Ok(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
    }

    /// Sends a request and returns its result object; the core every method goes through.
    pub(crate) async fn rpc(
        &self,
        method: &str,
        params: Value,
        options: &RpcOptions,
    ) -> Result<Value> {
        let (mut negotiated, mut reissued, mut renewed, mut fell_back) =
            (false, false, false, false);
        loop {
            // Settling the era (probe, initialize) counts against this call's timeout and
            // cancellation too.
            let era = self.bounded(options, self.era_for_request()).await?;
            if let (Era::Legacy(session), "server/discover") = (&era, method) {
                // A legacy server has no discover: its initialize result stands in (also after
                // a fallback on this very request).
                return Ok(serde_json::to_value(session.discover_result()?)
                    .expect("a discover result serializes"));
            }
            let id = self.next_id();
            let body = self.envelope(&era, id, method, &params, options.progress.is_some())?;
            let (version, session) = self.wire_identity(&era);
            let out = Outgoing {
                id: Some(id),
                method,
                body,
                name: options.name.as_deref(),
                mirrored: &options.mirrored,
                version: Some(&version),
                session: session.as_deref(),
                legacy: matches!(era, Era::Legacy(_)),
            };
            let failure = match self.exchange(&out, options).await {
                Ok(reply) => {
                    if !fell_back && self.is_legacy_signal(&era, &reply) {
                        fell_back = true;
                        if self.fall_back(&era, &reply_summary(&reply)).await? {
                            continue;
                        }
                        // Not a legacy server after all: the reply stands.
                    }
                    let message = reply.message;
                    if let Some(error) = message.get("error") {
                        let error: ErrorObject = serde_json::from_value(error.clone())
                            .map_err(|e| Error::InvalidResponse(format!("malformed error: {e}")))?;
                        if is_modern_error(error.code) {
                            self.confirm_modern(&era);
                        }
                        if error.code == UNSUPPORTED_PROTOCOL_VERSION
                            && !negotiated
                            && !matches!(era, Era::Legacy(_))
                        {
                            if let Some(v) = self.mutual_version(&error) {
                                // V-03: retry with a version both sides speak.
                                negotiated = true;
                                self.state().version = v;
                                continue;
                            }
                        }
                        return Err(Error::Rpc(error));
                    }
                    self.confirm_modern(&era);
                    return self.checked_result(message);
                }
                Err(failure) => failure,
            };
            match failure {
                Failure::Lost(why) if !reissued => {
                    // The request died with its stream or process: issue it again with a new
                    // id (H-27; on stdio the server is started again first, S-11).
                    reissued = true;
                    tracing::warn!(method, %why, "the request was lost; re-issuing it with a new id");
                }
                Failure::SessionExpired if !renewed => {
                    renewed = true;
                    tracing::warn!("the legacy session expired; initializing again");
                    self.forget_legacy_session(&era);
                }
                Failure::Error(Error::Http { status, body })
                    if !fell_back && self.is_legacy_status(&era, status) =>
                {
                    fell_back = true;
                    if !self
                        .fall_back(&era, &format!("HTTP {status}: {body}"))
                        .await?
                    {
                        return Err(Error::Http { status, body });
                    }
                }
                other => return Err(other.into_error()),
            }
        }
    }

    /// The first of our versions the server lists in `data.supported`.
    pub(crate) fn mutual_version(&self, error: &ErrorObject) -> Option<String> {
        let supported: Vec<String> =
            serde_json::from_value(error.data.as_ref()?.get("supported")?.clone()).ok()?;
        self.inner
            .config
            .versions
            .iter()
            .find(|v| supported.contains(v))
            .cloned()
    }

    /// The result object, with `resultType` checked: absent reads as complete (B-06), unknown
    /// types are refused (B-05).
    pub(crate) fn checked_result(&self, message: Value) -> Result<Value> {
        let Some(mut result) = message.get("result").cloned() else {
            return Err(Error::InvalidResponse(
                "a response with neither result nor error".into(),
            ));
        };
        let object = result
            .as_object_mut()
            .ok_or_else(|| Error::InvalidResponse("the result is not an object".into()))?;
        let result_type = object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        match result_type.as_str() {
            Some("complete" | "input_required") => Ok(result),
            Some("task") if self.inner.config.extensions.contains_key(TASKS_EXTENSION) => {
                Ok(result)
            }
            other => Err(Error::InvalidResponse(format!(
                "unknown resultType {other:?} (B-05)"
            ))),
        }
    }

    /// One exchange under the timeout: the deadline moves with progress, never past the cap;
    /// a cancelled token or the deadline drops the request, which cancels it on the wire
    /// (HTTP closes the stream, H-26; stdio sends `notifications/cancelled`, S-07).
    pub(crate) async fn exchange(
        &self,
        out: &Outgoing<'_>,
        options: &RpcOptions,
    ) -> Result<Reply, Failure> {
        let config = &self.inner.config;
        let timeout = options.timeout.unwrap_or(config.timeout);
        let started = Instant::now();
        let hard = started + config.max_timeout.max(timeout);
        let deadline = Arc::new(Mutex::new((started + timeout).min(hard)));
        let reset = config.reset_on_progress;
        let moved = deadline.clone();
        let (progress, log) = (options.progress.clone(), options.log.clone());
        let client = self.clone();
        let mut on_message = move |message: Value| match message["method"].as_str() {
            Some("notifications/progress") if message.get("id").is_none() => {
                if reset {
                    *moved.lock().unwrap_or_else(|p| p.into_inner()) =
                        (Instant::now() + timeout).min(hard);
                }
                if let (Some(f), Ok(params)) = (
                    &progress,
                    serde_json::from_value::<ProgressParams>(message["params"].clone()),
                ) {
                    f(&params);
                }
            }
            Some("notifications/message") if message.get("id").is_none() => {
                if let Ok(params) =
                    serde_json::from_value::<LoggingMessageParams>(message["params"].clone())
                {
                    match &log {
                        Some(f) => f(&params),
                        None => crate::incoming::trace_log(&params),
                    }
                }
            }
            _ => client.incoming(message),
        };
        let cancelled = async {
            match &options.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let request = self.inner.transport.request(out, &mut on_message);
        tokio::pin!(request, cancelled);
        loop {
            let until = *deadline.lock().unwrap_or_else(|p| p.into_inner());
            tokio::select! {
                result = &mut request => return result,
                () = &mut cancelled => return Err(Error::Cancelled.into()),
                () = tokio::time::sleep_until(until) => {
                    if *deadline.lock().unwrap_or_else(|p| p.into_inner()) <= Instant::now() {
                        return Err(Error::Timeout(started.elapsed()).into());
                    }
                }
            }
        }
    }

    /// Runs `work` under the call's timeout and cancellation token.
    pub(crate) async fn bounded<T>(
        &self,
        options: &RpcOptions,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let timeout = options.timeout.unwrap_or(self.inner.config.timeout);
        let cancelled = async {
            match &options.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = tokio::time::timeout(timeout, work) => {
                result.map_err(|_| Error::Timeout(timeout))?
            }
            () = cancelled => Err(Error::Cancelled),
        }
    }

    pub(crate) async fn typed<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
        options: &RpcOptions,
    ) -> Result<T> {
        let result = self.rpc(method, params, options).await?;
        serde_json::from_value(result).map_err(|e| Error::InvalidResponse(format!("{method}: {e}")))
    }

    /// Any request: `params` without `_meta` (it is added); the result object.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value> {
        self.rpc(method, params, &RpcOptions::default()).await
    }

    /// `server/discover` (V-04: optional; any request works without it). For a legacy server
    /// the answer is made from its `initialize` result.
    pub async fn discover(&self) -> Result<DiscoverResult> {
        self.typed("server/discover", json!({}), &RpcOptions::default())
            .await
    }

    /// Reads a resource, answering input requests on the way.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let options = RpcOptions {
            name: Some(uri.to_owned()),
            ..Default::default()
        };
        let result = self
            .rpc_rounds("resources/read", json!({"uri": uri}), &options)
            .await?;
        serde_json::from_value(result)
            .map_err(|e| Error::InvalidResponse(format!("resources/read: {e}")))
    }

    /// Renders a prompt, answering input requests on the way.
    pub async fn get_prompt(&self, name: &str, arguments: Value) -> Result<GetPromptResult> {
        let options = RpcOptions {
            name: Some(name.to_owned()),
            ..Default::default()
        };
        let result = self
            .rpc_rounds(
                "prompts/get",
                json!({"name": name, "arguments": arguments}),
                &options,
            )
            .await?;
        serde_json::from_value(result)
            .map_err(|e| Error::InvalidResponse(format!("prompts/get: {e}")))
    }

    /// Completion values for a prompt argument or template variable.
    pub async fn complete(
        &self,
        reference: CompletionReference,
        argument: CompletionArgument,
    ) -> Result<CompleteResult> {
        self.typed(
            "completion/complete",
            json!({"ref": reference, "argument": argument}),
            &RpcOptions::default(),
        )
        .await
    }

    /// Whether [`close`](Client::close) was called on a stdio client.
    pub fn is_closed(&self) -> bool {
        match &self.inner.transport {
            Transport::Stdio(t) => t.is_closed(),
            Transport::Http(_) => false,
        }
    }

    /// The process id of a stdio server, while it runs.
    pub async fn server_pid(&self) -> Option<u32> {
        match &self.inner.transport {
            Transport::Stdio(t) => t.pid().await,
            Transport::Http(_) => None,
        }
    }

    /// How many times the stdio server was started: 1, then one more each time it was found
    /// dead and started again (S-11). `None` over HTTP.
    pub fn server_starts(&self) -> Option<u64> {
        match &self.inner.transport {
            Transport::Stdio(t) => Some(t.generation()),
            Transport::Http(_) => None,
        }
    }

    /// Closes the connection: for a child process, stdin, then SIGTERM, then SIGKILL (S-09).
    pub async fn close(&self) {
        if let Transport::Stdio(t) = &self.inner.transport {
            t.close(self.inner.config.shutdown_grace).await;
        }
    }
}

/// A short description of a reply, for messages.
fn reply_summary(reply: &Reply) -> String {
    let body = reply.message.to_string();
    format!(
        "HTTP {}: {}",
        reply.status,
        body.chars().take(200).collect::<String>()
    )
}
