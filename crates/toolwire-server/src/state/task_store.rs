//! The tasks extension's state: task records and their pluggable [`TaskStore`], and the
//! handlers still running. The methods that serve tasks, and what it takes to run a task's
//! handler again, are in `tools/tasks.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ClientCapabilities, ErrorObject, InputRequests, InputResponses, JsonObject, TASKS_EXTENSION,
    TaskInfo, TaskStatus,
};

use crate::state::StoreError;
use crate::state::expiry::ExpiringMap;

/// A task as stored: its public view and what `tasks/get` reports by status.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The task.
    pub info: TaskInfo,
    /// Who created it; nobody else sees it.
    pub principal: Option<String>,
    /// Open input requests (status `input_required`).
    pub input_requests: Option<InputRequests>,
    /// The tool's result (status `completed`).
    pub result: Option<Value>,
    /// The error (status `failed`).
    pub error: Option<ErrorObject>,
    /// The instance running its handler (its server's instance id): while the task has not
    /// ended, another instance that finds this one's heartbeat gone ends it as failed.
    pub owner: Option<String>,
    /// The OAuth scopes of its tool, which whoever answers its input requests must hold
    /// (T-21), on whichever instance they answer.
    pub scopes: Vec<String>,
    /// Answers to its input requests given on another instance than its owner, waiting for
    /// the owner to take them to its handler.
    pub answers: Option<InputResponses>,
    /// When the record may be forgotten (ms since the epoch).
    pub expires_ms: Option<u64>,
    /// Incremented by each change; [`TaskStore::replace`] compares it (0 when inserted).
    pub version: u64,
}

impl TaskRecord {
    /// Takes the answers of a `tasks/update` to its open input requests, as the update is
    /// acknowledged, so that a `tasks/get` after the acknowledgement sees them: the requests
    /// they answer are open no longer, and once none is left the task is working again. With
    /// `hold`, the answers also wait in the record for an owner on another instance. Answers
    /// to requests not open are dropped; false when nothing was answered (nothing changed).
    pub(crate) fn answer(&mut self, responses: &InputResponses, hold: bool) -> bool {
        if self.info.status != TaskStatus::InputRequired {
            return false;
        }
        let Some(open) = self.input_requests.as_mut() else {
            return false;
        };
        let mut answered = false;
        for (key, response) in responses {
            if open.remove(key).is_some() {
                answered = true;
                if hold {
                    let held = self.answers.get_or_insert_with(InputResponses::new);
                    held.insert(key.clone(), response.clone());
                }
            }
        }
        if answered && open.is_empty() {
            self.info.status = TaskStatus::Working;
            self.input_requests = None;
        }
        answered
    }
}

/// Where task records live. Implement it on a shared store to let several server processes
/// answer `tasks/get` (the running handler stays in the process that started it);
/// `toolwire_server::contract` (feature `contract-tests`) is the test suite every implementation must pass.
///
/// A change is a compare-and-swap: read the record, change a copy, and
/// [`replace`](TaskStore::replace) it only if nobody wrote in between (else read again), which
/// a networked store does in one atomic step (a server-side script).
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new record.
    fn insert(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The record, unless unknown or expired at `now_ms`.
    fn get<'a>(
        &'a self,
        task_id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>>;

    /// Replaces the stored record of `record.info.task_id` if its version is
    /// `record.version - 1`; `false` if it changed in between or is gone (the caller reads
    /// again).
    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Says that the server instance `instance` is alive for `ttl_ms` more (a heartbeat key
    /// with that expiry, in a shared store). By default nothing: a store of one process has
    /// no other instance to tell.
    fn heartbeat<'a>(
        &'a self,
        instance: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (instance, ttl_ms);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Whether `instance`'s last heartbeat is still alive. By default true: in a store of one
    /// process, the instance running a task is this one.
    fn is_alive<'a>(&'a self, instance: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = instance;
        Box::pin(std::future::ready(Ok(true)))
    }
}

/// An in-memory [`TaskStore`]; expired records are forgotten as new ones arrive, in O(log n)
/// per record forgotten (an expiry queue, not a sweep).
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    records: Mutex<ExpiringMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    pub(crate) fn records(&self) -> std::sync::MutexGuard<'_, ExpiringMap<String, TaskRecord>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) fn expiry(record: &TaskRecord) -> u64 {
    record.expires_ms.unwrap_or(u64::MAX)
}

impl TaskStore for MemoryTaskStore {
    fn insert(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut records = self.records();
        // The new record's creation time stands in for "now".
        let now = record
            .expires_ms
            .map_or(0, |e| e.saturating_sub(record.info.ttl_ms.unwrap_or(0)));
        records.prune(now);
        records.insert(record.info.task_id.clone(), expiry(&record), record);
        Box::pin(std::future::ready(Ok(())))
    }

