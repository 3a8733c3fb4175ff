//! The request context a handler receives: what the client declared on this request, a
//! cancellation token, request-scoped progress and log messages, and the answers and state
//! of the previous round of a multi round-trip request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ClientCapabilities, CreateMessageResult, ElicitAction, ErrorObject, Implementation,
    InputResponse, InputResponses, LoggingLevel, LoggingMessageParams, NOTIFICATION_MESSAGE,
    NOTIFICATION_PROGRESS, Notification, ProgressParams, RequestId, RequestMeta, Root,
    SamplingCapability,
};

use crate::request::mrtr::{Elicited, ToolError};
use crate::request::outbound::{Frame, Outbound};

/// What a handler knows about the request it serves. Cheap to clone.
///
/// Everything here comes from the request's own `_meta`, never from the connection (B-11).
#[derive(Debug, Clone)]
pub struct RequestContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: RequestId,
    /// Shared with the connection's next request when that sends the same `_meta` text
    /// (`request::last_meta`).
    meta: Arc<RequestMeta>,
    cancel: CancellationToken,
    /// Fires when the transport or the server is closing; listen streams then end (L-10).
    closing: CancellationToken,
    /// `None` when the client cannot receive request-scoped notifications (a JSON-only HTTP reply).
    outbound: Option<Outbound>,
    /// Whether the server declared the `logging` capability (P-16).
    logging: Logging,
    /// The last progress value sent, as `f64` bits; progress must increase (P-12).
    last_progress: AtomicU64,
    /// The answers and state of the previous round (MRTR), set once before the handler runs.
    round: std::sync::OnceLock<Round>,
    /// Who is calling, as established by the transport (authentication); binds request state.
    principal: Option<Arc<str>>,
    /// The OAuth scopes granted to the caller; `None` when the transport checks no tokens.
    scopes: Option<Arc<[String]>>,
    /// Every claim of the caller's access token; `None` when the transport checks no tokens.
    claims: Option<Claims>,
    /// The caller's access token itself, only where the resource server was asked to hand it
    /// to handlers ([`OAuth::token_to_handlers`](crate::http::OAuth::token_to_handlers)).
    token: Option<AccessToken>,
    /// The client (HTTP): its network address, or what a trusted proxy said of it; `None` on
    /// stdio.
    address: Option<crate::safety::limits::ClientId>,
    /// Set once the final response is on its way: nothing more may be sent for it (P-13). The
    /// lock is held across each send, so no notification can follow `finish`.
    finished: tokio::sync::Mutex<bool>,
    /// Makes the call a task when notified: set only for the first step of a call of a
    /// [`Tool::deferred_task`](crate::Tool::deferred_task) tool that may run as a task.
    task_start: Option<Arc<tokio::sync::Notify>>,
    /// How the request arrived (its transport and HTTP trace headers), for its span and its
    /// metrics.
    incoming: crate::request::incoming::Incoming,
}

const NO_PROGRESS: u64 = u64::MAX;

/// An access token's claims, shared with the verified token.
pub(crate) type Claims = Arc<serde_json::Map<String, serde_json::Value>>;

/// A caller's access token, never printed.
#[derive(Clone)]
pub(crate) struct AccessToken(pub(crate) Arc<str>);

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessToken(..)")
    }
}

/// Whether the server declared the `logging` capability (P-16): handlers' log messages are
/// sent only if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logging {
    Declared,
    Undeclared,
}

impl RequestContext {
    pub(crate) fn new(
        id: RequestId,
        meta: impl Into<Arc<RequestMeta>>,
        cancel: CancellationToken,
        closing: CancellationToken,
        outbound: Option<Outbound>,
        logging: Logging,
    ) -> Self {
        RequestContext {
            inner: Arc::new(Inner {
                id,
                meta: meta.into(),
                // The handler's own token: cancelled with the request, and alone when its
                // deadline passes, so the transport still sends the timed-out result.
                cancel: cancel.child_token(),
                closing,
                outbound,
                logging,
                last_progress: AtomicU64::new(NO_PROGRESS),
                finished: tokio::sync::Mutex::new(false),
                round: std::sync::OnceLock::new(),
                principal: None,
                scopes: None,
                claims: None,
                token: None,
                address: None,
                task_start: None,
                incoming: Default::default(),
            }),
        }
    }

