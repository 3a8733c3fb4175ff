//! Tasks through the gateway: an upstream that makes a call a task makes it the caller's task
//! at the gateway (and only then: a call the upstream answers at once stays a plain call);
//! the gateway follows the upstream task to its result, relays its questions, and cancels it
//! when the caller cancels its own; a tool the upstream runs only as a task is served. All of
//! it through `call_tool` too, for a caller in search mode.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use toolwire_client::protocol::{ElicitAction, ElicitResult, ElicitValue};
use toolwire_client::{CallOptions, CancellationToken, Client, ClientBuilder, Error};
use toolwire_gateway::GatewayOptions;
use toolwire_gateway::discovery::{Discovery, DiscoveryConfig};
use toolwire_server::{
    Elicited, InputRequired, NoArgs, RequestContext, TaskSupport, Tool, ToolError,
};

use crate::gateway::{gateway_with, upstream};
use crate::support::{DEADLINE, Served, text};

/// The upstream's question inside a task.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    /// Your name.
    name: String,
}

/// What the test controls and observes of the upstream's tools.
#[derive(Default)]
struct Upstream {
    /// Lets a waiting tool finish.
    gate: Notify,
    /// Told when a waiting tool stopped without the gate: cancelled (a task's handler is
    /// dropped when its task is cancelled).
    cancelled: Notify,
}

/// Tells the upstream's `cancelled` when dropped before it is disarmed.
struct Stopped(Option<Arc<Upstream>>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(up) = self.0.take() {
            up.cancelled.notify_one();
        }
    }
}

/// The upstream's tools: `wait` (task-optional: waits for the gate, so its first step never
/// finishes at once, or sees its cancellation), `now` (task-optional, answers at once),
/// `only_task` (task-required, waits for the gate) and `ask` (task-optional: waits for the
/// gate, then asks for a name inside its task).
fn tools(up: &Arc<Upstream>) -> Vec<Tool> {
    let waiting = |name: &'static str, up: Arc<Upstream>| {
        Tool::new(name, move |_: NoArgs, ctx: RequestContext| {
            let up = up.clone();
            async move {
                let mut stopped = Stopped(Some(up.clone()));
                tokio::select! {
                    () = ctx.cancellation().cancelled() => Err(ToolError::failed("cancelled")),
                    () = up.gate.notified() => {
                        stopped.0 = None;
                        Ok(format!("{name} done"))
                    }
                }
            }
        })
    };
    let asking = up.clone();
    vec![
        waiting("wait", up.clone()).task_support(TaskSupport::Optional),
        waiting("only_task", up.clone()).task_support(TaskSupport::Required),
        Tool::new("now", |_: NoArgs, _: RequestContext| async { "at once" })
            .task_support(TaskSupport::Optional),
        Tool::new("ask", move |_: NoArgs, ctx: RequestContext| {
            let up = asking.clone();
            async move {
                match ctx.elicited::<Name>("name")? {
                    Some(Elicited::Accepted(form)) => {
                        Ok::<_, ToolError>(format!("Hello, {}!", form.name))
                    }
                    Some(_) => Ok("Hello, stranger!".to_owned()),
                    None => {
                        up.gate.notified().await;
                        Err(InputRequired::new()
                            .elicit::<Name>("name", "What is your name?")
                            .into())
                    }
                }
            }
        })
        .task_support(TaskSupport::Optional),
    ]
}

/// One upstream "up" with the tools above behind a gateway; a caller of the gateway that
/// declares the tasks extension and answers a name form with "Ada".
async fn tasks_gateway() -> (
    toolwire_gateway::Gateway,
    Served,
    Served,
    Arc<Upstream>,
    Client,
) {
    tasks_gateway_with(GatewayOptions::new()).await
}

