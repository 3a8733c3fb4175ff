//! Where the Streamable HTTP sessions of legacy clients live: what a session is (a record that a
//! shared backend could hold), the store trait, and the bounded in-memory store with idle expiry.
//!
//! The record is what any replica needs to serve the session's next request; what only the
//! process holding a connection can have (the open GET stream, requests waiting for the
//! client's answers) stays beside it in the HTTP transport.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt as _};
use serde::{Deserialize, Serialize};
use toolwire_protocol::{ClientCapabilities, Implementation, LoggingLevel};

use crate::state::StoreError;
use crate::state::expiry::ExpiringMap;

/// One legacy client's session: what it said at `initialize` and what it set since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionRecord {
    /// The unguessable id the client sends in `Mcp-Session-Id`.
    pub id: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// What the client declared at `initialize`, for the whole session.
    pub client_capabilities: ClientCapabilities,
    /// The client's self-description.
    pub client_info: Option<Implementation>,
    /// Who opened the session; every later request must come from the same principal.
    pub principal: Option<String>,
    /// The level set with `logging/setLevel`, if any.
    pub log_level: Option<LoggingLevel>,
    /// URIs subscribed with `resources/subscribe`.
    pub subscriptions: BTreeSet<String>,
}

impl SessionRecord {
    /// A new session for a client that initialized with `protocol_version`.
    pub fn new(
        id: String,
        protocol_version: impl Into<String>,
        client_capabilities: ClientCapabilities,
        client_info: Option<Implementation>,
        principal: Option<String>,
    ) -> Self {
        SessionRecord {
            id,
            protocol_version: protocol_version.into(),
            client_capabilities,
            client_info,
            principal,
            log_level: None,
            subscriptions: BTreeSet::new(),
        }
    }
}

/// Why a session could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionStoreError {
    /// The store holds as many live sessions as it may.
    #[error("too many sessions are open (at most {0})")]
    Full(usize),
    /// The store could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A change to a session record, applied in place by [`SessionStore::update`]. A shared store
/// may apply it more than once (read, change, write back unless another writer got there
/// first, else again), so it only computes.
pub type SessionChange = Box<dyn FnMut(&mut SessionRecord) + Send>;

/// Where sessions live. Asynchronous so that a shared backend (several replicas behind one
/// endpoint) can implement it; every call takes the time so that expiry follows the server's
/// clock. A store decides its own bounds: how many sessions, and how long an idle one lives.
/// A store that cannot answer says so with a [`StoreError`], which the transport reports as
/// such (503), never as an unknown session. `toolwire_server::contract` (feature `contract-tests`) is the test suite every
/// implementation must pass.
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session.
    fn create(
        &self,
        record: SessionRecord,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>>;

    /// The session, if it is live at `now_ms`; it counts as activity (its idle time restarts).
    fn touch<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>>;

    /// Changes a live session in place and counts as activity; false if it is unknown.
    fn update<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        change: SessionChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Ends a session; false if it was unknown.
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;
}

/// Sessions in this process's memory: at most `max_sessions` live ones, each forgotten after
/// `idle` without a request. Expired sessions are forgotten through an expiry queue, in
/// O(log n) each, never by a sweep per request.
#[derive(Debug)]
pub struct MemorySessionStore {
    sessions: Mutex<ExpiringMap<String, SessionRecord>>,
    max_sessions: usize,
    idle_ms: u64,
}

impl MemorySessionStore {
    /// The defaults: 10,000 sessions, 30 minutes idle.
    pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
    /// See [`MemorySessionStore::DEFAULT_MAX_SESSIONS`].
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

