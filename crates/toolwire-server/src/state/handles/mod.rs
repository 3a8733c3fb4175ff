//! Handles (T-21): unguessable, short-lived names for state a tool keeps between calls (a
//! note, a query's cursor, an open session with something), bound to the caller that created
//! them.
//!
//! A [`HandleStore<T>`] hands out identifiers of 128 random bits behind a readable type prefix
//! (`note_…`), keeps values of `T` (as JSON) in a [`HandleBackend`], and checks on every use
//! that the handle is the caller's (another principal's handle reads as unknown, never as
//! "forbidden": its existence is not disclosed) and alive (an idle lifetime, renewed by each
//! use, and an absolute one). The retention is a sentence the model can read, appended to the
//! description of each tool that creates handles ([`crate::Tool::creates_handles`]); an
//! unknown or expired handle is an `isError` result that says how to recover.
//!
//! Backends: [`MemoryHandles`] (bounded, gone with the process) and, with the `sqlite`
//! feature, [`SqliteHandles`] (a file that survives restarts; expired rows purged). A shared
//! backend for several replicas implements the same trait: [`crate::Store::handle_backend`]
//! gives the one of a store (Redis, with the `redis` feature).

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::{Clock, SystemClock};
use crate::request::context::RequestContext;
use crate::request::mrtr::ToolError;
use crate::state::{StoreError, UPDATE_ATTEMPTS, step_aside};

pub use memory::MemoryHandles;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteHandles;

/// How long a handle lives after its last use unless its store says otherwise.
pub const DEFAULT_HANDLE_IDLE: Duration = Duration::from_secs(30 * 60);

/// How long a handle lives at most unless its store says otherwise.
pub const DEFAULT_HANDLE_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// The key of a tool definition's `_meta` that lists the handles it creates:
/// `[{"kind", "idleMs", "maxAgeMs"}]`.
pub const HANDLES_META_KEY: &str = "dev.toolwire/handles";

/// Expired handles are purged once every this many creations (the first one included).
const PURGE_EVERY: u64 = 64;

/// A backend's own failure (I/O, a database error). A backend whose store cannot be reached
/// returns a boxed [`StoreError::Unavailable`], which the model is told as such (try again),
/// not as an internal error.
pub type BackendError = crate::state::BoxError;

/// One handle as a backend keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandleRecord {
    /// The identifier, prefix included.
    pub id: String,
    /// The principal it belongs to; empty for anonymous callers.
    pub owner: String,
    /// The value, as JSON text.
    pub value: String,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: u64,
    /// When it ends whatever happens.
    pub expires_ms: u64,
    /// When it ends unless used again.
    pub idle_until_ms: u64,
    /// Incremented by each change; [`HandleBackend::replace`] compares it.
    pub version: u64,
}

impl HandleRecord {
    /// A new record (version 0).
    pub fn new(
        id: String,
        owner: String,
        value: String,
        created_ms: u64,
        expires_ms: u64,
        idle_until_ms: u64,
    ) -> Self {
        HandleRecord {
            id,
            owner,
            value,
            created_ms,
            expires_ms,
            idle_until_ms,
            version: 0,
        }
    }

    /// Whether it is still alive at `now_ms`.
    pub fn alive_at(&self, now_ms: u64) -> bool {
        now_ms < self.expires_ms && now_ms < self.idle_until_ms
    }
}

/// Where handles live. Implementations must be safe to share between tasks; every method may
/// do I/O. A backend shared by several server replicas (a database, Redis) implements this.
pub trait HandleBackend: Send + Sync + 'static {
    /// Stores a new record.
    fn insert(&self, record: HandleRecord) -> BoxFuture<'_, Result<(), BackendError>>;

    /// The record `id`, expired or not, if it is still stored.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<HandleRecord>, BackendError>>;

    /// Replaces the stored record of `record.id` if its version is `record.version - 1`;
    /// `false` if it changed in between or is gone (the caller reads again).
    fn replace(&self, record: HandleRecord) -> BoxFuture<'_, Result<bool, BackendError>>;

    /// Removes `id`; whether it was there.
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, BackendError>>;

    /// Removes every record no longer alive at `now_ms`; how many.
    fn purge(&self, now_ms: u64) -> BoxFuture<'_, Result<u64, BackendError>>;
}

