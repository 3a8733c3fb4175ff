//! Tools from the client's side: `tools/list` walked and cached by `ttlMs` (K-05, K-07), tools
//! with invalid `x-mcp-header` declarations dropped on HTTP (C-08), arguments mirrored into
//! `Mcp-Param-*` headers (H-24) with one re-list on -32020 (H-25), `input_required` rounds
//! answered on the way (`rounds.rs`), and structured output validated (C-04).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use toolwire_protocol::headers::{self as mcp_headers, HeaderParam};
use toolwire_protocol::methods::{CallTool, ListTools, Method};
use toolwire_protocol::schema::Violation;
use toolwire_protocol::{
    CallToolParams, CallToolResult, ClientCapabilities, CreateTaskResult, HEADER_MISMATCH,
    InputResponses, ResultType, Tool,
};

use tokio_util::sync::CancellationToken;
use toolwire_protocol::{LoggingMessageParams, ProgressParams};

use crate::client::answer::Answer;
use crate::client::rounds::{CallRound, RoundAnswers};
use crate::client::tasks::{ResumeTask, TaskFn};
use crate::client::tool_cache::{CachedTool, ToolCache};
use crate::client::{Client, LogFn, ProgressFn, RequestIdFn, RpcOptions};
use crate::error::{Error, Result};

/// Options of one tool call.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// Called with each progress notification (sets `_meta.progressToken`).
    pub progress: Option<ProgressFn>,
    /// Called with each log message the server sends on this call's response stream (HTTP;
    /// on stdio log messages carry no request and go to `tracing`). Ask for them with
    /// [`ClientBuilder::log_level`](crate::ClientBuilder::log_level).
    pub log: Option<LogFn>,
    /// This call's timeout, instead of the client's.
    pub timeout: Option<Duration>,
    /// Cancels the call when cancelled: the request is dropped and the server told.
    pub cancel: Option<CancellationToken>,
    /// Sent with the first request: the answers to the previous round of this same call and
    /// the server's state, for a caller that relays rounds ([`CallOptions::answers`]).
    pub answers: Option<RoundAnswers>,
    /// Makes one round only: an `input_required` result comes back (as
    /// [`Error::InputRequired`], or [`CallRound::InputRequired`] from
    /// [`Client::call_tool_round`]) instead of being answered by the client's handlers.
    pub relay: bool,
    /// The capabilities declared for the server's questions (elicitation, sampling, roots)
    /// on this call's requests, instead of the client's own ([`CallOptions::input_capabilities`]).
    pub input_capabilities: Option<ClientCapabilities>,
    /// The bearer token of this call's requests ([`CallOptions::bearer`]); never printed.
    pub bearer: Option<Arc<str>>,
    /// Told the id of each request sent for this call ([`CallOptions::on_request`]).
    pub on_request: Option<RequestIdFn>,
    /// Lets the server run the call as a task, which the client follows to its end
    /// ([`CallOptions::tasks`]).
    pub tasks: bool,
    /// Called when the server makes the call a task ([`CallOptions::on_task`]).
    pub on_task: Option<TaskFn>,
    /// Continues a task that asked for input instead of calling anew
    /// ([`CallOptions::resume_task`]).
    pub resume: Option<ResumeTask>,
}

impl CallOptions {
    /// Receives progress notifications.
    pub fn on_progress(mut self, f: impl Fn(&ProgressParams) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Receives the server's log messages for this call.
    pub fn on_log(mut self, f: impl Fn(&LoggingMessageParams) + Send + Sync + 'static) -> Self {
        self.log = Some(Arc::new(f));
        self
    }

    /// Waits at most `timeout` (resetting on progress if the client does, P-07).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Cancels the call when `token` is cancelled.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Sends `answers` (the answers to the previous round of this same call, and the state
    /// the server gave with it) with the request: the retry of a relayed round (M-11, M-12).
    pub fn answers(mut self, answers: RoundAnswers) -> Self {
        self.answers = Some(answers);
        self
    }

    /// Relays the server's questions instead of answering them: the call makes one round,
    /// and an `input_required` result comes back for the caller to answer (a gateway passes
    /// it on to its own caller). See [`Client::call_tool_round`].
    pub fn relay_input(mut self) -> Self {
        self.relay = true;
        self
    }

    /// Declares `capabilities`' elicitation, sampling and roots on this call's requests
    /// instead of the client's own (a 2026-07-28 server reads them from each request, B-15):
    /// a relay declares what its own caller can answer, so that the server asks, or refuses
    /// with -32021, as it would ask or refuse that caller (M-05). The client's other
    /// capabilities (extensions) are declared as they are. A legacy session declared its
    /// capabilities once, at `initialize`: there this changes nothing.
    pub fn input_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.input_capabilities = Some(capabilities);
        self
    }

