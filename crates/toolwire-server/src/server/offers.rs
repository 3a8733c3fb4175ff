//! The prompts and resources of a running [`Server`] (R-01…R-09): added and removed at
//! runtime (listen streams told), the resources its listeners follow, the list methods,
//! `prompts/get` and `resources/read` (both may answer `input_required`, R-03). Registration
//! is in `tools/offered.rs`, completion in `completion.rs`.

use serde_json::{Value, json};
use toolwire_protocol::methods::{
    GetPrompt as GetPromptMethod, Method, ReadResource as ReadResourceMethod,
};
use toolwire_protocol::{
    CompletionReference, ErrorObject, ReadResourceResult, RequestId, ResultType,
};

use crate::error::{Error, Result};
use crate::request::context::RequestContext;
use crate::request::followed::FollowedResources;
use crate::request::mrtr::ToolError;
use crate::request::outcome::Final;
use crate::request::route::{GetPrompt, ReadResource, Route};
use crate::safety::deadline::contained;
use crate::server::Server;
use crate::state::request_state::Binding;
use crate::tools::catalog::{Catalog, insufficient_scope, permits};
use crate::tools::offered::{Change, Offer, Offered, register_all};
use crate::tools::prompt::Prompt;
use crate::tools::resource::{Reader, Resource, ResourceTemplate, TemplateVars};
use crate::tools::visibility::OfferKind;

impl Server {
    /// Registers a prompt at runtime; listen streams that asked are told (promptsListChanged).
    pub fn add_prompt(&self, prompt: Prompt) -> Result<()> {
        self.add_offered(&self.inner.prompts, prompt)
    }

    /// Removes a prompt at runtime.
    pub fn remove_prompt(&self, name: &str) -> Result<()> {
        self.remove_offered(&self.inner.prompts, name)
    }

    /// The registered prompt names in listing order.
    pub fn prompt_names(&self) -> Vec<String> {
        self.inner
            .prompts
            .snapshot()
            .items
            .iter()
            .map(|p| p.prompt.definition.name.clone())
            .collect()
    }

    /// Registers a resource at runtime; listen streams that asked are told (resourcesListChanged).
    pub fn add_resource(&self, resource: Resource) -> Result<()> {
        self.add_offered(&self.inner.resources, resource)
    }

    /// Removes a resource at runtime.
    pub fn remove_resource(&self, uri: &str) -> Result<()> {
        self.remove_offered(&self.inner.resources, uri)
    }

    /// Registers a resource template at runtime.
    pub fn add_resource_template(&self, template: ResourceTemplate) -> Result<()> {
        self.add_offered(&self.inner.templates, template)
    }

    /// Removes a resource template at runtime.
    pub fn remove_resource_template(&self, uri_template: &str) -> Result<()> {
        self.remove_offered(&self.inner.templates, uri_template)
    }

    /// Tells listen streams subscribed to `uri` (or to a resource it is under) that its
    /// contents changed (`notifications/resources/updated`, R-08).
    pub fn notify_resource_updated(&self, uri: &str) {
        self.notify(Change::ResourceUpdated(uri.into()));
    }

    /// The resource URIs this instance's listeners follow, as it changes: the
    /// `resourceSubscriptions` its open listen streams were acknowledged (those the caller
    /// may read), and the `resources/subscribe` of the legacy sessions that listen here (on
    /// stdio, or on their GET stream). For an embedder that relays changes from elsewhere
    /// with [`Server::notify_resource_updated`], to follow there only what someone follows
    /// here. It changes only when a stream opens or closes or a legacy session subscribes or
    /// unsubscribes.
    pub fn followed_resources(&self) -> FollowedResources {
        self.inner.followers.watch()
    }

    /// Adds one prompt, resource or template, if the server offers its kind, and tells listen
    /// streams.
    fn add_offered<E: Offered>(&self, catalog: &Catalog<E>, value: E::Value) -> Result<()> {
        self.check_offered(E::OFFER)?;
        register_all(catalog, vec![value])?;
        self.notify(E::CHANGE);
        Ok(())
    }

    /// Removes one prompt, resource or template by its key, and tells listen streams.
    fn remove_offered<E: Offered>(&self, catalog: &Catalog<E>, key: &str) -> Result<()> {
        if !catalog.remove(key) {
            return Err(Error::Unknown {
                kind: E::KIND,
                key: key.to_owned(),
            });
        }
        self.notify(E::CHANGE);
        Ok(())
    }

