//! Prompts, resources and completion (CHECKLIST §12): registration, the list methods,
//! `prompts/get`, `resources/read` (both may answer `input_required`, R-03) and
//! `completion/complete`.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwire_protocol::methods::{
    GetPrompt as GetPromptMethod, Method, ReadResource as ReadResourceMethod,
};
use toolwire_protocol::{
    CompleteResult, Completion, CompletionReference, ErrorObject, ReadResourceResult, RequestId,
    ResultType,
};

use crate::error::{Error, Result};
use crate::request::context::RequestContext;
use crate::request::cursor::ListKind;
use crate::request::outcome::Final;
use crate::request::route::{Complete, GetPrompt, ReadResource, Route};
use crate::safety::deadline::{contained, panicked};
use crate::server::{Change, Server};
use crate::state::request_state::Binding;
use crate::tools::catalog::{Catalog, insufficient_scope, permits};
use crate::tools::prompt::{Prompt, PromptArgs, RegisteredPrompt};
use crate::tools::resource::{
    Reader, RegisteredResource, RegisteredTemplate, Resource, ResourceTemplate, TemplateVars,
    UriTemplate,
};
use crate::tools::tool::ToolError;

/// Most completion values in one result.
const MAX_COMPLETIONS: usize = 100;

pub(crate) fn add_prompts(catalog: &Catalog<RegisteredPrompt>, prompts: Vec<Prompt>) -> Result<()> {
    let mut entries = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        entries.push(Arc::new(
            RegisteredPrompt::new(prompt).map_err(std::io::Error::other)?,
        ));
    }
    catalog.add_all(entries).map_err(|key| Error::Duplicate {
        kind: "prompt",
        key,
    })
}

pub(crate) fn add_resources(
    catalog: &Catalog<RegisteredResource>,
    resources: Vec<Resource>,
) -> Result<()> {
    let mut entries = Vec::with_capacity(resources.len());
    for resource in resources {
        let listed =
            serde_json::value::to_raw_value(&resource.definition).map_err(std::io::Error::other)?;
        entries.push(Arc::new(RegisteredResource { resource, listed }));
    }
    catalog.add_all(entries).map_err(|key| Error::Duplicate {
        kind: "resource",
        key,
    })
}

pub(crate) fn add_templates(
    catalog: &Catalog<RegisteredTemplate>,
    templates: Vec<ResourceTemplate>,
) -> Result<()> {
    let mut entries = Vec::with_capacity(templates.len());
    for template in templates {
        let uri_template = &template.definition.uri_template;
        let parsed = UriTemplate::parse(uri_template).map_err(|reason| Error::InvalidTemplate {
            template: uri_template.clone(),
            reason,
        })?;
        let listed =
            serde_json::value::to_raw_value(&template.definition).map_err(std::io::Error::other)?;
        entries.push(Arc::new(RegisteredTemplate {
            template,
            parsed,
            listed,
        }));
    }
    catalog.add_all(entries).map_err(|key| Error::Duplicate {
        kind: "resource template",
        key,
    })
}

impl Server {
    fn offers(&self, prompts: bool) -> Result<()> {
        let offers = self.inner.offers;
        match (prompts, offers.prompts, offers.resources) {
            (true, false, _) => Err(Error::NotOffered("prompts")),
            (false, _, false) => Err(Error::NotOffered("resources")),
            _ => Ok(()),
        }
    }

    fn changed(&self, change: Change) {
        let _ = self.inner.changes.send(change);
    }

    /// Registers a prompt at runtime; listen streams that asked are told (promptsListChanged).
    pub fn add_prompt(&self, prompt: Prompt) -> Result<()> {
        self.offers(true)?;
        add_prompts(&self.inner.prompts, vec![prompt])?;
        self.changed(Change::Prompts);
        Ok(())
    }

    /// Removes a prompt at runtime.
    pub fn remove_prompt(&self, name: &str) -> Result<()> {
        if !self.inner.prompts.remove(name) {
            return Err(Error::Unknown {
                kind: "prompt",
                key: name.to_owned(),
            });
        }
        self.changed(Change::Prompts);
        Ok(())
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
        self.offers(false)?;
        add_resources(&self.inner.resources, vec![resource])?;
        self.changed(Change::Resources);
        Ok(())
    }

    /// Removes a resource at runtime.
    pub fn remove_resource(&self, uri: &str) -> Result<()> {
        if !self.inner.resources.remove(uri) {
            return Err(Error::Unknown {
                kind: "resource",
                key: uri.to_owned(),
            });
        }
        self.changed(Change::Resources);
        Ok(())
    }

