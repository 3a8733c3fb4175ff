//! The tasks extension (`io.modelcontextprotocol/tasks`): a call to a task-capable tool from a
//! client that declared the extension, which does not finish on its first step, becomes a task.
//! The handler keeps running in the background; `tasks/get` reports it, `tasks/update` answers
//! its input requests (the handler then runs again with the answers, as in MRTR), and
//! `tasks/cancel` stops it. Records live in a pluggable [`TaskStore`].

use crate::tools::catalog::{insufficient_scope, permits};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CallToolResult, CreateTaskResult, ErrorObject, GetTaskResult, InputRequests, InputResponses,
    RequestId, ResultType, TASKS_EXTENSION, TaskInfo, TaskStatus, iso8601,
};

use crate::request::context::RequestContext;
use crate::request::mrtr::{InputRequired, Round};
use crate::request::outcome::Final;
use crate::safety::deadline::{contained, internal_failure, with_deadline};
use crate::server::Server;
use crate::tools::tool::ToolError;

use crate::state::task_store::{Inbox, Rerun, Running, Step, TaskRecord, tasks_capability};

impl Server {
    fn now(&self) -> u64 {
        self.clock().now_ms()
    }

    /// Starts a task around a handler that did not finish on its first step.
    pub(crate) fn start_task(
        &self,
        rerun: Rerun,
        cancel: CancellationToken,
        step: Step,
    ) -> CreateTaskResult {
        let tasks = self.tasks();
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
        tasks.store.insert(TaskRecord {
            info: info.clone(),
            principal: rerun.principal.as_deref().map(str::to_owned),
            input_requests: None,
            result: None,
            error: None,
            expires_ms: Some(now.saturating_add(tasks.ttl_ms)),
        });
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
            server.drive(&task_id, rerun, cancel, &inbox, step).await;
            server.tasks().running().remove(&task_id);
        });
        CreateTaskResult {
            result_type: ResultType::Task,
            task: info,
            meta: self.result_meta().cloned(),
        }
    }

    fn set(&self, task_id: &str, change: impl FnOnce(&mut TaskRecord)) {
        let now = iso8601(self.now());
        let mut change = Some(change);
        self.tasks().store.update(task_id, &mut |record| {
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
                _ = cancel.cancelled() => return self.stopped(task_id),
                _ = &mut expiry => return self.expired(task_id),
                outcome = &mut step => outcome,
            };
            let Some(input) = self.settle(task_id, &rerun, outcome) else {
                return;
            };
            let answers = tokio::select! {
                biased;
                _ = cancel.cancelled() => return self.stopped(task_id),
                _ = &mut expiry => return self.expired(task_id),
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
            step = with_deadline(
                contained(&rerun.tool.name, || handler(&rerun.arguments, ctx)),
                rerun.tool.timeout,
                handler_cancel,
                &rerun.tool.name,
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
    fn settle(
        &self,
        task_id: &str,
        rerun: &Rerun,
        outcome: Option<Result<CallToolResult, ToolError>>,
    ) -> Option<InputRequired> {
        let name = &rerun.tool.name;
        let input = match outcome {
            None => return self.complete_task(task_id, internal_failure()),
            Some(Ok(result)) => {
                let result = self.guarded(&rerun.tool, self.checked_result(&rerun.tool, result));
                return self.complete_task(task_id, result);
            }
            Some(Err(ToolError::Failed(message))) => {
                return self.complete_task(task_id, CallToolResult::error(message));
            }
            Some(Err(ToolError::Internal(error))) => {
                tracing::error!(tool = %name, %error, "task failed with an internal error");
                return self.complete_task(task_id, internal_failure());
            }
            Some(Err(ToolError::Protocol(error))) => {
                self.finish(task_id, TaskStatus::Failed, None, Some(error));
                return None;
            }
            Some(Err(ToolError::InputRequired(input))) => *input,
        };
        if let Some(missing) = input.missing_capabilities(&rerun.meta.client_capabilities) {
            let error = ErrorObject::missing_capability(&missing);
            self.finish(task_id, TaskStatus::Failed, None, Some(error));
            return None;
        }
        if input.problem.is_some() || input.requests.is_empty() {
            tracing::error!(tool = %name, problem = ?input.problem, "a task asked for no usable input");
            return self.complete_task(task_id, internal_failure());
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
        self.set(task_id, |r| {
            r.info.status = TaskStatus::InputRequired;
            r.input_requests = Some(requests);
        });
        loop {
            inbox.arrived.notified().await;
            match inbox.take() {
                Ok(answers) => {
                    self.set(task_id, |r| {
                        r.info.status = TaskStatus::Working;
                        r.input_requests = None;
                    });
                    return answers;
                }
                Err(remaining) => self.set(task_id, |r| r.input_requests = Some(remaining)),
            }
        }
    }

    /// A task whose cancellation fired: cancelled by its owner, or cut by a shutdown.
    fn stopped(&self, task_id: &str) {
        if self.is_shutting_down() {
            let error = ErrorObject::internal("The server shut down before the task finished");
            self.finish(task_id, TaskStatus::Failed, None, Some(error));
        } else {
            self.finish(task_id, TaskStatus::Cancelled, None, None);
        }
    }

    /// A task still running when its TTL ran out: its record is due to be forgotten, so the
    /// work stops too.
    fn expired(&self, task_id: &str) {
        let ttl = self.tasks().ttl_ms;
        tracing::warn!(task_id, ttl_ms = ttl, "task stopped at the end of its TTL");
        let error = ErrorObject::internal(format!(
            "The task did not finish within its TTL of {ttl} ms"
        ));
        self.finish(task_id, TaskStatus::Failed, None, Some(error));
    }

    /// Records a completed task; `None`, so that `settle` can end with it.
    fn complete_task(&self, task_id: &str, result: CallToolResult) -> Option<InputRequired> {
        let result = self.with_meta(result);
        let value = serde_json::to_value(&result).ok();
        self.finish(task_id, TaskStatus::Completed, value, None);
        None
    }

    /// The record of `task_id` for this caller: -32021 without the extension, -32602 when
    /// unknown, expired or someone else's.
    fn task_for(&self, ctx: &RequestContext, task_id: &str) -> Result<TaskRecord, ErrorObject> {
        if !ctx.client_capabilities().has_extension(TASKS_EXTENSION) {
            return Err(ErrorObject::missing_capability(&tasks_capability()));
        }
        self.tasks()
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
            meta: self.result_meta().cloned(),
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
            inbox.deliver(responses);
        }
        self.acknowledged(id)
    }

    pub(crate) fn task_cancel(&self, id: &RequestId, task_id: &str, ctx: &RequestContext) -> Final {
        let record = match self.task_for(ctx, task_id) {
            Ok(record) => record,
            Err(error) => return Final::error(Some(id), &error),
        };
        if !record.info.status.is_terminal() {
            if let Some(running) = self.tasks().running().get(task_id) {
                running.cancel.cancel();
            }
            self.finish(task_id, TaskStatus::Cancelled, None, None);
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
