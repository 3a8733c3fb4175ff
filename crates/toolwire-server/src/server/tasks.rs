//! The tasks extension (`io.modelcontextprotocol/tasks`): a call to a task-capable tool from a
//! client that declared the extension, which does not finish on its first step, becomes a task.
//! The handler keeps running in the background; `tasks/get` reports it, `tasks/update` answers
//! its input requests (the handler then runs again with the answers, as in MRTR), and
//! `tasks/cancel` stops it. Records live in a pluggable [`TaskStore`].

use crate::tools::catalog::{insufficient_scope, permits};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CallToolResult, CreateTaskResult, ErrorObject, GetTaskResult, InputRequests, InputResponses,
    RequestId, RequestMeta, ResultType, TASKS_EXTENSION, TaskInfo, TaskStatus, iso8601,
};

use crate::request::context::RequestContext;
use crate::request::context::Round;
use crate::request::mrtr::InputRequired;
use crate::request::mrtr::ToolError;
use crate::request::outcome::Final;
use crate::safety::deadline::{handler_step, internal_failure};
use crate::server::Server;

use crate::state::task_store::{Inbox, Running, TaskRecord, tasks_capability};
use crate::state::{StoreError, UPDATE_ATTEMPTS, step_aside};
use crate::tools::offered::Change;
use crate::tools::registry::{RegisteredTool, ToolName};

/// What it takes to run a task's handler again after its input requests are answered.
pub(crate) struct Rerun {
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) arguments: Value,
    pub(crate) meta: RequestMeta,
    pub(crate) principal: Option<Arc<str>>,
    /// The scopes of the call that started it, which its later steps keep.
    pub(crate) scopes: Option<Arc<[String]>>,
    pub(crate) id: RequestId,
}

pub(crate) type Step = BoxFuture<'static, Option<Result<CallToolResult, ToolError>>>;

impl Server {
    fn now(&self) -> u64 {
        self.clock().now_ms()
    }

    /// Starts a task around a handler that did not finish on its first step; -32603 (and the
    /// handler stopped) when its record cannot be stored, since nobody could see or cancel it.
    pub(crate) async fn start_task(
        &self,
        rerun: Rerun,
        cancel: CancellationToken,
        step: Step,
    ) -> Result<CreateTaskResult, ErrorObject> {
        let tasks = self.tasks();
        // Other instances judge the task by this instance's heartbeat: it is fresh before
        // the task is stored, and kept so while the server lives.
        self.watch_tasks(self.downgrade());
        if let Err(error) = self.beating().await {
            cancel.cancel();
            return Err(error.refusal("The task could not be started"));
        }
        let now = self.now();
        let task_id = toolwire_protocol::hex::encode(&rand::random::<[u8; 16]>());
        let info = TaskInfo {
            task_id: task_id.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: iso8601(now),
            last_updated_at: iso8601(now),
            ttl_ms: Some(tasks.ttl_ms),
            poll_interval_ms: Some(tasks.poll_interval_ms),
        };
        let record = TaskRecord {
            info: info.clone(),
            principal: rerun.principal.as_deref().map(str::to_owned),
            input_requests: None,
            result: None,
            error: None,
            owner: Some(tasks.instance.clone()),
            scopes: rerun.tool.scopes.clone(),
            answers: None,
            expires_ms: Some(now.saturating_add(tasks.ttl_ms)),
            version: 0,
        };
        if let Err(error) = tasks.store.insert(record).await {
            cancel.cancel();
            return Err(error.refusal("The task could not be started"));
        }
        let inbox = Arc::new(Inbox::default());
        tasks.running().insert(
            task_id.clone(),
            Running {
                cancel: cancel.clone(),
                inbox: inbox.clone(),
                scopes: rerun.tool.scopes.clone(),
            },
        );
        let server = self.clone();
        tokio::spawn(async move {
            let _running = server.metrics().map(crate::observe::Metrics::task);
            server.drive(&task_id, rerun, cancel, &inbox, step).await;
            server.tasks().running().remove(&task_id);
        });
        Ok(CreateTaskResult {
            result_type: ResultType::Task,
            task: info,
            meta: self.result_meta().cloned(),
        })
    }