    /// Lets the handler make the call a task ([`RequestContext::start_task`]); only on a
    /// context nobody else holds yet.
    pub(crate) fn with_task_start(mut self, start: Arc<tokio::sync::Notify>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.task_start = Some(start);
        }
        self
    }

    /// Sets the principal; only on a context nobody else holds yet.
    pub(crate) fn with_principal(mut self, principal: Option<Arc<str>>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.principal = principal;
        }
        self
    }

    /// Sets the granted scopes; only on a context nobody else holds yet.
    pub(crate) fn with_scopes(mut self, scopes: Option<Arc<[String]>>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.scopes = scopes;
        }
        self
    }

    /// Sets the token's claims; only on a context nobody else holds yet.
    pub(crate) fn with_claims(mut self, claims: Option<Claims>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.claims = claims;
        }
        self
    }

    /// Sets the caller's access token; only on a context nobody else holds yet.
    pub(crate) fn with_token(mut self, token: Option<AccessToken>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.token = token;
        }
        self
    }

    /// Sets the transport; only on a context nobody else holds yet.
    pub(crate) fn with_transport(mut self, transport: crate::request::incoming::Transport) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.incoming.transport = Some(transport);
        }
        self
    }

    /// Sets how the request arrived (its span's transport and HTTP trace headers); only on a
    /// context nobody else holds yet.
    pub(crate) fn with_incoming(mut self, incoming: crate::request::incoming::Incoming) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.incoming = incoming;
        }
        self
    }

    /// The transport the request came over (a pipe when it came in memory).
    pub(crate) fn transport(&self) -> crate::request::incoming::Transport {
        self.inner.incoming.transport.unwrap_or_default()
    }

    /// How the request arrived.
    pub(crate) fn incoming(&self) -> &crate::request::incoming::Incoming {
        &self.inner.incoming
    }

    /// Sets the client; only on a context nobody else holds yet.
    pub(crate) fn with_address(mut self, address: Option<crate::safety::limits::ClientId>) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.address = address;
        }
        self
    }

    /// The client's network address as the HTTP transport saw it (or as the configured
    /// forwarding header named it); `None` on stdio, and when the proxy named the client
    /// `unknown` or by an obfuscated identifier. Rate limits count against the client when
    /// there is no principal.
    pub fn client_address(&self) -> Option<std::net::IpAddr> {
        self.inner
            .address
            .as_ref()
            .and_then(|client| client.address())
    }

    /// The client as rate limits count it.
    pub(crate) fn client(&self) -> Option<&crate::safety::limits::ClientId> {
        self.inner.address.as_ref()
    }

    /// Who is calling, as the transport established it (for example from an authenticated
    /// identity); `None` without authentication. With OAuth it is the token's issuer and
    /// subject, separated by a space.
    pub fn principal(&self) -> Option<&str> {
        self.inner.principal.as_deref()
    }

    /// The principal, shared (a task keeps it).
    pub(crate) fn shared_principal(&self) -> Option<Arc<str>> {
        self.inner.principal.clone()
    }

    /// The scopes, shared (a task keeps them).
    pub(crate) fn shared_scopes(&self) -> Option<Arc<[String]>> {
        self.inner.scopes.clone()
    }

    /// The claims, shared (a subscription keeps them).
    pub(crate) fn shared_claims(&self) -> Option<Claims> {
        self.inner.claims.clone()
    }

    /// The OAuth scopes the caller's access token grants; `None` when the transport checks no
    /// tokens (stdio, or HTTP without OAuth).
    pub fn scopes(&self) -> Option<&[String]> {
        self.inner.scopes.as_deref()
    }

    /// Every claim of the caller's access token (a JWT's payload, or the introspection
    /// answer), for rules over claims the server does not read itself (`tenant`, `groups`);
    /// `None` when the transport checks no tokens.
    pub fn claims(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.inner.claims.as_deref()
    }

    /// The caller's access token as it presented it, for a handler that must act for the
    /// caller elsewhere without passing the token on (a gateway's RFC 8693 token exchange);
    /// `None` unless the resource server was told to hand it over
    /// ([`OAuth::token_to_handlers`](crate::http::OAuth::token_to_handlers)), and on stdio.
    pub fn access_token(&self) -> Option<&str> {
        self.inner.token.as_ref().map(|t| &*t.0)
    }

    pub(crate) fn round(&self) -> Option<&Round> {
        self.inner.round.get()
    }

    pub(crate) fn set_round(&self, round: Round) {
        let _ = self.inner.round.set(round);
    }

    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &RequestId {
        &self.inner.id
    }

    /// The request's `_meta`.
    pub fn meta(&self) -> &RequestMeta {
        &self.inner.meta
    }

    /// The protocol version the request speaks.
    pub fn protocol_version(&self) -> &str {
        &self.inner.meta.protocol_version
    }

    /// The capabilities the client declared on this request (B-20).
    pub fn client_capabilities(&self) -> &ClientCapabilities {
        &self.inner.meta.client_capabilities
    }

    /// The client's self-description; self-reported, so never a basis for security decisions (B-19).
    pub fn client_info(&self) -> Option<&Implementation> {
        self.inner.meta.client_info.as_ref()
    }

    /// Fires when the client cancels the request or goes away (H-08, S-08).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Makes this call a task now: the client is answered with the task while the handler
    /// keeps running, as its step. Only the first step of a call of a
    /// [`Tool::deferred_task`](crate::Tool::deferred_task) tool, from a client that declared
    /// the tasks extension, can be made a task; elsewhere this does nothing. Returns whether
    /// the call is becoming a task.
    pub fn start_task(&self) -> bool {
        match &self.inner.task_start {
            Some(start) => {
                start.notify_one();
                true
            }
            None => false,
        }
    }

    /// Fires when the server or the transport is shutting down: long-running handlers should
    /// wrap up (they are cancelled once the shutdown grace runs out).
    pub fn closing(&self) -> &CancellationToken {
        &self.inner.closing
    }

    /// Whether the request was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Fails the request with -32021 unless the client declared what `has` looks for (B-20).
    ///
    /// `required` is reported to the client in `data.requiredCapabilities`.
    pub fn require(
        &self,
        has: impl FnOnce(&ClientCapabilities) -> bool,
        required: ClientCapabilities,
    ) -> Result<(), ToolError> {
        if has(self.client_capabilities()) {
            Ok(())
        } else {
            Err(ToolError::Protocol(ErrorObject::missing_capability(
                &required,
            )))
        }
    }

    /// Fails with -32021 unless the client declared `sampling`.
    pub fn require_sampling(&self) -> Result<(), ToolError> {
        self.require(
            |c| c.sampling.is_some(),
            ClientCapabilities {
                sampling: Some(SamplingCapability::default()),
                ..Default::default()
            },
        )
    }

    /// Fails with -32021 unless the client declared form elicitation.
    pub fn require_elicitation(&self) -> Result<(), ToolError> {
        self.require(
            ClientCapabilities::supports_elicitation_form,
            ClientCapabilities {
                elicitation: Some(Default::default()),
                ..Default::default()
            },
        )
    }

    /// Fails with -32021 unless the client declared `roots`.
    pub fn require_roots(&self) -> Result<(), ToolError> {
        self.require(
            |c| c.roots.is_some(),
            ClientCapabilities {
                roots: Some(Default::default()),
                ..Default::default()
            },
        )
    }

    /// Reports progress if the client asked for it with `_meta.progressToken` and can receive it.
    ///
    /// Values must strictly increase (P-12); a value that does not is dropped. Returns whether
    /// the notification was sent.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        let Some(token) = self.inner.meta.progress_token.clone() else {
            return false;
        };
        if !progress.is_finite() {
            return false;
        }
        let increases = |last: u64| last == NO_PROGRESS || progress > f64::from_bits(last);
        let advanced =
            self.inner
                .last_progress
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                    increases(last).then_some(progress.to_bits())
                });
        if advanced.is_err() {
            // P-12
            tracing::debug!(progress, "dropped progress that does not increase");
            return false;
        }
        let params = ProgressParams {
            progress_token: token,
            progress,
            total,
            message: message.map(str::to_owned),
            meta: None,
        };
        self.notify(NOTIFICATION_PROGRESS, params).await
    }

    /// Whether a log message at `level` would be sent: the server declared logging and the
    /// request asked for this level or a lower one (P-17).
    pub fn log_enabled(&self, level: LoggingLevel) -> bool {
        self.inner.logging == Logging::Declared
            && self.inner.outbound.is_some()
            && self.inner.meta.log_level.is_some_and(|min| level >= min)
    }

    /// Sends a `notifications/message` on this request's stream, if enabled (P-17). Keep
    /// credentials and personal data out of `data` (P-19). Returns whether it was sent.
    pub async fn log(&self, level: LoggingLevel, logger: Option<&str>, data: Value) -> bool {
        if !self.log_enabled(level) {
            return false;
        }
        let params = LoggingMessageParams {
            level,
            logger: logger.map(str::to_owned),
            data,
            meta: None,
        };
        self.notify(NOTIFICATION_MESSAGE, params).await
    }

    /// Marks the request as answered; later notifications are dropped (P-13). Waits for a
    /// notification being sent right now, so it cannot land after the response.
    pub(crate) async fn finish(&self) {
        *self.inner.finished.lock().await = true;
    }

    /// Sends an already serialized notification about this request; false if it cannot be
    /// delivered.
    pub(crate) async fn send_json(&self, json: String) -> bool {
        let Some(outbound) = &self.inner.outbound else {
            return false;
        };
        let finished = self.inner.finished.lock().await;
        if self.is_cancelled() || *finished {
            return false;
        }
        let frame = Frame {
            json,
            last: false,
            error_code: None,
            cancel: self.inner.cancel.clone(),
            charge: None,
        };
        outbound.send(frame).await
    }

    /// Sends a notification about this request; false if it cannot be delivered.
    pub(crate) async fn notify<P: Serialize>(&self, method: &str, params: P) -> bool {
        if self.inner.outbound.is_none() || self.is_cancelled() {
            return false;
        }
        match serde_json::to_string(&Notification::new(method, params)) {
            Ok(json) => self.send_json(json).await,
            Err(e) => {
                tracing::error!(error = %e, method, "cannot serialize notification");
                false
            }
        }
    }
}

