//! The state stores in Redis (or Valkey, which speaks the same protocol), shared by every
//! instance that names the same store: request-state markers and key ring, task records and
//! heartbeats, legacy sessions, handles, rate-limit buckets and the change fan-out. One connection per [`Store`](crate::Store), multiplexed, made
//! on first use and made again by itself after the store went away.
//!
//! Keys, under a prefix (default `toolwire:`) so that several services can share a Redis:
//!
//! | key | type | what |
//! |---|---|---|
//! | `PREFIX replay:HEX` | string, `PX` | a redeemed request state (`SET NX PX`) |
//! | `PREFIX request-state:keys` | string (JSON) | the request-state key ring |
//! | `PREFIX task:ID` | hash `v r e`, `PX` | a task record: version, JSON, expiry (ms) |
//! | `PREFIX session:ID` | hash `v r until`, `PX` | a legacy session: version, JSON, idle end |
//! | `PREFIX sessions` | sorted set | live session ids by idle end, for the session bound |
//! | `PREFIX handle:ID` | hash `v owner value created expires idle`, `PX` | a handle |
//! | `PREFIX handles` | sorted set | handle ids by end of life, for purges |
//! | `PREFIX instance:ID` | string, `PX` | a server instance's heartbeat (its tasks' owner) |
//! | `PREFIX rate:HEX` | string, `PX` | a rate-limit bucket per tool × caller digest (GCRA arrival time, µs) |
//! | `PREFIX changes` | pub/sub channel | list changes and resource updates, tagged with the instance |
//! | `PREFIX sessions-relay` | pub/sub channel | legacy clients' answers, cancellations and session ends for another instance |
//!
//! Changes to a record are compare-and-swap on its version field, in one server-side script
//! (`EVALSHA`) each. Every record also carries its own expiry, judged by the time each call is
//! given, so that a record is gone when the server's clock says so; the Redis expiry (`PX`)
//! only frees the memory, and is never shorter than the record's life. The scripts touch a
//! record and its index together: a single Redis primary (or Valkey) serves them, not Redis
//! Cluster.
//!
//! Every call is bounded by the store's timeout (default 2 s): a Redis that is down, refuses
//! connections or hangs is [`StoreError::Unavailable`], never a hang or a panic, and a record
//! that does not read as what it should is [`StoreError::Corrupt`].
//!
//! Durability: a write the store acknowledged is in Redis's memory. It survives the death of
//! any Toolwire instance (another serves it); it survives a restart of Redis only with
//! persistence configured there (`appendonly yes`: with `appendfsync everysec`, at most about
//! a second of acknowledged writes is lost on a power cut; RDB snapshots alone lose what came
//! after the last snapshot). Without persistence a Redis restart forgets every record.

mod fanout;
mod handles;
mod keys;
mod rate;
mod relay;
mod replay;
mod sessions;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, FromRedisValue, RedisError, ScriptInvocation};
use tokio::sync::OnceCell;

use crate::observe::metrics::StoreCall;
use crate::state::StoreError;

pub(crate) use fanout::RedisFanOut;
pub(crate) use handles::RedisHandles;
pub(crate) use keys::SharedKeyRing;
pub(crate) use rate::RedisRateLimits;
pub(crate) use replay::RedisReplayGuard;
pub(crate) use sessions::RedisSessionStore;
pub(crate) use tasks::RedisTaskStore;

/// One Redis store: where it is, the prefix of its keys, how long a call may take, and the
/// connection (made on first use).
pub(crate) struct Redis {
    client: redis::Client,
    prefix: String,
    timeout: Duration,
    connection: OnceCell<ConnectionManager>,
    /// Where its calls are counted, once a server with metrics uses it.
    metrics: std::sync::OnceLock<crate::observe::Metrics>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold a password.
        f.debug_struct("Redis")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A call the store did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("the Redis store did not answer within {0:?}")]
pub(super) struct NoAnswer(Duration);

impl Redis {
    pub(crate) fn new(client: redis::Client, prefix: String, timeout: Duration) -> Self {
        Redis {
            client,
            prefix,
            timeout,
            connection: OnceCell::new(),
            metrics: std::sync::OnceLock::new(),
        }
    }

    /// The same store with another prefix or timeout (and a connection of its own).
    pub(crate) fn with(&self, prefix: String, timeout: Duration) -> Self {
        Redis::new(self.client.clone(), prefix, timeout)
    }

    /// Counts its calls in `metrics` from now on (the first metrics given stay).
    pub(crate) fn count_calls_in(&self, metrics: &crate::observe::Metrics) {
        let _ = self.metrics.set(metrics.clone());
    }