    fn get<'a>(
        &'a self,
        task_id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let record = self.records().get(&task_id.to_owned(), now_ms).cloned();
        Box::pin(std::future::ready(Ok(record)))
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreError>> {
        let mut records = self.records();
        let id = record.info.task_id.clone();
        let mut replaced = false;
        records.update(&id, |stored| {
            if stored.version.wrapping_add(1) == record.version {
                *stored = record;
                replaced = true;
            }
            expiry(stored)
        });
        Box::pin(std::future::ready(Ok(replaced)))
    }
}

/// Tasks of one server: the store, and the handles of tasks running in this process.
pub(crate) struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) running: Mutex<HashMap<String, Running>>,
    pub(crate) ttl_ms: u64,
    pub(crate) poll_interval_ms: u64,
    /// This server's instance id, the owner of the tasks it runs.
    pub(crate) instance: String,
    /// How often this instance says it is alive; its heartbeat lives three times as long.
    pub(crate) heartbeat: std::time::Duration,
    /// When the last heartbeat was stored, if one was.
    pub(crate) last_beat: Mutex<Option<std::time::Instant>>,
    /// Set once the watch over running tasks (heartbeat, cancellations and answers from
    /// other instances) is started.
    pub(crate) watching: std::sync::OnceLock<()>,
}

/// How often an instance says it is alive unless set: every 5 seconds (its heartbeat lives
/// 15).
pub const DEFAULT_TASK_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) struct Running {
    pub(crate) cancel: CancellationToken,
    pub(crate) inbox: Arc<Inbox>,
    /// The OAuth scopes of its tool, which whoever answers its input requests must hold.
    pub(crate) scopes: Vec<String>,
}

/// Where `tasks/update` leaves answers for a task's driver. It holds answers only while the task
/// waits for input, and only for the keys it asked for, so what it holds is bounded by the
/// task's own input requests however many updates arrive.
#[derive(Default)]
pub(crate) struct Inbox {
    pub(crate) waiting: Mutex<Option<Waiting>>,
    pub(crate) arrived: Notify,
}

pub(crate) struct Waiting {
    pub(crate) requests: InputRequests,
    pub(crate) answers: InputResponses,
}

impl Inbox {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Option<Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts accepting answers to `requests`.
    pub(crate) fn open(&self, requests: InputRequests) {
        *self.lock() = Some(Waiting {
            requests,
            answers: InputResponses::new(),
        });
    }

    /// Keeps the answers to open requests; anything else (unknown keys, or any update while
    /// the task is working) is dropped.
    pub(crate) fn deliver(&self, responses: InputResponses) {
        let mut waiting = self.lock();
        let Some(waiting) = waiting.as_mut() else {
            return;
        };
        let before = waiting.answers.len();
        for (key, response) in responses {
            if waiting.requests.contains_key(&key) {
                waiting.answers.insert(key, response);
            }
        }
        if waiting.answers.len() > before {
            self.arrived.notify_one();
        }
    }

    /// The requests still unanswered; when none are, the answers (and the inbox closes).
    pub(crate) fn take(&self) -> Result<InputResponses, InputRequests> {
        let mut guard = self.lock();
        let Some(waiting) = guard.as_ref() else {
            return Err(InputRequests::new());
        };
        let remaining: InputRequests = waiting
            .requests
            .iter()
            .filter(|(k, _)| !waiting.answers.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !remaining.is_empty() {
            return Err(remaining);
        }
        Ok(guard.take().map(|w| w.answers).unwrap_or_default())
    }
}

impl Tasks {
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        ttl_ms: u64,
        heartbeat: std::time::Duration,
    ) -> Self {
        Tasks {
            store,
            running: Mutex::new(HashMap::new()),
            ttl_ms,
            poll_interval_ms: 500,
            instance: toolwire_protocol::hex::encode(&rand::random::<[u8; 16]>()),
            heartbeat: heartbeat.max(std::time::Duration::from_millis(10)),
            last_beat: Mutex::new(None),
            watching: std::sync::OnceLock::new(),
        }
    }

    /// How long a heartbeat lives: three beats, so that one late beat is no death.
    pub(crate) fn heartbeat_ttl_ms(&self) -> u64 {
        (self.heartbeat * 3).as_millis() as u64
    }

    pub(crate) fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The capability a client must declare to use tasks.
pub(crate) fn tasks_capability() -> ClientCapabilities {
    let mut extensions = JsonObject::new();
    extensions.insert(TASKS_EXTENSION.into(), json!({}));
    ClientCapabilities {
        extensions: Some(extensions),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_memory_task_store_keeps_the_contract() {
        crate::state::contract::task_store(|| Arc::new(MemoryTaskStore::default())).await;
    }
}
