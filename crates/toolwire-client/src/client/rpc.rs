//! The request path every method goes through: `_meta` on every request (B-15, B-17), unique
//! ids (B-03), timeouts that may reset on progress under a hard cap (P-07), cancellation,
//! version negotiation on -32022 (V-03), `resultType` checks (B-05, B-06), re-issue of a
//! request whose stream or process was lost (H-27, S-11), and the fallback to a legacy session
//! the era module settles.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::time::Instant;
use toolwire_protocol::methods::{Discover, Method};
use toolwire_protocol::{
    ClientCapabilities, ErrorObject, JsonObject, LoggingMessageParams, META_CLIENT_CAPABILITIES,
    META_PROGRESS_TOKEN, META_PROTOCOL_VERSION, NOTIFICATION_MESSAGE, NOTIFICATION_PROGRESS,
    ProgressParams, TASKS_EXTENSION, UNSUPPORTED_PROTOCOL_VERSION,
};

use crate::client::answer::Answer;
use crate::client::envelope::{Envelope, Meta, Params};
use crate::client::{Client, RpcOptions, is_modern_error, params as params_value};
use crate::error::{Error, Result};
use crate::state::Era;
use crate::trace::{self, TraceContext};
use crate::transport::{Failure, Outgoing, Reply};

impl Client {
    /// The body of a request in `era`: modern requests carry the full `_meta` (B-15), legacy
    /// ones only a progress token.
    pub(crate) fn envelope(
        &self,
        era: &Era,
        id: i64,
        method: &str,
        params: &Value,
        progress: Progress,
    ) -> Result<String> {
        self.envelope_with(era, id, method, params, progress, Declared::default())
    }

    /// [`Client::envelope`], declaring what `declared` says on top of the client's own
    /// capabilities.
    pub(crate) fn envelope_with(
        &self,
        era: &Era,
        id: i64,
        method: &str,
        params: &Value,
        progress: Progress,
        Declared {
            inputs,
            tasks,
            trace,
        }: Declared<'_>,
    ) -> Result<String> {
        let members = params
            .as_object()
            .ok_or_else(|| Error::InvalidResponse("params must be an object".into()))?;
        // This request's own keys; a modern request's `_meta` has the client's keys too.
        let mut own: Vec<(&str, Value)> = Vec::with_capacity(4);
        let empty = JsonObject::new();
        let mut base = &empty;
        if !matches!(era, Era::Legacy(_)) {
            base = &self.inner.request_meta;
            if inputs.is_some() || tasks {
                let mut declared = self.capabilities();
                if let Some(inputs) = inputs {
                    declared.elicitation.clone_from(&inputs.elicitation);
                    declared.sampling.clone_from(&inputs.sampling);
                    declared.roots.clone_from(&inputs.roots);
                }
                if tasks {
                    declared
                        .extensions
                        .get_or_insert_with(Default::default)
                        .insert(TASKS_EXTENSION.into(), json!({}));
                }
                let declared = serde_json::to_value(declared).expect("capabilities serialize");
                own.push((META_CLIENT_CAPABILITIES, declared));
            }
            own.push((
                META_PROTOCOL_VERSION,
                Value::String(self.state().version.clone()),
            ));
        }
        if progress == Progress::Wanted {
            own.push((META_PROGRESS_TOKEN, json!(id)));
        }
        if let Some(trace) = trace {
            trace.write_pairs(&mut own);
        }
        let envelope = Envelope {
            jsonrpc: "2.0",
            id,
            method,
            params: Params {
                members,
                meta: Meta { base, own: &own },
            },
        };
        Ok(serde_json::to_string(&envelope).expect("a request serializes"))
    }

    /// Sends a request and returns its result object.
    pub(crate) async fn rpc(
        &self,
        method: &str,
        params: &Value,
        options: &RpcOptions,
    ) -> Result<Value> {
        self.rpc_answer(method, params, options).await?.into_value()
    }