    /// Whether the server declared the capability that registering at runtime needs.
    fn check_offered(&self, offer: Offer) -> Result<()> {
        if self.inner.offers.has(offer) {
            return Ok(());
        }
        Err(Error::NotOffered(match offer {
            Offer::Prompts => "prompts",
            Offer::Resources => "resources",
        }))
    }
}

impl Server {
    pub(crate) fn not_offered(method: &str) -> ErrorObject {
        ErrorObject::method_not_found(method)
            .with_data(json!({"reason": "capability not offered by this server"}))
    }

    /// `prompts/list`, `resources/list` or `resources/templates/list`: one page, or -32601
    /// when the server does not offer them. With a [`ToolVisibility`](crate::ToolVisibility),
    /// only what it shows this caller, privately (K-10).
    pub(crate) fn list_offered<E: Offered>(
        &self,
        catalog: &Catalog<E>,
        id: &RequestId,
        cursor: Option<&str>,
        ctx: &RequestContext,
    ) -> Final {
        if !self.offers().has(E::OFFER) {
            return Final::error(Some(id), &Self::not_offered(E::LIST_METHOD));
        }
        let snapshot = catalog.snapshot();
        let Some(check) = self.offer_check(ctx, E::VISIBLE_AS) else {
            return self.list_page(id, &snapshot, cursor, E::LIST, ctx.scopes());
        };
        let visible =
            snapshot.filtered(|e| permits(ctx.scopes(), e.scopes()) && check(e.key()).is_none());
        let scope = toolwire_protocol::CacheScope::Private;
        self.list_page_in(id, &visible, cursor, E::LIST, scope)
    }

    /// `prompts/get`: unknown prompt or missing required arguments are -32602.
    pub(crate) async fn get_prompt(
        &self,
        id: &RequestId,
        get: GetPrompt,
        ctx: RequestContext,
    ) -> Final {
        if !self.offers().prompts {
            return Final::error(Some(id), &Self::not_offered(GetPromptMethod::METHOD));
        }
        let GetPrompt {
            name,
            arguments,
            round,
        } = get;
        // A prompt hidden from this caller is, to it, one the server does not have.
        let entry = self.prompts().snapshot().get(&name).cloned();
        let Some(entry) = entry.filter(|_| !self.hides_offer(&ctx, OfferKind::Prompt, &name))
        else {
            return Final::error(
                Some(id),
                &ErrorObject::invalid_params(format!("Unknown prompt: {name}")),
            );
        };
        if !permits(ctx.scopes(), &entry.prompt.scopes) {
            return Final::error(
                Some(id),
                &insufficient_scope("prompt", &name, &entry.prompt.scopes),
            );
        }
        let missing = entry.prompt.missing_arguments(&arguments);
        if !missing.is_empty() {
            let message = format!(
                "Missing required arguments for prompt {name}: {}",
                missing.join(", ")
            );
            return Final::error(Some(id), &ErrorObject::invalid_params(message));
        }
        // The digest binding request state is computed only if state is opened or sealed.
        let principal = ctx.principal().map(str::to_owned);
        let kept = arguments.clone();
        let bind = || {
            let args = serde_json::to_value(&kept).unwrap_or(Value::Null);
            Binding::new(GetPromptMethod::METHOD, &name, &args, principal.as_deref())
        };
        if let Err(error) = self.open_round(bind, round, &ctx).await {
            return Final::error(Some(id), &error);
        }
        let declared = ctx.client_capabilities().clone();
        let handler = entry.prompt.handler.clone();
        match contained(&name, move || handler(arguments, ctx)).await {
            Some(Ok(mut result)) => {
                result.result_type = ResultType::Complete;
                if result.meta.is_none() {
                    result.meta = self.result_meta().cloned();
                }
                Final::result(id, &result)
            }
            Some(Err(error)) => self.handler_error(id, &name, &bind, &declared, error, None),
            None => Final::error(Some(id), &ErrorObject::internal("Internal error")),
        }
    }

