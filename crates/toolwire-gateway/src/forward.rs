//! A downstream call of a served tool, made upstream through the host: cancelled when the
//! caller cancels, and the upstream's progress passed on to the caller.

use std::sync::Arc;

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_host::{Called, Host};
use toolwire_protocol::{CallToolResult, ProgressParams};
use toolwire_server::{RequestContext, ToolError};

use crate::policy::{Policy, Verdict};

/// How many upstream progress notifications may wait to be passed on; past it, the newest
/// are dropped (a later one supersedes them anyway).
const PROGRESS_QUEUE: usize = 32;

/// Calls `qualified` upstream with `arguments` for the caller of `ctx`, if the gateway's rules
/// let it (or once the person behind the caller approved it).
pub(crate) async fn call(
    host: Arc<Host>,
    policy: Arc<Policy>,
    qualified: Arc<str>,
    arguments: Value,
    ctx: RequestContext,
) -> Result<CallToolResult, ToolError> {
    match policy.decide(&qualified, &arguments, &ctx) {
        Verdict::Go => passed_on(upstream(&host, &qualified, arguments, &ctx).await),
        Verdict::Answer(answer) => *answer,
    }
}

/// What the caller gets of an upstream call: its result, or the upstream's refusal of the
/// request itself when it is about the request (a client capability the tool needs, invalid
/// params), as the upstream sent it. Any other upstream error (internal, unknown method)
/// stays the `isError` result the host made of it, so that the upstream's failures are not
/// taken for the gateway's.
fn passed_on(called: Called) -> Result<CallToolResult, ToolError> {
    match called.error {
        Some(error) if PASSED_ON.contains(&error.code) => Err(ToolError::Protocol(error)),
        _ => Ok(called.result),
    }
}

/// The upstream JSON-RPC errors passed on to the caller as they are.
const PASSED_ON: [i64; 2] = [
    toolwire_protocol::MISSING_REQUIRED_CLIENT_CAPABILITY,
    toolwire_protocol::INVALID_PARAMS,
];

/// Makes the call upstream, with the caller's cancellation and progress passed through.
async fn upstream(host: &Host, qualified: &str, arguments: Value, ctx: &RequestContext) -> Called {
    let mut options = CallOptions::default().cancel_on(ctx.cancellation().clone());
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
