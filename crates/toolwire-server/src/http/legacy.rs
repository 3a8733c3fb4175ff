//! Streamable HTTP as 2025-11-25 describes it, for legacy clients: `initialize` mints an
//! unguessable `Mcp-Session-Id` bound to the caller's principal; later requests must carry it
//! (400 without, 404 for an unknown, expired, ended or someone else's session); GET opens the
//! session's stream of list changes and resource updates; DELETE ends the session. Requests that
//! may need the client's input reply with SSE, on which the server's requests to the client
//! travel; the client POSTs its answers, which reach the waiting request here.
//!
//! Sessions live in a [`SessionStore`]; what only this process can hold (the open GET stream,
//! requests waiting for answers, cancellation of running requests) lives beside it in `Live`.
//! With a shared store, an answer or a cancellation for a request that another instance runs
//! goes there through the session relay.

mod relay;
mod stream;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::legacy::{LEGACY_VERSIONS, METHOD_INITIALIZE, SESSION_ID_HEADER};
use toolwire_protocol::{
    CancelledParams, ErrorObject, MessageKind, NOTIFICATION_CANCELLED, PROTOCOL_VERSION,
    RawMessage, RequestId,
};

use super::checks::Accept;
use super::reply::{frame, sse_response, streaming_reply};
use super::{Caller, HttpState, Refusal, json_response};
use crate::legacy::{LegacyCall, LegacyStep, Peer, empty_result, new_session_id, read_initialize};
use crate::request::frame::read_meta;
use crate::request::outbound::{Frame, Outbound};
use crate::request::outcome::Final;
use crate::state::StoreError;
use crate::state::relay::{SessionRelay, SessionSink};
use crate::state::sessions::{SessionRecord, SessionStore, SessionStoreError};

pub(super) use stream::get;

/// `Mcp-Session-Id`, parsed once.
const SESSION_ID: http::HeaderName = http::HeaderName::from_static(SESSION_ID_HEADER);

/// The JSON-RPC code of "Session not found" (the TypeScript SDK's, which clients know).
const SESSION_NOT_FOUND: i64 = -32001;

/// The legacy sessions of one HTTP endpoint.
pub(super) struct Sessions {
    store: Arc<dyn SessionStore>,
    live: Arc<LiveMap>,
    /// The other instances of a shared store, for what reaches this one about their requests.
    relay: Option<Arc<dyn SessionRelay>>,
    /// How many live entries trigger the next sweep of abandoned ones (amortized O(1)).
    next_sweep: AtomicUsize,
    /// How often an open GET stream tells the store its session is still in use.
    stream_touch: Duration,
}

/// What this process holds for each session it has served, by id.
#[derive(Default)]
struct LiveMap(Mutex<HashMap<String, Arc<Live>>>);

impl LiveMap {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What this process holds for a session beside its record.
#[derive(Default)]
struct Live {
    peer: Arc<Peer>,
    /// Cancellation of the session's running requests by id, for `notifications/cancelled`.
    inflight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Set while a GET stream is open (one per session).
    stream_open: Mutex<bool>,
    /// Fires when the session ends (DELETE, or found expired).
    ended: CancellationToken,
    /// Told when the session subscribes or unsubscribes here, for its GET stream to count
    /// what it follows anew.
    resubscribed: tokio::sync::Notify,
}

impl Live {
    fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.inflight.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn end(&self) {
        self.ended.cancel();
        self.peer.close();
        for token in self.inflight().drain().map(|(_, token)| token) {
            token.cancel();
        }
    }

    /// Abandoned: nothing of it runs here, so the store alone decides whether it lives on.
    fn idle(&self) -> bool {
        !*self.stream_open.lock().unwrap_or_else(|p| p.into_inner()) && self.inflight().is_empty()
    }
}

impl Sessions {
    pub(super) fn new(
        store: Arc<dyn SessionStore>,
        stream_touch: Duration,
        relay: Option<Arc<dyn SessionRelay>>,
    ) -> Self {
        let live = Arc::new(LiveMap::default());
        if let Some(relay) = &relay {
            let sink: Arc<dyn SessionSink> = live.clone();
            relay.attach(Arc::downgrade(&sink));
        }
        Sessions {
            store,
            live,
            relay,
            next_sweep: AtomicUsize::new(1024),
            stream_touch,
        }
    }