    /// Sends a request and returns its checked result, to be read once into the caller's
    /// type; the core every method goes through, inside the request's span (see `trace`).
    pub(crate) async fn rpc_answer(
        &self,
        method: &str,
        params: &Value,
        options: &RpcOptions,
    ) -> Result<Answer> {
        use tracing::Instrument as _;
        let span = trace::request_span(method, options.name.as_deref());
        if span.is_disabled() {
            return self.attempts(method, params, options).await;
        }
        let outcome = self
            .attempts(method, params, options)
            .instrument(span.clone())
            .await;
        let ended = outcome
            .as_ref()
            .map(|answer| trace::ToolError(answer.is_tool_error()));
        trace::finish(&span, ended);
        outcome
    }

    /// [`Client::rpc`] without the span. Each attempt settles the era, sends, and reads the
    /// reply or the failure; a step may ask for one more attempt, and [`Retries`] makes each
    /// recovery happen at most once.
    async fn attempts(&self, method: &str, params: &Value, options: &RpcOptions) -> Result<Answer> {
        let mut retries = Retries::default();
        loop {
            let token = self.token_generation();
            // Settling the era (probe, initialize) counts against this call's timeout and
            // cancellation too.
            // Settling runs boxed: its future is large, and most requests find the era settled.
            let settled = match self.settled_era() {
                Some(era) => Ok(era),
                None => Box::pin(self.bounded(options, self.era_for_request())).await,
            };
            let era = match settled {
                Ok(era) => era,
                Err(error) => {
                    let again =
                        self.authorized_again(&error, token, &mut retries.authorizations, options);
                    if Box::pin(again).await? {
                        continue;
                    }
                    return Err(error);
                }
            };
            if let (Era::Legacy(session), Discover::METHOD) = (&era, method) {
                // A legacy server has no discover: its initialize result stands in (also after
                // a fallback on this very request).
                return Ok(Answer::Tree(
                    serde_json::to_value(session.discover_result()?)
                        .expect("a discover result serializes"),
                ));
            }
            let sent = Sent {
                era: &era,
                method,
                token,
                options,
            };
            let step = match self.attempt(&era, method, params, options).await {
                Ok(reply) => self.on_reply(&sent, reply, &mut retries).await?,
                // Boxed: rare, and larger than the rest of an attempt.
                Err(failure) => Box::pin(self.on_failure(&sent, failure, &mut retries)).await?,
            };
            match step {
                Step::Again => continue,
                Step::Done(result) => return Ok(result),
            }
        }
    }

    /// Sends the request once in `era`, with a new id.
    async fn attempt(
        &self,
        era: &Era,
        method: &str,
        params: &Value,
        options: &RpcOptions,
    ) -> Result<Reply, Failure> {
        let id = self.next_id();
        if let Some(sent) = &options.on_request {
            sent(crate::input::Sent {
                connection: self.connection(),
                id,
            });
        }
        let progress = match options.progress {
            Some(_) => Progress::Wanted,
            None => Progress::Unwanted,
        };
        trace::sent(id);
        // The context of this request's span, for the server to continue (OT-01).
        let trace = TraceContext::current();
        let declared = Declared {
            inputs: options.input_capabilities.as_ref(),
            tasks: options.tasks,
            trace: Some(&trace),
        };
        let body = self.envelope_with(era, id, method, params, progress, declared)?;
        let (version, session) = self.wire_identity(era);
        let out = Outgoing {
            id: Some(id),
            method,
            body,
            name: options.name.as_deref(),
            mirrored: &options.mirrored,
            version: Some(&version),
            session: session.as_deref(),
            legacy: matches!(era, Era::Legacy(_)),
            bearer: options.bearer.as_deref(),
            trace: Some(&trace),
        };
        self.exchange(&out, options).await
    }

