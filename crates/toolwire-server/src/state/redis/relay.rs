//! The session relay through Redis pub/sub, on `PREFIX sessions-relay`: one message per
//! answer, cancellation or end that the instance which got it could not deliver itself,
//! tagged with its instance id. Every instance receives them on the subscription of its change
//! fan-out (one connection, subscribed to both channels), skips its own, and delivers the rest
//! to its sessions, which take those of the sessions they hold.
//!
//! A message is JSON: `{"from": INSTANCE, "session": ID, "kind": "answer", "id": REQUEST,
//! "result": …}` (or `"error": {…}` instead of `"result"`), `{"from", "session", "kind":
//! "cancel", "id": REQUEST}`, or `{"from", "session", "kind": "end"}`. An answer is at most
//! the HTTP request body limit that its POST passed.

use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::DropGuard;
use toolwire_protocol::{ErrorObject, RequestId};

use super::Shared;
use crate::state::StoreError;
use crate::state::relay::{Relayed, SessionRelay, SessionSink};

/// A message on the relay channel.
#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    from: String,
    session: String,
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<RequestId>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
}

#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Answer,
    Cancel,
    End,
}

impl Wire<'_> {
    /// The message it carries, or `None` if it does not read as one.
    fn message(self) -> Option<Relayed> {
        match (self.kind, self.id, self.result, self.error) {
            (Kind::Answer, Some(request), Some(result), None) => Some(Relayed::Answer {
                request,
                answer: Ok(result.to_owned()),
            }),
            (Kind::Answer, Some(request), None, Some(error)) => Some(Relayed::Answer {
                request,
                answer: Err(error),
            }),
            (Kind::Cancel, Some(request), None, None) => Some(Relayed::Cancel { request }),
            (Kind::End, None, None, None) => Some(Relayed::End),
            _ => None,
        }
    }
}

/// What the fan-out's subscription and the relay share: where to publish, this instance's
/// id, and where to deliver.
pub(crate) struct RelayHub {
    redis: Shared,
    channel: String,
    id: String,
    sinks: Mutex<Vec<Weak<dyn SessionSink>>>,
}

impl RelayHub {
    /// The relay of the instance `id` (its fan-out's).
    pub(crate) fn new(redis: Shared, id: String) -> Self {
        RelayHub {
            channel: redis.name("sessions-relay"),
            redis,
            id,
            sinks: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn channel(&self) -> &str {
        &self.channel
    }

    /// A message read on the channel: delivered to every sink unless this instance sent it.
    pub(crate) fn incoming(&self, payload: &str) {
        let Ok(wire) = serde_json::from_str::<Wire<'_>>(payload) else {
            tracing::debug!("an unreadable message on the session relay channel, skipped");
            return;
        };
        if wire.from == self.id {
            return;
        }
        let session = wire.session.clone();
        let Some(message) = wire.message() else {
            tracing::debug!("an incomplete message on the session relay channel, skipped");
            return;
        };
        let sinks: Vec<Arc<dyn SessionSink>> = {
            let mut sinks = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
            sinks.retain(|sink| sink.strong_count() > 0);
            sinks.iter().filter_map(Weak::upgrade).collect()
        };
        for sink in sinks {
            sink.deliver(&session, message.clone());
        }
    }

    async fn publish(&self, session: &str, message: &Relayed) -> Result<(), StoreError> {
        let mut wire = Wire {
            from: self.id.clone(),
            session: session.to_owned(),
            kind: Kind::End,
            id: None,
            result: None,
            error: None,
        };
        match message {
            Relayed::Answer { request, answer } => {
                wire.kind = Kind::Answer;
                wire.id = Some(request.clone());
                match answer {
                    Ok(result) => wire.result = Some(result),
                    Err(error) => wire.error = Some(error.clone()),
                }
            }
            Relayed::Cancel { request } => {
                wire.kind = Kind::Cancel;
                wire.id = Some(request.clone());
            }
            Relayed::End => {}
        }
        let text = serde_json::to_string(&wire).map_err(StoreError::corrupt)?;
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&self.channel).arg(text);
        self.redis.query::<i64>(&cmd).await.map(drop)
    }
}

/// The relay of one server on a Redis store: publishes through the store, receives through
/// its fan-out's subscription (which runs while either lives).
pub(crate) struct RedisSessionRelay {
    hub: Arc<RelayHub>,
    _stop: Arc<DropGuard>,
}

impl RedisSessionRelay {
    pub(crate) fn new(hub: Arc<RelayHub>, stop: Arc<DropGuard>) -> Self {
        RedisSessionRelay { hub, _stop: stop }
    }
}

impl SessionRelay for RedisSessionRelay {
    fn send<'a>(
        &'a self,
        session: &'a str,
        message: &'a Relayed,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.hub.publish(session, message))
    }

    fn attach(&self, sink: Weak<dyn SessionSink>) {
        self.hub
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sink);
    }
}
