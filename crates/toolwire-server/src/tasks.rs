//! The tasks extension (`io.modelcontextprotocol/tasks`): a call to a task-capable tool from a
//! client that declared the extension, which does not finish on its first step, becomes a task.
//! The handler keeps running in the background; `tasks/get` reports it, `tasks/update` answers
//! its input requests (the handler then runs again with the answers, as in MRTR), and
//! `tasks/cancel` stops it. Records live in a pluggable [`TaskStore`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CallToolResult, ClientCapabilities, CreateTaskResult, ErrorObject, GetTaskResult,
    InputRequests, InputResponses, JsonObject, RequestId, RequestMeta, ResultType, TASKS_EXTENSION,
    TaskInfo, TaskStatus, iso8601,
};

use crate::call::contained;
use crate::context::RequestContext;
use crate::dispatch::Final;
use crate::mrtr::Round;
use crate::registry::RegisteredTool;
use crate::server::Server;
use crate::tool::ToolError;

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
    /// When the record may be forgotten (ms since the epoch).
    pub expires_ms: Option<u64>,
}

/// Where task records live. Implement it on a shared store to let several server processes
/// answer `tasks/get` (the running handler stays in the process that started it).
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new record.
    fn insert(&self, record: TaskRecord);
    /// The record, unless unknown or expired at `now_ms`.
    fn get(&self, task_id: &str, now_ms: u64) -> Option<TaskRecord>;
    /// Changes a record in place; false if it is unknown.
    fn update(&self, task_id: &str, change: &mut dyn FnMut(&mut TaskRecord)) -> bool;
}

/// An in-memory [`TaskStore`]; expired records are dropped as new ones arrive.
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    records: Mutex<HashMap<String, TaskRecord>>,
}

impl TaskStore for MemoryTaskStore {
    fn insert(&self, record: TaskRecord) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        if records.len() >= 1024 {
            // The new record's creation time stands in for "now".
            let now = record
                .expires_ms
                .map_or(0, |e| e.saturating_sub(record.info.ttl_ms.unwrap_or(0)));
            records.retain(|_, r| r.expires_ms.is_none_or(|e| e > now));
        }
        records.insert(record.info.task_id.clone(), record);
    }

    fn get(&self, task_id: &str, now_ms: u64) -> Option<TaskRecord> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records
            .get(task_id)
            .filter(|r| r.expires_ms.is_none_or(|e| e > now_ms))
            .cloned()
    }

    fn update(&self, task_id: &str, change: &mut dyn FnMut(&mut TaskRecord)) -> bool {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        match records.get_mut(task_id) {
            Some(record) => {
                change(record);
                true
            }
            None => false,
        }
    }
}

/// Tasks of one server: the store, and the handles of tasks running in this process.
pub(crate) struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    running: Mutex<HashMap<String, Running>>,
    pub(crate) ttl_ms: u64,
    pub(crate) poll_interval_ms: u64,
}

struct Running {
    cancel: CancellationToken,
    updates: mpsc::UnboundedSender<InputResponses>,
}