    /// Registers a resource template at runtime.
    pub fn add_resource_template(&self, template: ResourceTemplate) -> Result<()> {
        self.offers(false)?;
        add_templates(&self.inner.templates, vec![template])?;
        self.changed(Change::Resources);
        Ok(())
    }

    /// Removes a resource template at runtime.
    pub fn remove_resource_template(&self, uri_template: &str) -> Result<()> {
        if !self.inner.templates.remove(uri_template) {
            return Err(Error::Unknown {
                kind: "resource template",
                key: uri_template.to_owned(),
            });
        }
        self.changed(Change::Resources);
        Ok(())
    }

    /// Tells listen streams subscribed to `uri` (or to a resource it is under) that its
    /// contents changed (`notifications/resources/updated`, R-08).
    pub fn notify_resource_updated(&self, uri: &str) {
        self.changed(Change::ResourceUpdated(uri.into()));
    }

    fn not_offered(method: &str) -> ErrorObject {
        ErrorObject::method_not_found(method)
            .with_data(json!({"reason": "capability not offered by this server"}))
    }

    pub(crate) fn list_prompts(
        &self,
        id: &RequestId,
        cursor: Option<&str>,
        granted: Option<&[String]>,
    ) -> Final {
        if !self.inner.offers.prompts {
            return Final::error(Some(id), &Self::not_offered("prompts/list"));
        }
        self.list_page(
            id,
            &self.inner.prompts.snapshot(),
            cursor,
            ListKind::Prompts,
            "prompts",
            granted,
        )
    }

    pub(crate) fn list_resources(
        &self,
        id: &RequestId,
        cursor: Option<&str>,
        granted: Option<&[String]>,
    ) -> Final {
        if !self.inner.offers.resources {
            return Final::error(Some(id), &Self::not_offered("resources/list"));
        }
        self.list_page(
            id,
            &self.inner.resources.snapshot(),
            cursor,
            ListKind::Resources,
            "resources",
            granted,
        )
    }

    pub(crate) fn list_templates(
        &self,
        id: &RequestId,
        cursor: Option<&str>,
        granted: Option<&[String]>,
    ) -> Final {
        if !self.inner.offers.resources {
            return Final::error(Some(id), &Self::not_offered("resources/templates/list"));
        }
        let templates = self.inner.templates.snapshot();
        self.list_page(
            id,
            &templates,
            cursor,
            ListKind::Templates,
            "resourceTemplates",
            granted,
        )
    }

