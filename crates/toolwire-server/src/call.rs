//! `tools/call`: lookup, input validation, the MRTR round, the handler with panics contained,
//! output validation, and the shaping of the result.

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use toolwire_protocol::methods::{CallTool as CallToolMethod, Method};
use toolwire_protocol::{
    CallToolResult, ClientCapabilities, ErrorObject, InputRequiredResult, RequestId, ResultMeta,
    ResultType, TASKS_EXTENSION,
};

use toolwire_protocol::schema::REPORTED_VIOLATIONS;

use crate::context::RequestContext;
use crate::dispatch::{Final, Outcome};
use crate::mrtr::{InputRequired, Round};
use crate::registry::RegisteredTool;
use crate::route::{CallTool, RoundParams};
use crate::server::Server;
use crate::state::{Binding, StateError};
use crate::tasks::{Rerun, tasks_capability};
use crate::tool::{TaskSupport, ToolError};

/// Runs a handler with panics contained: `None` (logged) if it panicked.
pub(crate) async fn contained<T>(
    name: &str,
    make: impl FnOnce() -> futures::future::BoxFuture<'static, Result<T, ToolError>>,
) -> Option<Result<T, ToolError>> {
    let outcome = match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
        Err(panic) => Err(panic),
    };
    outcome
        .map_err(|panic| tracing::error!(%name, panic = panic_message(&panic), "handler panicked"))
        .ok()
}

impl Server {
    /// `tools/call`: lookup (T-14), input validation with the compiled validator, the handler
    /// with panics contained, and output validation (T-10).
    pub(crate) async fn call_tool(
        &self,
        call: CallTool,
        ctx: RequestContext,
    ) -> Result<Outcome, ErrorObject> {
        let CallTool {
            name,
            arguments,
            round,
        } = call;
        let Some(tool) = self.inner.registry.snapshot().get(&name).cloned() else {
            return Err(ErrorObject::invalid_params(format!("Unknown tool: {name}")));
        };
        let declared = ctx.client_capabilities().clone();
        let as_task = tool.task_support.is_some() && declared.has_extension(TASKS_EXTENSION);
        if tool.task_support == Some(TaskSupport::Required) && !as_task {
            return Err(ErrorObject::missing_capability(&tasks_capability()));
        }
        if !tool.input.is_valid(&arguments) {
            // The first few violations and a count of the rest (issue 8, item 3).
            let violations = tool.input.violations(&arguments, REPORTED_VIOLATIONS);
            let text = format!("Invalid arguments for tool {name}:\n{violations}");
            return Ok(Outcome::Complete(
                self.with_meta(CallToolResult::error(text)),
            ));
        }
        let binding = Binding::new(CallToolMethod::METHOD, &name, &arguments, ctx.principal());
        // A task outlives its request: its handler gets a cancellation of its own, which a
        // shutdown fires too (issue 8, item 2).
        let (ctx, rerun, task_cancel) = if as_task {
            let cancel = self.inner.shutdown.child_token();
            let rerun = Rerun {
                tool: tool.clone(),
                arguments: arguments.clone(),
                meta: ctx.meta().clone(),
                principal: ctx.principal().map(str::to_owned),
                id: ctx.request_id().clone(),
            };
            let task_ctx = RequestContext::new(
                rerun.id.clone(),
                rerun.meta.clone(),
                cancel.clone(),
                self.shutdown_token(),
                None,
                self.inner.config.logging,
            )
            .with_principal(rerun.principal.clone());
            (task_ctx, Some(rerun), Some(cancel))
        } else {
            (ctx, None, None)
        };
        self.open_round(&binding, round, &ctx)?;
        let handler = tool.handler.clone();
        let task_name = name.clone();
        let mut step =
            Box::pin(async move { contained(&task_name, move || handler(arguments, ctx)).await });
        let outcome = match (rerun, task_cancel) {
            // The first step runs inline; a call that does not finish at once becomes a task.
            (Some(rerun), Some(cancel)) => match futures::poll!(step.as_mut()) {
                std::task::Poll::Ready(outcome) => outcome,
                std::task::Poll::Pending => {
                    return Ok(Outcome::Task(self.start_task(rerun, cancel, step)));
                }
            },
            _ => step.await,
        };
        let result = match outcome {
            None => return Ok(Outcome::Complete(self.with_meta(internal_failure()))),
            Some(Err(ToolError::Protocol(error))) => return Err(error),
            Some(Err(ToolError::Failed(message))) => CallToolResult::error(message),
            Some(Err(ToolError::Internal(error))) => {
                tracing::error!(tool = %name, error = %error, "tool failed with an internal error");
                internal_failure()
            }
            Some(Err(ToolError::InputRequired(input))) => {
                return match self.ask(&binding, *input, &declared) {
                    Ok(Some(result)) => Ok(Outcome::InputRequired(result)),
                    Ok(None) => Ok(Outcome::Complete(self.with_meta(internal_failure()))),
                    Err(error) => Err(error),
                };
            }
            Some(Ok(result)) => result,
        };
        Ok(Outcome::Complete(
            self.with_meta(self.checked_result(&tool, result)),
        ))
    }

