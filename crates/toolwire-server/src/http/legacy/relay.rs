//! What a legacy client sends about a request of its session that may run on another instance:
//! its answer to the server's request, its cancellation, the end of the session. Delivered here
//! when the request lives here; else, with a shared store, relayed to every instance, the one
//! holding the request delivering it. The session was checked to be the caller's before any of
//! this: an instance delivers a relayed message only into the session it names.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use toolwire_protocol::RequestId;

use super::{Live, LiveMap, Sessions, store_failed};
use crate::state::relay::{Answer, Relayed, SessionSink};

/// The client's `answer` to the server's request `id`: to the request waiting here, or relayed.
/// 202 once delivered or relayed (or dropped: no shared store, no request waits for it); 503
/// when the store that would relay it is away, so that the client sees its answer went nowhere.
pub(super) async fn answer(
    sessions: &Sessions,
    session: &str,
    live: &Live,
    id: &RequestId,
    answer: Answer,
) -> Response {
    if live.peer.waits_for(id) {
        if !live.peer.answer(id, answer) {
            tracing::debug!(%id, "a response to a request that stopped waiting");
        }
        return StatusCode::ACCEPTED.into_response();
    }
    let Some(relay) = &sessions.relay else {
        tracing::debug!(%id, "a response to no waiting request");
        return StatusCode::ACCEPTED.into_response();
    };
    let message = Relayed::Answer {
        request: id.clone(),
        answer,
    };
    match relay.send(session, &message).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => store_failed(
            None,
            &error,
            "The answer could not be passed on to the server instance waiting for it",
        ),
    }
}

/// The client cancelled its request `id`: stopped here if it runs here, else relayed (503 when
/// the store that would relay it is away).
pub(super) async fn cancel(
    sessions: &Sessions,
    session: &str,
    live: &Live,
    id: RequestId,
) -> Response {
    if let Some(token) = live.inflight().remove(&id) {
        token.cancel();
        return StatusCode::ACCEPTED.into_response();
    }
    let Some(relay) = &sessions.relay else {
        return StatusCode::ACCEPTED.into_response();
    };
    match relay.send(session, &Relayed::Cancel { request: id }).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => store_failed(
            None,
            &error,
            "The cancellation could not be passed on to the server instance running the request",
        ),
    }
}

/// The client ended its session (here): the instances that run its requests stop them. The
/// session is gone from the store already, so a relay that fails is only logged: those requests
/// run to their end, and nothing more is served in the session.
pub(super) async fn ended(sessions: &Sessions, session: &str) {
    if let Some(relay) = &sessions.relay {
        if let Err(error) = relay.send(session, &Relayed::End).await {
            tracing::warn!(%error, "a session ended, but other instances could not be told to stop its running requests");
        }
    }
}

impl SessionSink for LiveMap {
    fn deliver(&self, session: &str, message: Relayed) {
        let live = match message {
            Relayed::End => self.lock().remove(session),
            _ => self.lock().get(session).cloned(),
        };
        let Some(live) = live else { return };
        match message {
            Relayed::Answer { request, answer } => {
                if !live.peer.answer(&request, answer) {
                    tracing::debug!(id = %request, "a relayed response to no waiting request");
                }
            }
            Relayed::Cancel { request } => {
                if let Some(token) = live.inflight().remove(&request) {
                    token.cancel();
                }
            }
            Relayed::End => live.end(),
        }
    }
}