    /// Sends this call's requests (HTTP) with `token` as the bearer instead of the configured
    /// `Authorization` header or the OAuth flow's token, and never runs the flow for them: a
    /// relay calling for one of its callers with a token obtained for that caller (an RFC 8693
    /// exchange). A refusal of it is the call's error.
    pub fn bearer(mut self, token: impl Into<Arc<str>>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Tells `f` each request sent for this call, its connection and id, before it is sent (a
    /// request lost with its stream is sent again with a new id, H-27): the `related` id and
    /// connection a legacy server's request during the call is handed to its handler with
    /// ([`Asked`](crate::Asked)), so that a relay can tell which of its calls a question
    /// belongs to. Ids are a connection's own: match both.
    pub fn on_request(mut self, f: impl Fn(crate::Sent) + Send + Sync + 'static) -> Self {
        self.on_request = Some(Arc::new(f));
        self
    }

    /// Declares the tasks extension on this call's requests, so that the server may run the
    /// call as a task (a tool it runs only as a task needs this), and follows such a task to
    /// its end: `tasks/get` at the server's `pollIntervalMs`, its input requests answered by
    /// the handlers (or, relaying, returned as [`Error::InputRequired`] for
    /// [`CallOptions::resume_task`]), its result returned as the call's. A call cancelled or
    /// dropped while its task runs cancels the task (`tasks/cancel`). A 2025-11-25 server is
    /// called as before (its tasks are another protocol).
    pub fn tasks(mut self) -> Self {
        self.tasks = true;
        self
    }

    /// Calls `f` when the server makes this call a task (with [`CallOptions::tasks`]), before
    /// the client follows it.
    pub fn on_task(mut self, f: impl Fn(&CreateTaskResult) + Send + Sync + 'static) -> Self {
        self.on_task = Some(Arc::new(f));
        self
    }

    /// Continues the task `task_id`, which stopped for input while this client relayed it,
    /// instead of calling the tool anew: `responses` go to it with `tasks/update`, and the
    /// task is followed to its end as with [`CallOptions::tasks`].
    pub fn resume_task(mut self, task_id: impl Into<String>, responses: InputResponses) -> Self {
        self.tasks = true;
        self.resume = Some(ResumeTask {
            task_id: task_id.into(),
            responses,
        });
        self
    }
}

impl CallOptions {
    /// The request path's options for a request about `name` (its `Mcp-Name`).
    pub(crate) fn into_rpc(self, name: &str) -> RpcOptions {
        RpcOptions {
            name: Some(name.to_owned()),
            progress: self.progress,
            log: self.log,
            timeout: self.timeout,
            cancel: self.cancel,
            answers: self.answers,
            relay: self.relay,
            input_capabilities: self.input_capabilities,
            bearer: self.bearer,
            on_request: self.on_request,
            tasks: self.tasks,
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("progress", &self.progress.is_some())
            .field("log", &self.log.is_some())
            .field("timeout", &self.timeout)
            .field("cancel", &self.cancel.is_some())
            .field("answers", &self.answers.as_ref().map(|a| a.responses.len()))
            .field("relay", &self.relay)
            .field("input_capabilities", &self.input_capabilities)
            .field("bearer", &self.bearer.is_some())
            .field("tasks", &self.tasks)
            .field("on_task", &self.on_task.is_some())
            .field("resume", &self.resume)
            .finish()
    }
}

/// Whether finding a tool's definition lists the tools first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    /// Only when nothing is cached.
    IfEmpty,
    /// Always: the server said the declarations changed (H-25).
    Again,
}

/// Which cached tool list will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freshness {
    /// Only one still within its `ttlMs` (K-05).
    Fresh,
    /// Any, however old: when listing again failed (K-07).
    Any,
}

impl Client {
    /// The server's tools: from the cache while fresh (`ttlMs`, K-05), else listed again; if
    /// listing fails and an older list exists, the older list is served (K-07).
    pub async fn list_tools(&self) -> Result<Vec<Tool>> {
        if let Some(tools) = self.cached_tools(Freshness::Fresh) {
            return Ok(tools);
        }
        match self.refresh_tools().await {
            Ok(tools) => Ok(tools),
            Err(error) => match self.cached_tools(Freshness::Any) {
                Some(stale) => {
                    // K-07
                    tracing::warn!(%error, "tools/list failed; using the previous list");
                    Ok(stale)
                }
                None => Err(error),
            },
        }
    }

