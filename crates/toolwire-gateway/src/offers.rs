//! The upstream prompts, resources and resource templates as the downstream server serves
//! them: each under the host's name for it (a prompt `prefix__name`, a resource
//! `toolwire://PREFIX/URI`, a template `toolwire://PREFIX/TEMPLATE`; see
//! [`toolwire_host::uris`]), its handler asking the host, which asks the upstream that offers
//! it; the served sets kept in step with the host's lists on each sync, the way tools are.
//!
//! The downstream server must offer prompts and resources
//! ([`ServerBuilder::offer_prompts`](toolwire_server::ServerBuilder::offer_prompts),
//! [`offer_resources`](toolwire_server::ServerBuilder::offer_resources)); a kind it does not
//! offer is not passed through (said once). Every field of a definition is served as listed
//! upstream, but for the name or URI (the host's) and fields the protocol does not define.
//! A template the server's matcher does not take (it takes `{var}` and `{+var}` with literal
//! text between them; RFC 6570 levels 3 and 4 are refused) is not served (said once); its
//! expansions can still be read through the host. `completion/complete` for a served prompt's
//! argument or template's variable is asked of the upstream, for the caller.
//!
//! The gateway's rules decide each of them as they decide tools ([`Policy`]): the facts of
//! every served prompt, resource and template are the policy's before the server offers it; a
//! caller's lists leave out what the rules deny it, and getting or reading one is decided
//! again with its arguments (a prompt's arguments, a template's matched variables) — denied as
//! unknown, asked of a person, or made.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex};

use crate::exchange::Exchanges;
use crate::policy::Policy;
use crate::relay::{self, Sealed, Upstream};
use crate::rules::{Kind as RuleKind, ToolFacts};
use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::auth::TokenExchange;
use toolwire_host::{Host, HostPrompt, HostResource, HostTemplate, OfferError};
use toolwire_protocol::{
    Completion, CompletionArgument, CompletionContext, CompletionReference, ErrorObject,
    GetPromptResult,
};
use toolwire_server::{
    CompletionAsk, Prompt, PromptArgs, RequestContext, Resource, ResourceTemplate, Server,
    ToolError,
};

/// JSON-RPC codes an upstream answers a request it cannot serve as asked with: invalid params
/// (an unknown prompt or resource, a missing argument), and the legacy "resource not found".
const AS_ASKED: [i64; 2] = [-32602, -32002];

/// What the gateway serves of the host's prompts, resources and templates.
pub(crate) struct Offers {
    state: Mutex<Served>,
    /// The upstreams' token exchanges, which requests for callers use.
    exchanges: Arc<Exchanges>,
    /// The rules, which every served item's handler consults.
    policy: Arc<Policy>,
}

#[derive(Default)]
struct Served {
    prompts: Kind,
    resources: Kind,
    templates: Kind,
    /// Whether "the server does not offer prompts" was said.
    said_no_prompts: bool,
    /// Whether "the server does not offer resources" was said.
    said_no_resources: bool,
}

/// One kind's served items, by name or URI, each with a digest of what it was made from.
#[derive(Default)]
struct Kind {
    served: HashMap<String, u64>,
    /// Items the server refused to register, with the digest refused: said once per
    /// definition.
    refused: HashMap<String, u64>,
}

impl Offers {
    /// Nothing served yet; requests to an upstream in `exchanges` go with exchanged tokens,
    /// under `policy`.
    pub(crate) fn new(exchanges: Arc<Exchanges>, policy: Arc<Policy>) -> Offers {
        Offers {
            state: Mutex::default(),
            exchanges,
            policy,
        }
    }

    /// Serves on `server` what `host` lists: new and changed items added, gone ones removed;
    /// nothing of the upstreams that are this gateway itself (`looped`).
    pub(crate) fn sync(
        &self,
        host: &Arc<Host>,
        server: &Server,
        looped: &std::collections::HashSet<String>,
    ) {
        let mut served = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let served = &mut *served;
        let capabilities = server.capabilities();
        let prompts: Vec<HostPrompt> = host
            .prompts()
            .iter()
            .filter(|p| !looped.contains(&p.server))
            .cloned()
            .collect();
        let resources: Vec<HostResource> = host
            .resources()
            .iter()
            .filter(|r| !looped.contains(&r.server))
            .cloned()
            .collect();
        let templates: Vec<HostTemplate> = host
            .resource_templates()
            .iter()
            .filter(|t| !looped.contains(&t.server))
            .cloned()
            .collect();
        // The rules know each one before it is served (and forget a gone one first).
        self.policy
            .set_offer_facts(offer_facts(&prompts, &resources, &templates));
        let policy = &self.policy;
        let offers_prompts = capabilities.prompts.is_some();
        if offered(
            &mut served.said_no_prompts,
            offers_prompts,
            "prompts",
            prompts.len(),
        ) {
            served.prompts.in_step(
                "prompt",
                wanted(&prompts, |p| {
                    let definition = serde_json::to_string(&p.definition);
                    (p.qualified.clone(), digest(&p.server, definition))
                }),
                |p| {
                    let exchange = self.exchanges.of_server(&p.server);
                    server.add_prompt(prompt(
                        host,
                        p,
                        Upstreamed::new(&p.server, exchange, policy),
                    ))
                },
                |name| server.remove_prompt(name),
            );
        }
        let offers_resources = capabilities.resources.is_some();
        let count = resources.len() + templates.len();
        if offered(
            &mut served.said_no_resources,
            offers_resources,
            "resources",
            count,
        ) {
            served.resources.in_step(
                "resource",
                wanted(&resources, |r| {
                    let definition = serde_json::to_string(&r.definition);
                    (r.uri.clone(), digest(&r.server, definition))
                }),
                |r| {
                    let exchange = self.exchanges.of_server(&r.server);
                    let upstream = Upstreamed::new(&r.server, exchange, policy);
                    server.add_resource(resource(host, r, upstream))
                },
                |uri| server.remove_resource(uri),
            );
            served.templates.in_step(
                "resource template",
                wanted(&templates, |t| {
                    let definition = serde_json::to_string(&t.definition);
                    (t.uri_template.clone(), digest(&t.server, definition))
                }),
                |t| {
                    let exchange = self.exchanges.of_server(&t.server);
                    let upstream = Upstreamed::new(&t.server, exchange, policy);
                    server.add_resource_template(template(host, t, upstream))
                },
                |uri_template| server.remove_resource_template(uri_template),
            );
        }
    }
}