/// [`tasks_gateway`] with `options`.
async fn tasks_gateway_with(
    options: GatewayOptions,
) -> (
    toolwire_gateway::Gateway,
    Served,
    Served,
    Arc<Upstream>,
    Client,
) {
    let up = Arc::new(Upstream::default());
    let upstream = Served::start(upstream("up", tools(&up)), None).await;
    let (gateway, served) = gateway_with(&[("up", "up", &upstream.url)], options).await;
    let caller = ClientBuilder::new("tasks-test", "1")
        .with_tasks()
        .on_elicit(|_| async {
            Ok(ElicitResult {
                action: ElicitAction::Accept,
                content: Some([("name".to_owned(), ElicitValue::String("Ada".into()))].into()),
                meta: None,
            })
        })
        .http(&served.url)
        .expect("a client");
    (gateway, served, upstream, up, caller)
}

/// Options that count the tasks made of the call and run `then` on each.
fn counting(made: &Arc<AtomicUsize>, then: impl Fn() + Send + Sync + 'static) -> CallOptions {
    let made = made.clone();
    CallOptions::default().tasks().on_task(move |_| {
        made.fetch_add(1, Ordering::SeqCst);
        then();
    })
}

/// Calls `tool` through the gateway as a task, letting the upstream finish once the caller
/// holds its task: the result, and how many tasks were made of the call.
async fn called_as_task(
    caller: &toolwire_client::Client,
    up: &Arc<Upstream>,
    tool: &str,
) -> (toolwire_client::protocol::CallToolResult, usize) {
    called_as_task_with(caller, up, tool, serde_json::json!({})).await
}