    /// Lists the tools again, whatever the cache says.
    pub async fn refresh_tools(&self) -> Result<Vec<Tool>> {
        let epoch = self.inner.tools_epoch.load(Ordering::Acquire);
        let pages = self.walk::<ListTools, Tool>().await?;
        // The list is as fresh as its stalest page.
        let ttl_ms = pages.iter().map(|p| p.ttl_ms).min().unwrap_or(0);
        let tools: Vec<Tool> = pages.into_iter().flat_map(|p| p.items).collect();
        // A change announced while the pages were walked makes this list stale at once (K-09).
        let changed = self.inner.tools_epoch.load(Ordering::Acquire) != epoch;
        let ttl = if changed {
            Duration::ZERO
        } else {
            Duration::from_millis(ttl_ms)
        };
        let mut cache = self.build_cache(tools, ttl);
        // What the server said, even when the list is stale at once.
        cache.ttl = Duration::from_millis(ttl_ms);
        let listed = cache.order.iter().map(|t| t.definition.clone()).collect();
        *self.inner.tools.lock().unwrap_or_else(|p| p.into_inner()) = Some(cache);
        Ok(listed)
    }

    /// Whether tool arguments are mirrored into headers: Streamable HTTP at 2026-07-28 (C-08).
    fn mirrors_headers(&self) -> bool {
        self.is_http() && !self.is_legacy()
    }

    /// Forgets the tool list (e.g. after `notifications/tools/list_changed`, K-09).
    pub fn invalidate_tools(&self) {
        self.inner.tools_epoch.fetch_add(1, Ordering::AcqRel);
        *self.inner.tools.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// How long the last tool list said it stays fresh (its `ttlMs`, the shortest of its
    /// pages'); `None` before a list.
    pub fn tools_ttl(&self) -> Option<std::time::Duration> {
        let cache = self.inner.tools.lock().unwrap_or_else(|p| p.into_inner());
        cache.as_ref().map(|c| c.ttl)
    }

    /// The tools the last list had that are not exposed, by name, with the reason: those
    /// whose `x-mcp-header` declarations are invalid (C-08, HTTP only).
    pub fn dropped_tools(&self) -> Vec<(String, String)> {
        let cache = self.inner.tools.lock().unwrap_or_else(|p| p.into_inner());
        let mut dropped: Vec<(String, String)> = cache
            .as_ref()
            .map(|c| c.dropped.clone().into_iter().collect())
            .unwrap_or_default();
        dropped.sort();
        dropped
    }

    /// The cached list, if there is one of the freshness asked for.
    fn cached_tools(&self, freshness: Freshness) -> Option<Vec<Tool>> {
        let cache = self.inner.tools.lock().unwrap_or_else(|p| p.into_inner());
        let cache = cache.as_ref()?;
        (freshness == Freshness::Any || Instant::now() < cache.fresh_until)
            .then(|| cache.order.iter().map(|t| t.definition.clone()).collect())
    }

    fn build_cache(&self, tools: Vec<Tool>, ttl: Duration) -> ToolCache {
        let mut order = Vec::new();
        let mut dropped = HashMap::new();
        for tool in tools {
            let headers = match mcp_headers::header_params(&tool.input_schema) {
                Ok(headers) => headers,
                Err(problem) if self.mirrors_headers() => {
                    // C-08: a tool whose header declarations are invalid is not exposed.
                    tracing::warn!(tool = %tool.name, %problem, "dropping a tool with an invalid x-mcp-header declaration");
                    dropped.insert(tool.name.clone(), problem.to_string());
                    continue;
                }
                // Other transports may ignore the annotation.
                Err(_) => Vec::new(),
            };
            order.push(Arc::new(CachedTool {
                definition: tool,
                headers,
                formats: self.inner.config.output_formats,
                output: OnceLock::new(),
            }));
        }
        let by_name = order
            .iter()
            .map(|t| (t.definition.name.clone(), t.clone()))
            .collect();
        ToolCache {
            order,
            by_name,
            dropped,
            fresh_until: Instant::now() + ttl,
            ttl,
        }
    }

    /// The cached entry for `name`, if the tools need not be listed first (`None` if they do).
    fn cached_entry(&self, name: &str, list: List) -> Option<Result<Option<Arc<CachedTool>>>> {
        if list == List::Again {
            return None;
        }
        let cache = self.inner.tools.lock().unwrap_or_else(|p| p.into_inner());
        let cache = cache.as_ref()?;
        if let Some(reason) = cache.dropped.get(name) {
            return Some(Err(Error::UnknownTool(format!(
                "{name} (not exposed: {reason})"
            ))));
        }
        Some(Ok(cache.by_name.get(name).cloned()))
    }

    /// The cached entry for `name`, listing the tools first (within the call's time and
    /// cancellation) when there is no list yet or `list` says to. Listing runs boxed: its
    /// future is large, and a call that finds the list cached (nearly every call) would carry
    /// it, and copy it, at each level of its own future.
    async fn listed_entry(
        &self,
        rpc: &RpcOptions,
        name: &str,
        list: List,
    ) -> Result<Option<Arc<CachedTool>>> {
        if let Some(entry) = self.cached_entry(name, list) {
            return entry;
        }
        let listed = async {
            self.refresh_tools().await?;
            self.cached_entry(name, List::IfEmpty).unwrap_or(Ok(None))
        };
        Box::pin(self.bounded(rpc, listed)).await
    }

    /// Calls a tool with its arguments (a JSON object, or `null` for none). A tool that fails
    /// returns `Ok` with `is_error()` set: its message is for the model (C-05).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<CallToolResult> {
        self.call_tool_with(name, arguments, CallOptions::default())
            .await
    }

