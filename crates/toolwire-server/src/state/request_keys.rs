//! Where a server's request-state keys come from: a ring it was given (or drew at random), or
//! the ring kept in a shared store, read at start and kept fresh.

#[cfg(feature = "redis")]
use std::sync::Arc;

use crate::state::StoreError;
use crate::state::request_state::{Binding, Opened, RequestStateKeys, StateError};

/// The keys that seal and open a server's request state.
#[derive(Debug, Clone)]
pub(crate) enum RequestKeys {
    /// A ring of this process's own (given, or random).
    Fixed(RequestStateKeys),
    /// The ring every instance sharing a store keeps there.
    #[cfg(feature = "redis")]
    Shared(Arc<crate::state::redis::SharedKeyRing>),
}

/// The shared ring has not been read yet (the store was away since the server started).
#[cfg(feature = "redis")]
#[derive(Debug, thiserror::Error)]
#[error("the request-state key ring has not been read from the state store yet")]
struct NotRead;

impl RequestKeys {
    /// Seals with the newest key; fails if the shared ring was never read.
    pub(crate) fn seal(
        &self,
        binding: &Binding,
        state: Option<serde_json::Value>,
        expires_ms: u64,
    ) -> Result<String, StoreError> {
        match self {
            RequestKeys::Fixed(keys) => Ok(keys.seal(binding, state, expires_ms)),
            #[cfg(feature = "redis")]
            RequestKeys::Shared(ring) => {
                let keys = ring
                    .current()
                    .ok_or_else(|| StoreError::unavailable(NotRead))?;
                Ok(keys.seal(binding, state, expires_ms))
            }
        }
    }

    /// Reads the shared ring if it never was (at most once a second while the store is
    /// away), so that [`RequestKeys::seal`] can seal; a failure is left for the seal to
    /// report.
    pub(crate) async fn ready(&self) {
        #[cfg(feature = "redis")]
        if let RequestKeys::Shared(ring) = self {
            ring.ready().await;
        }
    }

    /// Opens a token: the shared ring is read first if it never was, and again (at most once
    /// a second) if the token names a key it does not hold, as after a rotation.
    pub(crate) async fn open(
        &self,
        token: &str,
        binding: &Binding,
        now_ms: u64,
    ) -> Result<Result<Opened, StateError>, StoreError> {
        match self {
            RequestKeys::Fixed(keys) => Ok(keys.open(token, binding, now_ms)),
            #[cfg(feature = "redis")]
            RequestKeys::Shared(ring) => {
                let keys = ring.keys().await?;
                if !keys.knows_key_of(token) {
                    if let Some(fresh) = ring.refresh_for_unknown_key().await {
                        return Ok(fresh.open(token, binding, now_ms));
                    }
                }
                Ok(keys.open(token, binding, now_ms))
            }
        }
    }
}

impl From<RequestStateKeys> for RequestKeys {
    fn from(keys: RequestStateKeys) -> Self {
        RequestKeys::Fixed(keys)
    }
}
