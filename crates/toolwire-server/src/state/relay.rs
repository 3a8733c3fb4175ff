//! The session relay: what a legacy HTTP client sends about a request that another instance
//! runs. A client's answer to the server's request (`elicitation/create`, …) and its
//! `notifications/cancelled` are new POSTs, which a load balancer may send to any instance;
//! the instance that got one, having checked that the session is the caller's, hands it to
//! the instance holding the waiting request or the running one through the relay.
//!
//! In one process there is nothing to relay: a server without a shared store has no relay. A
//! shared store's relay publishes each message to every instance, and each delivers those of
//! the sessions it holds and ignores the others.

use std::sync::Weak;

use futures::future::BoxFuture;
use serde_json::value::RawValue;
use toolwire_protocol::{ErrorObject, RequestId};

use crate::state::StoreError;

/// What a client answered to a request of the server: its result, or its error.
pub(crate) type Answer = Result<Box<RawValue>, ErrorObject>;

/// A message for the instance holding a session's request.
// Only a shared store's relay reads these: a build without one only writes them.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) enum Relayed {
    /// The client's response to the server's request `request`.
    Answer {
        /// The id the server gave its request to the client.
        request: RequestId,
        /// The client's result or error.
        answer: Answer,
    },
    /// The client cancelled its request `request`.
    Cancel {
        /// The id of the client's request.
        request: RequestId,
    },
    /// The session ended (DELETE): its running requests stop.
    End,
}

/// Where an instance delivers the messages relayed to it: the legacy sessions of one HTTP
/// endpoint. It delivers those of the sessions it holds and ignores the others.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) trait SessionSink: Send + Sync {
    /// Delivers `message` for `session`, if that session's request lives here.
    fn deliver(&self, session: &str, message: Relayed);
}

/// Carries [`Relayed`] messages to every other instance sharing a store.
pub(crate) trait SessionRelay: Send + Sync {
    /// Publishes `message` for `session` to the other instances. The error says the store
    /// is away: the message reached nobody.
    fn send<'a>(
        &'a self,
        session: &'a str,
        message: &'a Relayed,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Delivers the messages of other instances to `sink` from now on, for as long as it
    /// lives.
    fn attach(&self, sink: Weak<dyn SessionSink>);
}
