//! `completion/complete` (R-01…R-09) on a running server: a prompt's argument or a template's
//! variable completed by its completers (`tools/completion.rs`), checked against the caller's
//! scopes and the server's visibility.

use serde_json::json;
use toolwire_protocol::{
    CompleteResult, Completion, CompletionReference, ErrorObject, RequestId, ResultType,
};

use crate::request::context::RequestContext;
use crate::request::mrtr::ToolError;
use crate::request::outcome::Final;
use crate::request::route::Complete;
use crate::safety::deadline::{contained, panicked};
use crate::server::Server;
use crate::tools::catalog::{insufficient_scope, permits};
use crate::tools::prompt::{CompleteAny, Completer, CompletionAsk};
use crate::tools::visibility::OfferKind;

/// Most completion values in one result.
const MAX_COMPLETIONS: usize = 100;

/// The completers a prompt or a template offers for one argument.
struct Completers {
    own: Option<Completer>,
    any: Option<CompleteAny>,
}

impl Server {
    /// `completion/complete` for a prompt argument or a template variable: -32602 for an
    /// unknown prompt or template, 403-style `insufficient_scope` for one the caller may not
    /// use, an empty completion for an argument nothing completes.
    pub(crate) async fn complete(
        &self,
        id: &RequestId,
        complete: Complete,
        ctx: RequestContext,
    ) -> Final {
        if !(self.offers().prompts || self.offers().resources) {
            return Final::error(Some(id), &Self::not_offered("completion/complete"));
        }
        let completers = match self.completers(&complete, &ctx) {
            Ok(completers) => completers,
            Err(error) => return Final::error(Some(id), &error),
        };
        let ask = CompletionAsk {
            argument: complete.argument.name,
            value: complete.argument.value,
            context: complete
                .context
                .and_then(|c| c.arguments)
                .unwrap_or_default(),
        };
        let completed = match completers {
            Completers { own: Some(own), .. } => own_values(&own, &ask),
            Completers { any: Some(any), .. } => {
                let name = ask.argument.clone();
                match contained(&name, move || any(ask, ctx)).await {
                    Some(Ok(completion)) => Ok(completion),
                    Some(Err(error)) => Err(completer_error(&name, error)),
                    None => Err(ErrorObject::internal("Internal error")),
                }
            }
            Completers {
                own: None,
                any: None,
            } => Ok(Completion::default()),
        };
        match completed {
            Ok(completion) => Final::result(
                id,
                &CompleteResult {
                    result_type: ResultType::Complete,
                    completion: at_most(completion),
                    meta: self.result_meta().cloned(),
                },
            ),
            Err(error) => Final::error(Some(id), &error),
        }
    }

    /// The completers of the argument `complete` asks about, or the error that says why it
    /// cannot be asked.
    fn completers(
        &self,
        complete: &Complete,
        ctx: &RequestContext,
    ) -> Result<Completers, ErrorObject> {
        let argument = &complete.argument.name;
        let granted = ctx.scopes();
        // A prompt or template hidden from this caller is, to it, one the server does not have.
        match &complete.reference {
            CompletionReference::Prompt { name, .. } => match self
                .prompts()
                .snapshot()
                .get(name)
                .filter(|_| !self.hides_offer(ctx, OfferKind::Prompt, name))
            {
                Some(entry) if !permits(granted, &entry.prompt.scopes) => {
                    Err(insufficient_scope("prompt", name, &entry.prompt.scopes))
                }
                Some(entry) => Ok(Completers {
                    own: entry.prompt.completions.get(argument).cloned(),
                    any: entry.prompt.complete_any.clone(),
                }),
                None => Err(ErrorObject::invalid_params(format!(
                    "Unknown prompt: {name}"
                ))),
            },
            CompletionReference::Resource { uri } => match self
                .templates()
                .snapshot()
                .get(uri)
                .filter(|_| !self.hides_offer(ctx, OfferKind::Template, uri))
            {
                Some(entry) if !permits(granted, &entry.template.scopes) => Err(
                    insufficient_scope("resource template", uri, &entry.template.scopes),
                ),
                Some(entry) => Ok(Completers {
                    own: entry.template.completions.get(argument).cloned(),
                    any: entry.template.complete_any.clone(),
                }),
                None => Err(ErrorObject::invalid_params(format!(
                    "Unknown resource template: {uri}"
                ))),
            },
        }
    }
}

/// The values of an argument's own completer; a panic in it is contained and logged, never an
/// aborted connection or a lost stdio answer (ARCHITECTURE invariant 6).
fn own_values(completer: &Completer, ask: &CompletionAsk) -> Result<Completion, ErrorObject> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        completer(&ask.value, &ask.context)
    }))
    .map(|values| Completion {
        total: Some(values.len() as u64),
        has_more: Some(false),
        values,
    })
    .map_err(|panic| {
        panicked(&ask.argument, &panic);
        ErrorObject::internal("Internal error")
    })
}

/// A completer of any argument that failed: its protocol error as it is, a failure as -32602
/// (the completion cannot be given as asked), anything else -32603 (logged). A completion
/// cannot ask the user: `completion/complete` has no `input_required` rounds.
fn completer_error(argument: &str, error: ToolError) -> ErrorObject {
    match error {
        ToolError::Protocol(error) => error,
        ToolError::Failed(message) => ErrorObject::invalid_params(message),
        ToolError::InputRequired(_) => {
            tracing::error!(%argument, "a completer asked for input, which completion/complete cannot carry");
            ErrorObject::internal("Internal error")
        }
        ToolError::Internal(error) => {
            tracing::error!(%argument, %error, "a completer failed with an internal error");
            ErrorObject::internal("Internal error").with_data(json!({"argument": argument}))
        }
    }
}

/// `completion` cut to the most one result carries, its `total` and `hasMore` kept
/// true to what was cut.
fn at_most(mut completion: Completion) -> Completion {
    let given = completion.values.len();
    if given > MAX_COMPLETIONS {
        completion.values.truncate(MAX_COMPLETIONS);
        completion.has_more = Some(true);
        completion.total = Some(completion.total.unwrap_or(0).max(given as u64));
    }
    completion
}