/// Why a handle could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandleError {
    /// Never issued, another caller's, or purged after it expired: the model is told how to
    /// recover.
    #[error(
        "The {kind} handle {id} is unknown: it was never issued to you, or it expired and was removed ({retention}). {recovery}"
    )]
    Unknown {
        /// The store's kind.
        kind: String,
        /// The identifier as given (shortened).
        id: String,
        /// The retention sentence.
        retention: String,
        /// What to do instead.
        recovery: String,
    },
    /// Expired and not yet purged.
    #[error("The {kind} handle {id} has expired ({retention}). {recovery}")]
    Expired {
        /// The store's kind.
        kind: String,
        /// The identifier.
        id: String,
        /// The retention sentence.
        retention: String,
        /// What to do instead.
        recovery: String,
    },
    /// The backend holds as many handles as it may.
    #[error("Too many {kind} handles are open; try again later, or finish with some first.")]
    Full {
        /// The store's kind.
        kind: String,
    },
    /// The value changed under every attempt to update it.
    #[error("The {kind} handle {id} is being changed by other calls; try again.")]
    Busy {
        /// The store's kind.
        kind: String,
        /// The identifier.
        id: String,
    },
    /// The backend's store cannot be reached for now.
    #[error(
        "The {kind} handles cannot be reached right now: the state store is unavailable; try again in a moment."
    )]
    Unavailable {
        /// The store's kind.
        kind: String,
        /// What the backend reported.
        #[source]
        source: StoreError,
    },
    /// The backend failed.
    #[error("handle backend: {0}")]
    Backend(BackendError),
    /// A stored value does not read as the store's type.
    #[error("stored handle value: {0}")]
    Value(#[from] serde_json::Error),
    /// The store's kind cannot be a prefix.
    #[error("handle kind {0:?}: use 1 to 16 of a-z, 0-9, starting with a letter")]
    InvalidKind(String),
}

impl From<HandleError> for ToolError {
    /// What the model can act on is an `isError` result; backend failures are internal.
    fn from(error: HandleError) -> Self {
        match error {
            HandleError::Backend(_) | HandleError::Value(_) | HandleError::InvalidKind(_) => {
                ToolError::internal(error)
            }
            _ => ToolError::failed(error.to_string()),
        }
    }
}

/// Handles of one kind, holding values of `T`. Cheap to clone; clones share the backend.
pub struct HandleStore<T> {
    inner: Arc<StoreInner>,
    _values: PhantomData<fn() -> T>,
}

impl<T> Clone for HandleStore<T> {
    fn clone(&self) -> Self {
        HandleStore {
            inner: self.inner.clone(),
            _values: PhantomData,
        }
    }
}

struct StoreInner {
    kind: String,
    backend: Arc<dyn HandleBackend>,
    idle: Duration,
    max_age: Duration,
    recovery: String,
    clock: Arc<dyn Clock>,
    creations: AtomicU64,
}

