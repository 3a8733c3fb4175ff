//! Resources as values (R-01…R-09): fixed resources by URI and families of resources by
//! RFC 6570 URI template (simple `{var}` and reserved `{+var}` expansions), each with an async
//! reader.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::value::RawValue;
use toolwire_protocol::{
    Annotations, Icon, JsonObject, Resource as ResourceDefinition, ResourceContents,
    ResourceTemplate as TemplateDefinition,
};

use crate::request::context::RequestContext;
use crate::request::mrtr::ToolError;
use crate::tools::catalog::Entry;
use crate::tools::prompt::{CompleteAny, Completer, CompletionAsk, complete_any};

/// What a resource reader may return: one contents or several (never none, R-04).
pub trait ResourceOutput: Send + 'static {
    /// The contents.
    fn into_contents(self) -> Vec<ResourceContents>;
}

impl ResourceOutput for ResourceContents {
    fn into_contents(self) -> Vec<ResourceContents> {
        vec![self]
    }
}

impl ResourceOutput for Vec<ResourceContents> {
    fn into_contents(self) -> Vec<ResourceContents> {
        self
    }
}

/// The variables a URI template matched.
pub type TemplateVars = BTreeMap<String, String>;

pub(crate) type Reader = Arc<
    dyn Fn(
            String,
            TemplateVars,
            RequestContext,
        ) -> BoxFuture<'static, Result<Vec<ResourceContents>, ToolError>>
        + Send
        + Sync,
>;

fn reader<O, F, Fut>(read: F) -> Reader
where
    O: ResourceOutput,
    F: Fn(String, TemplateVars, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
{
    Arc::new(move |uri, vars, ctx| {
        let fut = read(uri, vars, ctx);
        Box::pin(async move { fut.await.map(ResourceOutput::into_contents) })
    })
}

/// A resource with a fixed URI.
#[derive(Clone)]
pub struct Resource {
    pub(crate) definition: ResourceDefinition,
    pub(crate) reader: Reader,
    pub(crate) scopes: Vec<String>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// A resource at `uri` called `name`, read by `read`.
    pub fn new<O, F, Fut>(uri: impl Into<String>, name: impl Into<String>, read: F) -> Resource
    where
        O: ResourceOutput,
        F: Fn(String, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        Resource {
            definition: ResourceDefinition {
                uri: uri.into(),
                name: name.into(),
                ..Default::default()
            },
            reader: reader(move |uri, _, ctx| read(uri, ctx)),
            scopes: Vec::new(),
        }
    }

    /// Requires these OAuth scopes: a caller whose token lacks one does not see it in the list
    /// and is refused (403 `insufficient_scope` over HTTP). Ignored without OAuth.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = Some(description.into());
        self
    }

    /// Sets the MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.definition.mime_type = Some(mime_type.into());
        self
    }

    /// Sets the display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.definition.title = Some(title.into());
        self
    }

    /// Sets the size in bytes, as the client may show it before reading.
    pub fn size(mut self, size: u64) -> Self {
        self.definition.size = Some(size);
        self
    }

    /// Sets icons.
    pub fn icons(mut self, icons: Vec<Icon>) -> Self {
        self.definition.icons = Some(icons);
        self
    }

    /// Sets annotations for the client (audience, priority, last modified).
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.definition.annotations = Some(annotations);
        self
    }

    /// Sets the definition's `_meta`.
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.definition.meta = Some(meta);
        self
    }
}

/// A family of resources described by a URI template.
#[derive(Clone)]
pub struct ResourceTemplate {
    pub(crate) definition: TemplateDefinition,
    pub(crate) reader: Reader,
    pub(crate) completions: HashMap<String, Completer>,
    pub(crate) complete_any: Option<CompleteAny>,
    pub(crate) scopes: Vec<String>,
}

