//! A downstream call of a served tool, made upstream through the host: cancelled when the
//! caller cancels, the upstream's progress passed on to the caller, and the upstream's
//! `input_required` rounds relayed to the caller and back (`relay`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use toolwire_client::auth::TokenExchange;
use toolwire_client::{CallOptions, CancellationToken, RoundAnswers};
use toolwire_host::{Called, Host, Outcome};
use toolwire_protocol::{CallToolResult, ErrorObject, ProgressParams, TASKS_EXTENSION};
use toolwire_server::{InputRequired, RequestContext, ToolError};

use crate::hold::{Asking, HoldError, Holds, Question, Running};
use crate::policy::{Policy, Verdict};
use crate::relay::{self, HeldRef, Sealed, Unrelayable, Upstream};

/// How many upstream progress notifications may wait to be passed on; past it, the newest
/// are dropped (a later one supersedes them anyway).
const PROGRESS_QUEUE: usize = 32;

/// The rules' answer instead of a call: a result is their refusal, counted in the metrics; an
/// error asks the person behind the caller.
fn counted(
    route: &Route,
    answer: Result<CallToolResult, ToolError>,
) -> Result<CallToolResult, ToolError> {
    if let (Some(observed), Ok(result)) = (route.observed.get(), &answer) {
        if result.is_error() {
            observed.count_policy_refusal();
        }
    }
    answer
}

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
        Verdict::Answer(answer) => return counted(&route, *answer),
    };
    let answers = sealed.upstream_answers(qualified, &arguments, &ctx)?;
    // A caller that declared the tasks extension may get a task: the upstream's, followed by
    // the gateway's client, made the caller's own task by the downstream server when the
    // upstream makes one (the served tool's task is deferred to that moment).
    let task = Arc::new(UpstreamTask::of(&ctx, &sealed));
    if let Some(held) = &sealed.held {
        return answered(&route, held, &arguments, approved, &ctx).await;
    }
    // Kept for the digest that binds a round the upstream may ask to these arguments.
    let sent = arguments.clone();
    let questions = route.asked.load(Ordering::Acquire);
    if route.modern {
        let called = upstream_call(
            (&host, &route),
            arguments,
            answers,
            None,
            task.clone(),
            &ctx,
        );
        let called = called.await;
        return finished(
            &route,
            called,
            (&sent, approved, task.id()),
            questions,
            &ctx,
        );
    }
    // A legacy upstream's question during the call comes out of `asking`: the call is then
    // held, running on in a task of its own, for the caller to answer.
    let (asking, mut asked) = route.holds.asking(&route.server);
    // The call is cancelled with the caller's request until it is held; once held it outlives
    // that request, and ends with its hold (dropped, it is cancelled upstream).
    let cancel = CancellationToken::new();
    let mut call = upstream_call(
        (&host, &route),
        arguments,
        answers,
        Some((asking, cancel.clone())),
        task.clone(),
        &ctx,
    );
    let called = tokio::select! {
        called = &mut call => called,
        () = ctx.cancellation().cancelled() => {
            cancel.cancel();
            call.await
        }
        Some(question) = asked.recv() => {
            let running = Running::spawn(call, asked);
            let held = Pending { sent: &sent, approved };
            return held.ask(&route, question, running, &ctx).await;
        }
    };
    finished(
        &route,
        called,
        (&sent, approved, task.id()),
        questions,
        &ctx,
    )
}