impl<T> std::fmt::Debug for HandleStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandleStore")
            .field("kind", &self.inner.kind)
            .field("idle", &self.inner.idle)
            .field("max_age", &self.inner.max_age)
            .finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> HandleStore<T> {
    /// A store of `kind` handles (the identifiers' prefix: 1–16 of `a-z0-9`, starting with a
    /// letter) in `backend`; several stores may share one backend.
    pub fn new(
        kind: impl Into<String>,
        backend: Arc<dyn HandleBackend>,
    ) -> Result<Self, HandleError> {
        let kind = kind.into();
        let valid = (1..=16).contains(&kind.len())
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !valid {
            return Err(HandleError::InvalidKind(kind));
        }
        let recovery = format!("Create a new {kind} and use its handle.");
        Ok(HandleStore {
            inner: Arc::new(StoreInner {
                kind,
                backend,
                idle: DEFAULT_HANDLE_IDLE,
                max_age: DEFAULT_HANDLE_MAX_AGE,
                recovery,
                clock: Arc::new(SystemClock),
                creations: AtomicU64::new(0),
            }),
            _values: PhantomData,
        })
    }

    /// A store in memory of its own (at most [`MemoryHandles::DEFAULT_MAX`] handles).
    pub fn in_memory(kind: impl Into<String>) -> Result<Self, HandleError> {
        Self::new(kind, Arc::new(MemoryHandles::default()))
    }

    /// How long a handle lives after its last use (default 30 minutes) and at most (default
    /// 24 hours). Both at least a millisecond; the idle one at most the other.
    pub fn lifetimes(mut self, idle: Duration, max_age: Duration) -> Self {
        let max_age = max_age.max(Duration::from_millis(1));
        let inner = self.inner_mut();
        inner.idle = idle.clamp(Duration::from_millis(1), max_age);
        inner.max_age = max_age;
        self
    }

    /// What the model should do when a handle is unknown or expired (default: "Create a new
    /// KIND and use its handle."), e.g. "Call notes_create to start a new note."
    pub fn recovery(mut self, hint: impl Into<String>) -> Self {
        self.inner_mut().recovery = hint.into();
        self
    }

    /// The clock lifetimes are measured with (tests use [`crate::ManualClock`]).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.inner_mut().clock = clock;
        self
    }

    /// The configuration to change: this store's own (clones made before keep theirs).
    fn inner_mut(&mut self) -> &mut StoreInner {
        if Arc::get_mut(&mut self.inner).is_none() {
            let shared = &self.inner;
            self.inner = Arc::new(StoreInner {
                kind: shared.kind.clone(),
                backend: shared.backend.clone(),
                idle: shared.idle,
                max_age: shared.max_age,
                recovery: shared.recovery.clone(),
                clock: shared.clock.clone(),
                creations: AtomicU64::new(0),
            });
        }
        Arc::get_mut(&mut self.inner).expect("a store of its own")
    }

    /// The kind (the identifiers' prefix).
    pub fn kind(&self) -> &str {
        &self.inner.kind
    }

    /// The retention, in a sentence the model reads: "note handles stay valid for 30
    /// minutes after their last use and for 24 hours at most".
    pub fn retention(&self) -> String {
        format!(
            "{} handles stay valid for {} after their last use and for {} at most",
            self.inner.kind,
            human(self.inner.idle),
            human(self.inner.max_age)
        )
    }

    /// The `_meta` entry describing these handles.
    pub(crate) fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": self.inner.kind,
            "idleMs": self.inner.idle.as_millis() as u64,
            "maxAgeMs": self.inner.max_age.as_millis() as u64,
        })
    }

    /// Stores `value` for the caller and returns its new handle.
    pub async fn create(&self, ctx: &RequestContext, value: &T) -> Result<String, HandleError> {
        self.create_as(ctx.principal(), value).await
    }

    /// Stores `value` for `owner` (`None`: anonymous) and returns its new handle.
    pub async fn create_as(&self, owner: Option<&str>, value: &T) -> Result<String, HandleError> {
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        if inner.creations.fetch_add(1, Ordering::Relaxed) % PURGE_EVERY == 0 {
            let purged = inner
                .backend
                .purge(now)
                .await
                .map_err(|e| self.backend_error(e))?;
            if purged > 0 {
                tracing::debug!(kind = %inner.kind, purged, "expired handles purged");
            }
        }
        let bits: [u8; 16] = rand::random();
        let id = format!(
            "{}_{}",
            inner.kind,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bits)
        );
        let record = HandleRecord::new(
            id.clone(),
            owner.unwrap_or_default().to_owned(),
            serde_json::to_string(value)?,
            now,
            now.saturating_add(inner.max_age.as_millis() as u64),
            now.saturating_add(inner.idle.as_millis() as u64),
        );
        inner
            .backend
            .insert(record)
            .await
            .map_err(|e| self.backend_error(e))?;
        Ok(id)
    }

    /// The value of the caller's handle `id`; the use renews its idle lifetime.
    pub async fn get(&self, ctx: &RequestContext, id: &str) -> Result<T, HandleError> {
        self.get_as(ctx.principal(), id).await
    }

    /// The value of `owner`'s handle `id` (`None`: anonymous); the use renews it.
    pub async fn get_as(&self, owner: Option<&str>, id: &str) -> Result<T, HandleError> {
        self.change_as(owner, id, |_| ()).await
    }

    /// Changes the value of the caller's handle `id` with `change` (run again if another call
    /// changed it in between, so it should only compute) and returns what `change` returned.
    pub async fn update<R>(
        &self,
        ctx: &RequestContext,
        id: &str,
        change: impl FnMut(&mut T) -> R,
    ) -> Result<R, HandleError> {
        self.update_as(ctx.principal(), id, change).await
    }

    /// [`HandleStore::update`] for `owner` (`None`: anonymous).
    pub async fn update_as<R>(
        &self,
        owner: Option<&str>,
        id: &str,
        mut change: impl FnMut(&mut T) -> R,
    ) -> Result<R, HandleError> {
        let mut out = None;
        self.change_as(owner, id, |value| out = Some(change(value)))
            .await?;
        out.ok_or_else(|| HandleError::Backend("the change did not run".into()))
    }

    /// Removes the caller's handle `id`.
    pub async fn remove(&self, ctx: &RequestContext, id: &str) -> Result<(), HandleError> {
        self.remove_as(ctx.principal(), id).await
    }

    /// Removes `owner`'s handle `id` (`None`: anonymous).
    pub async fn remove_as(&self, owner: Option<&str>, id: &str) -> Result<(), HandleError> {
        let record = self.live_record(owner, id).await?;
        self.inner
            .backend
            .remove(&record.id)
            .await
            .map_err(|e| self.backend_error(e))?;
        Ok(())
    }

    /// Removes every expired handle of the backend now; how many.
    pub async fn purge_expired(&self) -> Result<u64, HandleError> {
        let now = self.inner.clock.now_ms();
        self.inner
            .backend
            .purge(now)
            .await
            .map_err(|e| self.backend_error(e))
    }

    /// A backend's failure as the model reads it: full, away for now (both say what to do),
    /// or internal.
    fn backend_error(&self, error: BackendError) -> HandleError {
        let kind = || self.inner.kind.clone();
        if error.is::<memory::Full>() {
            return HandleError::Full { kind: kind() };
        }
        match error.downcast::<StoreError>() {
            Ok(store) => match *store {
                source @ StoreError::Unavailable(_) => HandleError::Unavailable {
                    kind: kind(),
                    source,
                },
                other => HandleError::Backend(Box::new(other)),
            },
            Err(error) => HandleError::Backend(error),
        }
    }

    /// Reads, changes (maybe not at all) and writes back `id` with its idle lifetime renewed;
    /// retried when another call wrote in between.
    async fn change_as(
        &self,
        owner: Option<&str>,
        id: &str,
        mut change: impl FnMut(&mut T),
    ) -> Result<T, HandleError> {
        let inner = &self.inner;
        for attempt in 0..UPDATE_ATTEMPTS {
            // Another call wrote in between: step aside for a random moment that grows.
            step_aside(attempt).await;
            let mut record = self.live_record(owner, id).await?;
            let mut value: T = serde_json::from_str(&record.value)?;
            change(&mut value);
            let now = inner.clock.now_ms();
            record.value = serde_json::to_string(&value)?;
            record.idle_until_ms = now.saturating_add(inner.idle.as_millis() as u64);
            record.version += 1;
            if inner
                .backend
                .replace(record)
                .await
                .map_err(|e| self.backend_error(e))?
            {
                return Ok(value);
            }
        }
        Err(HandleError::Busy {
            kind: inner.kind.clone(),
            id: shown(id),
        })
    }

    /// The record of `id` if it is `owner`'s and alive.
    async fn live_record(
        &self,
        owner: Option<&str>,
        id: &str,
    ) -> Result<HandleRecord, HandleError> {
        let inner = &self.inner;
        let unknown = || HandleError::Unknown {
            kind: inner.kind.clone(),
            id: shown(id),
            retention: self.retention(),
            recovery: inner.recovery.clone(),
        };
        let ours = id
            .strip_prefix(inner.kind.as_str())
            .is_some_and(|rest| rest.starts_with('_'));
        if !ours {
            return Err(unknown());
        }
        let record = inner
            .backend
            .get(id)
            .await
            .map_err(|e| self.backend_error(e))?;
        // Another principal's handle is as unknown as one never issued.
        let Some(record) = record.filter(|r| r.owner == owner.unwrap_or_default()) else {
            return Err(unknown());
        };
        if !record.alive_at(inner.clock.now_ms()) {
            return Err(HandleError::Expired {
                kind: inner.kind.clone(),
                id: shown(id),
                retention: self.retention(),
                recovery: inner.recovery.clone(),
            });
        }
        Ok(record)
    }
}