    /// `resources/read`: a fixed resource by URI, else the first template that matches; an
    /// unknown URI is -32602 with `data.uri`, and a result is never empty.
    pub(crate) async fn read_resource(
        &self,
        id: &RequestId,
        read: ReadResource,
        ctx: RequestContext,
    ) -> Final {
        if !self.offers().resources {
            return Final::error(Some(id), &Self::not_offered(ReadResourceMethod::METHOD));
        }
        let ReadResource { uri, round } = read;
        // What is hidden from this caller is, to it, not there: another template may match.
        let found = {
            let resources = self.offer_check(&ctx, OfferKind::Resource);
            let templates = self.offer_check(&ctx, OfferKind::Template);
            let visible = |kind: OfferKind, key: &str| {
                let check = match kind {
                    OfferKind::Template => templates.as_ref(),
                    _ => resources.as_ref(),
                };
                check.is_none_or(|check| check(key).is_none())
            };
            self.resource_reader(&uri, &visible)
        };
        if found.is_none() && self.resource_reader(&uri, &|_, _| true).is_some() {
            // There is one, hidden from this caller: answered as none, counted as refused.
            self.count_refusal(crate::observe::RefusalReason::Policy);
        }
        let Some((reader, vars, scopes)) = found else {
            let error = ErrorObject::invalid_params(format!("Resource not found: {uri}"))
                .with_data(json!({"uri": uri}));
            return Final::error(Some(id), &error);
        };
        if !permits(ctx.scopes(), &scopes) {
            return Final::error(Some(id), &insufficient_scope("resource", &uri, &scopes));
        }
        let principal = ctx.principal().map(str::to_owned);
        let bind = || {
            Binding::new(
                ReadResourceMethod::METHOD,
                &uri,
                &Value::Null,
                principal.as_deref(),
            )
        };
        if let Err(error) = self.open_round(bind, round, &ctx).await {
            return Final::error(Some(id), &error);
        }
        let declared = ctx.client_capabilities().clone();
        let read_uri = uri.clone();
        match contained(&uri, move || reader(read_uri, vars, ctx)).await {
            Some(Ok(contents)) if contents.is_empty() => {
                //
                tracing::error!(%uri, "a resource reader returned no contents");
                Final::error(Some(id), &ErrorObject::internal("Internal error"))
            }
            Some(Ok(contents)) => Final::result(
                id,
                &ReadResourceResult {
                    result_type: ResultType::Complete,
                    contents,
                    ttl_ms: self.config().read_ttl_ms,
                    cache_scope: self.config().read_cache_scope,
                    meta: self.result_meta().cloned(),
                },
            ),
            Some(Err(error)) => self.handler_error(id, &uri, &bind, &declared, error, Some(&uri)),
            None => Final::error(Some(id), &ErrorObject::internal("Internal error")),
        }
    }

    /// The reader of `uri`: a fixed resource, else the first template that matches, with the
    /// variables matched and the scopes it needs; of those `visible` says the caller may see
    /// (by kind, and URI or URI template).
    fn resource_reader(
        &self,
        uri: &str,
        visible: &dyn Fn(OfferKind, &str) -> bool,
    ) -> Option<(Reader, TemplateVars, Vec<String>)> {
        let fixed = self.resources().snapshot().get(uri).cloned();
        match fixed.filter(|_| visible(OfferKind::Resource, uri)) {
            Some(entry) => Some((
                entry.resource.reader.clone(),
                TemplateVars::default(),
                entry.resource.scopes.clone(),
            )),
            None => self.templates().snapshot().items.iter().find_map(|t| {
                let key = t.template.definition.uri_template.as_str();
                if !visible(OfferKind::Template, key) {
                    return None;
                }
                t.parsed
                    .matches(uri)
                    .map(|vars| (t.template.reader.clone(), vars, t.template.scopes.clone()))
            }),
        }
    }

    /// Whether `follower` may not read `uri`, which the server has (as a resource or through a
    /// template), because the [`ToolVisibility`](crate::ToolVisibility) hides every one that
    /// would serve it. A URI the server has nothing for is not hidden: it may come.
    pub(crate) fn hides_resource(
        &self,
        follower: &crate::tools::visibility::Follower,
        uri: &str,
    ) -> bool {
        let Some(visibility) = self.config().tool_visibility.as_ref() else {
            return false;
        };
        if self.resource_reader(uri, &|_, _| true).is_none() {
            return false;
        }
        let resources = visibility.check_offers(follower.viewer(), OfferKind::Resource);
        let templates = visibility.check_offers(follower.viewer(), OfferKind::Template);
        let visible = |kind: OfferKind, key: &str| match kind {
            OfferKind::Template => templates(key).is_none(),
            _ => resources(key).is_none(),
        };
        self.resource_reader(uri, &visible).is_none()
    }

    /// The OAuth scopes reading `uri` needs (none for an unknown URI).
    pub(crate) fn resource_scopes(&self, uri: &str) -> Vec<String> {
        self.resource_reader(uri, &|_, _| true)
            .map(|(_, _, scopes)| scopes)
            .unwrap_or_default()
    }

