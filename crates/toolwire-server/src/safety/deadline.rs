//! Running a handler: panics contained, a deadline with its token and grace, and the results
//! the model gets when a handler panicked, failed inside or ran out of time.

use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::CallToolResult;

/// Starts a handler with panics contained, in the call that builds its future and while it
/// runs: the future yields `None` (logged) if it panicked. `make` runs now, so it may borrow.
/// `E` is the handler's error (a tool's `ToolError`), passed through untouched.
pub(crate) fn contained<T: Send + 'static, E: Send + 'static>(
    name: &str,
    make: impl FnOnce() -> BoxFuture<'static, Result<T, E>>,
) -> BoxFuture<'static, Option<Result<T, E>>> {
    match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(fut) => {
            let name = name.to_owned();
            Box::pin(async move {
                AssertUnwindSafe(fut)
                    .catch_unwind()
                    .await
                    .map_err(|panic| panicked(&name, &panic))
                    .ok()
            })
        }
        Err(panic) => {
            panicked(name, &panic);
            Box::pin(std::future::ready(None))
        }
    }
}

/// A handler's step as one future: started with panics contained (in `make` and while it
/// runs: `None`, logged), and stopped after `limit`: its cancellation token fires and the call
/// ends with an `isError` result that says so, for the model to act on (retry smaller, or
/// later). One box, and the name is not copied: every tool call runs this, and `name` is only
/// read to log a panic or a timeout.
pub(crate) fn handler_step<E: Send + 'static, N: AsRef<str> + Send + 'static>(
    name: N,
    make: impl FnOnce() -> BoxFuture<'static, Result<CallToolResult, E>>,
    limit: Option<std::time::Duration>,
    cancel: CancellationToken,
) -> BoxFuture<'static, Option<Result<CallToolResult, E>>> {
    let handler = match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(handler) => handler,
        Err(panic) => {
            panicked(name.as_ref(), &panic);
            return Box::pin(std::future::ready(None));
        }
    };
    Box::pin(async move {
        let mut handler = AssertUnwindSafe(handler).catch_unwind();
        let ran = match limit {
            None => handler.await,
            Some(limit) => match tokio::time::timeout(limit, &mut handler).await {
                Ok(ran) => ran,
                Err(_) => {
                    // The token fires, and the handler gets a moment to notice and clean up
                    // (end a child process, roll back) before its future is dropped; what it
                    // returns then is not sent.
                    cancel.cancel();
                    let _ = tokio::time::timeout(DEADLINE_GRACE.min(limit), &mut handler).await;
                    let name = name.as_ref();
                    tracing::warn!(tool = %name, limit_ms = limit.as_millis() as u64, "tool timed out and was stopped");
                    return Some(Ok(timed_out(name, limit)));
                }
            },
        };
        ran.map_err(|panic| panicked(name.as_ref(), &panic)).ok()
    })
}

/// Whether a result is the one a deadline produced.
pub(crate) fn is_timed_out(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .is_some_and(|m| m.extra.contains_key(TIMED_OUT_META_KEY))
}

/// How long a handler whose deadline passed may take to wind down after its token fires.
const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The key of a timed-out result's `_meta`: `{"limitMs": N}`.
pub const TIMED_OUT_META_KEY: &str = "dev.toolwire/timedOut";

/// What the model sees when a tool ran out of time.
fn timed_out(name: &str, limit: std::time::Duration) -> CallToolResult {
    let seconds = limit.as_secs_f64();
    let mut result = CallToolResult::error(format!(
        "The tool {name} did not finish within {seconds} s and was stopped. Try again with a smaller request, or later."
    ));
    // The same for a program: which limit was hit (the server's serverInfo joins it later).
    let mut meta = toolwire_protocol::ResultMeta::default();
    meta.extra.insert(
        TIMED_OUT_META_KEY.into(),
        serde_json::json!({ "limitMs": limit.as_millis() as u64 }),
    );
    result.meta = Some(meta);
    result
}

pub(crate) fn panicked(name: &str, panic: &Box<dyn std::any::Any + Send>) {
    tracing::error!(%name, panic = panic_message(panic), "handler panicked");
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