/// An identifier as it may be shown back: at most 64 characters.
fn shown(id: &str) -> String {
    match id.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

/// "30 minutes", "24 hours", "1 day", "90 seconds", "250 ms".
fn human(duration: Duration) -> String {
    let ms = duration.as_millis() as u64;
    let (n, unit) = if ms % 86_400_000 == 0 {
        (ms / 86_400_000, "day")
    } else if ms % 3_600_000 == 0 {
        (ms / 3_600_000, "hour")
    } else if ms % 60_000 == 0 {
        (ms / 60_000, "minute")
    } else if ms % 1000 == 0 {
        (ms / 1000, "second")
    } else {
        return format!("{ms} ms");
    };
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// What a tool that creates handles says about them: a sentence for its description and an
/// entry for its `_meta`. Made from a [`HandleStore`].
#[derive(Debug, Clone)]
pub struct HandleRetention {
    pub(crate) sentence: String,
    pub(crate) meta: serde_json::Value,
}

impl<T: Serialize + DeserializeOwned> From<&HandleStore<T>> for HandleRetention {
    fn from(store: &HandleStore<T>) -> Self {
        let mut sentence = store.retention();
        // A sentence starts with a capital.
        if let Some(first) = sentence.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        HandleRetention {
            sentence: format!("{sentence}; after that, or for another caller, they are unknown."),
            meta: store.describe(),
        }
    }
}

#[cfg(test)]
mod tests;
