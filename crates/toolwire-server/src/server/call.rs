//! `tools/call`: lookup, input validation, the MRTR round, the handler with panics contained,
//! output validation, and the shaping of the result.

use std::sync::Arc;

use serde_json::Value;
use toolwire_protocol::methods::{CallTool as CallToolMethod, Method};
use toolwire_protocol::schema::REPORTED_VIOLATIONS;
use toolwire_protocol::{
    CallToolResult, ClientCapabilities, ErrorObject, InputRequiredResult, RequestId, RequestMeta,
    ResultMeta, ResultType, TASKS_EXTENSION, iso8601,
};

use crate::request::context::RequestContext;
use crate::request::context::Round;
use crate::request::mrtr::InputRequired;
use crate::request::mrtr::ToolError;
use crate::request::outcome::{Final, Outcome};
use crate::request::route::{CallTool, RoundParams};
use crate::safety::audit::{self, AuditOutcome, CallSeen};
use crate::safety::deadline::{handler_step, internal_failure, is_timed_out};
use crate::safety::limits::{CallerBucket, is_limited, limited_result};
use crate::server::Server;
use crate::state::request_state::{Binding, StateError};
use crate::state::task_store::tasks_capability;
use crate::tools::catalog::{insufficient_scope, permits};
use crate::tools::registry::{RegisteredTool, ToolName};
use crate::tools::tool::TaskSupport;

impl Server {
    /// `tools/call`: lookup (T-14), input validation with the compiled validator, the handler
    /// with panics contained, and output validation (T-10).
    pub(crate) async fn call_tool(
        &self,
        call: CallTool,
        ctx: RequestContext,
    ) -> Result<Outcome, ErrorObject> {
        let tool = self.permitted_tool(&call.name, &ctx)?;
        if let Some(limited) = self.over_quota(&tool, &call.name, &ctx).await {
            return Ok(Outcome::Complete(self.with_meta(limited)));
        }
        let as_task =
            tool.task_support.is_some() && ctx.client_capabilities().has_extension(TASKS_EXTENSION);
        if tool.task_support == Some(TaskSupport::Required) && !as_task {
            return Err(ErrorObject::missing_capability(&tasks_capability()));
        }
        if let Some(invalid) = invalid_arguments(&tool, &call.name, &call.arguments) {
            return Ok(Outcome::Complete(self.with_meta(invalid)));
        }
        if as_task {
            // Boxed: a task's first step holds far more than a plain call's, and every plain
            // call's future would otherwise be as large (and be copied as large).
            return Box::pin(self.call_as_task(tool, call, ctx)).await;
        }
        let CallTool {
            name,
            arguments,
            round,
        } = call;
        let principal = ctx.shared_principal();
        let bind = binder(&name, &arguments, principal.as_deref());
        self.open_round(bind, round, &ctx).await?;
        // The caller's context outlives the handler's, for the capabilities it declared.
        let caller = ctx.clone();
        let cancel = ctx.cancellation().clone();
        let (timeout, named) = (tool.timeout, ToolName(tool.clone()));
        let outcome =
            handler_step(named, || (tool.handler)(&arguments, ctx), timeout, cancel).await;
        let declared = caller.client_capabilities();
        self.first_step_outcome(&tool, &name, outcome, bind, declared)
    }

    /// The tool named, if it exists (T-14) and the caller holds its scopes: with OAuth they are
    /// checked on every call (T-21), whatever the transport did.
    fn permitted_tool(
        &self,
        name: &str,
        ctx: &RequestContext,
    ) -> Result<Arc<RegisteredTool>, ErrorObject> {
        let Some(tool) = self.registry().snapshot().get(name).cloned() else {
            return Err(ErrorObject::invalid_params(format!("Unknown tool: {name}")));
        };
        if !permits(ctx.scopes(), &tool.scopes) {
            self.count_refusal(crate::observe::RefusalReason::Scope);
            return Err(insufficient_scope("tool", name, &tool.scopes));
        }
        if let Some(visibility) = &self.config().tool_visibility {
            if let Some(reason) = visibility.check(crate::tools::visibility::Viewer::of(ctx))(name)
            {
                self.count_refusal(crate::observe::RefusalReason::Policy);
                return Err(ErrorObject::invalid_params(format!(
                    "Tool {name} is not available to this caller: {reason}"
                )));
            }
        }
        Ok(tool)
    }