    fn live_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live.lock()
    }

    /// This process's part of a session the store knows, made on first use. Entries nobody
    /// uses are swept once the map doubles, so sessions that expired without a DELETE cannot
    /// grow it without bound.
    fn live(&self, id: &str) -> Arc<Live> {
        let mut live = self.live_map();
        if let Some(entry) = live.get(id) {
            return entry.clone();
        }
        if live.len() >= self.next_sweep.load(Ordering::Relaxed) {
            live.retain(|_, entry| !entry.idle());
            self.next_sweep
                .store((live.len() * 2).max(1024), Ordering::Relaxed);
        }
        let shared = self.relay.is_some();
        let made = || {
            Arc::new(Live {
                peer: Arc::new(if shared {
                    Peer::spread()
                } else {
                    Peer::default()
                }),
                ..Live::default()
            })
        };
        live.entry(id.to_owned()).or_insert_with(made).clone()
    }

    /// The session subscribed or unsubscribed here: its GET stream, if open here, counts what
    /// it follows anew (a change made through another instance is seen at the stream's next
    /// reading of the record).
    fn resubscribed(&self, id: &str) {
        if let Some(live) = self.live_map().get(id) {
            live.resubscribed.notify_one();
        }
    }

    fn forget(&self, id: &str) {
        if let Some(live) = self.live_map().remove(id) {
            live.end();
        }
    }
}

fn refusal(status: StatusCode, id: Option<&RequestId>, error: ErrorObject) -> Response {
    Refusal::new(status, id, error).into_response()
}

fn not_found(id: Option<&RequestId>) -> Response {
    let error = ErrorObject::new(
        SESSION_NOT_FOUND,
        "Session not found: it expired or ended; initialize a new one",
    );
    refusal(StatusCode::NOT_FOUND, id, error)
}

/// Every JSON-RPC error of a legacy request travels with 200: 2025-11-25 keeps HTTP statuses
/// for the transport (no session, unknown session, bad header).
fn legacy_status(_code: Option<i64>) -> StatusCode {
    StatusCode::OK
}

/// Whether a POST belongs to the legacy era: an `initialize` without a 2026-07-28 `_meta`, or
/// a message naming a session that is not a 2026-07-28 request (which is stateless whatever
/// headers it carries: V-07, H-16). A 2026-07-28 request costs two header lookups here.
pub(super) fn claims(headers: &HeaderMap, raw: &RawMessage<'_>) -> bool {
    if raw.method.as_deref() == Some(METHOD_INITIALIZE) {
        return crate::legacy::is_legacy_initialize(METHOD_INITIALIZE, raw.params);
    }
    headers.contains_key(&SESSION_ID)
        && headers
            .get(toolwire_protocol::headers::PROTOCOL_VERSION)
            .is_none_or(|v| v.as_bytes() != PROTOCOL_VERSION.as_bytes())
        && (raw.method.is_none() || !may_carry_meta(raw.params) || read_meta(raw.params).is_err())
}

/// Whether params could hold a `_meta` member: their text names it, or has a `\u` escape that
/// could spell it. Params that cannot are not read for one (a 2025-11-25 request has none, and
/// reading the params to find that out cost it 1,400 instructions under callgrind).
fn may_carry_meta(params: Option<&serde_json::value::RawValue>) -> bool {
    params.is_some_and(|params| {
        let text = params.get();
        text.contains("\"_meta\"") || text.contains("\\u")
    })
}

