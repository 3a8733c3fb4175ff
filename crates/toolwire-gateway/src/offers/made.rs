//! Each served prompt, resource and template, made from the host's: its definition as listed
//! upstream (titles and descriptions cleaned), its handler asking the host with the caller's
//! rounds, exchanged token and cancellation, once the gateway's rules allow it; and the
//! completions of its arguments.

use std::sync::Arc;

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::auth::TokenExchange;
use toolwire_host::{Host, HostPrompt, HostResource, HostTemplate, OfferError};
use toolwire_protocol::{
    Completion, CompletionArgument, CompletionContext, CompletionReference, ErrorObject,
    GetPromptResult,
};
use toolwire_server::{
    CompletionAsk, Prompt, PromptArgs, RequestContext, Resource, ResourceTemplate, ToolError,
};

use crate::policy::Policy;
use crate::relay::{self, Sealed, Upstream};
use crate::rules::Kind as RuleKind;

/// JSON-RPC codes an upstream answers a request it cannot serve as asked with: invalid params
/// (an unknown prompt or resource, a missing argument), and the legacy "resource not found".
const AS_ASKED: [i64; 2] = [-32602, -32002];

/// The server prompt that stands for `prompt`: its definition as listed upstream (what the
/// builder carries), under its qualified name, got through the host.
pub(super) fn prompt(host: &Arc<Host>, prompt: &HostPrompt, upstream: Upstreamed) -> Prompt {
    let definition = &prompt.definition;
    let qualified: Arc<str> = prompt.qualified.as_str().into();
    let (got_from, getting) = (host.clone(), upstream.clone());
    let mut served = Prompt::new(
        prompt.qualified.clone(),
        move |arguments: PromptArgs, ctx: RequestContext| {
            let (host, qualified) = (got_from.clone(), qualified.clone());
            let upstream = getting.clone();
            async move {
                let arguments = Value::Object(
                    arguments
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect(),
                );
                let unknown =
                    || ErrorObject::invalid_params(format!("Unknown prompt: {qualified}"));
                let allowed = (RuleKind::Prompt, unknown);
                let got = one_round(
                    &qualified,
                    &arguments,
                    &ctx,
                    &upstream,
                    allowed,
                    |options| host.get_prompt_with(&qualified, arguments.clone(), options),
                )
                .await;
                got.map(|result| GetPromptResult {
                    // The gateway's own `_meta` (its serverInfo), as on every result it gives.
                    meta: None,
                    ..result
                })
            }
        },
    );
    // The text a person does not see goes, as it goes from tools and results (see `clean`).
    let (mut description, mut title) = (definition.description.clone(), definition.title.clone());
    crate::clean::optional(&mut description);
    crate::clean::optional(&mut title);
    if let Some(description) = description {
        served = served.description(description);
    }
    if let Some(title) = title {
        served = served.title(title);
    }
    if let Some(icons) = &definition.icons {
        served = served.icons(icons.clone());
    }
    if let Some(meta) = &definition.meta {
        served = served.meta(meta.clone());
    }
    for argument in definition.arguments.iter().flatten() {
        let mut argument = argument.clone();
        crate::clean::optional(&mut argument.description);
        crate::clean::optional(&mut argument.title);
        served = served.argument_defined(argument);
    }
    let complete = Completing::new(host, upstream, prompt.qualified.as_str(), true);
    served.complete_any(move |ask, ctx| complete.clone().ask(ask, ctx))
}

/// The server resource that stands for `resource`, under the host's URI, read through the
/// host.
pub(super) fn resource(
    host: &Arc<Host>,
    resource: &HostResource,
    upstream: Upstreamed,
) -> Resource {
    let definition = &resource.definition;
    let host = host.clone();
    let mut served = Resource::new(
        resource.uri.clone(),
        definition.name.clone(),
        move |uri: String, ctx: RequestContext| {
            let (host, upstream) = (host.clone(), upstream.clone());
            let decided = Decided {
                kind: RuleKind::Resource,
                name: uri.clone(),
                args: Value::Object(serde_json::Map::new()),
            };
            async move { read(&host, &uri, &ctx, &upstream, decided).await }
        },
    );
    let (mut description, mut title) = (definition.description.clone(), definition.title.clone());
    crate::clean::optional(&mut description);
    crate::clean::optional(&mut title);
    if let Some(description) = description {
        served = served.description(description);
    }
    if let Some(title) = title {
        served = served.title(title);
    }
    if let Some(mime_type) = &definition.mime_type {
        served = served.mime_type(mime_type.clone());
    }
    if let Some(size) = definition.size {
        served = served.size(size);
    }
    if let Some(icons) = &definition.icons {
        served = served.icons(icons.clone());
    }
    if let Some(annotations) = &definition.annotations {
        served = served.annotations(annotations.clone());
    }
    if let Some(meta) = &definition.meta {
        served = served.meta(meta.clone());
    }
    served
}