/// The facts the rules read of every prompt, resource and template the host lists, by kind and
/// served name, URI or URI template.
fn offer_facts(
    prompts: &[HostPrompt],
    resources: &[HostResource],
    templates: &[HostTemplate],
) -> HashMap<(RuleKind, String), Arc<ToolFacts>> {
    let annotations = |annotations: Option<Value>| match annotations {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let prompts = prompts.iter().map(|p| ToolFacts {
        kind: RuleKind::Prompt,
        name: p.qualified.clone(),
        upstream: p.server.clone(),
        title: p.definition.title.clone(),
        description: p.definition.description.clone(),
        annotations: serde_json::Map::new(),
    });
    let resources = resources.iter().map(|r| ToolFacts {
        kind: RuleKind::Resource,
        name: r.uri.clone(),
        upstream: r.server.clone(),
        title: r.definition.title.clone(),
        description: r.definition.description.clone(),
        annotations: annotations(
            r.definition
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        ),
    });
    let templates = templates.iter().map(|t| ToolFacts {
        kind: RuleKind::Template,
        name: t.uri_template.clone(),
        upstream: t.server.clone(),
        title: t.definition.title.clone(),
        description: t.definition.description.clone(),
        annotations: annotations(
            t.definition
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        ),
    });
    prompts
        .chain(resources)
        .chain(templates)
        .map(|facts| ((facts.kind, facts.name.clone()), Arc::new(facts)))
        .collect()
}

/// Each of `items` by its name or URI, with a digest of what it is made from.
fn wanted<T>(items: &[T], key: impl Fn(&T) -> (String, u64)) -> BTreeMap<String, (u64, &T)> {
    items
        .iter()
        .map(|item| {
            let (key, digest) = key(item);
            (key, (digest, item))
        })
        .collect()
}

/// Whether the server offers a kind; when it does not and the upstreams have some, says so
/// once.
fn offered(said: &mut bool, offers: bool, kind: &str, upstream: usize) -> bool {
    if !offers && upstream > 0 && !*said {
        *said = true;
        tracing::warn!(
            "the upstreams offer {kind}, and the gateway's server does not: they are not passed through (build it with offer_{kind})"
        );
    }
    offers
}

impl Kind {
    /// Brings the served items of one kind in step with `wanted` (by name, with digest): gone
    /// or changed ones removed, new or changed ones added in order of their names.
    fn in_step<T>(
        &mut self,
        kind: &str,
        wanted: BTreeMap<String, (u64, T)>,
        add: impl Fn(T) -> toolwire_server::Result<()>,
        remove: impl Fn(&str) -> toolwire_server::Result<()>,
    ) {
        self.served.retain(|key, digest| {
            let keep = wanted.get(key).is_some_and(|(d, _)| d == digest);
            if !keep {
                if let Err(error) = remove(key) {
                    tracing::warn!(%key, %error, "a {kind} no longer listed upstream could not be removed");
                }
            }
            keep
        });
        self.refused.retain(|key, _| wanted.contains_key(key));
        for (key, (digest, item)) in wanted {
            if self.served.contains_key(&key) || self.refused.get(&key) == Some(&digest) {
                continue;
            }
            match add(item) {
                Ok(()) => {
                    self.refused.remove(&key);
                    self.served.insert(key, digest);
                }
                Err(error) => {
                    tracing::warn!(%key, %error, "{key} is not served: the gateway's server refuses this {kind}");
                    self.refused.insert(key, digest);
                }
            }
        }
    }
}

/// The server prompt that stands for `prompt`: its definition as listed upstream (what the
/// builder carries), under its qualified name, got through the host.
fn prompt(host: &Arc<Host>, prompt: &HostPrompt, upstream: Upstreamed) -> Prompt {
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
fn resource(host: &Arc<Host>, resource: &HostResource, upstream: Upstreamed) -> Resource {
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
fn template(host: &Arc<Host>, template: &HostTemplate, upstream: Upstreamed) -> ResourceTemplate {
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
struct Upstreamed {
    server: Arc<str>,
    exchange: Option<Arc<TokenExchange>>,
    policy: Arc<Policy>,
}

impl Upstreamed {
    fn new(server: &str, exchange: Option<Arc<TokenExchange>>, policy: &Arc<Policy>) -> Upstreamed {
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

/// What a served item is made from: its upstream and its definition (as JSON).
fn digest(server: &str, definition: serde_json::Result<String>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    server.hash(&mut hasher);
    definition.unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}
