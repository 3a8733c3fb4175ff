//! The one setting that says where a server's state lives: [`Store::memory`] (the default:
//! this process only) or `Store::redis` (feature `redis`: one Redis or Valkey shared by
//! every instance that names it, so that any instance answers any request).

use std::sync::Arc;
use std::time::Duration;

use crate::state::handles::{HandleBackend, MemoryHandles};
use crate::state::request_state::{MemoryReplayGuard, ReplayGuard};
use crate::state::sessions::{MemorySessionStore, SessionStore};
#[cfg(feature = "redis")]
use crate::state::store_url::StoreUrlError;
use crate::state::task_store::{MemoryTaskStore, TaskStore};

/// The key prefix of a Redis store unless set: `toolwire:`.
pub const DEFAULT_KEY_PREFIX: &str = "toolwire:";

/// How long a call to a Redis store may take unless set: 2 seconds. Past it the call fails as
/// [`crate::state::StoreError::Unavailable`].
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where every piece of a server's state lives: request-state markers (and, unless keys are
/// given, the key ring), task records, legacy sessions and handles. Give it to
/// [`crate::ServerBuilder::store`]; hand [`Store::handle_backend`] to the handle stores of
/// your tools. Cheap to clone; clones share the store (and, in memory, its contents).
#[derive(Clone, Debug)]
pub struct Store {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Memory {
        replay: Arc<MemoryReplayGuard>,
        tasks: Arc<MemoryTaskStore>,
        handles: Arc<MemoryHandles>,
    },
    #[cfg(feature = "redis")]
    Redis(crate::state::redis::Shared),
}

impl Default for Store {
    fn default() -> Self {
        Store::memory()
    }
}

impl Store {
    /// Every state in this process's memory (handles bounded by
    /// [`MemoryHandles::DEFAULT_MAX`]); nothing outlives it or is shared with another.
    pub fn memory() -> Self {
        Store {
            kind: Kind::Memory {
                replay: Arc::new(MemoryReplayGuard::default()),
                tasks: Arc::new(MemoryTaskStore::default()),
                handles: Arc::new(MemoryHandles::default()),
            },
        }
    }

    /// Every state in the Redis (or Valkey) at `url`: `redis://HOST:PORT[/DB]`, or
    /// `rediss://…` for TLS (feature `redis-tls`); a password as `redis://:PASSWORD@HOST…`.
    /// Nothing connects yet: the first call does, and a call made while Redis is away fails as
    /// [`crate::state::StoreError::Unavailable`] within the store's timeout, the next one connecting
    /// again. See the key layout and what an acknowledged write survives in
    /// [`Store::handle_backend`] and the crate's Redis notes.
    #[cfg(feature = "redis")]
    pub fn redis(url: &str) -> Result<Self, StoreUrlError> {
        let client = crate::state::store_url::client(url)?;
        Ok(Store {
            kind: Kind::Redis(Arc::new(crate::state::redis::Redis::new(
                client,
                DEFAULT_KEY_PREFIX.to_owned(),
                DEFAULT_STORE_TIMEOUT,
            ))),
        })
    }

