//! Prompts, resources and resource templates of every server, beside its tools: listed in the
//! same refresh, and named for the host's one list the way tools are — a prompt
//! `prefix__name` within the name budget ([`crate::names`]), a resource or template
//! `toolwire://PREFIX/URI` ([`crate::uris`]) — so that each maps back to its server.
//!
//! A server that does not offer a kind (it does not declare the capability, or answers "method
//! not found") simply has none of it; one whose list of a kind fails otherwise keeps its last
//! list of that kind, and its tools are not affected either way.

use toolwire_client::protocol::{Prompt, Resource, ResourceTemplate};

use super::connect::Connection;

/// The JSON-RPC code of a method the server does not have.
const METHOD_NOT_FOUND: i64 = -32601;

/// A prompt as the model sees it.
#[derive(Debug, Clone)]
pub struct HostPrompt {
    /// The qualified name (`prefix__name`), by which the model gets it.
    pub qualified: String,
    /// The server's name.
    pub server: String,
    /// The definition as the server lists it (under its own name).
    pub definition: Prompt,
}

impl HostPrompt {
    /// The definition to give the model: the server's, named by the qualified name.
    pub fn for_model(&self) -> Prompt {
        Prompt {
            name: self.qualified.clone(),
            ..self.definition.clone()
        }
    }
}

/// A resource as the model sees it.
#[derive(Debug, Clone)]
pub struct HostResource {
    /// The URI the host offers it under (`toolwire://PREFIX/URI`), by which the model reads
    /// it.
    pub uri: String,
    /// The server's name.
    pub server: String,
    /// The definition as the server lists it (under its own URI).
    pub definition: Resource,
}

impl HostResource {
    /// The definition to give the model: the server's, under the host's URI.
    pub fn for_model(&self) -> Resource {
        Resource {
            uri: self.uri.clone(),
            ..self.definition.clone()
        }
    }
}

/// A resource template as the model sees it.
#[derive(Debug, Clone)]
pub struct HostTemplate {
    /// The template the host offers it under (`toolwire://PREFIX/TEMPLATE`): each of its
    /// expansions is a URI [`Host::read_resource`](super::Host::read_resource) reads from the
    /// server, as the server's own expansion.
    pub uri_template: String,
    /// The server's name.
    pub server: String,
    /// The definition as the server lists it (under its own template).
    pub definition: ResourceTemplate,
}

impl HostTemplate {
    /// The definition to give the model: the server's, under the host's template.
    pub fn for_model(&self) -> ResourceTemplate {
        ResourceTemplate {
            uri_template: self.uri_template.clone(),
            ..self.definition.clone()
        }
    }
}

/// One server's prompts, resources and templates, as last listed.
#[derive(Debug, Clone, Default)]
pub(super) struct Offers {
    pub(super) prompts: Vec<Prompt>,
    pub(super) resources: Vec<Resource>,
    pub(super) templates: Vec<ResourceTemplate>,
}

/// The prompts, resources and templates of `connection`'s server: those of the kinds it
/// declares (`server/discover`, or a legacy server's `initialize` result), listed at once; a
/// kind it does not declare is not asked for (a server need not answer a method it does not
/// offer) and is empty. A list that fails (or capabilities that cannot be read) keeps
/// `previous`'s, and the failure is logged.
pub(super) async fn list(connection: &Connection, previous: &Offers) -> Offers {
    let client = &connection.client;
    let server = connection.config.name.as_str();
    let capabilities = match client.discover().await {
        Ok(discovered) => discovered.capabilities,
        Err(toolwire_client::Error::Rpc(e)) if e.code == METHOD_NOT_FOUND => Default::default(),
        Err(error) => {
            tracing::warn!(
                server,
                %error,
                "server {server}: its capabilities could not be read; its last lists of prompts and resources are kept"
            );
            return previous.clone();
        }
    };
    let (prompts, resources) = (
        capabilities.prompts.is_some(),
        capabilities.resources.is_some(),
    );
    let (prompts, resources, templates) = futures::join!(
        if_offered(prompts, client.list_prompts()),
        if_offered(resources, client.list_resources()),
        if_offered(resources, client.list_resource_templates()),
    );
    let resources = kept(server, "resources", resources, &previous.resources);
    let templates = kept(server, "resource templates", templates, &previous.templates);
    Offers {
        prompts: kept(server, "prompts", prompts, &previous.prompts),
        resources: readable(server, resources, |r| &r.uri),
        templates: readable(server, templates, |t| &t.uri_template),
    }
}

/// The list, if the server offers its kind.
async fn if_offered<T>(
    offered: bool,
    list: impl std::future::Future<Output = toolwire_client::Result<Vec<T>>>,
) -> Option<toolwire_client::Result<Vec<T>>> {
    match offered {
        true => Some(list.await),
        false => None,
    }
}

/// A list as listed; none if the server does not offer its kind (it does not declare it, or
/// answers "method not found"); `previous` if it failed.
fn kept<T: Clone>(
    server: &str,
    kind: &str,
    listed: Option<toolwire_client::Result<Vec<T>>>,
    previous: &[T],
) -> Vec<T> {
    match listed {
        None => Vec::new(),
        Some(Ok(items)) => items,
        Some(Err(toolwire_client::Error::Rpc(e))) if e.code == METHOD_NOT_FOUND => Vec::new(),
        Some(Err(error)) => {
            tracing::warn!(
                server,
                %error,
                "server {server}: its {kind} could not be listed; its last list of them is kept"
            );
            previous.to_vec()
        }
    }
}

/// The items whose URI a person can read: one with control or hidden format characters
/// (escape sequences, bidi overrides, zero-width characters) is left out, since what it shows
/// is not what it says, and it could not be cleaned without naming another resource.
fn readable<T>(server: &str, items: Vec<T>, uri: impl Fn(&T) -> &String) -> Vec<T> {
    items
        .into_iter()
        .filter(|item| {
            let uri = uri(item);
            let hidden = uri
                .chars()
                .any(|c| c.is_control() || toolwire_sanitize::text::is_hidden_format(c));
            if hidden {
                tracing::warn!(
                    server,
                    uri = %uri.escape_debug(),
                    "server {server}: a resource URI with control or hidden characters is not offered"
                );
            }
            !hidden
        })
        .collect()
}