    /// Changes the task's record with `change` and stamps the time of the change, as a
    /// compare-and-swap: read, change, and write back unless another writer got there first,
    /// else again. `change` says whether it changed anything (nothing is written if not); it
    /// never changes a task that has ended. False when the record is gone or was left as is.
    pub(crate) async fn set(
        &self,
        task_id: &str,
        mut change: impl FnMut(&mut TaskRecord) -> bool,
    ) -> Result<bool, StoreError> {
        let store = &self.tasks().store;
        for attempt in 0..UPDATE_ATTEMPTS {
            step_aside(attempt).await;
            let now = self.now();
            let Some(mut record) = store.get(task_id, now).await? else {
                return Ok(false);
            };
            if record.info.status.is_terminal() || !change(&mut record) {
                return Ok(false);
            }
            record.info.last_updated_at = iso8601(now);
            record.version += 1;
            if store.replace(record).await? {
                return Ok(true);
            }
        }
        Err(StoreError::Contended)
    }

    /// [`Server::set`] for the task's driver, which has nobody to answer: a failure is logged,
    /// and the record keeps its last state until it expires.
    async fn record(&self, task_id: &str, change: impl FnMut(&mut TaskRecord) -> bool) {
        if let Err(error) = self.set(task_id, change).await {
            tracing::error!(task_id, %error, "a task's record could not be updated");
        }
    }

    /// Ends a task with `status` (and its result or error), unless it has ended already.
    pub(crate) async fn finish(
        &self,
        task_id: &str,
        status: TaskStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) -> Result<bool, StoreError> {
        self.set(task_id, |r| {
            r.info.status = status;
            r.input_requests = None;
            r.answers = None;
            r.result.clone_from(&result);
            r.error.clone_from(&error);
            true
        })
        .await
    }

    /// [`Server::finish`] for the task's driver (failures logged).
    async fn end(
        &self,
        task_id: &str,
        status: TaskStatus,
        result: Option<Value>,
        error: Option<ErrorObject>,
    ) {
        if let Err(error) = self.finish(task_id, status, result, error).await {
            tracing::error!(task_id, %error, "a task's end could not be recorded");
        }
    }

