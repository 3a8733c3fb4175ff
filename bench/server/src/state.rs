//! Tools whose calls touch the server's state, for the shared-state latency rows
//! (`--state-tools`): `ask` (two rounds, the second carrying a sealed, single-use
//! `requestState`), `wait` (a task: it does not finish on its first poll), and `counter_new` /
//! `counter_bump` (a value kept by handle, updated as compare-and-swap). With `--store URL`
//! every one of them goes through the shared store.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwire_server::handles::HandleBackend;
use toolwire_server::{
    Elicited, HandleStore, InputRequired, NoArgs, RequestContext, TaskSupport, Tool, ToolError,
};

#[derive(Deserialize, JsonSchema)]
struct Answer {
    /// Any text.
    answer: String,
}

/// What `ask` seals between its rounds.
#[derive(Serialize, Deserialize)]
struct Asked {
    round: u32,
}

#[derive(Deserialize, JsonSchema)]
struct Bump {
    /// The counter's handle, as counter_new returned it.
    counter: String,
}

/// The state tools over `handles` (the store's handle backend).
pub(crate) fn tools(handles: std::sync::Arc<dyn HandleBackend>) -> anyhow::Result<Vec<Tool>> {
    let counters = HandleStore::<u64>::new("counter", handles)?;
    let (create, bump) = (counters.clone(), counters.clone());
    Ok(vec![
        Tool::new("ask", |_: NoArgs, ctx: RequestContext| async move {
            if ctx.request_state::<Asked>()?.is_some() {
                return match ctx.elicited::<Answer>("answer")? {
                    Some(Elicited::Accepted(form)) => Ok::<_, ToolError>(form.answer),
                    _ => Err(ToolError::failed("no answer")),
                };
            }
            Err(InputRequired::new()
                .elicit::<Answer>("answer", "Any answer?")
                .state(Asked { round: 1 })
                .into())
        })
        .description("Asks one question; the retry carries a sealed requestState"),
        Tool::new("wait", |_: NoArgs, _: RequestContext| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            "waited"
        })
        .task_support(TaskSupport::Optional)
        .description("Waits a millisecond: a task for a client that declares tasks"),
        Tool::new("counter_new", move |_: NoArgs, ctx: RequestContext| {
            let counters = create.clone();
            async move { Ok::<_, ToolError>(counters.create(&ctx, &0).await?) }
        })
        .creates_handles(&counters)
        .description("A new counter at 0; returns its handle"),
        Tool::new("counter_bump", move |b: Bump, ctx: RequestContext| {
            let counters = bump.clone();
            async move {
                let n = counters
                    .update(&ctx, &b.counter, |n| {
                        *n += 1;
                        Some(*n)
                    })
                    .await?
                    .ok_or_else(|| ToolError::failed("not bumped"))?;
                Ok::<_, ToolError>(n.to_string())
            }
        })
        .description("Adds one to a counter"),
    ])
}
