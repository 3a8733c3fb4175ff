//! A downstream call of a served tool, made upstream through the host: cancelled when the
//! caller cancels, the upstream's progress passed on to the caller, and the upstream's
//! `input_required` rounds relayed to the caller and back (`relay`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use toolwire_client::auth::TokenExchange;
use toolwire_client::{CallOptions, RoundAnswers};
use toolwire_host::{Called, Host, Outcome};
use toolwire_protocol::{CallToolResult, ProgressParams, TASKS_EXTENSION};
use toolwire_server::{RequestContext, ToolError};

use crate::policy::{Policy, Verdict};
use crate::relay::{self, Sealed, Unrelayable, Upstream};

/// How many upstream progress notifications may wait to be passed on; past it, the newest
/// are dropped (a later one supersedes them anyway).
const PROGRESS_QUEUE: usize = 32;

/// Calls `qualified` upstream with `arguments` for the caller of `ctx`, if the gateway's rules
/// let it (or once the person behind the caller approved it). An upstream that needs input
/// gets its questions relayed to the caller; the caller's retry takes the answers upstream.
pub(crate) async fn call(
    host: Arc<Host>,
    policy: Arc<Policy>,
    route: Arc<Route>,
    arguments: Value,
    ctx: RequestContext,
) -> Result<CallToolResult, ToolError> {
    let qualified = &*route.qualified;
    let sealed = Sealed::of(&ctx)?;
    let approved = match policy.decide(qualified, &arguments, &ctx, &sealed) {
        Verdict::Go(approved) => approved,
        Verdict::Answer(answer) => return *answer,
    };
    let answers = sealed.upstream_answers(qualified, &arguments, &ctx)?;
    // A caller that declared the tasks extension may get a task: the upstream's, followed by
    // the gateway's client, made the caller's own task by the downstream server when the
    // upstream makes one (the served tool's task is deferred to that moment).
    let task = UpstreamTask::of(&ctx, &sealed);
    let bearer = match &route.exchange {
        Some(exchange) => {
            match crate::exchange::bearer_for(exchange, &route.server, qualified, &ctx).await {
                Ok(token) => Some(token),
                Err(why) => return Ok(crate::exchange::refused(why)),
            }
        }
        None => None,
    };
    // Kept for the digest that binds a round the upstream may ask to these arguments.
    let sent = arguments.clone();
    let questions = route.asked.load(Ordering::Acquire);
    let mut called = upstream(&host, qualified, arguments, (answers, bearer), &task, &ctx).await;
    let task_id = task.id();
    match (called.outcome, called.input_required.take()) {
        (Outcome::InputRequired, Some(input)) => {
            let upstream = Upstream {
                server: route.server.to_string(),
                tool: qualified.to_owned(),
                arguments_sha256: relay::arguments_sha256(&sent),
                state: input.request_state.clone(),
                task: task_id,
            };
            Err(relay::relayed(*input, upstream, approved))
        }
        // The upstream's task failed with an error: the caller's task fails with it.
        (Outcome::Failed, _) if task_id.is_some() && called.error.is_some() => {
            Err(ToolError::Protocol(called.error.take().unwrap_or_else(
                || toolwire_protocol::ErrorObject::internal("The upstream task failed"),
            )))
        }
        (Outcome::Answered, _) if route.asked.load(Ordering::Acquire) != questions => Ok(
            Unrelayable::failed(&route.server, qualified, &called.result),
        ),
        _ => passed_on(called, &ctx),
    }
}

/// The upstream task of a call, for a caller that declared the tasks extension: the one the
/// call continues (its earlier round stopped for input), or the one the upstream makes of it.
struct UpstreamTask {
    /// Whether the caller declared the extension.
    declared: bool,
    /// The task this round continues, with the caller's answers.
    resumed: Option<String>,
    /// The task the upstream made of this round's call.
    made: Arc<std::sync::Mutex<Option<String>>>,
}

impl UpstreamTask {
    fn of(ctx: &RequestContext, sealed: &Sealed) -> UpstreamTask {
        UpstreamTask {
            declared: ctx.client_capabilities().has_extension(TASKS_EXTENSION),
            resumed: sealed.upstream.as_ref().and_then(|up| up.task.clone()),
            made: Arc::default(),
        }
    }