    /// One round of a tool call: like [`Client::call_tool_with`], except that a server that
    /// needs input gets its `input_required` result returned rather than answered by the
    /// handlers. Answer its requests and call again with the same name and arguments and
    /// [`CallOptions::answers`] (the answers and the `requestState` verbatim, M-11, M-12).
    pub async fn call_tool_round(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallRound> {
        match self
            .call_tool_with(name, arguments, options.relay_input())
            .await
        {
            Ok(result) => Ok(CallRound::Complete(Box::new(result))),
            Err(Error::InputRequired(input)) => Ok(CallRound::InputRequired(input)),
            Err(error) => Err(error),
        }
    }

    /// Calls a tool with options (progress, log, timeout, cancellation). With output
    /// validation on (the default), the tool's definition is known before the call (listed if
    /// need be): a tool whose `outputSchema` cannot be used is not called, and its
    /// `structuredContent` is checked against the definition, fetched again if the list changed
    /// during the call (C-04, K-09).
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<CallToolResult> {
        if !(arguments.is_object() || arguments.is_null()) {
            return Err(Error::InvalidArguments(format!(
                "the arguments of {name} must be a JSON object, not {arguments}"
            )));
        }
        let typed = CallToolParams {
            name: name.to_owned(),
            arguments: match arguments {
                Value::Object(members) => Some(members),
                _ => None,
            },
            ..Default::default()
        };
        let params = crate::client::params(&typed);
        // The arguments moved in and out again, not copied.
        let arguments = typed.arguments.map(Value::Object).unwrap_or_default();
        let validate = self.inner.config.validate_output;
        let (on_task, resume) = (options.on_task.clone(), options.resume.clone());
        let mut rpc = options.into_rpc(name);
        if let Some(resume) = resume {
            // A task that asked for input: answered, and followed on; nothing is called anew.
            let epoch = self.inner.tools_epoch.load(Ordering::Acquire);
            // Boxed, as is following a task below: rare, and large.
            let result = Box::pin(self.resume_task(resume, &rpc)).await?;
            return self
                .completed(name, Answer::Tree(result), None, epoch, &rpc)
                .await;
        }
        let mut relisted = false;
        loop {
            let epoch = self.inner.tools_epoch.load(Ordering::Acquire);
            // On HTTP the tool's header declarations decide which arguments are mirrored; the
            // output check needs the definition on every transport. Listing is part of the call.
            let entry = if self.mirrors_headers() || validate {
                let list = if relisted { List::Again } else { List::IfEmpty };
                self.listed_entry(&rpc, name, list).await?
            } else {
                None
            };
            if let (true, Some(entry)) = (validate, &entry) {
                entry.output_schema()?;
            }
            if self.mirrors_headers() {
                rpc.mirrored = entry
                    .as_ref()
                    .map(|t| mirror(&t.headers, &arguments))
                    .unwrap_or_default();
            }
            let answered = self.rpc_rounds_answer(CallTool::METHOD, &params, &rpc);
            match answered.await {
                Err(Error::Rpc(e))
                    if e.code == HEADER_MISMATCH && self.mirrors_headers() && !relisted =>
                {
                    // H-25: the declarations may have changed; list again and retry once.
                    relisted = true;
                    continue;
                }
                Err(e) => return Err(e),
                Ok(answer) if answer.is(&ResultType::InputRequired) => {
                    // Only a relaying call gets here: the others answer every round.
                    let input = answer.read("input_required")?;
                    return Err(Error::InputRequired(Box::new(input)));
                }
                Ok(answer) if rpc.tasks && answer.is(&ResultType::Task) => {
                    let task = answer.into_value()?;
                    let result = Box::pin(self.follow_task(task, on_task.as_ref(), &rpc)).await?;
                    let result = Answer::Tree(result);
                    return self.completed(name, result, entry, epoch, &rpc).await;
                }
                Ok(result) => return self.completed(name, result, entry, epoch, &rpc).await,
            }
        }
    }

    /// A call's complete result, read and checked against the tool's `outputSchema`.
    async fn completed(
        &self,
        name: &str,
        result: Answer,
        entry: Option<Arc<CachedTool>>,
        epoch: u64,
        rpc: &RpcOptions,
    ) -> Result<CallToolResult> {
        let result = result.read::<CallToolResult>(CallTool::METHOD)?;
        if self.inner.config.validate_output && !result.is_error() {
            let tool = self.definition_after(name, entry, epoch, rpc).await?;
            if let Some(tool) = tool {
                check_output(&tool, &result)?;
            }
        }
        Ok(result)
    }

    /// The definition to check a result against: the one the call started with, unless the
    /// list changed meanwhile (K-09) or there was none; then the current list, fetched if it
    /// was emptied. A tool the server does not list at all has no schema to check against.
    async fn definition_after(
        &self,
        name: &str,
        before: Option<Arc<CachedTool>>,
        epoch: u64,
        options: &RpcOptions,
    ) -> Result<Option<Arc<CachedTool>>> {
        if before.is_some() && self.inner.tools_epoch.load(Ordering::Acquire) == epoch {
            return Ok(before);
        }
        let now = self.listed_entry(options, name, List::IfEmpty).await?;
        Ok(now.or(before))
    }
}

/// The `Mcp-Param-*` headers for `arguments` (H-24): each declared parameter with a value, as is
/// for strings, decimal for integers, `true`/`false`, encoded when not plain ASCII (H-23).
pub(crate) fn mirror(params: &[HeaderParam], arguments: &Value) -> Vec<(String, String)> {
    params
        .iter()
        .filter_map(|p| {
            let rendered = p.render(p.value_in(arguments)?)?;
            Some((
                format!("Mcp-Param-{}", p.name),
                mcp_headers::encode_value(&rendered),
            ))
        })
        .collect()
}

/// Checks `structuredContent` against the tool's `outputSchema`, compiled once (C-04, J-05).
fn check_output(tool: &CachedTool, result: &CallToolResult) -> Result<()> {
    let Some(compiled) = tool.output_schema()? else {
        return Ok(());
    };
    match &result.structured_content {
        Some(value) => {
            let violations =
                compiled.violations(value, toolwire_protocol::schema::REPORTED_VIOLATIONS);
            if violations.is_empty() {
                Ok(())
            } else {
                Err(Error::InvalidOutput(violations.first))
            }
        }
        None => Err(Error::InvalidOutput(vec![Violation {
            path: String::new(),
            message: "the tool declares an outputSchema but returned no structuredContent".into(),
        }])),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use toolwire_protocol::headers::ParamKind;

    #[test]
    fn mirrors_declared_values_only() {
        let p = |name: &str, key: &str, kind| HeaderParam {
            name: name.into(),
            path: vec![key.into()],
            kind,
        };
        let params = [
            p("Region", "region", ParamKind::String),
            p("Priority", "priority", ParamKind::Integer),
            p("Verbose", "verbose", ParamKind::Boolean),
            p("Missing", "missing", ParamKind::String),
        ];
        let args = json!({"region": "Hello, 世界", "priority": 42, "verbose": null, "other": 1});
        assert_eq!(
            mirror(&params, &args),
            [
                (
                    "Mcp-Param-Region".to_owned(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".to_owned()
                ),
                ("Mcp-Param-Priority".to_owned(), "42".to_owned())
            ]
        );
    }
}
