//! The client: configuration, `_meta` on every request (B-15, B-17), unique ids (B-03),
//! timeouts that may reset on progress under a hard cap (P-07), version negotiation on -32022
//! (V-03), `resultType` checks (B-05, B-06), and re-issue of a request whose stream broke (H-27).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::Instant;
use toolwire_protocol::{
    ClientCapabilities, CompleteResult, CompletionArgument, CompletionReference, DiscoverResult,
    ElicitationCapability, ErrorObject, GetPromptResult, Implementation, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, LoggingMessageParams,
    PROTOCOL_VERSION, ProgressParams, ReadResourceResult, RootsCapability, SamplingCapability,
    TASKS_EXTENSION, UNSUPPORTED_PROTOCOL_VERSION,
};

use crate::error::{Error, Result};
use crate::input::{InputHandlers, elicit_handler, roots_handler, sample_handler};
use crate::tools::ToolCache;
use crate::transport::http::HttpTransport;
use crate::transport::stdio::{StdioCommand, StdioTransport};
use crate::transport::{Outgoing, Transport};

/// Called with each progress notification of a request.
pub type ProgressFn = Arc<dyn Fn(&ProgressParams) + Send + Sync>;

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
    pub(crate) handlers: InputHandlers,
    pub(crate) max_rounds: usize,
    pub(crate) extensions: JsonObject,
    pub(crate) validate_output: bool,
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
            handlers: InputHandlers::default(),
            max_rounds: 8,
            extensions: JsonObject::new(),
            validate_output: true,
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

    /// Answers elicitation requests (and declares `elicitation` with form and URL modes).
    pub fn on_elicit<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(toolwire_protocol::ElicitRequestParams) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<toolwire_protocol::ElicitResult>> + Send + 'static,
    {
        self.handlers.elicit = Some(elicit_handler(handler));
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
        let transport = HttpTransport::new(url.into(), headers, self.bearer.as_deref())?;
        Ok(Client::new(self, Transport::Http(transport)))
    }

    /// A client for a server run as a child process speaking stdio.
    pub async fn spawn(
        self,
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Client> {
        let command = StdioCommand {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
        };
        let transport = StdioTransport::spawn(command).await?;
        Ok(Client::new(self, Transport::Stdio(transport)))
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
    version: Mutex<String>,
    pub(crate) tools: Mutex<Option<ToolCache>>,
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
}

impl Client {
    fn new(config: ClientBuilder, transport: Transport) -> Self {
        let version = config
            .versions
            .first()
            .cloned()
            .unwrap_or_else(|| PROTOCOL_VERSION.to_owned());
        Client {
            inner: Arc::new(Inner {
                transport,
                config,
                next_id: AtomicI64::new(1),
                version: Mutex::new(version),
                tools: Mutex::new(None),
            }),
        }
    }

    /// The capabilities declared on every request: those the handlers can answer (B-20).
    pub fn capabilities(&self) -> ClientCapabilities {
        let handlers = &self.inner.config.handlers;
        let extensions = &self.inner.config.extensions;
        ClientCapabilities {
            elicitation: handlers.elicit.as_ref().map(|_| ElicitationCapability {
                form: Some(JsonObject::new()),
                url: Some(JsonObject::new()),
                ..Default::default()
            }),
            sampling: handlers
                .sample
                .as_ref()
                .map(|_| SamplingCapability::default()),
            roots: handlers.roots.as_ref().map(|_| RootsCapability::default()),
            extensions: (!extensions.is_empty()).then(|| extensions.clone()),
            ..Default::default()
        }
    }

    /// The protocol version requests are sent with (after any negotiation).
    pub fn protocol_version(&self) -> String {
        self.inner
            .version
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn next_id(&self) -> i64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_http(&self) -> bool {
        self.inner.transport.is_http()
    }

    /// Sends a request and returns its result object; the core every method goes through.
    pub(crate) async fn rpc(
        &self,
        method: &str,
        params: Value,
        options: &RpcOptions,
    ) -> Result<Value> {
        let mut negotiated = false;
        let mut reissued = false;
        loop {
            let id = self.next_id();
            let version = self.protocol_version();
            let mut params = params.clone();
            let object = params
                .as_object_mut()
                .ok_or_else(|| Error::InvalidResponse("params must be an object".into()))?;
            let mut meta = json!({
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": self.capabilities(),
            });
            if self.inner.config.send_client_info {
                meta["io.modelcontextprotocol/clientInfo"] = json!(self.inner.config.info);
            }
            if options.progress.is_some() {
                meta["progressToken"] = json!(id);
            }
            object.insert("_meta".into(), meta);
            let body =
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
            let out = Outgoing {
                id,
                method,
                body,
                name: options.name.as_deref(),
                mirrored: &options.mirrored,
                version: &version,
            };
            let message = match self.exchange(&out, options.progress.clone()).await {
                Err(Error::Transport(why)) if why.contains("H-27") && !reissued => {
                    // A broken response stream loses the request: issue it again (H-27).
                    reissued = true;
                    tracing::warn!(
                        method,
                        "the response stream broke; re-issuing the request with a new id"
                    );
                    continue;
                }
                other => other?,
            };
            if let Some(error) = message.get("error") {
                let error: ErrorObject = serde_json::from_value(error.clone())
                    .map_err(|e| Error::InvalidResponse(format!("malformed error: {e}")))?;
                if error.code == UNSUPPORTED_PROTOCOL_VERSION && !negotiated {
                    if let Some(v) = self.mutual_version(&error) {
                        // V-03: retry with a version both sides speak.
                        negotiated = true;
                        *self.inner.version.lock().unwrap_or_else(|p| p.into_inner()) = v;
                        continue;
                    }
                }
                return Err(Error::Rpc(error));
            }
            return self.checked_result(message);
        }
    }

    /// The first of our versions the server lists in `data.supported`.
    fn mutual_version(&self, error: &ErrorObject) -> Option<String> {
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
    fn checked_result(&self, message: Value) -> Result<Value> {
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

    /// One exchange under the timeout: the deadline moves with progress, never past the cap.
    async fn exchange(&self, out: &Outgoing<'_>, progress: Option<ProgressFn>) -> Result<Value> {
        let config = &self.inner.config;
        let started = Instant::now();
        let hard = started + config.max_timeout;
        let deadline = Arc::new(Mutex::new((started + config.timeout).min(hard)));
        let (reset, timeout) = (config.reset_on_progress, config.timeout);
        let moved = deadline.clone();
        let mut on_notification = move |message: Value| match message["method"].as_str() {
            Some("notifications/progress") => {
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
            Some("notifications/message") => {
                if let Ok(log) =
                    serde_json::from_value::<LoggingMessageParams>(message["params"].clone())
                {
                    tracing::info!(level = ?log.level, logger = log.logger.as_deref(), data = %log.data, "server log");
                }
            }
            _ => {}
        };
        let request = self.inner.transport.request(out, &mut on_notification);
        tokio::pin!(request);
        loop {
            let until = *deadline.lock().unwrap_or_else(|p| p.into_inner());
            tokio::select! {
                result = &mut request => return result,
                _ = tokio::time::sleep_until(until) => {
                    if *deadline.lock().unwrap_or_else(|p| p.into_inner()) <= Instant::now() {
                        // Dropping the request cancels it: HTTP closes the stream, stdio sends
                        // notifications/cancelled.
                        return Err(Error::Timeout(started.elapsed()));
                    }
                }
            }
        }
    }

    async fn typed<T: DeserializeOwned>(
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

    /// `server/discover` (V-04: optional; any request works without it).
    pub async fn discover(&self) -> Result<DiscoverResult> {
        self.typed("server/discover", json!({}), &RpcOptions::default())
            .await
    }

    /// Every resource, all pages.
    pub async fn list_resources(&self) -> Result<Vec<toolwire_protocol::Resource>> {
        let mut all = Vec::new();
        self.walk("resources/list", |page: ListResourcesResult| {
            all.extend(page.resources);
            page.next_cursor
        })
        .await?;
        Ok(all)
    }

    /// Every resource template, all pages.
    pub async fn list_resource_templates(
        &self,
    ) -> Result<Vec<toolwire_protocol::ResourceTemplate>> {
        let mut all = Vec::new();
        self.walk(
            "resources/templates/list",
            |page: ListResourceTemplatesResult| {
                all.extend(page.resource_templates);
                page.next_cursor
            },
        )
        .await?;
        Ok(all)
    }

    /// Every prompt, all pages.
    pub async fn list_prompts(&self) -> Result<Vec<toolwire_protocol::Prompt>> {
        let mut all = Vec::new();
        self.walk("prompts/list", |page: ListPromptsResult| {
            all.extend(page.prompts);
            page.next_cursor
        })
        .await?;
        Ok(all)
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

    /// Walks a paginated list: stops at the last page, on a repeated cursor (no progress) or
    /// after 10,000 pages (K-13, K-14).
    pub(crate) async fn walk<P: DeserializeOwned>(
        &self,
        method: &str,
        mut take: impl FnMut(P) -> Option<String>,
    ) -> Result<()> {
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page: P = self.typed(method, params, &RpcOptions::default()).await?;
            match take(page) {
                None => return Ok(()),
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(Error::InvalidResponse(format!(
                        "{method}: the server repeated a cursor"
                    )));
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(Error::InvalidResponse(format!(
            "{method}: more than 10,000 pages"
        )))
    }

    /// Closes the connection: for a child process, stdin, then SIGTERM, then SIGKILL (S-09).
    pub async fn close(&self) {
        if let Transport::Stdio(t) = &self.inner.transport {
            t.close(Duration::from_secs(2)).await;
        }
    }
}
