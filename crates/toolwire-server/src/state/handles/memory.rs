//! Handles in memory: a bounded map, gone with the process.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

use super::{BackendError, HandleBackend, HandleRecord};

/// A [`HandleBackend`] in memory, holding at most `max` handles (expired ones are purged to
/// make room; beyond that, creating one fails with [`super::HandleError::Full`]).
#[derive(Debug)]
pub struct MemoryHandles {
    records: Mutex<HashMap<String, HandleRecord>>,
    max: usize,
}

/// The backend is full (a [`BackendError`] the store reports as `HandleError::Full`).
#[derive(Debug, thiserror::Error)]
#[error("the handle store is full")]
pub(super) struct Full;

impl MemoryHandles {
    /// The most handles [`MemoryHandles::default`] holds.
    pub const DEFAULT_MAX: usize = 100_000;

    /// A store of at most `max` handles.
    pub fn new(max: usize) -> Self {
        MemoryHandles {
            records: Mutex::new(HashMap::new()),
            max: max.max(1),
        }
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, HandleRecord>> {
        // A panic while holding the lock cannot leave a record half-written: use the map.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for MemoryHandles {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX)
    }
}

impl HandleBackend for MemoryHandles {
    fn insert(&self, record: HandleRecord) -> BoxFuture<'_, Result<(), BackendError>> {
        let mut records = self.records();
        if records.len() >= self.max {
            let now = record.created_ms;
            records.retain(|_, r| r.alive_at(now));
        }
        let outcome = if records.len() >= self.max {
            Err(Box::new(Full) as BackendError)
        } else {
            records.insert(record.id.clone(), record);
            Ok(())
        };
        Box::pin(std::future::ready(outcome))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<HandleRecord>, BackendError>> {
        let record = self.records().get(id).cloned();
        Box::pin(std::future::ready(Ok(record)))
    }

    fn replace(&self, record: HandleRecord) -> BoxFuture<'_, Result<bool, BackendError>> {
        let mut records = self.records();
        let replaced = match records.get_mut(&record.id) {
            Some(stored) if stored.version + 1 == record.version => {
                *stored = record;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(replaced)))
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, BackendError>> {
        let removed = self.records().remove(id).is_some();
        Box::pin(std::future::ready(Ok(removed)))
    }

    fn purge(&self, now_ms: u64) -> BoxFuture<'_, Result<u64, BackendError>> {
        let mut records = self.records();
        let before = records.len();
        records.retain(|_, r| r.alive_at(now_ms));
        let purged = (before - records.len()) as u64;
        Box::pin(std::future::ready(Ok(purged)))
    }
}