/// The upstream call as a future of its own, so that it can be held: made with a token
/// exchanged for the caller's where the upstream takes one (and once more with a new one
/// when the upstream refuses it); for an upstream that may ask during a call, `holding`: its
/// requests bound to the `Asking` (a legacy upstream's question names one), and the call
/// cancelled by the token, not the caller's request (a held call outlives it).
fn upstream_call(
    (host, route): (&Arc<Host>, &Route),
    arguments: Value,
    answers: Option<RoundAnswers>,
    holding: Option<(Asking, CancellationToken)>,
    task: Arc<UpstreamTask>,
    ctx: &RequestContext,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Called> + Send>> {
    let (host, qualified, ctx) = (host.clone(), route.qualified.clone(), ctx.clone());
    let bound = holding.clone();
    let options = move |options: CallOptions| match bound {
        Some((asking, cancel)) => options
            .on_request(move |sent| asking.bind(sent))
            .cancel_on(cancel),
        None => options,
    };
    let (exchange, server) = (route.exchange.clone(), route.server.clone());
    let observed = route.observed.clone();
    // Kept only where the call may be made again with a new token.
    let again = exchange.as_ref().map(|_| arguments.clone());
    Box::pin(async move {
        let mut first = Some(arguments);
        let started = std::time::Instant::now();
        let made = crate::exchange::with_exchanged(
            exchange.as_deref(),
            (&server, &qualified),
            &ctx,
            |bearer| {
                let arguments = first.take().or_else(|| again.clone()).unwrap_or_default();
                let more = (answers.clone(), bearer, options.clone());
                upstream(&host, &qualified, arguments, more, &task, &ctx)
            },
            |called: &Called| matches!(called.outcome, Outcome::Unauthorized),
        )
        .await;
        // The call's requests are unbound when it ends.
        drop(holding);
        if let (Some(observed), Ok(called)) = (observed.get(), &made) {
            observed.observe_call(&server, &qualified, called, started.elapsed());
        }
        made.unwrap_or_else(|why| Called {
            result: crate::exchange::refused(why),
            outcome: Outcome::Refused,
            error: None,
            input_required: None,
        })
    })
}

/// What the caller gets of an upstream call that ended: its result, or the upstream's own
/// `input_required` round relayed (a 2026-07-28 upstream), or the error result saying that a
/// question of a legacy upstream could not be relayed.
fn finished(
    route: &Route,
    mut called: Called,
    (sent, approved, task_id): (&Value, Option<String>, Option<String>),
    questions: u64,
    ctx: &RequestContext,
) -> Result<CallToolResult, ToolError> {
    let qualified = &*route.qualified;
    match (called.outcome, called.input_required.take()) {
        (Outcome::InputRequired, Some(input)) => {
            let upstream = Upstream {
                server: route.server.to_string(),
                tool: qualified.to_owned(),
                arguments_sha256: relay::arguments_sha256(sent),
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
        _ => passed_on(called, ctx),
    }
}

/// A call whose upstream asked: what binds the round to it.
struct Pending<'a> {
    sent: &'a Value,
    approved: Option<String>,
}

impl Pending<'_> {
    /// Holds the running call for the caller to answer `question`, and returns the round that
    /// asks it; or, if the caller could not answer it (it did not declare the capability,
    /// M-05), lets the upstream be told no and waits for the call's end or next question.
    async fn ask(
        self,
        route: &Route,
        mut question: Question,
        mut running: Running,
        ctx: &RequestContext,
    ) -> Result<CallToolResult, ToolError> {
        let qualified = &*route.qualified;
        loop {
            if question.answerable_by(ctx.client_capabilities()) {
                break;
            }
            // Dropped unanswered, the question is refused upstream, as the caller would.
            drop(question);
            tokio::select! {
                called = &mut running.done => return self.ended(route, called, ctx),
                Some(next) = running.questions.recv() => question = next,
            }
        }
        let key = question.key();
        let request = question.request.clone();
        let id = route
            .holds
            .hold(
                route.server.to_string(),
                qualified.to_owned(),
                relay::arguments_sha256(self.sent),
                (question, running),
            )
            .map_err(|full| ToolError::Protocol(ErrorObject::internal(format!(
                "The upstream server {} asked for input during the call of {qualified}, and the \
                 gateway could not hold the call for your answer: {full}",
                route.server
            ))))?;
        let held = HeldRef {
            instance: route.holds.instance().to_owned(),
            id,
            server: route.server.to_string(),
        };
        Err(InputRequired::new()
            .request(key, request)
            .state(Sealed {
                approved_sha256: self.approved,
                held: Some(held),
                upstream: Some(Upstream {
                    server: route.server.to_string(),
                    tool: qualified.to_owned(),
                    arguments_sha256: relay::arguments_sha256(self.sent),
                    state: None,
                    task: None,
                }),
                ..Sealed::default()
            })
            .into())
    }

    /// The end of a held call.
    fn ended(
        &self,
        route: &Route,
        called: Result<Called, tokio::sync::oneshot::error::RecvError>,
        ctx: &RequestContext,
    ) -> Result<CallToolResult, ToolError> {
        match called {
            Ok(called) => {
                // The questions it asked were held, not refused: none to report.
                let refused = route.asked.load(Ordering::Acquire);
                finished(
                    route,
                    called,
                    (self.sent, self.approved.clone(), None),
                    refused,
                    ctx,
                )
            }
            Err(_) => Ok(CallToolResult::error(format!(
                "The call of {} on the upstream server {} stopped while it was held",
                route.qualified, route.server
            ))),
        }
    }
}

/// The retry of a round whose question a legacy upstream asked during the call held under
/// `held`: the caller's answer goes upstream, and the caller gets the call's result or its
/// next question.
async fn answered(
    route: &Route,
    held: &HeldRef,
    arguments: &Value,
    approved: Option<String>,
    ctx: &RequestContext,
) -> Result<CallToolResult, ToolError> {
    let holds = &route.holds;
    if held.instance != holds.instance() {
        return Err(ToolError::Protocol(ErrorObject::internal(format!(
            "This call of {} is held by another gateway instance (the upstream server {} asked \
             for input during it, and only the instance holding the call can take your answer \
             to it), or by this one before it restarted. The gateway's operator must route a \
             caller's retries to the instance that answered its first round (sticky sessions \
             on the load balancer); call the tool anew without requestState",
            route.qualified, held.server
        ))));
    }
    let taken = holds.take(&held.id).and_then(|taken| {
        // The server binds the state to the call; this says so plainly should it not.
        if taken.tool == *route.qualified
            && taken.server == held.server
            && taken.arguments_sha256 == relay::arguments_sha256(arguments)
        {
            Ok(taken)
        } else {
            holds.put_back(held.id.clone(), taken);
            Err(HoldError::Unknown(holds.ttl()))
        }
    });
    let mut taken = taken.map_err(|unknown| {
        ToolError::Protocol(ErrorObject::invalid_params(format!(
            "The call of {} on {}: {unknown}",
            route.qualified, held.server
        )))
    })?;
    let key = taken.question.key();
    let response = ctx.input_responses().get(key).cloned();
    let pending = Pending {
        sent: arguments,
        approved,
    };
    match response {
        Some(response) if taken.question.answered_by(&response) => {
            taken.question.answer(response);
        }
        Some(_) => {
            holds.put_back(held.id.clone(), taken);
            return Err(ToolError::Protocol(ErrorObject::invalid_params(format!(
                "inputResponses[\"{key}\"] does not answer the {} request the upstream server {} \
                 asked",
                key, held.server
            ))));
        }
        None => {
            // Asked again, as it was (M-10): the call stays held under a new id.
            return pending.ask(route, taken.question, taken.running, ctx).await;
        }
    }
    let running = &mut taken.running;
    tokio::select! {
        called = &mut running.done => pending.ended(route, called, ctx),
        Some(question) = running.questions.recv() => {
            pending.ask(route, question, taken.running, ctx).await
        }
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
    /// The calls this gateway instance holds for their callers' answers.
    pub(crate) holds: Arc<Holds>,
    /// Whether the upstream speaks 2026-07-28, whose questions come as `input_required`
    /// rounds and never as requests during a call: its calls are not set up to be held.
    pub(crate) modern: bool,
    /// Where its upstream calls are counted, once the gateway has metrics.
    pub(crate) observed: Arc<std::sync::OnceLock<crate::observe::GatewayMetrics>>,
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
    (answers, bearer, more): (
        Option<RoundAnswers>,
        Option<String>,
        impl FnOnce(CallOptions) -> CallOptions,
    ),
    task: &UpstreamTask,
    ctx: &RequestContext,
) -> Called {
    // The caller's options last: they may set another cancellation.
    let mut options = more(
        CallOptions::default()
            .cancel_on(ctx.cancellation().clone())
            .relay_input()
            .input_capabilities(ctx.client_capabilities().clone()),
    );
    if let (Some(answers), None) = (answers, &task.resumed) {
        options = options.answers(answers);
    }
    options = task.options(options, ctx);
    if let Some(bearer) = bearer {
        options = options.bearer(bearer);
    }
    // Boxed: the call's future is some 7 KB, and each level above that held it inline (the
    // token exchange, the held call) would copy it whole as it is made and moved.
    if ctx.meta().progress_token.is_none() {
        return Box::pin(host.call_with(qualified, arguments, options)).await;
    }
    let (progress, mut received) = tokio::sync::mpsc::channel::<ProgressParams>(PROGRESS_QUEUE);
    options = options.on_progress(move |params| {
        let _ = progress.try_send(params.clone());
    });
    // The options, and with them the sender, are dropped when the call ends: the relay then
    // ends too.
    let called = Box::pin(host.call_with(qualified, arguments, options));
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