    /// What the handler's first (or only) step ended with, as the call's outcome: a result,
    /// checked against the output schema and guarded; a protocol error; or a request for input.
    pub(super) fn first_step_outcome(
        &self,
        tool: &RegisteredTool,
        name: &str,
        outcome: Option<Result<CallToolResult, ToolError>>,
        bind: impl FnOnce() -> Binding,
        declared: &ClientCapabilities,
    ) -> Result<Outcome, ErrorObject> {
        let result = match outcome {
            None => return Ok(Outcome::Complete(self.with_meta(internal_failure()))),
            Some(Err(ToolError::Protocol(error))) => return Err(error),
            Some(Err(ToolError::Failed(message))) => CallToolResult::error(message),
            Some(Err(ToolError::Internal(error))) => {
                tracing::error!(tool = %name, error = %error, "tool failed with an internal error");
                internal_failure()
            }
            Some(Err(ToolError::InputRequired(input))) => {
                return match self.ask(name, bind, *input, declared) {
                    Ok(Some(result)) => Ok(Outcome::InputRequired(result)),
                    Ok(None) => Ok(Outcome::Complete(self.with_meta(internal_failure()))),
                    Err(error) => Err(error),
                };
            }
            Some(Ok(result)) => result,
        };
        let result = self.guarded(tool, self.checked_result(tool, result));
        Ok(Outcome::Complete(self.with_meta(result)))
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
                // T-10
                tracing::error!(tool = %tool.name, %problem, "structured output does not match the outputSchema");
                internal_failure()
            }
            None => result,
        }
    }

    /// A `tools/call` run to its final message, with its audit event when anyone listens
    /// (a sink, or a subscriber of `toolwire::audit`). The request's span, which carries the
    /// W3C trace context, is the transport's (`observe::trace`).
    pub(crate) async fn audited_call(
        &self,
        id: &RequestId,
        call: CallTool,
        ctx: RequestContext,
    ) -> Final {
        let sink = self.audit();
        let Some(pending) = audit::wanted(sink).then(|| self.audit_start(id, &call, &ctx)) else {
            return self.call_final(id, self.call_tool(call, ctx).await);
        };
        let outcome = self.call_tool(call, ctx).await;
        let (kind, code) = match &outcome {
            Ok(Outcome::Complete(result)) if is_timed_out(result) => (AuditOutcome::TimedOut, None),
            Ok(Outcome::Complete(result)) if is_limited(result) => (AuditOutcome::Limited, None),
            Ok(Outcome::Complete(result)) if result.is_error() => (AuditOutcome::IsError, None),
            Ok(Outcome::Complete(_)) => (AuditOutcome::Complete, None),
            Ok(Outcome::InputRequired(_)) => (AuditOutcome::InputRequired, None),
            Ok(Outcome::Task(_)) => (AuditOutcome::Task, None),
            Err(error) => (AuditOutcome::Error, Some(error.code)),
        };
        pending.finish(kind, code, sink);
        self.call_final(id, outcome)
    }

    fn call_final(&self, id: &RequestId, outcome: Result<Outcome, ErrorObject>) -> Final {
        match outcome {
            Ok(Outcome::Complete(result)) => {
                if result.is_error() {
                    crate::observe::trace::tool_error();
                }
                self.call_result(id, &result)
            }
            Ok(Outcome::InputRequired(result)) => Final::result(id, &result),
            Ok(Outcome::Task(result)) => Final::result(id, &result),
            Err(error) => Final::error(Some(id), &error),
        }
    }

    /// What the audit event of a call knows before it runs.
    fn audit_start(&self, id: &RequestId, call: &CallTool, ctx: &RequestContext) -> audit::Pending {
        let definition = self
            .registry()
            .snapshot()
            .get(&call.name)
            .map(|t| t.definition_sha256.clone());
        let traceparent = ctx.meta().traceparent();
        audit::Pending::start(CallSeen {
            time: iso8601(self.clock().now_ms()),
            request_id: id.to_string(),
            principal: ctx.principal(),
            tool: &call.name,
            definition_sha256: definition,
            arguments: &call.arguments,
            traceparent,
        })
    }

    /// Records a call a transport refused before it ran (a 403 for a missing scope).
    pub(crate) fn audit_refused(
        &self,
        id: &RequestId,
        call: &CallTool,
        principal: Option<&str>,
        meta: Option<&RequestMeta>,
        code: i64,
    ) {
        let sink = self.audit();
        if !audit::wanted(sink) {
            return;
        }
        let definition = self
            .registry()
            .snapshot()
            .get(&call.name)
            .map(|t| t.definition_sha256.clone());
        let traceparent = meta.and_then(RequestMeta::traceparent);
        let pending = audit::Pending::start(CallSeen {
            time: iso8601(self.clock().now_ms()),
            request_id: id.to_string(),
            principal,
            tool: &call.name,
            definition_sha256: definition,
            arguments: &call.arguments,
            traceparent,
        });
        pending.finish(AuditOutcome::Refused, Some(code), sink);
    }

    /// The result after the output guard (T-15): the tool's own, else the server's.
    pub(crate) fn guarded(
        &self,
        tool: &RegisteredTool,
        mut result: CallToolResult,
    ) -> CallToolResult {
        let report = tool
            .guard
            .apply(&tool.name, &mut result, |scheme| self.own_scheme(scheme));
        if let Some(metrics) = self.metrics() {
            metrics.count_guard(&report);
        }
        result
    }

    /// Whether `scheme` is the URI scheme of one of this server's resources or templates: links
    /// to them are always allowed.
    fn own_scheme(&self, scheme: &str) -> bool {
        let of = |uri: &str| {
            uri.split_once(':')
                .is_some_and(|(s, _)| s.eq_ignore_ascii_case(scheme))
        };
        self.resources()
            .snapshot()
            .items
            .iter()
            .any(|r| of(&r.resource.definition.uri))
            || self
                .templates()
                .snapshot()
                .items
                .iter()
                .any(|t| of(&t.template.definition.uri_template))
    }

    /// Opens the previous round's request state, if any, and hands the answers and state to the
    /// handler's context. Tampered, expired, foreign or replayed state is -32602 (M-06…M-08);
    /// in single-use mode, state whose use the replay guard's store cannot record is refused
    /// with -32603 (it might be a replay: M-08 holds even while the store is away).
    pub(crate) async fn open_round(
        &self,
        bind: impl FnOnce() -> Binding,
        round: RoundParams,
        ctx: &RequestContext,
    ) -> Result<(), ErrorObject> {
        let config = self.request_state();
        let state = match round.request_state {
            None => {
                // The handler may ask for input, whose state is sealed with the ring: read a
                // shared one now if it never was (a no-op once it has been).
                config.keys.ready().await;
                None
            }
            Some(token) => {
                let now = self.clock().now_ms();
                let opened = config
                    .keys
                    .open(&token, &bind(), now)
                    .await
                    .map_err(|e| e.refusal("The requestState could not be opened"))?
                    .map_err(|e| ErrorObject::invalid_params(e.to_string()))?;
                if let Some(guard) = &config.replay_guard {
                    let first = guard
                        .redeem(opened.token_id, opened.expires_ms, now)
                        .await
                        .map_err(|e| {
                            e.refusal("The requestState could not be checked for reuse")
                        })?;
                    if !first {
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
        name: &str,
        bind: impl FnOnce() -> Binding,
        input: InputRequired,
        declared: &ClientCapabilities,
    ) -> Result<Option<InputRequiredResult>, ErrorObject> {
        if let Some(problem) = &input.problem {
            tracing::error!(%name, %problem, "unusable input request");
            return Ok(None);
        }
        if input.requests.is_empty() && input.state.is_none() {
            // M-03
            tracing::error!(%name, "an input_required result needs input requests or state");
            return Ok(None);
        }
        if let Some(missing) = input.missing_capabilities(declared) {
            return Err(ErrorObject::missing_capability(&missing));
        }
        let config = self.request_state();
        let request_state = input
            .state
            .map(|state| {
                let expires = self.clock().now_ms().saturating_add(config.ttl_ms);
                config.keys.seal(&bind(), Some(state), expires)
            })
            .transpose()
            .map_err(|e| e.refusal("The request state could not be sealed"))?;
        Ok(Some(InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: (!input.requests.is_empty()).then_some(input.requests),
            request_state,
            meta: self.result_meta().cloned(),
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
        let mut done = self.call_final_json(id, result);
        done.tool_error = result.is_error();
        done
    }

    /// A tool result's final message, with the server's `_meta` merged in.
    fn call_final_json(&self, id: &RequestId, result: &CallToolResult) -> Final {
        let Some(server_meta) = self.result_meta() else {
            return Final::result(id, result);
        };
        match &result.meta {
            None => Final::result_with_meta(id, result, self.result_meta_json()),
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

impl Server {
    /// Runs the tool `name` with `arguments` from inside another tool's handler (a tool that
    /// calls tools by name: a gateway's `call_tool`), for the caller of `ctx`, the calling
    /// handler's own context, through the checks a `tools/call` of it makes: its scopes, the
    /// [`ToolVisibility`](crate::ToolVisibility)'s `check` (not `check_listed`: a tool left out
    /// of a caller's list may still be called, D-03), its rate limit, its input schema, its
    /// deadline with panics contained, its output schema and its output guard; audited under its
    /// own name as well. `None` when the caller may not call it — no such tool, out of the
    /// caller's scopes, or hidden from it (counted as a refusal) — so that the calling tool
    /// answers all three alike. A request for input and a protocol error come back as the
    /// handler gave them, to be the calling tool's own: the calling call's round seals the
    /// state, and its retry hands this handler the answers in `ctx`. The handler may make the
    /// call a task only through the calling tool's own task ([`RequestContext::start_task`]).
    pub async fn call_within(
        &self,
        name: &str,
        arguments: Value,
        ctx: RequestContext,
    ) -> Option<Result<CallToolResult, ToolError>> {
        let tool = match self.permitted_tool(name, &ctx) {
            Ok(tool) => tool,
            Err(_) => return None,
        };
        let call = CallTool {
            name: name.to_owned(),
            arguments,
            round: RoundParams::default(),
        };
        let sink = self.audit();
        let pending = audit::wanted(sink).then(|| self.audit_start(ctx.request_id(), &call, &ctx));
        let outcome = self.within(&tool, &call.arguments, ctx).await;
        if let Some(pending) = pending {
            let kind = match &outcome {
                Ok(result) if is_timed_out(result) => AuditOutcome::TimedOut,
                Ok(result) if is_limited(result) => AuditOutcome::Limited,
                Ok(result) if result.is_error() => AuditOutcome::IsError,
                Ok(_) => AuditOutcome::Complete,
                Err(ToolError::InputRequired(_)) => AuditOutcome::InputRequired,
                Err(_) => AuditOutcome::Error,
            };
            pending.finish(kind, None, sink);
        }
        Some(outcome)
    }

    /// [`Server::call_within`] once the tool is found and permitted.
    async fn within(
        &self,
        tool: &Arc<RegisteredTool>,
        arguments: &Value,
        ctx: RequestContext,
    ) -> Result<CallToolResult, ToolError> {
        let name = tool.name.as_str();
        if let Some(limited) = self.over_quota(tool, name, &ctx).await {
            return Ok(limited);
        }
        if tool.task_support == Some(TaskSupport::Required) {
            return Err(ToolError::Failed(format!(
                "Tool {name} runs only as a task: call it with tools/call"
            )));
        }
        if let Some(invalid) = invalid_arguments(tool, name, arguments) {
            return Ok(invalid);
        }
        let cancel = ctx.cancellation().clone();
        let named = ToolName(tool.clone());
        match handler_step(
            named,
            || (tool.handler)(arguments, ctx),
            tool.timeout,
            cancel,
        )
        .await
        {
            None => Ok(internal_failure()),
            Some(Ok(result)) => Ok(self.guarded(tool, self.checked_result(tool, result))),
            Some(Err(ToolError::Internal(error))) => {
                tracing::error!(tool = %name, error = %error, "tool failed with an internal error");
                Ok(internal_failure())
            }
            Some(Err(error)) => Err(error),
        }
    }

    /// The tool's quota, checked before any of the call's work is done (T-15): the result
    /// that tells the model to wait, if the caller is over it. With a shared store the quota
    /// is shared by every instance (see `state::shared_limits` for the tiers and what happens
    /// while the store is away).
    async fn over_quota(
        &self,
        tool: &RegisteredTool,
        name: &str,
        ctx: &RequestContext,
    ) -> Option<CallToolResult> {
        let limit = tool.limit.as_ref()?;
        let wait = match self.shared_limits() {
            Some(shared) => {
                shared
                    .check(name, limit, ctx.principal(), ctx.client())
                    .await?
            }
            None => {
                let caller = CallerBucket::of(ctx.principal(), ctx.client());
                limit.limiter.check(caller, limit.cost).err()?
            }
        };
        self.count_refusal(crate::observe::RefusalReason::RateLimit);
        Some(limited_result(name, limit, wait))
    }
}

/// What binds request state to a call: its name, arguments and caller. A digest of the
/// arguments is computed only when state is opened or sealed, never on a plain call, which would
/// pay for a digest it never uses.
pub(super) fn binder<'a>(
    name: &'a str,
    arguments: &'a Value,
    principal: Option<&'a str>,
) -> impl Fn() -> Binding + Copy + 'a {
    move || Binding::new(CallToolMethod::METHOD, name, arguments, principal)
}

/// The tool error that tells the model what is wrong with its arguments, if anything is: the
/// first few violations and a count of the rest, since a long array of wrong items would
/// otherwise make a message of millions of lines.
fn invalid_arguments(
    tool: &RegisteredTool,
    name: &str,
    arguments: &Value,
) -> Option<CallToolResult> {
    if tool.input.is_valid(arguments) {
        return None;
    }
    let violations = tool.input.violations(arguments, REPORTED_VIOLATIONS);
    let text = format!("Invalid arguments for tool {name}:\n{violations}");
    Some(CallToolResult::error(text))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::request::context::RequestContext;
    use crate::request::mrtr::InputRequired;
    use crate::request::mrtr::ToolError;
    use crate::server::Server;
    use crate::state::request_state::DIGESTS;
    use crate::tools::tool::Tool;

    fn call(arguments: serde_json::Value, extra: serde_json::Value) -> Vec<u8> {
        let mut params = json!({"name": "t", "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        }});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            .to_string()
            .into_bytes()
    }

    /// The arguments are serialized and hashed only when request state is sealed or opened,
    /// not on every call.
    #[tokio::test]
    async fn plain_calls_compute_no_argument_digest() {
        let server = Server::builder("t", "1")
            .tool(Tool::raw(
                "t",
                json!({"type": "object"}),
                |args, ctx: RequestContext| async move {
                    if args["ask"] == true && ctx.request_state::<u8>()?.is_none() {
                        return Err(InputRequired::new().list_roots("r").state(1u8).into());
                    }
                    Ok::<_, ToolError>("done")
                },
            ))
            .build()
            .unwrap();
        let digests = || DIGESTS.with(|d| d.get());
        let before = digests();
        let reply = server
            .handle_message(&call(json!({"a": 1}), json!({})))
            .await;
        assert!(reply[0].contains("done"), "{reply:?}");
        assert_eq!(digests(), before, "a plain call hashes nothing");
        let reply = server
            .handle_message(&call(json!({"ask": true}), json!({})))
            .await;
        let state: serde_json::Value = serde_json::from_str(&reply[0]).unwrap();
        let token = state["result"]["requestState"].as_str().unwrap().to_owned();
        assert_eq!(digests(), before + 1, "sealing hashes once");
        let retry = call(
            json!({"ask": true}),
            json!({"requestState": token, "inputResponses": {}}),
        );
        let reply = server.handle_message(&retry).await;
        assert!(reply[0].contains("done"), "{reply:?}");
        assert_eq!(digests(), before + 2, "opening hashes once");
    }
}
