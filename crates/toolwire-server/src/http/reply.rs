//! Running an admitted request and shaping its reply: plain JSON when the request finishes
//! before it sends any notification; otherwise SSE from the first notification on, with the
//! rest of the work in a task whose cancellation is tied to the stream (H-05…H-08).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use futures::{Stream, StreamExt as _};
use http::{HeaderValue, StatusCode};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use toolwire_protocol::methods::{Listen, Method};
use toolwire_protocol::{ErrorObject, RequestId, RequestMeta};

use super::checks::Accept;
use super::{Caller, HttpState, Refusal, json_response, status_for};
use crate::request::context::{Logging, RequestContext};
use crate::request::outbound::{Frame, Outbound};
use crate::request::outcome::Final;
use crate::request::route::Route;
use crate::server::Server;
use crate::tools::visibility::Follower;

/// A request that passed every check: its id, its `_meta` and the method it runs.
pub(super) struct Admitted {
    pub(super) id: RequestId,
    /// Shared: it is large, each level of the request path would hold (and move) it, and the
    /// connection may keep it for its next request.
    pub(super) meta: Arc<RequestMeta>,
    pub(super) route: Route,
    /// How it arrived, for its span.
    pub(super) incoming: crate::request::incoming::Incoming,
}

pub(super) async fn run(
    state: &HttpState,
    request: Admitted,
    accept: Accept,
    caller: Caller,
) -> Response {
    let Admitted {
        id,
        meta,
        route,
        incoming,
    } = request;
    let listen = matches!(route, Route::Listen { .. });
    if listen && !accept.sse {
        let error = ErrorObject::invalid_request(format!(
            "{} replies with text/event-stream; accept it",
            Listen::METHOD
        ));
        return Refusal::new(StatusCode::NOT_ACCEPTABLE, Some(&id), error).into_response();
    }
    if let Route::Listen { filter } = &route {
        // The subscription's messages are the SSE body itself: no task and no channel per
        // stream. Dropping the body (the client went away) ends the subscription (L-09).
        let server = &state.server;
        let follower = Follower {
            principal: caller.principal.clone(),
            scopes: caller.scopes.clone(),
            claims: caller.claims.clone(),
            client: meta.client_info.clone(),
        };
        let stream = server.listen_stream(
            id,
            filter,
            follower,
            CancellationToken::new(),
            server.shutdown_token(),
        );
        let events =
            stream.map(|m| Ok::<_, Infallible>(Event::default().event("message").data(m.json)));
        return sse_events(events, state.config.keep_alive);
    }
    // Only progress and logs travel before the response; a request that can have neither gets
    // a plain reply without a channel (the common, fast case).
    let logging = state.server.config().logging;
    let may_stream = accept.sse
        && (meta.progress_token.is_some()
            || (logging == Logging::Declared && meta.log_level.is_some()));
    let request = Admitted {
        id,
        meta,
        route,
        incoming,
    };
    if may_stream {
        // Boxed, so that the common plain reply's future is not as large as this one.
        Box::pin(run_streaming(state, request, accept, caller)).await
    } else {
        run_plain(state, request, accept, caller).await
    }
}

/// A request that cannot stream: run it inline and answer once.
async fn run_plain(
    state: &HttpState,
    request: Admitted,
    accept: Accept,
    caller: Caller,
) -> Response {
    let Admitted {
        id,
        meta,
        route,
        incoming,
    } = request;
    let server = &state.server;
    let cancel = CancellationToken::new();
    let ctx = context(server, (&id, meta), &cancel, None, caller).with_incoming(incoming);
    // When the client leaves, hyper drops this future. `guard` is declared after `work`, so it
    // is dropped first: the handler's token has fired by the time the handler is dropped.
    let mut work = std::pin::pin!(server.run(&id, route, ctx));
    let guard = cancel.clone().drop_guard();
    tokio::select! {
        biased;
        done = &mut work => match done {
            Some(f) if accept.json => json_response(status_for(f.error_code), f.json),
            Some(f) => sse_response(vec![frame(f, &cancel)], None, guard, state.config.keep_alive),
            None => StatusCode::NO_CONTENT.into_response(),
        },
        _ = state.hard_stop.cancelled() => shutting_down(&id),
    }
}

/// A request that may stream. The reply is JSON if it finishes before sending any notification;
/// otherwise it becomes SSE from the first notification on, and the rest of the work continues
/// in a task whose cancellation is tied to the stream (H-08).
async fn run_streaming(
    state: &HttpState,
    request: Admitted,
    accept: Accept,
    caller: Caller,
) -> Response {
    let Admitted {
        id,
        meta,
        route,
        incoming,
    } = request;
    let server = state.server.clone();
    let cancel = CancellationToken::new();
    let (tx, rx) = mpsc::channel::<Frame>(64);
    let outbound = Some(Outbound::new(tx.clone()));
    let ctx = context(&server, (&id, meta), &cancel, outbound, caller).with_incoming(incoming);
    let finisher = ctx.clone();
    let request_id = id.clone();
    let work = Box::pin(async move {
        let done = server.run(&request_id, route, ctx).await;
        finisher.finish().await;
        done
    });
    let channel = (tx, rx);
    streaming_reply(state, &id, cancel, channel, work, accept, status_for).await
}

