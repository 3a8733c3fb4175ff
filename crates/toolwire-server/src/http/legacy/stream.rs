//! A legacy session's GET stream: the list changes and resource updates of the session, for as
//! long as the session lives and the client listens. The open stream counts as use of the
//! session.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use axum::response::sse::Event;
use http::{HeaderMap, StatusCode};
use toolwire_protocol::ErrorObject;

use super::{
    Caller, HttpState, Live, SESSION_ID, Sessions, method_not_allowed, refusal, session_of,
};
use crate::http::checks::Accept;
use crate::http::reply::sse_events;
use crate::legacy::notifications_for;
use crate::request::followed::Following;
use crate::server::Server;
use crate::server::visibility::SeenTools;
use crate::state::sessions::{SessionRecord, SessionStore};
use crate::tools::visibility::Follower;

/// GET with a session: the session's stream of list changes and resource updates. 405 without
/// a session (2026-07-28 has no GET, H-16), 409 if the session's stream is already open.
pub(in crate::http) async fn get(
    state: &HttpState,
    sessions: &Sessions,
    headers: &HeaderMap,
    accept: Accept,
    caller: &Caller,
) -> Response {
    let Some(session_id) = headers.get(&SESSION_ID) else {
        return method_not_allowed();
    };
    if !accept.sse {
        let error =
            ErrorObject::invalid_request("the session stream is text/event-stream; accept it");
        return refusal(StatusCode::NOT_ACCEPTABLE, None, error);
    }
    let record = match session_of(state, sessions, session_id, caller, None).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let live = sessions.live(&record.id);
    {
        let mut open = live.stream_open.lock().unwrap_or_else(|p| p.into_inner());
        if *open {
            let error = ErrorObject::invalid_request("this session's stream is already open");
            return refusal(StatusCode::CONFLICT, None, error);
        }
        *open = true;
    }
    let follower = Follower {
        principal: caller.principal.clone(),
        scopes: caller.scopes.clone(),
        claims: caller.claims.clone(),
        client: record.client_info.clone(),
    };
    let seen = SeenTools::new(&state.server, follower);
    let following = state.server.followers().hold(record.subscriptions.clone());
    let events = session_stream(
        state.server.clone(),
        sessions.store.clone(),
        (record.id, seen),
        (live, following),
        sessions.stream_touch,
    );
    sse_events(events, state.config.keep_alive)
}

/// The messages of a session's GET stream, until the session or the server ends or the client
/// goes away. While it is open, the session counts as in use.
fn session_stream(
    server: Server,
    store: Arc<dyn SessionStore>,
    (session_id, mut seen): (String, SeenTools),
    (live, following): (Arc<Live>, Following),
    touch_every: Duration,
) -> impl futures::Stream<Item = Result<Event, Infallible>> + Send + 'static {
    struct Close(Arc<Live>);
    impl Drop for Close {
        fn drop(&mut self) {
            *self.0.stream_open.lock().unwrap_or_else(|p| p.into_inner()) = false;
        }
    }
    async_stream::stream! {
        let close = Close(live);
        let mut changes = server.subscribe_changes();
        let mut touch = tokio::time::interval(touch_every);
        touch.tick().await;
        let shutdown = server.shutdown_token();
        // While the stream is open, the session's subscriptions count as followed here.
        let following = following;
        loop {
            let change = tokio::select! {
                _ = close.0.ended.cancelled() => break,
                _ = shutdown.cancelled() => break,
                _ = touch.tick() => {
                    let Some(record) = still_live(&*store, &session_id, &server).await else {
                        break;
                    };
                    following.set(record.subscriptions);
                    continue;
                }
                _ = close.0.resubscribed.notified() => {
                    let Some(record) = still_live(&*store, &session_id, &server).await else {
                        break;
                    };
                    following.set(record.subscriptions);
                    continue;
                }
                change = changes.recv() => change,
            };
            // A task's record changed elsewhere: nothing a session is told about.
            if matches!(change, Ok(crate::tools::offered::Change::Task(_))) {
                continue;
            }
            // A change of tools it cannot see is not the session's.
            if change.as_ref().is_ok_and(|change| !seen.is_news(&server, change)) {
                continue;
            }
            let Some(record) = still_live(&*store, &session_id, &server).await else {
                break;
            };
            for json in notifications_for(&server, &change, &record.subscriptions) {
                yield Ok(Event::default().event("message").data(json));
            }
        }
    }
}

/// The session's record, its use counted, while it lives. A store that cannot say ends the
/// stream too: the session may have ended elsewhere, and the client reopens the stream.
async fn still_live(
    store: &dyn SessionStore,
    session_id: &str,
    server: &Server,
) -> Option<SessionRecord> {
    match store.touch(session_id, server.clock().now_ms()).await {
        Ok(record) => record,
        Err(error) => {
            tracing::warn!(%error, "a session's stream ends: the session store did not answer");
            None
        }
    }
}