    /// A store of at most `max_sessions` sessions that expire after `idle` without a request.
    pub fn new(max_sessions: usize, idle: Duration) -> Self {
        MemorySessionStore {
            sessions: Mutex::new(ExpiringMap::default()),
            max_sessions: max_sessions.max(1),
            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, ExpiringMap<String, SessionRecord>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for MemorySessionStore {
    fn default() -> Self {
        MemorySessionStore::new(Self::DEFAULT_MAX_SESSIONS, Self::DEFAULT_IDLE)
    }
}

impl SessionStore for MemorySessionStore {
    fn create(
        &self,
        record: SessionRecord,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        let result = {
            let mut sessions = self.sessions();
            sessions.prune(now_ms);
            if sessions.len() >= self.max_sessions {
                Err(SessionStoreError::Full(self.max_sessions))
            } else {
                let expires = now_ms.saturating_add(self.idle_ms);
                sessions.insert(record.id.clone(), expires, record);
                Ok(())
            }
        };
        futures::future::ready(result).boxed()
    }

    fn touch<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>> {
        let record = {
            let mut sessions = self.sessions();
            let key = id.to_owned();
            let live = sessions.get(&key, now_ms).cloned();
            if live.is_some() {
                let expires = now_ms.saturating_add(self.idle_ms);
                sessions.update(&key, |_| expires);
            }
            live
        };
        futures::future::ready(Ok(record)).boxed()
    }

    fn update<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        mut change: SessionChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let changed = {
            let mut sessions = self.sessions();
            let key = id.to_owned();
            sessions.get(&key, now_ms).is_some() && {
                let expires = now_ms.saturating_add(self.idle_ms);
                sessions.update(&key, |record| {
                    change(record);
                    expires
                })
            }
        };
        futures::future::ready(Ok(changed)).boxed()
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let removed = self.sessions().remove(&id.to_owned());
        futures::future::ready(Ok(removed)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord::new(
            id.into(),
            "2025-11-25",
            ClientCapabilities::default(),
            None,
            None,
        )
    }

    #[tokio::test]
    async fn sessions_expire_when_idle_and_activity_keeps_them() {
        let store = MemorySessionStore::new(10, Duration::from_millis(100));
        store.create(record("a"), 0).await.unwrap();
        store.create(record("b"), 0).await.unwrap();
        assert!(
            store.touch("a", 90).await.unwrap().is_some(),
            "a is live at 90"
        );
        assert!(
            store.touch("b", 100).await.unwrap().is_none(),
            "b idled out at 100"
        );
        assert!(
            store.touch("a", 180).await.unwrap().is_some(),
            "touching a at 90 kept it to 190"
        );
        assert!(
            store
                .update(
                    "a",
                    250,
                    Box::new(|r| r.log_level = Some(LoggingLevel::Info))
                )
                .await
                .unwrap(),
            "touched at 180, live until 280"
        );
        assert_eq!(
            store.touch("a", 300).await.unwrap().map(|r| r.log_level),
            Some(Some(LoggingLevel::Info)),
            "the update counted as activity"
        );
        assert!(store.touch("a", 401).await.unwrap().is_none());
        assert!(!store.update("a", 401, Box::new(|_| {})).await.unwrap());
        assert!(store.touch("nope", 0).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_number_of_sessions_is_bounded_and_expired_ones_make_room() {
        let store = MemorySessionStore::new(2, Duration::from_millis(100));
        store.create(record("a"), 0).await.unwrap();
        store.create(record("b"), 50).await.unwrap();
        assert!(matches!(
            store.create(record("c"), 60).await,
            Err(SessionStoreError::Full(2))
        ));
        // a expires at 100: room for c.
        store.create(record("c"), 100).await.unwrap();
        assert!(store.remove("b").await.unwrap());
        assert!(!store.remove("b").await.unwrap());
        store.create(record("d"), 101).await.unwrap();
        assert!(matches!(
            store.create(record("e"), 101).await,
            Err(SessionStoreError::Full(2))
        ));
    }

    #[tokio::test]
    async fn the_memory_session_store_keeps_the_contract() {
        crate::state::contract::session_store(|idle| {
            std::sync::Arc::new(MemorySessionStore::new(100, idle))
        })
        .await;
    }
}