/// The handler's context for a request over HTTP: cancelled with `cancel` or at shutdown,
/// its notifications sent on `outbound` if it may stream, and the caller's identity.
fn context(
    server: &Server,
    (id, meta): (&RequestId, Arc<RequestMeta>),
    cancel: &CancellationToken,
    outbound: Option<Outbound>,
    caller: Caller,
) -> RequestContext {
    RequestContext::new(
        id.clone(),
        meta,
        cancel.clone(),
        server.shutdown_token(),
        outbound,
        server.config().logging,
    )
    .with_principal(caller.principal)
    .with_scopes(caller.scopes)
    .with_claims(caller.claims)
    .with_token(caller.token)
    .with_address(caller.address)
    .with_transport(crate::request::incoming::Transport::Tcp)
}

/// The reply to `work`, a request whose notifications (and, for a legacy session, requests to
/// the client) arrive on `channel`: JSON if it finishes before sending any and the client
/// accepts JSON; otherwise SSE from the first message on, the rest of the work continuing in a
/// task whose cancellation is tied to the stream (H-08). `status` maps an error code to the
/// HTTP status of a JSON reply.
pub(super) async fn streaming_reply(
    state: &HttpState,
    id: &RequestId,
    cancel: CancellationToken,
    channel: (mpsc::Sender<Frame>, mpsc::Receiver<Frame>),
    mut work: BoxFuture<'static, Option<Final>>,
    accept: Accept,
    status: fn(Option<i64>) -> StatusCode,
) -> Response {
    let (tx, mut rx) = channel;
    let guard = cancel.clone().drop_guard();
    tokio::select! {
        biased;
        done = &mut work => {
            let done = done.map(|f| frame(f, &cancel));
            match rx.try_recv() {
                Err(_) if accept.json => match done {
                    Some(f) => json_response(status(f.error_code), f.json),
                    None => StatusCode::NO_CONTENT.into_response(),
                },
                queued => {
                    // Notifications were queued before the work finished: send all of them.
                    drop(tx);
                    let mut frames: Vec<Frame> = queued.into_iter().collect();
                    while let Ok(f) = rx.try_recv() {
                        frames.push(f);
                    }
                    frames.extend(done);
                    sse_response(frames, None, guard, state.config.keep_alive)
                }
            }
        }
        Some(first) = rx.recv() => {
            let (task_cancel, hard_stop) = (cancel.clone(), state.hard_stop.clone());
            tokio::spawn(async move {
                let done = tokio::select! {
                    biased;
                    _ = task_cancel.cancelled() => None,
                    _ = hard_stop.cancelled() => None,
                    done = work => done,
                };
                if let Some(f) = done {
                    let _ = tx.send(frame(f, &task_cancel)).await;
                }
            });
            sse_response(vec![first], Some(rx), guard, state.config.keep_alive)
        }
        _ = state.hard_stop.cancelled() => shutting_down(id),
    }
}

/// The reply to a request still running when the shutdown grace ran out.
fn shutting_down(id: &RequestId) -> Response {
    let error = ErrorObject::internal("The server is shutting down");
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        Final::error(Some(id), &error).json,
    );
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(super) fn frame(done: Final, cancel: &CancellationToken) -> Frame {
    Frame {
        json: done.json,
        last: true,
        error_code: done.error_code,
        cancel: cancel.clone(),
        charge: None,
    }
}

/// An SSE reply: the frames given, then those from `rx` until the final one. Dropping the
/// stream (the client closed it) cancels the request through `guard` (H-08).
pub(super) fn sse_response(
    frames: Vec<Frame>,
    rx: Option<mpsc::Receiver<Frame>>,
    guard: DropGuard,
    keep_alive: Duration,
) -> Response {
    sse_events(frame_stream(frames, rx, guard), keep_alive)
}

/// An SSE response of `events`, with keep-alive comments (H-07) and no proxy buffering.
pub(super) fn sse_events(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn frame_stream(
    frames: Vec<Frame>,
    rx: Option<mpsc::Receiver<Frame>>,
    guard: DropGuard,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    struct St {
        queued: std::vec::IntoIter<Frame>,
        rx: Option<mpsc::Receiver<Frame>>,
        done: bool,
        _guard: DropGuard,
    }
    let state = St {
        queued: frames.into_iter(),
        rx,
        done: false,
        _guard: guard,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let next = match st.queued.next() {
            Some(f) => f,
            None => st.rx.as_mut()?.recv().await?,
        };
        st.done = next.last;
        let event = Event::default().event("message").data(next.json);
        Some((Ok(event), st))
    })
}