impl Tasks {
    pub(crate) fn new(store: Arc<dyn TaskStore>, ttl_ms: u64) -> Self {
        Tasks {
            store,
            running: Mutex::new(HashMap::new()),
            ttl_ms,
            poll_interval_ms: 500,
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
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

/// What it takes to run a task's handler again after its input requests are answered.
pub(crate) struct Rerun {
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) arguments: Value,
    pub(crate) meta: RequestMeta,
    pub(crate) principal: Option<String>,
    pub(crate) id: RequestId,
}

type Step = BoxFuture<'static, Option<Result<CallToolResult, ToolError>>>;

impl Server {
    fn now(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Starts a task around a handler that did not finish on its first step.
    pub(crate) fn start_task(
        &self,
        rerun: Rerun,
        cancel: CancellationToken,
        step: Step,
    ) -> CreateTaskResult {
        let tasks = &self.inner.tasks;
        let now = self.now();
        let task_id: String = rand::random::<[u8; 16]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let info = TaskInfo {
            task_id: task_id.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: iso8601(now),
            last_updated_at: iso8601(now),
            ttl_ms: Some(tasks.ttl_ms),
            poll_interval_ms: Some(tasks.poll_interval_ms),
        };
        tasks.store.insert(TaskRecord {
            info: info.clone(),
            principal: rerun.principal.clone(),
            input_requests: None,
            result: None,
            error: None,
            expires_ms: Some(now.saturating_add(tasks.ttl_ms)),
        });
        let (updates, rx) = mpsc::unbounded_channel();
        tasks.running().insert(
            task_id.clone(),
            Running {
                cancel: cancel.clone(),
                updates,
            },
        );
        let server = self.clone();
        tokio::spawn(async move {
            server.drive(&task_id, rerun, cancel, rx, step).await;
            server.inner.tasks.running().remove(&task_id);
        });
        CreateTaskResult {
            result_type: ResultType::Task,
            task: info,
            meta: self.result_meta(),
        }
    }

    fn set(&self, task_id: &str, change: impl FnOnce(&mut TaskRecord)) {
        let now = iso8601(self.now());
        let mut change = Some(change);
        self.inner.tasks.store.update(task_id, &mut |record| {
            if let Some(change) = change.take() {
                change(record);
            }
            record.info.last_updated_at = now.clone();
        });
    }

    fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) {
        self.set(task_id, |r| {
            if r.info.status.is_terminal() {
                return;
            }
            r.info.status = status;
            r.input_requests = None;
            r.result = result;
            r.error = error;
        });
    }

    /// Runs a task to its end: each step's outcome completes, fails or pauses it for input.
    async fn drive(
        &self,
        task_id: &str,
        rerun: Rerun,
        cancel: CancellationToken,
        mut updates: mpsc::UnboundedReceiver<InputResponses>,
        mut step: Step,
    ) {
        let name = rerun.tool.name.clone();
        loop {
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => return self.finish(task_id, TaskStatus::Cancelled, None, None),
                outcome = &mut step => outcome,
            };
            let input = match outcome {
                None => return self.complete_task(task_id, crate::call::internal_failure()),
                Some(Ok(result)) => {
                    return self.complete_task(task_id, self.checked_result(&rerun.tool, result));
                }
                Some(Err(ToolError::Failed(message))) => {
                    return self.complete_task(task_id, CallToolResult::error(message));
                }
                Some(Err(ToolError::Internal(error))) => {
                    tracing::error!(tool = %name, %error, "task failed with an internal error");
                    return self.complete_task(task_id, crate::call::internal_failure());
                }
                Some(Err(ToolError::Protocol(error))) => {
                    return self.finish(task_id, TaskStatus::Failed, None, Some(error));
                }
                Some(Err(ToolError::InputRequired(input))) => *input,
            };
            if let Some(missing) = input.missing_capabilities(&rerun.meta.client_capabilities) {
                return self.finish(
                    task_id,
                    TaskStatus::Failed,
                    None,
                    Some(ErrorObject::missing_capability(&missing)),
                );
            }
            if input.problem.is_some() || input.requests.is_empty() {
                tracing::error!(tool = %name, problem = ?input.problem, "a task asked for no usable input");
                return self.complete_task(task_id, crate::call::internal_failure());
            }
            let requests = input.requests;
            let mut answers = InputResponses::new();
            self.set(task_id, |r| {
                r.info.status = TaskStatus::InputRequired;
                r.input_requests = Some(requests.clone());
            });
            while requests.keys().any(|k| !answers.contains_key(k)) {
                let update = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return self.finish(task_id, TaskStatus::Cancelled, None, None),
                    update = updates.recv() => update,
                };
                let Some(update) = update else { return };
                answers.extend(update.into_iter().filter(|(k, _)| requests.contains_key(k)));
                let remaining: InputRequests = requests
                    .iter()
                    .filter(|(k, _)| !answers.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !remaining.is_empty() {
                    self.set(task_id, |r| r.input_requests = Some(remaining));
                }
            }
            self.set(task_id, |r| {
                r.info.status = TaskStatus::Working;
                r.input_requests = None;
            });
            let ctx = RequestContext::new(
                rerun.id.clone(),
                rerun.meta.clone(),
                cancel.clone(),
                self.shutdown_token(),
                None,
                self.inner.config.logging,
            )
            .with_principal(rerun.principal.clone());
            ctx.set_round(Round {
                responses: answers,
                state: input.state,
            });
            let (handler, arguments) = (rerun.tool.handler.clone(), rerun.arguments.clone());
            let task_name = name.clone();
            step = Box::pin(
                async move { contained(&task_name, move || handler(arguments, ctx)).await },
            );
        }
    }

    fn complete_task(&self, task_id: &str, result: CallToolResult) {
        let result = self.with_meta(result);
        let value = serde_json::to_value(&result).ok();
        self.finish(task_id, TaskStatus::Completed, value, None);
    }

    /// The record of `task_id` for this caller: -32021 without the extension, -32602 when
    /// unknown, expired or someone else's.
    fn task_for(&self, ctx: &RequestContext, task_id: &str) -> Result<TaskRecord, ErrorObject> {
        if !ctx.client_capabilities().has_extension(TASKS_EXTENSION) {
            return Err(ErrorObject::missing_capability(&tasks_capability()));
        }
        self.inner
            .tasks
            .store
            .get(task_id, self.now())
            .filter(|r| r.principal.as_deref() == ctx.principal())
            .ok_or_else(|| ErrorObject::invalid_params(format!("Unknown task: {task_id}")))
    }

    pub(crate) fn task_get(&self, id: &RequestId, task_id: &str, ctx: &RequestContext) -> Final {
        let record = match self.task_for(ctx, task_id) {
            Ok(record) => record,
            Err(error) => return Final::error(Some(id), &error),
        };
        let status = record.info.status;
        let result = GetTaskResult {
            result_type: ResultType::Complete,
            task: record.info,
            input_requests: record
                .input_requests
                .filter(|_| status == TaskStatus::InputRequired),
            result: record.result.filter(|_| status == TaskStatus::Completed),
            error: record.error.filter(|_| status == TaskStatus::Failed),
            meta: self.result_meta(),
        };
        Final::result(id, &result)
    }

    pub(crate) fn task_update(
        &self,
        id: &RequestId,
        task_id: &str,
        responses: InputResponses,
        ctx: &RequestContext,
    ) -> Final {
        if let Err(error) = self.task_for(ctx, task_id) {
            return Final::error(Some(id), &error);
        }
        if let Some(running) = self.inner.tasks.running().get(task_id) {
            let _ = running.updates.send(responses);
        }
        self.acknowledged(id)
    }

    pub(crate) fn task_cancel(&self, id: &RequestId, task_id: &str, ctx: &RequestContext) -> Final {
        let record = match self.task_for(ctx, task_id) {
            Ok(record) => record,
            Err(error) => return Final::error(Some(id), &error),
        };
        if !record.info.status.is_terminal() {
            if let Some(running) = self.inner.tasks.running().get(task_id) {
                running.cancel.cancel();
            }
            self.finish(task_id, TaskStatus::Cancelled, None, None);
        }
        self.acknowledged(id)
    }

    fn acknowledged(&self, id: &RequestId) -> Final {
        let result = toolwire_protocol::EmptyResult {
            result_type: ResultType::Complete,
            meta: self.result_meta(),
            ..Default::default()
        };
        Final::result(id, &result)
    }
}