/// The server template that stands for `template`, under the host's template: each URI it
/// matches is read through the host, which reads the upstream's own expansion.
pub(super) fn template(
    host: &Arc<Host>,
    template: &HostTemplate,
    upstream: Upstreamed,
) -> ResourceTemplate {
    let definition = &template.definition;
    let (read_from, reading) = (host.clone(), upstream.clone());
    let served_as: Arc<str> = template.uri_template.as_str().into();
    let mut served = ResourceTemplate::new(
        template.uri_template.clone(),
        definition.name.clone(),
        move |uri: String, vars: toolwire_server::TemplateVars, ctx: RequestContext| {
            let (host, upstream) = (read_from.clone(), reading.clone());
            // The rules read the variables the URI matched as `args`.
            let decided = Decided {
                kind: RuleKind::Template,
                name: served_as.to_string(),
                args: Value::Object(
                    vars.into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect(),
                ),
            };
            async move { read(&host, &uri, &ctx, &upstream, decided).await }
        },
    );
    let (mut description, mut title) = (definition.description.clone(), definition.title.clone());
    crate::clean::optional(&mut description);
    crate::clean::optional(&mut title);
    if let Some(description) = description {
        served = served.description(description);
    }
    if let Some(title) = title {
        served = served.title(title);
    }
    if let Some(mime_type) = &definition.mime_type {
        served = served.mime_type(mime_type.clone());
    }
    if let Some(icons) = &definition.icons {
        served = served.icons(icons.clone());
    }
    if let Some(annotations) = &definition.annotations {
        served = served.annotations(annotations.clone());
    }
    if let Some(meta) = &definition.meta {
        served = served.meta(meta.clone());
    }
    let complete = Completing::new(host, upstream, template.uri_template.as_str(), false);
    served.complete_any(move |ask, ctx| complete.clone().ask(ask, ctx))
}

/// What the rules decide a read by: the resource or template read, and its `args`.
struct Decided {
    kind: RuleKind,
    /// The served URI of a resource, or URI template of a template.
    name: String,
    args: Value,
}

/// Reads `uri` through the host, once the rules allow it (`decided`): the contents, under the
/// host's URIs. Denied, it is a URI the gateway does not have.
async fn read(
    host: &Host,
    uri: &str,
    ctx: &RequestContext,
    upstream: &Upstreamed,
    decided: Decided,
) -> Result<Vec<toolwire_protocol::ResourceContents>, ToolError> {
    let unknown = || {
        ErrorObject::invalid_params(format!("Resource not found: {uri}"))
            .with_data(serde_json::json!({"uri": uri}))
    };
    let sealed = Sealed::of(ctx)?;
    let approved = upstream.policy.decide_offer(
        decided.kind,
        &decided.name,
        &decided.args,
        ctx,
        &sealed,
        unknown,
    )?;
    let read = one_round_approved(
        uri,
        &Value::Null,
        ctx,
        upstream,
        sealed,
        approved,
        |options| host.read_resource_with(uri, options),
    )
    .await?;
    Ok(read.contents)
}

/// The upstream a served prompt or resource comes from, its token exchange if it has one, and
/// the rules that decide it.
#[derive(Clone)]
pub(super) struct Upstreamed {
    server: Arc<str>,
    exchange: Option<Arc<TokenExchange>>,
    policy: Arc<Policy>,
}

impl Upstreamed {
    pub(super) fn new(
        server: &str,
        exchange: Option<Arc<TokenExchange>>,
        policy: &Arc<Policy>,
    ) -> Upstreamed {
        Upstreamed {
            server: server.into(),
            exchange,
            policy: policy.clone(),
        }
    }
}

/// Completions of a served prompt's arguments or template's variables, asked of its upstream
/// through the host for the caller (with the caller's exchanged token where the upstream has
/// a token exchange, and the caller's cancellation).
#[derive(Clone)]
struct Completing {
    host: Arc<Host>,
    upstream: Upstreamed,
    /// The prompt's qualified name, or the template as the host offers it.
    name: Arc<str>,
    /// Whether `name` names a prompt (else a template).
    prompt: bool,
}

impl Completing {
    fn new(host: &Arc<Host>, upstream: Upstreamed, name: &str, prompt: bool) -> Completing {
        Completing {
            host: host.clone(),
            prompt,
            upstream,
            name: name.into(),
        }
    }

    async fn ask(self, ask: CompletionAsk, ctx: RequestContext) -> Result<Completion, ToolError> {
        let reference = if self.prompt {
            CompletionReference::Prompt {
                name: self.name.to_string(),
                title: None,
            }
        } else {
            CompletionReference::Resource {
                uri: self.name.to_string(),
            }
        };
        let context = (!ask.context.is_empty()).then_some(CompletionContext {
            arguments: Some(ask.context),
        });
        let argument = CompletionArgument {
            name: ask.argument,
            value: ask.value,
        };
        let host = &self.host;
        let completed = crate::exchange::with_exchanged(
            self.upstream.exchange.as_deref(),
            (&self.upstream.server, &self.name),
            &ctx,
            |bearer| {
                let mut options = CallOptions::default().cancel_on(ctx.cancellation().clone());
                if let Some(bearer) = bearer {
                    options = options.bearer(bearer);
                }
                let (reference, argument, context) =
                    (reference.clone(), argument.clone(), context.clone());
                async move {
                    host.complete_with(reference, argument, context, options)
                        .await
                }
            },
            refused_credentials,
        )
        .await
        .map_err(|why| ToolError::Protocol(ErrorObject::internal(why)))?;
        completed.map(|result| result.completion).map_err(refusal)
    }
}

