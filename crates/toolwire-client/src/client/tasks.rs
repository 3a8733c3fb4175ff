//! A tool call the server runs as a task (tasks extension, `io.modelcontextprotocol/tasks`),
//! followed to its end from the client's side: `tasks/get` at the server's `pollIntervalMs`,
//! input requests answered by the handlers (`tasks/update`) or, for a relay, returned for its
//! own caller to answer, and `tasks/cancel` when the call is cancelled or dropped first.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use toolwire_protocol::methods::{CancelTask, GetTask, UpdateTask};
use toolwire_protocol::{
    CreateTaskResult, ErrorObject, InputRequiredResult, InputResponses, RequestMeta, ResultType,
    TaskParams, TaskStatus, UpdateTaskParams,
};

use crate::client::{Client, RpcOptions};
use crate::error::{Error, Result};

/// The polling interval when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// The bounds on the polling interval, whatever the server suggests: often enough to answer
/// in time, rarely enough not to flood the server.
const MIN_POLL: Duration = Duration::from_millis(20);
const MAX_POLL: Duration = Duration::from_secs(5);

/// Told when the server made a call a task, with the task as created.
pub type TaskFn = std::sync::Arc<dyn Fn(&CreateTaskResult) + Send + Sync>;

/// A task that asked for input, and the answers to send it
/// ([`CallOptions::resume_task`](crate::CallOptions::resume_task)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResumeTask {
    /// The task.
    pub task_id: String,
    /// The answers to its input requests, by their keys.
    pub responses: InputResponses,
}

/// Cancels the task upstream when dropped armed: the call was cancelled, timed out or
/// dropped while the task ran, and nobody would follow it any more.
struct CancelOnDrop<'a> {
    client: &'a Client,
    task_id: &'a str,
    options: &'a RpcOptions,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let params = task_params(self.task_id);
        // Not under the call's cancellation, which may be what fired.
        let options = RpcOptions {
            cancel: None,
            ..task_options(self.options, self.task_id)
        };
        runtime.spawn(async move {
            if let Err(error) = client.call::<CancelTask>(&params, &options).await {
                tracing::warn!(task_id = %params.task_id, %error, "the server's task could not be cancelled");
            }
        });
    }
}

fn task_params(task_id: &str) -> TaskParams {
    TaskParams {
        meta: RequestMeta::default(),
        task_id: task_id.to_owned(),
    }
}

/// The options of the requests about the task `task_id`: the call's credentials, timeout and
/// cancellation, the tasks extension declared, nothing of the call's request itself.
fn task_options(call: &RpcOptions, task_id: &str) -> RpcOptions {
    RpcOptions {
        // `Mcp-Name` is the task's id (H-13).
        name: Some(task_id.to_owned()),
        tasks: true,
        bearer: call.bearer.clone(),
        timeout: call.timeout,
        cancel: call.cancel.clone(),
        input_capabilities: call.input_capabilities.clone(),
        relay: call.relay,
        ..Default::default()
    }
}

/// The keys of the requests `responses` answer.
fn answered_keys(responses: &InputResponses) -> BTreeSet<String> {
    responses.keys().cloned().collect()
}

fn poll_interval(suggested: Option<u64>) -> Duration {
    suggested
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .clamp(MIN_POLL, MAX_POLL)
}

impl Client {
    /// Follows the task `result` stands for to its end, after telling `on_task` of it.
    pub(crate) async fn follow_task(
        &self,
        result: Value,
        on_task: Option<&TaskFn>,
        options: &RpcOptions,
    ) -> Result<Value> {
        let created: CreateTaskResult = serde_json::from_value(result)
            .map_err(|e| Error::InvalidResponse(format!("a task result: {e}")))?;
        if let Some(on_task) = on_task {
            on_task(&created);
        }
        let poll = poll_interval(created.task.poll_interval_ms);
        self.follow(&created.task.task_id, poll, options, None)
            .await
    }

    /// Sends the answers of `resume` to its task, and follows the task on.
    pub(crate) async fn resume_task(
        &self,
        resume: ResumeTask,
        options: &RpcOptions,
    ) -> Result<Value> {
        let answered = answered_keys(&resume.responses);
        self.update_task(&resume.task_id, resume.responses, options)
            .await?;
        self.follow(&resume.task_id, DEFAULT_POLL, options, Some(answered))
            .await
    }

    async fn update_task(
        &self,
        task_id: &str,
        responses: InputResponses,
        options: &RpcOptions,
    ) -> Result<()> {
        let params = UpdateTaskParams {
            meta: RequestMeta::default(),
            task_id: task_id.to_owned(),
            input_responses: responses,
        };
        self.call::<UpdateTask>(&params, &task_options(options, task_id))
            .await
            .map(drop)
    }

    /// Polls the task until it ends: its result (completed), the server's error (failed),
    /// [`Error::TaskCancelled`]; its input requests answered on the way, or returned as
    /// [`Error::InputRequired`] when the call relays them (the task waits for
    /// [`CallOptions::resume_task`](crate::CallOptions::resume_task)).
    ///
    /// `answered` names the requests just answered by `tasks/update`: a server whose record
    /// has not caught up yet may still show exactly those as open, so once, such a round is
    /// read again after the polling interval before it is taken for a new question.
    async fn follow(
        &self,
        task_id: &str,
        mut poll: Duration,
        options: &RpcOptions,
        mut answered: Option<BTreeSet<String>>,
    ) -> Result<Value> {
        let task_options = task_options(options, task_id);
        let mut guard = CancelOnDrop {
            client: self,
            task_id,
            options,
            armed: true,
        };
        let params = task_params(task_id);
        let ended = loop {
            let got = self.call::<GetTask>(&params, &task_options).await?;
            if let Some(suggested) = got.task.poll_interval_ms {
                poll = poll_interval(Some(suggested));
            }
            // Only the first read after an update may not have caught up with it.
            let just_answered = answered.take();
            match got.task.status {
                TaskStatus::Working => {}
                TaskStatus::InputRequired => {
                    let requests = got.input_requests.unwrap_or_default();
                    if just_answered.is_some_and(|keys| keys.iter().eq(requests.keys())) {
                        // Not caught up yet: read it again after the interval.
                    } else if options.relay {
                        guard.armed = false;
                        return Err(Error::InputRequired(Box::new(InputRequiredResult {
                            result_type: ResultType::InputRequired,
                            input_requests: Some(requests),
                            request_state: None,
                            meta: None,
                        })));
                    } else if !requests.is_empty() {
                        let answers = self.bounded(options, self.answer(requests)).await?;
                        let answers: InputResponses = answers.into_iter().collect();
                        answered = Some(answered_keys(&answers));
                        self.update_task(task_id, answers, options).await?;
                        continue;
                    }
                }
                TaskStatus::Completed => {
                    break got.result.ok_or_else(|| {
                        Error::InvalidResponse(format!(
                            "the completed task {task_id} has no result"
                        ))
                    });
                }
                TaskStatus::Failed => {
                    break Err(Error::Rpc(got.error.unwrap_or_else(|| {
                        ErrorObject::internal(format!("The task {task_id} failed"))
                    })));
                }
                TaskStatus::Cancelled => break Err(Error::TaskCancelled(task_id.to_owned())),
            }
            let cancelled = async {
                match &options.cancel {
                    Some(token) => token.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = cancelled => return Err(Error::Cancelled),
            }
        };
        guard.armed = false;
        ended
    }
}