    /// `prompts/get`: unknown prompt or missing required arguments are -32602.
    pub(crate) async fn get_prompt(
        &self,
        id: &RequestId,
        get: GetPrompt,
        ctx: RequestContext,
    ) -> Final {
        if !self.inner.offers.prompts {
            return Final::error(Some(id), &Self::not_offered(GetPromptMethod::METHOD));
        }
        let GetPrompt {
            name,
            arguments,
            round,
        } = get;
        let Some(entry) = self.inner.prompts.snapshot().get(&name).cloned() else {
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
        if let Err(error) = self.open_round(bind, round, &ctx) {
            return Final::error(Some(id), &error);
        }
        let declared = ctx.client_capabilities().clone();
        let handler = entry.prompt.handler.clone();
        match contained(&name, move || handler(arguments, ctx)).await {
            Some(Ok(mut result)) => {
                result.result_type = ResultType::Complete;
                if result.meta.is_none() {
                    result.meta = self.result_meta();
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
        if !self.inner.offers.resources {
            return Final::error(Some(id), &Self::not_offered(ReadResourceMethod::METHOD));
        }
        let ReadResource { uri, round } = read;
        let Some((reader, vars, scopes)) = self.resource_reader(&uri) else {
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
        if let Err(error) = self.open_round(bind, round, &ctx) {
            return Final::error(Some(id), &error);
        }
        let declared = ctx.client_capabilities().clone();
        let read_uri = uri.clone();
        match contained(&uri, move || reader(read_uri, vars, ctx)).await {
            Some(Ok(contents)) if contents.is_empty() => {
                tracing::error!(%uri, "a resource reader returned no contents (R-04)");
                Final::error(Some(id), &ErrorObject::internal("Internal error"))
            }
            Some(Ok(contents)) => Final::result(
                id,
                &ReadResourceResult {
                    result_type: ResultType::Complete,
                    contents,
                    ttl_ms: self.inner.config.read_ttl_ms,
                    cache_scope: self.inner.config.read_cache_scope,
                    meta: self.result_meta(),
                },
            ),
            Some(Err(error)) => self.handler_error(id, &uri, &bind, &declared, error, Some(&uri)),
            None => Final::error(Some(id), &ErrorObject::internal("Internal error")),
        }
    }

    /// The reader of `uri`: a fixed resource, else the first template that matches, with the
    /// variables matched and the scopes it needs.
    fn resource_reader(&self, uri: &str) -> Option<(Reader, TemplateVars, Vec<String>)> {
        match self.inner.resources.snapshot().get(uri) {
            Some(entry) => Some((
                entry.resource.reader.clone(),
                TemplateVars::default(),
                entry.resource.scopes.clone(),
            )),
            None => self.inner.templates.snapshot().items.iter().find_map(|t| {
                t.parsed
                    .matches(uri)
                    .map(|vars| (t.template.reader.clone(), vars, t.template.scopes.clone()))
            }),
        }
    }

    /// The OAuth scopes reading `uri` needs (none for an unknown URI).
    pub(crate) fn resource_scopes(&self, uri: &str) -> Vec<String> {
        self.resource_reader(uri)
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
                .inner
                .registry
                .snapshot()
                .get(&call.name)
                .map(|t| t.scopes.clone()),
            Route::GetPrompt(get) => self
                .inner
                .prompts
                .snapshot()
                .get(&get.name)
                .map(|p| p.prompt.scopes.clone()),
            Route::ReadResource(read) => self.resource_reader(&read.uri).map(|(_, _, s)| s),
            Route::Complete(complete) => match &complete.reference {
                CompletionReference::Prompt { name, .. } => self
                    .inner
                    .prompts
                    .snapshot()
                    .get(name)
                    .map(|p| p.prompt.scopes.clone()),
                CompletionReference::Resource { uri } => self
                    .inner
                    .templates
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

    /// `completion/complete` for a prompt argument or a template variable.
    pub(crate) fn complete(
        &self,
        id: &RequestId,
        complete: Complete,
        granted: Option<&[String]>,
    ) -> Final {
        if !(self.inner.offers.prompts || self.inner.offers.resources) {
            return Final::error(Some(id), &Self::not_offered("completion/complete"));
        }
        let context: PromptArgs = complete
            .context
            .and_then(|c| c.arguments)
            .unwrap_or_default();
        let argument = &complete.argument;
        let completer = match &complete.reference {
            CompletionReference::Prompt { name, .. } => {
                match self.inner.prompts.snapshot().get(name) {
                    Some(entry) if !permits(granted, &entry.prompt.scopes) => {
                        let error = insufficient_scope("prompt", name, &entry.prompt.scopes);
                        return Final::error(Some(id), &error);
                    }
                    Some(entry) => entry.prompt.completions.get(&argument.name).cloned(),
                    None => {
                        return Final::error(
                            Some(id),
                            &ErrorObject::invalid_params(format!("Unknown prompt: {name}")),
                        );
                    }
                }
            }
            CompletionReference::Resource { uri } => match self.inner.templates.snapshot().get(uri)
            {
                Some(entry) if !permits(granted, &entry.template.scopes) => {
                    let error =
                        insufficient_scope("resource template", uri, &entry.template.scopes);
                    return Final::error(Some(id), &error);
                }
                Some(entry) => entry.template.completions.get(&argument.name).cloned(),
                None => {
                    let error =
                        ErrorObject::invalid_params(format!("Unknown resource template: {uri}"));
                    return Final::error(Some(id), &error);
                }
            },
        };
        // Completers are user code too: a panic is contained and logged, never an aborted
        // connection or a lost stdio answer (ARCHITECTURE invariant 6).
        let completed = completer.map(|c| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                c(&argument.value, &context)
            }))
        });
        let mut values = match completed {
            None => Vec::new(),
            Some(Ok(values)) => values,
            Some(Err(panic)) => {
                panicked(&argument.name, &panic);
                return Final::error(Some(id), &ErrorObject::internal("Internal error"));
            }
        };
        let total = values.len();
        values.truncate(MAX_COMPLETIONS);
        let result = CompleteResult {
            result_type: ResultType::Complete,
            completion: Completion {
                has_more: Some(total > values.len()),
                total: Some(total as u64),
                values,
            },
            meta: self.result_meta(),
        };
        Final::result(id, &result)
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