    /// The upstream task this call followed, if any.
    fn id(&self) -> Option<String> {
        self.resumed
            .clone()
            .or_else(|| self.made.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The options of the upstream call: the task continued with the caller's answers, or
    /// the extension declared, and the caller's own task started when the upstream makes one.
    fn options(&self, mut options: CallOptions, ctx: &RequestContext) -> CallOptions {
        if let Some(task_id) = &self.resumed {
            return options.resume_task(task_id.clone(), ctx.input_responses().clone());
        }
        if self.declared {
            let (made, ctx) = (self.made.clone(), ctx.clone());
            options = options.tasks().on_task(move |created| {
                *made.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(created.task.task_id.clone());
                ctx.start_task();
            });
        }
        options
    }
}

/// What a served tool stands for: the upstream tool's qualified name, its upstream, and the
/// count of the questions that upstream asked that the gateway could not relay.
pub(crate) struct Route {
    pub(crate) qualified: Arc<str>,
    pub(crate) server: Arc<str>,
    pub(crate) asked: Arc<AtomicU64>,
    /// The token exchange its calls go with, if its upstream has one.
    pub(crate) exchange: Option<Arc<TokenExchange>>,
}

/// What the caller gets of an upstream call: its result, or the upstream's refusal of the
/// request itself when that refusal is about the caller's request, as the upstream sent it:
/// invalid params, or a client capability the tool needs that the caller did not declare (a
/// 2026-07-28 upstream is told the caller's own capabilities on each request). A capability
/// the caller did declare is missing on the gateway's side (a legacy upstream read the
/// gateway's own at `initialize`), so the caller is not told it lacks it: it gets the
/// `isError` result the host made, as for any other upstream error (internal, unknown
/// method), so that the upstream's failures are not taken for the caller's.
fn passed_on(called: Called, ctx: &RequestContext) -> Result<CallToolResult, ToolError> {
    let Some(error) = called.error else {
        return Ok(called.result);
    };
    let about_the_caller = match error.code {
        toolwire_protocol::INVALID_PARAMS => true,
        toolwire_protocol::MISSING_REQUIRED_CLIENT_CAPABILITY => {
            let required = error
                .data
                .as_ref()
                .and_then(|data| data.get("requiredCapabilities"));
            let declared = serde_json::to_value(ctx.client_capabilities()).unwrap_or_default();
            required.is_some_and(|required| !declares(&declared, required))
        }
        _ => false,
    };
    if about_the_caller {
        Err(ToolError::Protocol(error))
    } else {
        Ok(called.result)
    }
}

/// Whether the capabilities `declared` hold every capability of `required`, member by member
/// (`{"elicitation": {"url": {}}}` needs `elicitation.url`).
fn declares(declared: &Value, required: &Value) -> bool {
    match required {
        Value::Object(required) => required.iter().all(|(name, required)| {
            declared
                .get(name)
                .is_some_and(|declared| !declared.is_null() && declares(declared, required))
        }),
        _ => true,
    }
}

/// Makes one round of the call upstream, with the caller's cancellation and progress passed
/// through, the answers to the upstream's previous round if there was one, and the token
/// exchanged for the caller's if the upstream takes one.
async fn upstream(
    host: &Host,
    qualified: &str,
    arguments: Value,
    (answers, bearer): (Option<RoundAnswers>, Option<String>),
    task: &UpstreamTask,
    ctx: &RequestContext,
) -> Called {
    let mut options = CallOptions::default()
        .cancel_on(ctx.cancellation().clone())
        .relay_input()
        .input_capabilities(ctx.client_capabilities().clone());
    if let (Some(answers), None) = (answers, &task.resumed) {
        options = options.answers(answers);
    }
    options = task.options(options, ctx);
    if let Some(bearer) = bearer {
        options = options.bearer(bearer);
    }
    if ctx.meta().progress_token.is_none() {
        return host.call_with(qualified, arguments, options).await;
    }
    let (progress, mut received) = tokio::sync::mpsc::channel::<ProgressParams>(PROGRESS_QUEUE);
    options = options.on_progress(move |params| {
        let _ = progress.try_send(params.clone());
    });
    // The options, and with them the sender, are dropped when the call ends: the relay then
    // ends too.
    let called = host.call_with(qualified, arguments, options);
    let relay = async {
        while let Some(params) = received.recv().await {
            ctx.progress(params.progress, params.total, params.message.as_deref())
                .await;
        }
    };
    let (called, ()) = tokio::join!(called, relay);
    called
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::declares;

    #[test]
    fn a_required_capability_is_declared_member_by_member() {
        let declared = json!({"elicitation": {"form": {}}, "sampling": {}});
        assert!(declares(&declared, &json!({"sampling": {}})));
        assert!(declares(&declared, &json!({"elicitation": {"form": {}}})));
        assert!(!declares(&declared, &json!({"elicitation": {"url": {}}})));
        assert!(!declares(&declared, &json!({"roots": {}})));
        assert!(!declares(&json!({"roots": null}), &json!({"roots": {}})));
        assert!(declares(&declared, &json!({})));
    }
}