    /// Runs a task to its end: each step's outcome completes, fails or pauses it for input.
    /// Whatever it is doing, the task ends when it is cancelled, when the server shuts down
    /// (its token is a child of the server's), or when its TTL runs out: nothing outlives the
    /// record that lets its owner see and cancel it, so no task runs on unseen.
    async fn drive(
        &self,
        task_id: &str,
        rerun: Rerun,
        cancel: CancellationToken,
        inbox: &Inbox,
        mut step: Step,
    ) {
        let expiry = tokio::time::sleep(Duration::from_millis(self.tasks().ttl_ms));
        tokio::pin!(expiry);
        loop {
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => return self.stopped(task_id).await,
                _ = &mut expiry => return self.expired(task_id).await,
                outcome = &mut step => outcome,
            };
            let Some(input) = self.settle(task_id, &rerun, outcome).await else {
                return;
            };
            let answers = tokio::select! {
                biased;
                _ = cancel.cancelled() => return self.stopped(task_id).await,
                _ = &mut expiry => return self.expired(task_id).await,
                answers = self.answers(task_id, inbox, input.requests) => answers,
            };
            let ctx = self.task_handler_context(&rerun, &cancel);
            ctx.set_round(Round {
                responses: answers,
                state: input.state,
                ..Round::default()
            });
            let handler = &rerun.tool.handler;
            let handler_cancel = ctx.cancellation().clone();
            step = handler_step(
                ToolName(rerun.tool.clone()),
                || handler(&rerun.arguments, ctx),
                rerun.tool.timeout,
                handler_cancel,
            );
        }
    }

    /// The context a task's handler runs in: the request's own `_meta` and principal, the
    /// task's cancellation, and no channel back (a task's client polls instead).
    pub(crate) fn task_handler_context(
        &self,
        rerun: &Rerun,
        cancel: &CancellationToken,
    ) -> RequestContext {
        RequestContext::new(
            rerun.id.clone(),
            rerun.meta.clone(),
            cancel.clone(),
            self.shutdown_token(),
            None,
            self.config().logging,
        )
        .with_principal(rerun.principal.clone())
        .with_scopes(rerun.scopes.clone())
    }

    /// Records a step's outcome; the input it asks for when the task must wait for answers.
    async fn settle(
        &self,
        task_id: &str,
        rerun: &Rerun,
        outcome: Option<Result<CallToolResult, ToolError>>,
    ) -> Option<InputRequired> {
        let name = &rerun.tool.name;
        let input = match outcome {
            None => return self.complete_task(task_id, internal_failure()).await,
            Some(Ok(result)) => {
                let result = self.guarded(&rerun.tool, self.checked_result(&rerun.tool, result));
                return self.complete_task(task_id, result).await;
            }
            Some(Err(ToolError::Failed(message))) => {
                return self
                    .complete_task(task_id, CallToolResult::error(message))
                    .await;
            }
            Some(Err(ToolError::Internal(error))) => {
                tracing::error!(tool = %name, %error, "task failed with an internal error");
                return self.complete_task(task_id, internal_failure()).await;
            }
            Some(Err(ToolError::Protocol(error))) => {
                self.end(task_id, TaskStatus::Failed, None, Some(error))
                    .await;
                return None;
            }
            Some(Err(ToolError::InputRequired(input))) => *input,
        };
        if let Some(missing) = input.missing_capabilities(&rerun.meta.client_capabilities) {
            let error = ErrorObject::missing_capability(&missing);
            self.end(task_id, TaskStatus::Failed, None, Some(error))
                .await;
            return None;
        }
        if input.problem.is_some() || input.requests.is_empty() {
            tracing::error!(tool = %name, problem = input.problem.as_deref(), "a task asked for no usable input");
            return self.complete_task(task_id, internal_failure()).await;
        }
        Some(input)
    }

    /// Parks the task in `input_required` until `tasks/update` has answered every request.
    async fn answers(
        &self,
        task_id: &str,
        inbox: &Inbox,
        requests: InputRequests,
    ) -> InputResponses {
        // The inbox opens before the record says `input_required`, so no answer given after a
        // client saw that status can be dropped.
        inbox.open(requests.clone());
        self.record(task_id, |r| {
            r.info.status = TaskStatus::InputRequired;
            r.input_requests = Some(requests.clone());
            true
        })
        .await;
        loop {
            inbox.arrived.notified().await;
            // `tasks/update` recorded what it answered before delivering it; answers given on
            // another instance were recorded there. These writes only catch up.
            match inbox.take() {
                Ok(answers) => {
                    self.record(task_id, |r| {
                        let stale = r.info.status != TaskStatus::Working
                            || r.input_requests.is_some()
                            || r.answers.is_some();
                        r.info.status = TaskStatus::Working;
                        r.input_requests = None;
                        r.answers = None;
                        stale
                    })
                    .await;
                    return answers;
                }
                Err(remaining) => {
                    self.record(task_id, |r| {
                        let open = r.info.status == TaskStatus::InputRequired
                            && r.input_requests.as_ref() != Some(&remaining);
                        if open {
                            r.input_requests = Some(remaining.clone());
                        }
                        open
                    })
                    .await;
                }
            }
        }
    }

    /// A task whose cancellation fired: cancelled by its owner, or cut by a shutdown.
    async fn stopped(&self, task_id: &str) {
        if self.is_shutting_down() {
            let error = ErrorObject::internal("The server shut down before the task finished");
            self.end(task_id, TaskStatus::Failed, None, Some(error))
                .await;
        } else {
            self.end(task_id, TaskStatus::Cancelled, None, None).await;
        }
    }

    /// A task still running when its TTL ran out: its record is due to be forgotten, so the
    /// work stops too.
    async fn expired(&self, task_id: &str) {
        let ttl = self.tasks().ttl_ms;
        tracing::warn!(task_id, ttl_ms = ttl, "task stopped at the end of its TTL");
        let error = ErrorObject::internal(format!(
            "The task did not finish within its TTL of {ttl} ms"
        ));
        self.end(task_id, TaskStatus::Failed, None, Some(error))
            .await;
    }

    /// Records a completed task; `None`, so that `settle` can end with it.
    async fn complete_task(&self, task_id: &str, result: CallToolResult) -> Option<InputRequired> {
        let result = self.with_meta(result);
        let value = serde_json::to_value(&result).ok();
        self.end(task_id, TaskStatus::Completed, value, None).await;
        None
    }

    /// The record of `task_id` for this caller: -32021 without the extension, -32602 when
    /// unknown, expired or someone else's, -32603 when the store cannot say.
    async fn task_for(
        &self,
        ctx: &RequestContext,
        task_id: &str,
    ) -> Result<TaskRecord, ErrorObject> {
        if !ctx.client_capabilities().has_extension(TASKS_EXTENSION) {
            return Err(ErrorObject::missing_capability(&tasks_capability()));
        }
        let record = self
            .tasks()
            .store
            .get(task_id, self.now())
            .await
            .map_err(|e| e.refusal("The task could not be read"))?
            .filter(|r| r.principal.as_deref() == ctx.principal())
            .ok_or_else(|| ErrorObject::invalid_params(format!("Unknown task: {task_id}")))?;
        self.reaped(record)
            .await
            .map_err(|e| e.refusal("The task could not be read"))
    }

    pub(crate) async fn task_get(
        &self,
        id: &RequestId,
        task_id: &str,
        ctx: &RequestContext,
    ) -> Final {
        let record = match self.task_for(ctx, task_id).await {
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
            meta: self.result_meta().cloned(),
        };
        Final::result(id, &result)
    }

    pub(crate) async fn task_update(
        &self,
        id: &RequestId,
        task_id: &str,
        responses: InputResponses,
        ctx: &RequestContext,
    ) -> Final {
        let record = match self.task_for(ctx, task_id).await {
            Ok(record) => record,
            Err(error) => return Final::error(Some(id), &error),
        };
        let running = self
            .tasks()
            .running()
            .get(task_id)
            .map(|running| (running.inbox.clone(), running.scopes.clone()));
        if let Some((inbox, scopes)) = running {
            // Answering makes the handler run again: the caller's rights are checked again
            // (T-21), as for the call that started it.
            if !permits(ctx.scopes(), &scopes) {
                let error = insufficient_scope("task", task_id, &scopes);
                return Final::error(Some(id), &error);
            }
            // The record first, the handler after: a `tasks/get` once this is acknowledged
            // sees the answers taken (the handler, woken, may already have asked again).
            if let Err(error) = self.set(task_id, |r| r.answer(&responses, false)).await {
                let error = error.refusal("The answers could not be recorded");
                return Final::error(Some(id), &error);
            }
            inbox.deliver(responses);
        } else if record.info.status == TaskStatus::InputRequired {
            // Its handler runs on another instance: the answers go through the record.
            if !permits(ctx.scopes(), &record.scopes) {
                let error = insufficient_scope("task", task_id, &record.scopes);
                return Final::error(Some(id), &error);
            }
            if let Err(error) = self.answer_elsewhere(task_id, &responses).await {
                let error = error.refusal("The answers could not be recorded");
                return Final::error(Some(id), &error);
            }
        }
        self.acknowledged(id)
    }

    /// `tasks/cancel`: stops the handler if it runs here and records the task as cancelled;
    /// -32603 when that cannot be recorded.
    pub(crate) async fn task_cancel(
        &self,
        id: &RequestId,
        task_id: &str,
        ctx: &RequestContext,
    ) -> Final {
        let record = match self.task_for(ctx, task_id).await {
            Ok(record) => record,
            Err(error) => return Final::error(Some(id), &error),
        };
        if !record.info.status.is_terminal() {
            let here = self
                .tasks()
                .running()
                .get(task_id)
                .map(|r| r.cancel.clone());
            if let Some(cancel) = &here {
                cancel.cancel();
            }
            let cancelled = self.finish(task_id, TaskStatus::Cancelled, None, None);
            match cancelled.await {
                Err(error) => {
                    let error = error.refusal("The task's cancellation could not be recorded");
                    return Final::error(Some(id), &error);
                }
                // Its handler runs on another instance, which stops it once told.
                Ok(true) if here.is_none() => self.notify(Change::Task(task_id.into())),
                Ok(_) => {}
            }
        }
        self.acknowledged(id)
    }

    /// The scopes a running task's tool needs (for the transport's 403, A-07).
    pub(crate) fn task_scopes(&self, task_id: &str) -> Option<Vec<String>> {
        self.tasks()
            .running()
            .get(task_id)
            .map(|running| running.scopes.clone())
    }

    fn acknowledged(&self, id: &RequestId) -> Final {
        let result = toolwire_protocol::EmptyResult {
            result_type: ResultType::Complete,
            meta: self.result_meta().cloned(),
            ..Default::default()
        };
        Final::result(id, &result)
    }
}