/// One round of getting the prompt `name` (with `arguments`) for the caller of `ctx`, once the
/// rules allow it (`allowed`: the kind, and the error of an unknown one, which a denied one
/// is answered with).
async fn one_round<T, Got>(
    name: &str,
    arguments: &Value,
    ctx: &RequestContext,
    upstream: &Upstreamed,
    allowed: (RuleKind, impl FnOnce() -> ErrorObject),
    get: impl FnMut(CallOptions) -> Got,
) -> Result<T, ToolError>
where
    Got: std::future::Future<Output = Result<T, OfferError>>,
{
    let sealed = Sealed::of(ctx)?;
    let (kind, unknown) = allowed;
    let approved = upstream
        .policy
        .decide_offer(kind, name, arguments, ctx, &sealed, unknown)?;
    one_round_approved(name, arguments, ctx, upstream, sealed, approved, get).await
}

/// One round of getting the prompt or reading the resource `name` (with `arguments`) for the
/// caller of `ctx`, as a tool call is made (see `relay`): the answers to the upstream's
/// previous round sent with it, and an upstream's questions relayed to the caller (with what a
/// person `approved`, kept for the rounds after).
async fn one_round_approved<T, Got>(
    name: &str,
    arguments: &Value,
    ctx: &RequestContext,
    upstream: &Upstreamed,
    sealed: Sealed,
    approved: Option<String>,
    mut get: impl FnMut(CallOptions) -> Got,
) -> Result<T, ToolError>
where
    Got: std::future::Future<Output = Result<T, OfferError>>,
{
    let answers = sealed.upstream_answers(name, arguments, ctx)?;
    let got = crate::exchange::with_exchanged(
        upstream.exchange.as_deref(),
        (&upstream.server, name),
        ctx,
        |bearer| {
            let mut options = CallOptions::default()
                .cancel_on(ctx.cancellation().clone())
                .relay_input()
                .input_capabilities(ctx.client_capabilities().clone());
            if let Some(answers) = answers.clone() {
                options = options.answers(answers);
            }
            if let Some(bearer) = bearer {
                options = options.bearer(bearer);
            }
            get(options)
        },
        refused_credentials,
    )
    .await
    .map_err(|why| ToolError::Protocol(ErrorObject::internal(why)))?;
    match got {
        Ok(got) => Ok(got),
        Err(OfferError::Server {
            server,
            error: toolwire_client::Error::InputRequired(input),
        }) => {
            let upstream = Upstream {
                server,
                tool: name.to_owned(),
                arguments_sha256: relay::arguments_sha256(arguments),
                state: input.request_state.clone(),
                task: None,
            };
            Err(relay::relayed(*input, upstream, approved))
        }
        Err(error) => Err(refusal(error)),
    }
}

/// Whether the upstream refused the credentials a request went with (HTTP 401).
fn refused_credentials<T>(got: &Result<T, OfferError>) -> bool {
    matches!(
        got,
        Err(OfferError::Server {
            error: toolwire_client::Error::Unauthorized { status: 401, .. },
            ..
        })
    )
}

/// What the caller is told when the host could not get a prompt or read a resource: the
/// upstream's refusal of the request as asked stays that (-32602, with the URI the caller
/// used), and any other failure is the gateway's -32603 naming the upstream; the upstream's
/// words are cleaned of escape sequences and hidden characters.
fn refusal(error: OfferError) -> ToolError {
    match error {
        OfferError::Server {
            error: toolwire_client::Error::Rpc(refused),
            ..
        } if AS_ASKED.contains(&refused.code) => ToolError::Failed(clean(&refused.message)),
        error @ (OfferError::UnknownPrompt(_) | OfferError::UnknownUri(_)) => {
            ToolError::Failed(error.to_string())
        }
        OfferError::NotRunning(server) => ToolError::Protocol(ErrorObject::internal(format!(
            "the upstream {} is not running",
            clean(&server)
        ))),
        OfferError::Server { server, error } => ToolError::Protocol(ErrorObject::internal(clean(
            &format!("the upstream {server} failed: {error}"),
        ))),
        error => ToolError::Protocol(ErrorObject::internal(clean(&error.to_string()))),
    }
}

/// `text` without escape sequences, control characters and hidden format characters.
fn clean(text: &str) -> String {
    toolwire_sanitize::text::clean(text).0.into_owned()
}
