//! `tools/call` of a tool that may run as a task: a task outlives its request, so its handler
//! gets a context and a cancellation of its own; the first step runs inline, and a call that
//! does not finish at once (or whose handler says so) becomes a task.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::ErrorObject;

use crate::request::context::RequestContext;
use crate::request::outcome::Outcome;
use crate::request::route::CallTool;
use crate::safety::deadline::handler_step;
use crate::server::Server;
use crate::server::call::binder;
use crate::server::tasks::Rerun;
use crate::tools::registry::{RegisteredTool, ToolName};

impl Server {
    /// [`Server::call_tool`] of a call that may become a task: a task outlives its request, so
    /// its handler gets a cancellation of its own, which a shutdown fires too, so that no task
    /// outlives the server.
    pub(super) async fn call_as_task(
        &self,
        tool: Arc<RegisteredTool>,
        call: CallTool,
        ctx: RequestContext,
    ) -> Result<Outcome, ErrorObject> {
        let CallTool {
            name,
            arguments,
            round,
        } = call;
        let declared = ctx.client_capabilities().clone();
        let principal = ctx.shared_principal();
        let bind = binder(&name, &arguments, principal.as_deref());
        let (mut task_ctx, mut rerun, cancel) = self.task_context(&tool, &ctx);
        drop(ctx);
        let start = tool.deferred_task.then(Arc::<tokio::sync::Notify>::default);
        if let Some(start) = &start {
            task_ctx = task_ctx.with_task_start(start.clone());
        }
        let ctx = task_ctx;
        self.open_round(bind, round, &ctx).await?;
        let handler_cancel = ctx.cancellation().clone();
        let (timeout, named) = (tool.timeout, ToolName(tool.clone()));
        let mut step = handler_step(
            named,
            || (tool.handler)(&arguments, ctx),
            timeout,
            handler_cancel,
        );
        let outcome = match start {
            // The first step runs inline; a call that does not finish at once becomes a task.
            None => match futures::poll!(step.as_mut()) {
                std::task::Poll::Ready(outcome) => outcome,
                std::task::Poll::Pending => {
                    rerun.arguments = arguments;
                    let task = self.start_task(rerun, cancel, step).await?;
                    return Ok(Outcome::Task(task));
                }
            },
            // A deferred task: the handler says when the call becomes one.
            Some(start) => tokio::select! {
                biased;
                outcome = &mut step => outcome,
                () = start.notified() => {
                    rerun.arguments = arguments;
                    let task = self.start_task(rerun, cancel, step).await?;
                    return Ok(Outcome::Task(task));
                }
            },
        };
        self.first_step_outcome(&tool, &name, outcome, bind, &declared)
    }

    /// The context a task's handler runs in, and what it takes to run it again: it outlives the
    /// request, so it has a cancellation of its own. The arguments are filled in if the call
    /// becomes a task.
    fn task_context(
        &self,
        tool: &Arc<RegisteredTool>,
        ctx: &RequestContext,
    ) -> (RequestContext, Rerun, CancellationToken) {
        let cancel = self.shutdown_token().child_token();
        let rerun = Rerun {
            tool: tool.clone(),
            arguments: Value::Null,
            meta: ctx.meta().clone(),
            principal: ctx.shared_principal(),
            scopes: ctx.shared_scopes(),
            id: ctx.request_id().clone(),
        };
        let task_ctx = self.task_handler_context(&rerun, &cancel);
        (task_ctx, rerun, cancel)
    }
}
