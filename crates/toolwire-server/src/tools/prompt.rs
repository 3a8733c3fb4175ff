//! Prompts as values (R-01…R-09): a definition with arguments and an async handler that
//! renders messages; optional completions for its arguments. What `completion/complete` asks
//! of a prompt's or a template's completers is here too: an argument's own completer
//! (synchronous, [`Completer`]) or the completer of any argument ([`CompleteAny`]:
//! asynchronous, with the request's context, for values that come from elsewhere, as a gateway
//! asks its upstream). The method is the server's.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::value::RawValue;
use toolwire_protocol::{
    Completion, ContentBlock, GetPromptResult, Icon, JsonObject, Prompt as PromptDefinition,
    PromptArgument, PromptMessage, Role,
};

use crate::request::context::RequestContext;
use crate::request::mrtr::ToolError;
use crate::tools::catalog::Entry;

/// The string arguments of a `prompts/get`.
pub type PromptArgs = BTreeMap<String, String>;

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

/// What a prompt handler may return.
pub trait PromptOutput: Send + 'static {
    /// Converts into the result (its `_meta` and `resultType` are filled in by the server).
    fn into_result(self) -> GetPromptResult;
}

impl PromptOutput for GetPromptResult {
    fn into_result(self) -> GetPromptResult {
        self
    }
}

impl PromptOutput for Vec<PromptMessage> {
    fn into_result(self) -> GetPromptResult {
        GetPromptResult {
            messages: self,
            ..Default::default()
        }
    }
}

impl PromptOutput for String {
    /// One user message with this text.
    fn into_result(self) -> GetPromptResult {
        vec![PromptMessage {
            role: Role::User,
            content: ContentBlock::text(self),
        }]
        .into_result()
    }
}

pub(crate) type PromptHandler = Arc<
    dyn Fn(PromptArgs, RequestContext) -> BoxFuture<'static, Result<GetPromptResult, ToolError>>
        + Send
        + Sync,
>;

/// Completes a partly typed argument value: candidates for `value`, given the other arguments.
pub type Completer = Arc<dyn Fn(&str, &PromptArgs) -> Vec<String> + Send + Sync>;

/// A prompt: its definition, its handler and its argument completions.
#[derive(Clone)]
pub struct Prompt {
    pub(crate) definition: PromptDefinition,
    pub(crate) handler: PromptHandler,
    pub(crate) completions: HashMap<String, Completer>,
    pub(crate) complete_any: Option<CompleteAny>,
    pub(crate) scopes: Vec<String>,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl Prompt {
    /// A prompt named `name`, rendered by `handler` from its arguments. Declare arguments with
    /// [`Prompt::argument`]; required ones are checked before the handler runs.
    pub fn new<O, F, Fut>(name: impl Into<String>, handler: F) -> Prompt
    where
        O: PromptOutput,
        F: Fn(PromptArgs, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let handler: PromptHandler = Arc::new(move |args, ctx| {
            let fut = handler(args, ctx);
            Box::pin(async move { fut.await.map(PromptOutput::into_result) })
        });
        Prompt {
            definition: PromptDefinition {
                name: name.into(),
                ..Default::default()
            },
            handler,
            completions: HashMap::new(),
            complete_any: None,
            scopes: Vec::new(),
        }
    }

    /// Requires these OAuth scopes: a caller whose token lacks one does not see it in the list
    /// and is refused (403 `insufficient_scope` over HTTP). Ignored without OAuth.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = Some(description.into());
        self
    }

    /// Sets the display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.definition.title = Some(title.into());
        self
    }

    /// Sets icons.
    pub fn icons(mut self, icons: Vec<Icon>) -> Self {
        self.definition.icons = Some(icons);
        self
    }

    /// Sets the definition's `_meta`.
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.definition.meta = Some(meta);
        self
    }

    /// Declares an argument from its protocol definition (with its display `title`): for a
    /// server that passes another's prompts on. A missing `required` is "not required".
    pub fn argument_defined(mut self, argument: PromptArgument) -> Self {
        self.definition
            .arguments
            .get_or_insert_with(Vec::new)
            .push(argument);
        self
    }

    /// Declares an argument.
    pub fn argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.definition
            .arguments
            .get_or_insert_with(Vec::new)
            .push(PromptArgument {
                name: name.into(),
                description: Some(description.into()),
                required: Some(required),
                title: None,
            });
        self
    }

    /// Completes values of `argument` for `completion/complete`.
    pub fn complete(
        mut self,
        argument: impl Into<String>,
        completer: impl Fn(&str, &PromptArgs) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.completions
            .insert(argument.into(), Arc::new(completer));
        self
    }

    /// Completes every argument without a completer of its own ([`Prompt::complete`]),
    /// asynchronously and with the request's context (its caller, its cancellation): for values
    /// that come from elsewhere, as a gateway asks its upstream. The completer gives the
    /// [`Completion`](toolwire_protocol::Completion) whole; past 100 values it is cut and says
    /// so (`hasMore`). A [`ToolError::Failed`] answers -32602, a protocol error as it is,
    /// anything else -32603.
    pub fn complete_any<F, Fut>(mut self, completer: F) -> Self
    where
        F: Fn(CompletionAsk, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<toolwire_protocol::Completion, ToolError>> + Send + 'static,
    {
        self.complete_any = Some(complete_any(completer));
        self
    }

    /// Names of required arguments missing from `args`.
    pub(crate) fn missing_arguments(&self, args: &PromptArgs) -> Vec<&str> {
        self.definition
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect()
    }
}

/// A registered prompt with its definition serialized once.
pub(crate) struct RegisteredPrompt {
    pub(crate) prompt: Prompt,
    pub(crate) listed: Box<RawValue>,
}

impl Entry for RegisteredPrompt {
    fn key(&self) -> &str {
        &self.prompt.definition.name
    }

    fn listed(&self) -> &RawValue {
        &self.listed
    }

    fn scopes(&self) -> &[String] {
        &self.prompt.scopes
    }
}

impl RegisteredPrompt {
    pub(crate) fn new(prompt: Prompt) -> Result<Self, serde_json::Error> {
        let listed = serde_json::value::to_raw_value(&prompt.definition)?;
        Ok(RegisteredPrompt { prompt, listed })
    }
}