/// A legacy POST, its body read and parsed.
pub(super) async fn post(
    state: &HttpState,
    sessions: &Sessions,
    headers: &HeaderMap,
    raw: RawMessage<'_>,
    accept: Accept,
    caller: Caller,
) -> Response {
    let Some(session_id) = headers.get(&SESSION_ID) else {
        return initialize(state, sessions, &raw, accept, caller).await;
    };
    let request_id = raw.request_id();
    let record = match session_of(state, sessions, session_id, &caller, request_id.as_ref()).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    if let Some(refused) = version_header(headers, request_id.as_ref()) {
        return refused;
    }
    let live = sessions.live(&record.id);
    match raw.kind() {
        Err(why) => refusal(
            StatusCode::BAD_REQUEST,
            request_id.as_ref(),
            ErrorObject::invalid_request(why),
        ),
        Ok(MessageKind::Response) => {
            let answer = match (&raw.error, raw.result) {
                (Some(error), _) => Err(error.clone()),
                (None, Some(result)) => Ok(result.to_owned()),
                (None, None) => Err(ErrorObject::invalid_request("a response without a result")),
            };
            match &request_id {
                Some(id) => relay::answer(sessions, &record.id, &live, id, answer).await,
                None => StatusCode::ACCEPTED.into_response(),
            }
        }
        Ok(MessageKind::Notification) => {
            if raw.method.as_deref() == Some(NOTIFICATION_CANCELLED) {
                let cancelled = raw
                    .params
                    .and_then(|p| serde_json::from_str::<CancelledParams>(p.get()).ok());
                if let Some(cancelled) = cancelled {
                    return relay::cancel(sessions, &record.id, &live, cancelled.request_id).await;
                }
            }
            StatusCode::ACCEPTED.into_response()
        }
        Ok(MessageKind::Request(id)) => {
            let known = Known {
                record,
                live,
                scopes: caller.scopes,
                claims: caller.claims,
                token: caller.token,
                address: caller.address,
            };
            request(state, sessions, known, id, &raw, accept).await
        }
    }
}

/// The session a request names, if it is live and belongs to the caller; else the response to
/// send: 404 for an unknown, expired, ended or someone else's session, 503 when the store
/// cannot say (which is not "not found": the client keeps its session and retries).
async fn session_of(
    state: &HttpState,
    sessions: &Sessions,
    session_id: &HeaderValue,
    caller: &Caller,
    id: Option<&RequestId>,
) -> Result<SessionRecord, Response> {
    let Ok(session_id) = session_id.to_str() else {
        return Err(not_found(id));
    };
    let now = state.server.clock().now_ms();
    match sessions.store.touch(session_id, now).await {
        Err(error) => Err(store_failed(id, &error, "The session could not be read")),
        Ok(None) => {
            sessions.forget(session_id);
            Err(not_found(id))
        }
        // Another principal's session is reported as unknown: its existence is not revealed.
        Ok(Some(record)) if record.principal.as_deref() != caller.principal.as_deref() => {
            Err(not_found(id))
        }
        Ok(Some(record)) => Ok(record),
    }
}