    /// A successful result whose structured content breaks the tool's `outputSchema` never
    /// leaves: it becomes an internal failure, logged (T-10).
    pub(crate) fn checked_result(
        &self,
        tool: &RegisteredTool,
        result: CallToolResult,
    ) -> CallToolResult {
        let Some(schema) = &tool.output else {
            return result;
        };
        if result.is_error() {
            return result;
        }
        let problem = match &result.structured_content {
            None => Some("the result has no structuredContent".to_owned()),
            Some(value) if !schema.is_valid(value) => {
                Some(schema.violations(value, REPORTED_VIOLATIONS).to_string())
            }
            Some(_) => None,
        };
        match problem {
            Some(problem) => {
                tracing::error!(tool = %tool.name, %problem, "structured output does not match the outputSchema (T-10)");
                internal_failure()
            }
            None => result,
        }
    }

    /// Opens the previous round's request state, if any, and hands the answers and state to the
    /// handler's context. Tampered, expired, foreign or replayed state is -32602 (M-06…M-08).
    pub(crate) fn open_round(
        &self,
        binding: &Binding,
        round: RoundParams,
        ctx: &RequestContext,
    ) -> Result<(), ErrorObject> {
        let config = &self.inner.request_state;
        let state = match round.request_state {
            None => None,
            Some(token) => {
                let now = self.inner.clock.now_ms();
                let opened = config
                    .keys
                    .open(&token, binding, now)
                    .map_err(|e| ErrorObject::invalid_params(e.to_string()))?;
                if let Some(guard) = &config.replay_guard {
                    if !guard.redeem(opened.token_id, opened.expires_ms, now) {
                        return Err(ErrorObject::invalid_params(
                            StateError::Replayed.to_string(),
                        ));
                    }
                }
                opened.state
            }
        };
        ctx.set_round(Round {
            responses: round.answers.parsed,
            malformed: round.answers.malformed,
            state,
        });
        Ok(())
    }

    /// Turns a handler's request for input into an `input_required` result: -32021 if it asks
    /// for what the client did not declare (M-05); `None` (an internal failure, logged) if the
    /// handler built no usable request.
    pub(crate) fn ask(
        &self,
        binding: &Binding,
        input: InputRequired,
        declared: &ClientCapabilities,
    ) -> Result<Option<InputRequiredResult>, ErrorObject> {
        if let Some(problem) = &input.problem {
            tracing::error!(name = %binding.name, %problem, "unusable input request");
            return Ok(None);
        }
        if input.requests.is_empty() && input.state.is_none() {
            tracing::error!(name = %binding.name, "an input_required result needs input requests or state (M-03)");
            return Ok(None);
        }
        if let Some(missing) = input.missing_capabilities(declared) {
            return Err(ErrorObject::missing_capability(&missing));
        }
        let config = &self.inner.request_state;
        let request_state = input.state.map(|state| {
            let expires = self.inner.clock.now_ms().saturating_add(config.ttl_ms);
            config.keys.seal(binding, Some(state), expires)
        });
        Ok(Some(InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: (!input.requests.is_empty()).then_some(input.requests),
            request_state,
            meta: self.result_meta(),
        }))
    }

    /// Normalizes a call result: a completed call is `complete` whatever the handler wrote
    /// (B-04), and structured content without any content block is repeated as text for older
    /// clients (T-11).
    pub(crate) fn with_meta(&self, mut result: CallToolResult) -> CallToolResult {
        result.result_type = ResultType::Complete;
        if let (Some(value), true) = (&result.structured_content, result.content.is_empty()) {
            result
                .content
                .push(toolwire_protocol::ContentBlock::text(value.to_string()));
        }
        result
    }

    /// The response to a call, with serverInfo in the result's `_meta` (B-18). A result without
    /// `_meta` gets the pre-serialized one spliced in; one the handler gave `_meta` is merged.
    pub(crate) fn call_result(&self, id: &RequestId, result: &CallToolResult) -> Final {
        let Some(server_meta) = &self.inner.result_meta else {
            return Final::result(id, result);
        };
        match &result.meta {
            None => Final::result_with_meta(id, result, &self.inner.result_meta_json),
            Some(meta) if meta.server_info.is_some() => Final::result(id, result),
            Some(meta) => {
                let mut merged = result.clone();
                merged.meta = Some(ResultMeta {
                    server_info: server_meta.server_info.clone(),
                    ..meta.clone()
                });
                Final::result(id, &merged)
            }
        }
    }
}

/// What the client sees when a tool fails internally: no details (they are logged).
pub(crate) fn internal_failure() -> CallToolResult {
    CallToolResult::error("The tool failed because of an internal error.")
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