/// The answers and state a request carries from the previous round.
#[derive(Debug, Default)]
pub(crate) struct Round {
    pub(crate) responses: InputResponses,
    /// Answers that did not parse, with why: an error only if the handler asks for one.
    pub(crate) malformed: BTreeMap<String, String>,
    pub(crate) state: Option<Value>,
}

impl RequestContext {
    /// The raw answers to the previous round's input requests (empty on a first round).
    pub fn input_responses(&self) -> &InputResponses {
        static EMPTY: InputResponses = BTreeMap::new();
        self.round().map_or(&EMPTY, |r| &r.responses)
    }

    /// The answer under `key`: -32602 if it was sent but is not an answer of any kind.
    fn answer(&self, key: &str) -> Result<Option<&InputResponse>, ToolError> {
        if let Some(why) = self.round().and_then(|r| r.malformed.get(key)) {
            return Err(malformed(key, &format!("is malformed: {why}")));
        }
        Ok(self.input_responses().get(key))
    }

    /// The state the handler attached to the previous round, verified and decrypted.
    pub fn request_state<T: DeserializeOwned>(&self) -> Result<Option<T>, ToolError> {
        match self.round().and_then(|r| r.state.clone()) {
            None => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(ToolError::internal),
        }
    }

    /// The answer to the form asked for under `key`: `None` if it was not answered (ask again,
    /// M-10); -32602 if the answer is not a form answer or its content does not fit `T`.
    pub fn elicited<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<Elicited<T>>, ToolError> {
        let Some(response) = self.answer(key)? else {
            return Ok(None);
        };
        let InputResponse::Elicit(result) = response else {
            return Err(malformed(key, "is not an answer to elicitation/create"));
        };
        Ok(Some(match result.action {
            ElicitAction::Decline => Elicited::Declined,
            ElicitAction::Cancel => Elicited::Cancelled,
            ElicitAction::Accept => {
                let content = serde_json::to_value(result.content.clone().unwrap_or_default())
                    .map_err(ToolError::internal)?;
                let form = serde_json::from_value(content)
                    .map_err(|e| malformed(key, &format!("does not fit the form: {e}")))?;
                Elicited::Accepted(form)
            }
        }))
    }