impl std::fmt::Debug for ResourceTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceTemplate")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl ResourceTemplate {
    /// Resources matching `uri_template` (e.g. `file:///{+path}` or `db://rows/{id}`), read by
    /// `read` with the matched variables.
    pub fn new<O, F, Fut>(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        read: F,
    ) -> ResourceTemplate
    where
        O: ResourceOutput,
        F: Fn(String, TemplateVars, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        ResourceTemplate {
            definition: TemplateDefinition {
                uri_template: uri_template.into(),
                name: name.into(),
                ..Default::default()
            },
            reader: reader(read),
            completions: HashMap::new(),
            complete_any: None,
            scopes: Vec::new(),
        }
    }

    /// Requires these OAuth scopes: a caller whose token lacks one does not see it (nor any resource it matches) in the lists
    /// and is refused (403 `insufficient_scope` over HTTP). Ignored without OAuth.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = Some(description.into());
        self
    }

    /// Sets the MIME type of matching resources.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.definition.mime_type = Some(mime_type.into());
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

    /// Sets annotations for the client (audience, priority, last modified).
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.definition.annotations = Some(annotations);
        self
    }

    /// Sets the definition's `_meta`.
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.definition.meta = Some(meta);
        self
    }

    /// Completes values of the template variable `variable` for `completion/complete`.
    pub fn complete(
        mut self,
        variable: impl Into<String>,
        completer: impl Fn(&str, &TemplateVars) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.completions
            .insert(variable.into(), Arc::new(completer));
        self
    }

    /// Completes every variable without a completer of its own ([`ResourceTemplate::complete`]),
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
}

/// One part of a parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// A variable; `reserved` (`{+var}`) may span `/`.
    Var {
        name: String,
        reserved: bool,
    },
}

/// A parsed URI template (RFC 6570 levels 1 and 2 without fragments: `{var}`, `{+var}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    pub(crate) fn parse(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}').ok_or("an unclosed '{'")? + open;
            let expr = &rest[open + 1..close];
            let (reserved, name) = match expr.strip_prefix('+') {
                Some(name) => (true, name),
                None => (false, expr),
            };
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
            if !valid {
                return Err(format!(
                    "unsupported expression {{{expr}}}: only {{var}} and {{+var}} are supported"
                ));
            }
            if matches!(parts.last(), Some(Part::Var { .. })) {
                return Err("two variables must be separated by literal text".into());
            }
            parts.push(Part::Var {
                name: name.to_owned(),
                reserved,
            });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err("a '}' without '{'".into());
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(UriTemplate { parts })
    }

    /// The variables if `uri` matches.
    pub(crate) fn matches(&self, uri: &str) -> Option<TemplateVars> {
        let mut vars = TemplateVars::new();
        let mut rest = uri;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var { name, reserved } => {
                    let end = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || (!reserved && value.contains('/')) {
                        return None;
                    }
                    vars.insert(name.clone(), value.to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

/// A registered resource.
pub(crate) struct RegisteredResource {
    pub(crate) resource: Resource,
    pub(crate) listed: Box<RawValue>,
}

impl Entry for RegisteredResource {
    fn key(&self) -> &str {
        &self.resource.definition.uri
    }

    fn listed(&self) -> &RawValue {
        &self.listed
    }

    fn scopes(&self) -> &[String] {
        &self.resource.scopes
    }
}

/// A registered template with its parsed form.
pub(crate) struct RegisteredTemplate {
    pub(crate) template: ResourceTemplate,
    pub(crate) parsed: UriTemplate,
    pub(crate) listed: Box<RawValue>,
}

impl Entry for RegisteredTemplate {
    fn key(&self) -> &str {
        &self.template.definition.uri_template
    }

    fn listed(&self) -> &RawValue {
        &self.listed
    }

    fn scopes(&self) -> &[String] {
        &self.template.scopes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_and_bind() {
        let t = UriTemplate::parse("test://template/{id}/data").unwrap();
        assert_eq!(t.matches("test://template/123/data").unwrap()["id"], "123");
        assert_eq!(
            t.matches("test://template/1/2/data"),
            None,
            "{{id}} does not span '/'"
        );
        assert_eq!(t.matches("test://template//data"), None);
        assert_eq!(t.matches("test://template/123/data/x"), None);
        let files = UriTemplate::parse("file:///{+path}").unwrap();
        assert_eq!(
            files.matches("file:///a/b/c.txt").unwrap()["path"],
            "a/b/c.txt"
        );
        let two = UriTemplate::parse("db://{table}/rows/{id}").unwrap();
        let vars = two.matches("db://users/rows/7").unwrap();
        assert_eq!(
            (vars["table"].as_str(), vars["id"].as_str()),
            ("users", "7")
        );
        for bad in [
            "x://{a}{b}",
            "x://{?q}",
            "x://{a",
            "x://a}",
            "x://{}",
            "x://{a:3}",
            "x://{a*}",
        ] {
            assert!(UriTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