/// The session store did not answer: 503 with `Retry-After` while it may come back (500 for a
/// corrupt record), and a JSON-RPC -32603 error that says so.
fn store_failed(id: Option<&RequestId>, error: &StoreError, failed: &str) -> Response {
    let status = match error {
        StoreError::Corrupt(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = refusal(status, id, error.refusal(failed));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

/// Whether `MCP-Protocol-Version` names an initialization-based version.
pub(super) fn names_a_legacy_version(headers: &HeaderMap) -> bool {
    headers
        .get(toolwire_protocol::headers::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| LEGACY_VERSIONS.contains(&v))
}

/// The 400 to send unless `MCP-Protocol-Version`, when present, names a version legacy
/// sessions speak.
fn version_header(headers: &HeaderMap, id: Option<&RequestId>) -> Option<Response> {
    let value = headers.get(toolwire_protocol::headers::PROTOCOL_VERSION)?;
    match value.to_str() {
        Ok(v) if LEGACY_VERSIONS.contains(&v) => None,
        _ => {
            let error = ErrorObject::invalid_request(format!(
                "MCP-Protocol-Version {value:?} is not a version of this session; sessions speak {}",
                LEGACY_VERSIONS.join(", ")
            ));
            Some(refusal(StatusCode::BAD_REQUEST, id, error))
        }
    }
}

/// `initialize` without a session: a new session, its id in the reply's `Mcp-Session-Id`.
async fn initialize(
    state: &HttpState,
    sessions: &Sessions,
    raw: &RawMessage<'_>,
    accept: Accept,
    caller: Caller,
) -> Response {
    let id = match raw.kind() {
        Ok(MessageKind::Request(id)) => id,
        _ => {
            let error = ErrorObject::invalid_request("initialize must be a request");
            return refusal(StatusCode::BAD_REQUEST, raw.request_id().as_ref(), error);
        }
    };
    let principal = caller.principal.as_deref().map(str::to_owned);
    let params = match read_initialize(raw.params) {
        Ok(params) => params,
        Err(error) => return refusal(StatusCode::BAD_REQUEST, Some(&id), error),
    };
    let result = state.server.initialize_result(&params);
    let record = SessionRecord::new(
        new_session_id(),
        result.protocol_version.clone(),
        params.capabilities,
        params.client_info,
        principal,
    );
    let session_id = record.id.clone();
    let now = state.server.clock().now_ms();
    match sessions.store.create(record, now).await {
        Ok(()) => {}
        Err(e @ SessionStoreError::Full(_)) => {
            let error = ErrorObject::internal(e.to_string());
            let mut response = refusal(StatusCode::SERVICE_UNAVAILABLE, Some(&id), error);
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("60"));
            return response;
        }
        Err(SessionStoreError::Store(e)) => {
            return store_failed(Some(&id), &e, "The session could not be created");
        }
    }
    tracing::debug!(version = %result.protocol_version, client = ?result.server_info.name, "legacy HTTP session created");
    let mut response = single_reply(Final::result(&id, &result), accept, state);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_ID, value);
    }
    response
}

/// A final message alone, as JSON or (for a client that accepts only SSE) one event.
fn single_reply(done: Final, accept: Accept, state: &HttpState) -> Response {
    if accept.json {
        return json_response(legacy_status(done.error_code), done.json);
    }
    let cancel = CancellationToken::new();
    let guard = cancel.clone().drop_guard();
    sse_response(
        vec![frame(done, &cancel)],
        None,
        guard,
        state.config.keep_alive,
    )
}

/// A live session, what only this process holds of it, and what the caller's token grants.
struct Known {
    record: SessionRecord,
    live: Arc<Live>,
    scopes: Option<Arc<[String]>>,
    claims: Option<crate::request::context::Claims>,
    token: Option<crate::request::context::AccessToken>,
    address: Option<crate::safety::limits::ClientId>,
}

/// A request in a session.
async fn request(
    state: &HttpState,
    sessions: &Sessions,
    known: Known,
    id: RequestId,
    raw: &RawMessage<'_>,
    accept: Accept,
) -> Response {
    let method = raw.method.as_deref().unwrap_or_default();
    let server = &state.server;
    let now = server.clock().now_ms();
    let step = match server.legacy_step(method, raw.params) {
        Ok(step) => step,
        Err(error) => return single_reply(Final::error(Some(&id), &error), accept, state),
    };
    let update = |change: crate::state::sessions::SessionChange| async {
        match sessions.store.update(&known.record.id, now, change).await {
            Ok(true) => single_reply(empty_result(&id), accept, state),
            Ok(false) => not_found(Some(&id)),
            Err(error) => store_failed(Some(&id), &error, "The session could not be changed"),
        }
    };
    match step {
        LegacyStep::Initialize => {
            let error = ErrorObject::invalid_request("this session is already initialized");
            refusal(StatusCode::BAD_REQUEST, Some(&id), error)
        }
        LegacyStep::Ping => single_reply(empty_result(&id), accept, state),
        LegacyStep::SetLevel(level) => update(Box::new(move |r| r.log_level = Some(level))).await,
        LegacyStep::Subscribe(uri) => {
            // Updates of a resource the caller may not read are not its business.
            if let (Some(guard), Some(granted)) = (&state.guard, &known.scopes) {
                let needed = server.resource_scopes(&uri);
                if !needed.iter().all(|s| granted.contains(s)) {
                    return guard.insufficient_scope(&needed, Some(&id)).into_response();
                }
            }
            let response = update(Box::new(move |r| {
                r.subscriptions.insert(uri.clone());
            }))
            .await;
            sessions.resubscribed(&known.record.id);
            response
        }
        LegacyStep::Unsubscribe(uri) => {
            let response = update(Box::new(move |r| {
                r.subscriptions.remove(&uri);
            }))
            .await;
            sessions.resubscribed(&known.record.id);
            response
        }
        LegacyStep::Served => served(state, known, id, raw, accept).await,
    }
}

