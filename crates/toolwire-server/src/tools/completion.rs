//! What `completion/complete` (R-01…R-09) asks of a prompt's or a template's completers: the
//! values for a prompt argument or a template variable, from the argument's own completer
//! (synchronous, [`Completer`]) or else from the prompt's or template's completer of any
//! argument ([`CompleteAny`]: asynchronous, with the request's context, for values that come
//! from elsewhere, as a gateway asks its upstream). The method is the server's.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolwire_protocol::Completion;

use crate::request::context::RequestContext;
use crate::request::mrtr::ToolError;
use crate::tools::prompt::PromptArgs;

/// What `completion/complete` asks of a prompt's or a template's completer of any argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompletionAsk {
    /// The argument (or template variable) being completed.
    pub argument: String,
    /// What the user has typed of it so far.
    pub value: String,
    /// The values of the other arguments already given (`context.arguments`).
    pub context: PromptArgs,
}

/// Completes any argument of a prompt or variable of a template, asynchronously: see
/// [`Prompt::complete_any`](crate::Prompt::complete_any).
pub(crate) type CompleteAny = Arc<
    dyn Fn(CompletionAsk, RequestContext) -> BoxFuture<'static, Result<Completion, ToolError>>
        + Send
        + Sync,
>;

/// `completer` as the stored, boxed [`CompleteAny`].
pub(crate) fn complete_any<F, Fut>(completer: F) -> CompleteAny
where
    F: Fn(CompletionAsk, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Completion, ToolError>> + Send + 'static,
{
    Arc::new(move |ask, ctx| Box::pin(completer(ask, ctx)))
}