    /// The OAuth scopes the request addresses needs: the tool called, the prompt got, the
    /// resource read or the prompt or template completed; empty for anything else, or for
    /// something unknown (whose request then fails as unknown). A transport with OAuth answers
    /// 403 `insufficient_scope` before the request runs when the caller lacks one.
    pub(crate) fn needed_scopes(&self, route: &Route) -> Vec<String> {
        match route {
            Route::CallTool(call) => self
                .registry()
                .snapshot()
                .get(&call.name)
                .map(|t| t.scopes.clone()),
            Route::GetPrompt(get) => self
                .prompts()
                .snapshot()
                .get(&get.name)
                .map(|p| p.prompt.scopes.clone()),
            Route::ReadResource(read) => self
                .resource_reader(&read.uri, &|_, _| true)
                .map(|(_, _, s)| s),
            Route::Complete(complete) => match &complete.reference {
                CompletionReference::Prompt { name, .. } => self
                    .prompts()
                    .snapshot()
                    .get(name)
                    .map(|p| p.prompt.scopes.clone()),
                CompletionReference::Resource { uri } => self
                    .templates()
                    .snapshot()
                    .get(uri)
                    .map(|t| t.template.scopes.clone()),
            },
            Route::TasksUpdate { task_id, .. } => self.task_scopes(task_id),
            _ => None,
        }
        .unwrap_or_default()
    }

    /// A prompt or resource handler's error: input required becomes an `input_required`
    /// result; a failure is -32602 (the request cannot be served as asked); internals -32603.
    fn handler_error(
        &self,
        id: &RequestId,
        name: &str,
        bind: &dyn Fn() -> Binding,
        declared: &toolwire_protocol::ClientCapabilities,
        error: ToolError,
        uri: Option<&str>,
    ) -> Final {
        match error {
            ToolError::InputRequired(input) => match self.ask(name, bind, *input, declared) {
                Ok(Some(result)) => Final::result(id, &result),
                Ok(None) => Final::error(Some(id), &ErrorObject::internal("Internal error")),
                Err(error) => Final::error(Some(id), &error),
            },
            ToolError::Protocol(error) => Final::error(Some(id), &error),
            ToolError::Failed(message) => {
                let error = ErrorObject::invalid_params(message);
                let error = match uri {
                    Some(uri) => error.with_data(json!({"uri": uri})),
                    None => error,
                };
                Final::error(Some(id), &error)
            }
            ToolError::Internal(error) => {
                tracing::error!(%name, %error, "handler failed with an internal error");
                Final::error(Some(id), &ErrorObject::internal("Internal error"))
            }
        }
    }
}

/// Whether a subscription to `subscribed` covers an update of `updated` (the resource itself or
/// one under it; R-08).
pub(crate) fn covers(subscribed: &str, updated: &str) -> bool {
    updated == subscribed
        || (names_a_container(subscribed)
            && updated
                .strip_prefix(subscribed)
                .is_some_and(|rest| subscribed.ends_with('/') || rest.starts_with('/')))
}

/// Whether a URI names something that others can sit under: it has an authority, or a path
/// with more than slashes. A bare scheme (`users:`), `file://` and `file:///` do not, so a
/// subscription to them is not a subscription to everything.
fn names_a_container(uri: &str) -> bool {
    let Some((_scheme, rest)) = uri.split_once(':') else {
        return false;
    };
    let (authority, path) = match rest.strip_prefix("//") {
        Some(hier) => hier.split_at(hier.find(['/', '?', '#']).unwrap_or(hier.len())),
        None => ("", rest),
    };
    !authority.is_empty() || path.bytes().any(|b| b != b'/')
}

#[cfg(test)]
mod tests {
    #[test]
    fn subscriptions_cover_sub_resources() {
        let cases = [
            ("file:///a", "file:///a", true),
            ("file:///a", "file:///a/b", true),
            ("file:///a/", "file:///a/b", true),
            ("file:///a", "file:///ab", false),
            ("file:///a/b", "file:///a", false),
            // A bare scheme, or a URI with no authority and no path, names no resource that
            // others sit under: a subscription to them must not cover everything.
            ("users:", "users:/alice", false),
            ("users:", "users:alice", false),
            ("users:", "users:", true),
            ("file://", "file:///etc/passwd", false),
            ("file:///", "file:///etc/passwd", false),
            ("users:alice", "users:alice/notes", true),
            ("users:alice", "users:alicex", false),
            ("https://example.com", "https://example.com/a", true),
            ("https://example.com", "https://example.com.evil/a", false),
            ("https://example.com/", "https://example.com/a", true),
        ];
        for (subscribed, updated, want) in cases {
            assert_eq!(
                super::covers(subscribed, updated),
                want,
                "{subscribed} {updated}"
            );
        }
    }
}