    /// The client model's answer to the sampling request under `key`.
    pub fn sampled(&self, key: &str) -> Result<Option<&CreateMessageResult>, ToolError> {
        match self.answer(key)? {
            None => Ok(None),
            Some(InputResponse::CreateMessage(result)) => Ok(Some(result)),
            Some(_) => Err(malformed(key, "is not an answer to sampling/createMessage")),
        }
    }

    /// The client's roots, answering the request under `key`.
    pub fn listed_roots(&self, key: &str) -> Result<Option<&[Root]>, ToolError> {
        match self.answer(key)? {
            None => Ok(None),
            Some(InputResponse::ListRoots(result)) => Ok(Some(&result.roots)),
            Some(_) => Err(malformed(key, "is not an answer to roots/list")),
        }
    }
}

fn malformed(key: &str, why: &str) -> ToolError {
    ToolError::Protocol(ErrorObject::invalid_params(format!(
        "inputResponses.{key} {why}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::sync::mpsc;

    fn context(meta: Value, logging: Logging) -> (RequestContext, mpsc::Receiver<Frame>) {
        let (tx, rx) = mpsc::channel(8);
        let meta: RequestMeta = serde_json::from_value(meta).unwrap();
        (
            RequestContext::new(
                1.into(),
                meta,
                CancellationToken::new(),
                CancellationToken::new(),
                Some(Outbound::new(tx)),
                logging,
            ),
            rx,
        )
    }

    fn meta(extra: Value) -> Value {
        let mut m = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        m.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        m
    }

    #[tokio::test]
    async fn progress_needs_a_token_and_must_increase() {
        let (ctx, _rx) = context(meta(json!({})), Logging::Undeclared);
        assert!(!ctx.progress(1.0, None, None).await);
        let (ctx, mut rx) = context(meta(json!({"progressToken": "t"})), Logging::Undeclared);
        assert!(ctx.progress(0.0, Some(100.0), None).await);
        assert!(!ctx.progress(0.0, Some(100.0), None).await);
        assert!(ctx.progress(50.0, Some(100.0), Some("half")).await);
        assert!(!ctx.progress(f64::NAN, None, None).await);
        let first: Value = serde_json::from_str(&rx.recv().await.unwrap().json).unwrap();
        assert_eq!(
            first["params"],
            json!({"progressToken": "t", "progress": 0.0, "total": 100.0})
        );
    }

    #[tokio::test]
    async fn nothing_is_sent_after_the_request_finished() {
        let (ctx, mut rx) = context(meta(json!({"progressToken": 1})), Logging::Undeclared);
        let handler_copy = ctx.clone();
        ctx.finish().await;
        assert!(!handler_copy.progress(1.0, None, None).await);
        drop((ctx, handler_copy));
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn logs_only_at_or_above_the_requested_level() {
        let (ctx, _rx) = context(meta(json!({})), Logging::Declared);
        assert!(!ctx.log(LoggingLevel::Emergency, None, json!("x")).await);
        let (ctx, _rx) = context(
            meta(json!({"io.modelcontextprotocol/logLevel": "warning"})),
            Logging::Undeclared,
        );
        assert!(
            !ctx.log(LoggingLevel::Error, None, json!("x")).await,
            "server did not declare logging"
        );
        let (ctx, mut rx) = context(
            meta(json!({"io.modelcontextprotocol/logLevel": "warning"})),
            Logging::Declared,
        );
        assert!(!ctx.log(LoggingLevel::Info, None, json!("x")).await);
        assert!(
            ctx.log(LoggingLevel::Warning, Some("db"), json!({"a": 1}))
                .await
        );
        let sent: Value = serde_json::from_str(&rx.recv().await.unwrap().json).unwrap();
        assert_eq!(sent["method"], "notifications/message");
        assert_eq!(
            sent["params"],
            json!({"level": "warning", "logger": "db", "data": {"a": 1}})
        );
    }

    #[test]
    fn require_reports_the_missing_capability() {
        let (ctx, _rx) = context(meta(json!({})), Logging::Undeclared);
        let Err(ToolError::Protocol(e)) = ctx.require_sampling() else {
            panic!("accepted")
        };
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data.unwrap(),
            json!({"requiredCapabilities": {"sampling": {}}})
        );
        let (ctx, _rx) = context(
            meta(
                json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "roots": {}}}),
            ),
            Logging::Undeclared,
        );
        assert!(ctx.require_sampling().is_ok() && ctx.require_roots().is_ok());
        assert!(ctx.require_elicitation().is_err());
    }
}