    /// `PING`, bounded by the timeout: whether the store answers at all.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection()?;
        let ping = redis::cmd("PING");
        let call = ping.query_async::<String>(&mut connection);
        self.bounded(StoreCall::Ping, call).await.map(drop)
    }

    /// The client, for a connection of its own (a pub/sub subscription).
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The key of `id` among records of `kind`: `PREFIX kind:id`.
    pub(crate) fn key(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    /// A key of its own: `PREFIX name`.
    pub(crate) fn name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The connection, made lazily (it connects on first use and again after a failure).
    fn connection(&self) -> Result<ConnectionManager, StoreError> {
        if let Some(connection) = self.connection.get() {
            return Ok(connection.clone());
        }
        // Retries within one call stay inside its timeout; a later call tries again.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let made = ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            .map_err(StoreError::unavailable)?;
        // Two first calls at once: one connection wins, the other is dropped unused.
        let _ = self.connection.set(made);
        Ok(self.connection.get().cloned().expect("set just now"))
    }

    /// Runs `cmd`, bounded by the timeout.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, StoreError> {
        let mut connection = self.connection()?;
        self.bounded(StoreCall::Command, cmd.query_async(&mut connection))
            .await
    }

    /// Runs a pipeline (a transaction if it is atomic), bounded by the timeout.
    pub(crate) async fn query_pipe<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection()?;
        self.bounded(StoreCall::Pipeline, pipe.query_async(&mut connection))
            .await
    }

    /// Runs a script, bounded by the timeout (`EVALSHA`, loading it first if Redis lacks it).
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        script: &ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection()?;
        self.bounded(StoreCall::Script, script.invoke_async(&mut connection))
            .await
    }

    async fn bounded<T>(
        &self,
        kind: StoreCall,
        call: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        let answer = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(store_error(error)),
            Err(_) => Err(StoreError::unavailable(NoAnswer(self.timeout))),
        };
        if let Some(metrics) = self.metrics.get() {
            metrics.count_store_call(kind, answer.is_err());
        }
        answer
    }
}

/// What a Redis error means for the caller: a reply of the wrong shape is a corrupt record,
/// everything else (refused, reset, timed out, loading, read-only) the store being away.
fn store_error(error: RedisError) -> StoreError {
    use redis::{ErrorKind, ServerErrorKind};
    match error.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => StoreError::corrupt(error),
        ErrorKind::Server(ServerErrorKind::ResponseError)
            if error.to_string().contains("WRONGTYPE") =>
        {
            StoreError::corrupt(error)
        }
        _ => StoreError::unavailable(error),
    }
}

/// A record's JSON text as `T`, or [`StoreError::Corrupt`].
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::corrupt(Unreadable(what, e)))
}

/// A number field of a record, or [`StoreError::Corrupt`].
pub(crate) fn number(what: &'static str, text: &str) -> Result<u64, StoreError> {
    text.parse()
        .map_err(|_| StoreError::corrupt(BadField(what, text.chars().take(32).collect())))
}

#[derive(Debug, thiserror::Error)]
#[error("a stored {0} does not read: {1}")]
struct Unreadable(&'static str, #[source] serde_json::Error);

#[derive(Debug, thiserror::Error)]
#[error("a stored {0} is not a number: {1:?}")]
struct BadField(&'static str, String);

/// The longest Redis expiry set (ten years): Redis refuses one past its clock's range.
const MAX_PX: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The Redis expiry (ms, from 1 to [`MAX_PX`]) of a record that lives until `until_ms`,
/// written at `now_ms`.
pub(crate) fn px(until_ms: u64, now_ms: u64) -> u64 {
    until_ms.saturating_sub(now_ms).clamp(1, MAX_PX)
}

/// Whether one use of the store (the fan-out, the shared rate limits) is in an outage, so that
/// a warning is logged once when it begins, and a note when it ends, not once per failed call.
pub(crate) struct Outage {
    down: std::sync::atomic::AtomicBool,
    what: &'static str,
    meanwhile: &'static str,
}

impl Outage {
    /// `what` the store serves; what happens `meanwhile`.
    pub(crate) fn new(what: &'static str, meanwhile: &'static str) -> Self {
        Outage {
            down: std::sync::atomic::AtomicBool::new(false),
            what,
            meanwhile,
        }
    }

    /// A call failed: warns if this begins an outage.
    pub(crate) fn failed(&self, error: &StoreError) {
        if !self.down.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(%error, "{}: the Redis store is unavailable; until it is back, {}", self.what, self.meanwhile);
        }
    }

    /// A call succeeded: notes the end of an outage.
    pub(crate) fn recovered(&self) {
        if self.down.swap(false, std::sync::atomic::Ordering::Relaxed) {
            tracing::info!("{}: the Redis store is back", self.what);
        }
    }
}

/// The shared handle on one store that every backend holds.
pub(crate) type Shared = Arc<Redis>;