    /// The prefix of every key of a Redis store (default [`DEFAULT_KEY_PREFIX`]), so that
    /// several services can share one Redis; instances of one service must use the same. No
    /// effect in memory.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub fn key_prefix(self, prefix: impl Into<String>) -> Self {
        match self.kind {
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => Store {
                kind: Kind::Redis(Arc::new(redis.with(prefix.into(), redis.timeout()))),
            },
            memory => Store { kind: memory },
        }
    }

    /// How long a call to a Redis store may take (default [`DEFAULT_STORE_TIMEOUT`], at
    /// least 1 ms); past it the call fails as unavailable. No effect in memory.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub fn timeout(self, limit: Duration) -> Self {
        match self.kind {
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => {
                let limit = limit.max(Duration::from_millis(1));
                Store {
                    kind: Kind::Redis(Arc::new(redis.with(redis.prefix().to_owned(), limit))),
                }
            }
            memory => Store { kind: memory },
        }
    }

    /// Whether the store is shared with other processes (not in memory).
    pub fn is_shared(&self) -> bool {
        !matches!(self.kind, Kind::Memory { .. })
    }

    /// The replay guard of single-use request state (M-08).
    pub fn replay_guard(&self) -> Arc<dyn ReplayGuard> {
        match &self.kind {
            Kind::Memory { replay, .. } => replay.clone(),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => {
                Arc::new(crate::state::redis::RedisReplayGuard::new(redis.clone()))
            }
        }
    }

    /// Where task records live.
    pub fn task_store(&self) -> Arc<dyn TaskStore> {
        match &self.kind {
            Kind::Memory { tasks, .. } => tasks.clone(),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => Arc::new(crate::state::redis::RedisTaskStore::new(redis.clone())),
        }
    }

    /// Where legacy sessions live: at most `max_sessions` live ones (across every instance of
    /// a shared store), each ended after `idle` without a request. In memory each call makes a
    /// store of its own.
    pub fn session_store(&self, max_sessions: usize, idle: Duration) -> Arc<dyn SessionStore> {
        match &self.kind {
            Kind::Memory { .. } => Arc::new(MemorySessionStore::new(max_sessions, idle)),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => Arc::new(crate::state::redis::RedisSessionStore::new(
                redis.clone(),
                max_sessions,
                idle,
            )),
        }
    }

    /// A fan-out of changes for one server: in memory, this process's own (each call makes a
    /// new one, so servers do not hear each other's changes); in a shared store, one that
    /// also carries every change to every other instance of the store and theirs to this one
    /// (Redis pub/sub on `PREFIX changes`, a connection of its own that subscribes again by
    /// itself after Redis comes back).
    ///
    /// While Redis is away, this instance's listeners still get this instance's changes;
    /// others' are lost, a warning is logged once per outage, and once the link is back
    /// every listener is told that everything may have changed ([`crate::Change::Missed`]).
    pub fn change_fan_out(&self) -> Arc<dyn crate::state::fanout::ChangeFanOut> {
        self.fan_out_and_relay().0
    }

    /// The change fan-out, and the session relay that shares its subscription (`None` in
    /// memory, where one process holds every session): a legacy client's answer or
    /// cancellation that reached an instance other than the one running its request goes
    /// through the relay (Redis pub/sub on `PREFIX sessions-relay`).
    pub(crate) fn fan_out_and_relay(
        &self,
    ) -> (
        Arc<dyn crate::state::fanout::ChangeFanOut>,
        Option<Arc<dyn crate::state::relay::SessionRelay>>,
    ) {
        match &self.kind {
            Kind::Memory { .. } => (
                Arc::new(crate::state::fanout::MemoryFanOut::default()),
                None,
            ),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => {
                let fan_out = crate::state::redis::RedisFanOut::new(redis.clone());
                let relay = Arc::new(fan_out.session_relay());
                (Arc::new(fan_out), Some(relay))
            }
        }
    }

    /// Tool rate limits shared by every instance (a quota per caller × tool across all of
    /// them), in a shared store; `None` in memory, where each server keeps its own.
    pub(crate) fn shared_limits(&self) -> Option<crate::state::shared_limits::SharedLimits> {
        match &self.kind {
            Kind::Memory { .. } => None,
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => Some(crate::state::shared_limits::SharedLimits::new(Box::new(
                crate::state::redis::RedisRateLimits::new(redis.clone()),
            ))),
        }
    }

    /// Where handles live, for [`crate::HandleStore::new`]: the same backend for every tool
    /// and every instance of a shared store.
    ///
    /// In Redis, a write acknowledged to the tool is in Redis's memory: it survives the death
    /// of any Toolwire instance, and a restart of Redis only with Redis persistence configured
    /// (`appendonly yes`; with `appendfsync everysec` about a second of writes can be lost on
    /// a power cut). Without persistence, a Redis restart forgets every handle.
    pub fn handle_backend(&self) -> Arc<dyn HandleBackend> {
        match &self.kind {
            Kind::Memory { handles, .. } => handles.clone(),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => Arc::new(crate::state::redis::RedisHandles::new(redis.clone())),
        }
    }

    /// Puts a new random key first in the shared request-state key ring and returns its id;
    /// `None` in memory (rotate a server's own keys with
    /// [`crate::RequestStateKeys::rotate`]). Every instance opens states sealed with the new
    /// key at once and seals with it within 30 seconds; the ring keeps four retired keys, so
    /// states sealed before stay open until they expire unless five rotations come within
    /// their life.
    pub async fn rotate_request_state_key(&self) -> Result<Option<u8>, crate::state::StoreError> {
        match &self.kind {
            Kind::Memory { .. } => Ok(None),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => crate::state::redis::SharedKeyRing::new(redis.clone())
                .rotate()
                .await
                .map(Some),
        }
    }

    /// Whether the store answers: always in memory; a Redis store must answer `PING` within
    /// its timeout (`/readyz` asks this). The error never shows the store's URL or password.
    pub async fn ping(&self) -> Result<(), crate::state::StoreError> {
        match &self.kind {
            Kind::Memory { .. } => Ok(()),
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => redis.ping().await,
        }
    }

    /// Counts the store's calls in `metrics` (the first server with metrics to use it).
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) fn count_calls_in(&self, metrics: &crate::observe::Metrics) {
        match &self.kind {
            Kind::Memory { .. } => {}
            #[cfg(feature = "redis")]
            Kind::Redis(redis) => redis.count_calls_in(metrics),
        }
    }

    /// The key ring kept in this store, if it is shared.
    #[cfg(feature = "redis")]
    pub(crate) fn key_ring(&self) -> Option<Arc<crate::state::redis::SharedKeyRing>> {
        match &self.kind {
            Kind::Memory { .. } => None,
            Kind::Redis(redis) => Some(crate::state::redis::SharedKeyRing::new(redis.clone())),
        }
    }
}
