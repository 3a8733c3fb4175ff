//! A downstream call of a served tool, made upstream through the host: cancelled when the
//! caller cancels, and the upstream's progress passed on to the caller.

use std::sync::Arc;

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_host::Host;
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
        Verdict::Go => Ok(upstream(&host, &qualified, arguments, &ctx).await),
        Verdict::Answer(answer) => *answer,
    }
}

/// Makes the call upstream, with the caller's cancellation and progress passed through.
async fn upstream(
    host: &Host,
    qualified: &str,
    arguments: Value,
    ctx: &RequestContext,
) -> CallToolResult {
    let mut options = CallOptions::default().cancel_on(ctx.cancellation().clone());
    if ctx.meta().progress_token.is_none() {
        return host.call_with(qualified, arguments, options).await.result;
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
    called.result
}