/// [`called_as_task`] of `tool` with `arguments`.
async fn called_as_task_with(
    caller: &toolwire_client::Client,
    up: &Arc<Upstream>,
    tool: &str,
    arguments: serde_json::Value,
) -> (toolwire_client::protocol::CallToolResult, usize) {
    let made = Arc::new(AtomicUsize::new(0));
    let gate = up.clone();
    let options = counting(&made, move || gate.gate.notify_one());
    let result = tokio::time::timeout(DEADLINE, caller.call_tool_with(tool, arguments, options))
        .await
        .expect("in time")
        .expect("a result");
    (result, made.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_through_the_gateway_runs_to_its_result() {
    let (_gateway, _served, _upstream, up, caller) = tasks_gateway().await;
    // The upstream finishes once the caller holds its task.
    let (result, made) = called_as_task(&caller, &up, "up__wait").await;
    assert_eq!(text(&result), "wait done");
    assert_eq!(made, 1, "the call became the caller's task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_upstream_answers_at_once_stays_a_plain_call() {
    let (_gateway, _served, _upstream, _up, caller) = tasks_gateway().await;
    let made = Arc::new(AtomicUsize::new(0));
    let result = tokio::time::timeout(
        DEADLINE,
        caller.call_tool_with("up__now", serde_json::json!({}), counting(&made, || {})),
    )
    .await
    .expect("in time")
    .expect("a result");
    assert_eq!(text(&result), "at once");
    assert_eq!(made.load(Ordering::SeqCst), 0, "no task was made of it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cancelled_through_the_gateway_cancels_the_upstream_task() {
    let (_gateway, _served, _upstream, up, caller) = tasks_gateway().await;
    let made = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let cancelling = cancel.clone();
    // The caller cancels as soon as it holds the task: its client sends tasks/cancel.
    let options = counting(&made, move || cancelling.cancel()).cancel_on(cancel);
    let called = tokio::time::timeout(
        DEADLINE,
        caller.call_tool_with("up__wait", serde_json::json!({}), options),
    )
    .await
    .expect("in time");
    assert!(matches!(called, Err(Error::Cancelled)), "{called:?}");
    assert_eq!(made.load(Ordering::SeqCst), 1);
    tokio::time::timeout(DEADLINE, up.cancelled.notified())
        .await
        .expect("the upstream task is cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_upstream_runs_only_as_a_task_is_served_and_runs() {
    let (_gateway, served, _upstream, up, caller) = tasks_gateway().await;
    let listed: Vec<String> = caller
        .refresh_tools()
        .await
        .expect("a list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(listed.contains(&"up__only_task".to_owned()), "{listed:?}");
    let (result, _) = called_as_task(&caller, &up, "up__only_task").await;
    assert_eq!(text(&result), "only_task done");
    // A caller that does not declare the extension is told it must, as the upstream says.
    let plain = crate::support::client(&served.url);
    match plain
        .call_tool("up__only_task", serde_json::json!({}))
        .await
    {
        Err(Error::Rpc(error)) => assert_eq!(error.code, -32021, "{error:?}"),
        other => panic!("-32021 for a caller without the extension, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_tasks_question_reaches_the_caller_and_its_answer_goes_back() {
    let (_gateway, _served, _upstream, up, caller) = tasks_gateway().await;
    let (result, made) = called_as_task(&caller, &up, "up__ask").await;
    assert_eq!(text(&result), "Hello, Ada!");
    assert_eq!(made, 1);
}

/// A gateway in search mode in front of the upstream above, and its caller.
async fn searching_gateway() -> (
    toolwire_gateway::Gateway,
    Served,
    Served,
    Arc<Upstream>,
    Client,
) {
    let config = DiscoveryConfig::from_json(&serde_json::json!({"mode": "search"}))
        .expect("a discovery section");
    let discovery = Discovery::compile(&config).expect("it compiles");
    let (gateway, served, upstream, up, caller) =
        tasks_gateway_with(GatewayOptions::new().discovery(discovery)).await;
    let listed: Vec<String> = caller
        .refresh_tools()
        .await
        .expect("a list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(
        !listed.contains(&"up__wait".to_owned()),
        "search mode: {listed:?}"
    );
    (gateway, served, upstream, up, caller)
}

/// `call_tool`'s arguments for `tool`.
fn by_name(tool: &str) -> serde_json::Value {
    serde_json::json!({"name": tool, "arguments": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_through_call_tool_is_the_callers_task_and_ends_with_the_upstreams_result() {
    let (_gateway, _served, _upstream, up, caller) = searching_gateway().await;
    let (result, made) = called_as_task_with(&caller, &up, "call_tool", by_name("up__wait")).await;
    assert_eq!(text(&result), "wait done");
    assert_eq!(made, 1, "the call of call_tool became the caller's task");
    // The upstream answers at once: a plain call, no task.
    let made = Arc::new(AtomicUsize::new(0));
    let result = tokio::time::timeout(
        DEADLINE,
        caller.call_tool_with("call_tool", by_name("up__now"), counting(&made, || {})),
    )
    .await
    .expect("in time")
    .expect("a result");
    assert_eq!(text(&result), "at once");
    assert_eq!(made.load(Ordering::SeqCst), 0, "no task was made of it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_tasks_question_through_call_tool_reaches_the_caller_and_its_answer_goes_back()
{
    let (_gateway, _served, _upstream, up, caller) = searching_gateway().await;
    let (result, made) = called_as_task_with(&caller, &up, "call_tool", by_name("up__ask")).await;
    assert_eq!(text(&result), "Hello, Ada!");
    assert_eq!(made, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_through_call_tool_cancelled_cancels_the_upstream_task() {
    let (_gateway, _served, _upstream, up, caller) = searching_gateway().await;
    let made = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let cancelling = cancel.clone();
    let options = counting(&made, move || cancelling.cancel()).cancel_on(cancel);
    let called = tokio::time::timeout(
        DEADLINE,
        caller.call_tool_with("call_tool", by_name("up__wait"), options),
    )
    .await
    .expect("in time");
    assert!(matches!(called, Err(Error::Cancelled)), "{called:?}");
    assert_eq!(made.load(Ordering::SeqCst), 1);
    tokio::time::timeout(DEADLINE, up.cancelled.notified())
        .await
        .expect("the upstream task is cancelled");
}