/// A method run through the 2026-07-28 machinery. Its notifications and the server's requests
/// to the client go on the reply's event stream, when the client accepts one.
async fn served(
    state: &HttpState,
    known: Known,
    id: RequestId,
    raw: &RawMessage<'_>,
    accept: Accept,
) -> Response {
    let method = raw.method.as_deref().unwrap_or_default();
    // As for a 2026-07-28 request: without the scopes of what it addresses, 403 with a
    // challenge the client can step up with, before anything runs.
    if let (Some(guard), Some(granted)) = (&state.guard, &known.scopes) {
        if let Ok(route) = crate::request::route::Route::parse(method, raw.params) {
            if let Err(refusal) = guard.check_scopes(&state.server, &route, granted, &id) {
                if let crate::request::route::Route::CallTool(call) = &route {
                    let principal = known.record.principal.as_deref();
                    let code = refusal.error.code;
                    state.server.audit_refused(&id, call, principal, None, code);
                }
                return refusal.into_response();
            }
        }
    }
    let Known {
        record,
        live,
        scopes,
        claims,
        token,
        address,
    } = known;
    let cancel = CancellationToken::new();
    {
        let mut inflight = live.inflight();
        if inflight.contains_key(&id) {
            let error = ErrorObject::invalid_request(format!(
                "request id {id} is already in use in this session"
            ));
            return single_reply(Final::error(Some(&id), &error), accept, state);
        }
        inflight.insert(id.clone(), cancel.clone());
    }
    let (tx, rx) = mpsc::channel::<Frame>(64);
    let call = LegacyCall {
        session: record,
        scopes,
        claims,
        token,
        address,
        peer: live.peer.clone(),
        outbound: accept.sse.then(|| Outbound::new(tx.clone())),
        cancel: cancel.clone(),
        closing: state.server.shutdown_token(),
    };
    let server = state.server.clone();
    let (method, params) = (method.to_owned(), raw.params.map(|p| p.to_owned()));
    let (request_id, cancelled) = (id.clone(), cancel.clone());
    let work = Box::pin(async move {
        let _done = Untrack {
            live: &live,
            id: &request_id,
        };
        // A cancelled request stops here (no answer: the client gave up on it), even if its
        // handler never looks at its cancellation, as over stdio.
        tokio::select! {
            biased;
            () = cancelled.cancelled() => None,
            done = server.run_legacy(&request_id, &method, params.as_deref(), call) => done,
        }
    });
    streaming_reply(state, &id, cancel, (tx, rx), work, accept, legacy_status).await
}

/// Takes a request off its session's in-flight list however it ends.
struct Untrack<'a> {
    live: &'a Live,
    id: &'a RequestId,
}

impl Drop for Untrack<'_> {
    fn drop(&mut self) {
        self.live.inflight().remove(self.id);
    }
}

/// DELETE with a session ends it: its stream closes, its running requests are cancelled and
/// later requests naming it get 404. Without a session, 405 (H-16).
pub(super) async fn delete(
    state: &HttpState,
    sessions: &Sessions,
    headers: &HeaderMap,
    caller: &Caller,
) -> Response {
    let Some(session_id) = headers.get(&SESSION_ID) else {
        return method_not_allowed();
    };
    let record = match session_of(state, sessions, session_id, caller, None).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    if let Err(error) = sessions.store.remove(&record.id).await {
        return store_failed(None, &error, "The session could not be ended");
    }
    sessions.forget(&record.id);
    relay::ended(sessions, &record.id).await;
    tracing::debug!("legacy HTTP session ended by the client");
    StatusCode::OK.into_response()
}

pub(super) fn method_not_allowed() -> Response {
    let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
    response
        .headers_mut()
        .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
    response
}
