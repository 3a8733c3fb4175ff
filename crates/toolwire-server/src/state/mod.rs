//! What outlives a single request, each behind a trait that a shared backend can implement:
//! sealed [`request_state`] and its replay guard, task records ([`task_store`]), [`handles`] a
//! tool keeps between calls, the [`sessions`] of legacy HTTP clients, and the
//! [`shared_limits`] that hold every instance's callers to one quota. The in-memory
//! backends forget what has expired through an [`expiry`] map.
//!
//! Every store may fail (a shared one lives across a network): the traits are asynchronous and
//! fallible, their failures a [`StoreError`], and the `contract` test suites (feature
//! `contract-tests`) are what every backend must pass, the in-memory ones and a shared one
//! alike.
//!
//! Which backends a server uses is one setting, a [`store::Store`]: in memory (the default) or,
//! with the `redis` feature, one Redis or Valkey shared by every instance that names it.

#[cfg(any(test, feature = "contract-tests"))]
pub mod contract;
pub(crate) mod expiry;
pub(crate) mod fanout;
pub mod handles;
#[cfg(feature = "redis")]
pub(crate) mod redis;
pub(crate) mod relay;
pub(crate) mod request_keys;
pub(crate) mod request_state;
pub(crate) mod sessions;
pub(crate) mod shared_limits;
pub(crate) mod store;
pub(crate) mod store_url;
pub(crate) mod task_store;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use toolwire_protocol::ErrorObject;

/// A store's own failure, as the backend reports it (a connection error, a parse error).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a state store could not answer. Whoever asked fails closed: a request that needs the
/// answer is refused, never served as if the store had said yes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or did not answer in time; the same request may succeed
    /// once it is back.
    #[error("the state store is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// A stored record does not read as what it should be.
    #[error("a record in the state store is corrupt: {0}")]
    Corrupt(#[source] BoxError),
    /// A record changed under every attempt to update it.
    #[error("a record in the state store kept changing under every attempt to update it")]
    Contended,
}

impl StoreError {
    /// The store is away: `cause` says why.
    pub fn unavailable(cause: impl Into<BoxError>) -> Self {
        StoreError::Unavailable(cause.into())
    }

    /// A stored record is unreadable: `cause` says why.
    pub fn corrupt(cause: impl Into<BoxError>) -> Self {
        StoreError::Corrupt(cause.into())
    }

    /// The JSON-RPC error (-32603) of a request refused because of this, `failed` saying what
    /// could not be done ("The task could not be read"): a sentence a person can act on,
    /// without the cause (which may name hosts), which is logged here instead.
    /// While the store is away every request that needs it is refused, so the log gets at
    /// most one line a second of it, saying how many refusals it left out.
    pub(crate) fn refusal(&self, failed: &str) -> ErrorObject {
        static GATE: LogGate = LogGate::new(Duration::from_secs(1));
        if let Some(left_out) = GATE.admit(std::time::Instant::now()) {
            tracing::error!(error = %self, left_out, "{failed}");
        }
        ErrorObject::internal(format!("{failed}: {}", self.advice()))
    }

    /// What the caller can do about it, in words.
    pub(crate) fn advice(&self) -> &'static str {
        match self {
            StoreError::Unavailable(_) => {
                "the server's state store is unavailable; try again in a moment"
            }
            StoreError::Corrupt(_) => "the server's state store holds an unreadable record",
            StoreError::Contended => "the record was being changed by other requests; try again",
        }
    }
}

/// How often a compare-and-swap update is tried before it gives up as contended.
pub(crate) const UPDATE_ATTEMPTS: usize = 32;

/// Steps aside before the next attempt of an update whose record another writer changed: a
/// random moment that grows with the attempt, so that writers racing each other spread out.
pub(crate) async fn step_aside(attempt: usize) {
    if attempt > 0 {
        let wait = rand::random_range(0..=(1u64 << attempt.min(6)));
        tokio::time::sleep(Duration::from_micros(100 * wait)).await;
    }
}

/// Lets a log line through at most once per `every`, counting the ones it held back.
struct LogGate {
    every: Duration,
    /// When a line last went through, and how many were held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogGate {
    const fn new(every: Duration) -> Self {
        LogGate {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Whether a line may go through at `now`: with how many were held back before it.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (last, held_back) = &mut *state;
        if last.is_some_and(|last| now.saturating_duration_since(last) < self.every) {
            *held_back += 1;
            return None;
        }
        *last = Some(now);
        Some(std::mem::take(held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_gate_lets_one_line_a_period_through_and_counts_the_rest() {
        let gate = LogGate::new(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(gate.admit(start), Some(0));
        assert_eq!(gate.admit(start + Duration::from_millis(10)), None);
        assert_eq!(gate.admit(start + Duration::from_millis(999)), None);
        assert_eq!(gate.admit(start + Duration::from_secs(1)), Some(2));
        assert_eq!(gate.admit(start + Duration::from_millis(1_500)), None);
        assert_eq!(gate.admit(start + Duration::from_secs(3)), Some(1));
    }
}