    /// A reply: a legacy server's refusal falls back once; an error is returned, except an
    /// unsupported version, negotiated once (V-03); a result is checked (B-05, B-06).
    async fn on_reply(&self, sent: &Sent<'_>, reply: Reply, retries: &mut Retries) -> Result<Step> {
        let (era, token) = (sent.era, sent.token);
        if let Some(flow) = self.inner.transport.auth() {
            flow.confirm(token);
        }
        if !retries.fell_back && self.is_legacy_signal(era, &reply) {
            retries.fell_back = true;
            if self.fall_back(era, &reply_summary(&reply)).await? {
                return Ok(Step::Again);
            }
            // Not a legacy server after all: the reply stands.
        }
        let message = reply.message;
        if let Some(error) = message.error() {
            let error: ErrorObject = serde_json::from_value(error.clone())
                .map_err(|e| Error::InvalidResponse(format!("malformed error: {e}")))?;
            if is_modern_error(error.code) {
                self.confirm_modern(era);
            }
            if error.code == UNSUPPORTED_PROTOCOL_VERSION
                && !retries.negotiated
                && !matches!(era, Era::Legacy(_))
            {
                if let Some(v) = self.mutual_version(&error) {
                    // V-03: retry with a version both sides speak.
                    retries.negotiated = true;
                    self.state().version = v;
                    return Ok(Step::Again);
                }
            }
            return Err(Error::Rpc(error));
        }
        self.confirm_modern(era);
        self.checked_result(message, sent.options.tasks)
            .map(Step::Done)
    }

    /// A failure before any reply: a lost request is issued again once (H-27, S-11), an
    /// expired legacy session renewed once, a legacy server's HTTP refusal falls back once
    /// (V-12), a want of authorization answered by the OAuth flow; anything else is
    /// the call's error.
    async fn on_failure(
        &self,
        sent: &Sent<'_>,
        failure: Failure,
        retries: &mut Retries,
    ) -> Result<Step> {
        let Sent {
            era,
            method,
            token,
            options,
        } = *sent;
        match failure {
            Failure::Lost(why) if !retries.reissued => {
                // The request died with its stream or process: issue it again with a new
                // id (H-27; on stdio the server is started again first, S-11).
                retries.reissued = true;
                tracing::warn!(method, %why, "the request was lost; re-issuing it with a new id");
                Ok(Step::Again)
            }
            Failure::SessionExpired if !retries.renewed => {
                retries.renewed = true;
                tracing::warn!("the legacy session expired; initializing again");
                self.forget_legacy_session(era);
                Ok(Step::Again)
            }
            Failure::Error(Error::Http { status, body })
                if !retries.fell_back && self.is_legacy_status(era, status) =>
            {
                retries.fell_back = true;
                if self
                    .fall_back(era, &format!("HTTP {status}: {body}"))
                    .await?
                {
                    Ok(Step::Again)
                } else {
                    Err(Error::Http { status, body })
                }
            }
            other => {
                let error = other.into_error();
                if self
                    .authorized_again(&error, token, &mut retries.authorizations, options)
                    .await?
                {
                    Ok(Step::Again)
                } else {
                    Err(error)
                }
            }
        }
    }

    /// The generation of the OAuth token requests are sent with now (0 without a flow).
    pub(crate) fn token_generation(&self) -> u64 {
        self.inner
            .transport
            .auth()
            .map_or(0, |flow| flow.bearer().0)
    }

    /// Answers a refusal for want of authorization with the OAuth flow, at most
    /// [`MAX_ATTEMPTS`](crate::auth::flow::MAX_ATTEMPTS) times per request: `true` when
    /// the request should be sent again with the new token. A request sent with the token of
    /// generation `token`. The flow may wait for a person: it is bounded by the caller's
    /// cancellation and the authorizer's own wait, not by the request's timeout.
    pub(crate) async fn authorized_again(
        &self,
        error: &Error,
        token: u64,
        attempts: &mut usize,
        options: &RpcOptions,
    ) -> Result<bool> {
        let Error::Unauthorized { status, challenge } = error else {
            return Ok(false);
        };
        let Some(flow) = self.inner.transport.auth() else {
            return Ok(false);
        };
        // A request sent with a token of its caller's is not the flow's to authorize again.
        if options.bearer.is_some() {
            return Ok(false);
        }
        if *attempts >= crate::auth::flow::MAX_ATTEMPTS
            || !crate::auth::flow::answerable(*status, challenge.as_deref())
        {
            return Ok(false);
        }
        *attempts += 1;
        let cancelled = async {
            match &options.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answered = flow.answer(token, *status, challenge.as_deref()) => {
                answered.map(|()| true).map_err(Error::from)
            }
            () = cancelled => Err(Error::Cancelled),
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
            Some(NOTIFICATION_PROGRESS) if message.get("id").is_none() => {
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
            Some(NOTIFICATION_MESSAGE) if message.get("id").is_none() => {
                if let Ok(params) =
                    serde_json::from_value::<LoggingMessageParams>(message["params"].clone())
                {
                    match &log {
                        Some(f) => f(&params),
                        None => crate::client::incoming::trace_log(&params),
                    }
                }
            }
            // A legacy server's request on this request's own stream is about it.
            _ => client.incoming_for(message, out.id),
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

    /// Sends the typed request `M` and reads its typed result.
    pub(crate) async fn call<M: Method>(
        &self,
        params: &M::Params,
        options: &RpcOptions,
    ) -> Result<M::Result> {
        let result = self.rpc(M::METHOD, &params_value(params), options).await?;
        read_result::<M>(result)
    }

    /// Any request: `params` without `_meta` (it is added); the result object.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value> {
        self.rpc(method, &params, &RpcOptions::default()).await
    }
}

/// The typed result of `M`, or an error naming the method.
pub(crate) fn read_result<M: Method>(result: Value) -> Result<M::Result> {
    serde_json::from_value(result)
        .map_err(|e| Error::InvalidResponse(format!("{}: {e}", M::METHOD)))
}

/// Whether a request asks for progress notifications: with a token (its id) in its `_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The caller follows progress.
    Wanted,
    /// Nobody follows it: no token.
    Unwanted,
}

/// The recoveries one request has made: each at most once, the OAuth answers counted.
#[derive(Debug, Default)]
struct Retries {
    /// Retried with a version both sides speak (V-03).
    negotiated: bool,
    /// Issued again after its stream or process was lost (H-27, S-11).
    reissued: bool,
    /// Sent again in a new legacy session after the old one expired.
    renewed: bool,
    /// Fell back to a legacy session (V-12).
    fell_back: bool,
    /// Refusals answered with the OAuth flow.
    authorizations: usize,
}

/// What one attempt was sent with, for the step that reads its outcome.
#[derive(Clone, Copy)]
struct Sent<'a> {
    era: &'a Era,
    method: &'a str,
    /// The generation of the OAuth token it carried.
    token: u64,
    options: &'a RpcOptions,
}

/// What a request declares on top of the client's own capabilities (2026-07-28 only).
#[derive(Default, Clone, Copy)]
pub(crate) struct Declared<'a> {
    /// The capabilities for the server's questions (elicitation, sampling, roots) instead of
    /// the client's own: a relay declares what its own caller can answer.
    pub(crate) inputs: Option<&'a ClientCapabilities>,
    /// The tasks extension: the call may become a task the client follows.
    pub(crate) tasks: bool,
    /// The trace context of the request's span, written into `_meta` (OT-01).
    pub(crate) trace: Option<&'a TraceContext>,
}

/// What the request path does after one attempt.
enum Step {
    /// Send the request again.
    Again,
    /// The result.
    Done(Answer),
}

/// A short description of a reply, for messages.
fn reply_summary(reply: &Reply) -> String {
    let body = reply.message.text();
    format!(
        "HTTP {}: {}",
        reply.status,
        body.chars().take(200).collect::<String>()
    )
}
