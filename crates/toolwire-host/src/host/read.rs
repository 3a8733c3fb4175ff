//! What servers offer besides tools, asked for by the host's names: a prompt got by its
//! qualified name, a resource read by its wrapped URI, a completion for either, each from the
//! server that offers it. Results are cleaned (unless
//! [`HostOptions::clean_offers`](super::HostOptions::clean_offers) is off) and the URIs in them
//! wrapped like the lists', so that a URI a result names can be read through the host too.

use std::time::Instant;

use serde_json::Value;
use toolwire_client::CallOptions;
use toolwire_client::protocol::{
    CompleteResult, CompletionArgument, CompletionContext, CompletionReference, ContentBlock,
    GetPromptResult, ReadResourceResult, ResourceContents,
};

use super::connect::Connection;
use super::output::{clean_prompt, clean_read};
use super::view::View;
use super::{Host, HostEvent};
use crate::uris;

/// Why a prompt, a resource or a completion could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OfferError {
    /// No listed prompt has this name.
    #[error("there is no prompt named {0}; list the prompts again and use one of their names")]
    UnknownPrompt(String),
    /// The URI (or template) names no server of the host: it is not `toolwire://PREFIX/URI`
    /// with a configured server's prefix.
    #[error(
        "{0} is not a resource of this host: its resources are read as toolwire://PREFIX/URI, PREFIX the prefix of one of its servers"
    )]
    UnknownUri(String),
    /// The server has no connection: it could not be started.
    #[error("the server {0} is not running")]
    NotRunning(String),
    /// The server did not give it: its own error ([`toolwire_client::Error::Rpc`]), no answer
    /// in time, a lost connection.
    #[error("server {server}: {error}")]
    Server {
        /// The server's name.
        server: String,
        /// What the client saw.
        error: toolwire_client::Error,
    },
}

impl OfferError {
    /// The server it concerns, when it concerns one.
    pub fn server(&self) -> Option<&str> {
        match self {
            OfferError::NotRunning(server) | OfferError::Server { server, .. } => Some(server),
            _ => None,
        }
    }
}

/// The steps of [`Host::get_prompt`]: the prompt looked up, got from its server, recorded,
/// cleaned and its URIs wrapped.
pub(super) async fn get_prompt(
    host: &Host,
    qualified: &str,
    arguments: Value,
    options: CallOptions,
) -> Result<GetPromptResult, OfferError> {
    let view = host.view.load_full();
    let prompt = view
        .prompt(qualified)
        .ok_or_else(|| OfferError::UnknownPrompt(qualified.to_owned()))?;
    let (connection, prefix) = connection(&view, &prompt.server)?;
    let started = Instant::now();
    let got = connection
        .client
        .get_prompt_with(&prompt.definition.name, arguments.clone(), options)
        .await;
    let (logged, redacted) = host.logged(&arguments);
    host.record(HostEvent::PromptGot {
        server: &prompt.server,
        prompt: qualified,
        arguments: logged,
        redacted,
        latency_ms: started.elapsed().as_millis() as u64,
        result_sha256: got.as_ref().ok().map(digest),
        error: got.as_ref().err().map(ToString::to_string),
    });
    let mut result = got.map_err(|error| OfferError::Server {
        server: prompt.server.clone(),
        error,
    })?;
    if host.options().clean_offers {
        clean_prompt(&mut result);
    }
    for message in &mut result.messages {
        match &mut message.content {
            ContentBlock::ResourceLink(link) => link.uri = uris::wrap(prefix, &link.uri),
            ContentBlock::EmbeddedResource(embedded) => {
                wrap_contents(prefix, &mut embedded.resource)
            }
            _ => {}
        }
    }
    Ok(result)
}

/// The steps of [`Host::read_resource`]: the URI taken apart, read from its server, recorded,
/// cleaned and its contents' URIs wrapped.
pub(super) async fn read_resource(
    host: &Host,
    uri: &str,
    options: CallOptions,
) -> Result<ReadResourceResult, OfferError> {
    let view = host.view.load_full();
    let (server, original) = server_of(&view, uri)?;
    let (connection, prefix) = connection(&view, server)?;
    let started = Instant::now();
    let read = connection
        .client
        .read_resource_with(original, options)
        .await;
    host.record(HostEvent::ResourceRead {
        server,
        uri,
        latency_ms: started.elapsed().as_millis() as u64,
        result_sha256: read.as_ref().ok().map(digest),
        error: read.as_ref().err().map(ToString::to_string),
    });
    let mut result = read.map_err(|error| OfferError::Server {
        server: server.to_owned(),
        error,
    })?;
    if host.options().clean_offers {
        clean_read(&mut result);
    }
    for contents in &mut result.contents {
        wrap_contents(prefix, contents);
    }
    Ok(result)
}

/// The steps of [`Host::complete`]: the reference mapped to the server's own name or
/// template, asked of that server, the values cleaned.
pub(super) async fn complete(
    host: &Host,
    reference: CompletionReference,
    argument: CompletionArgument,
    context: Option<CompletionContext>,
    options: CallOptions,
) -> Result<CompleteResult, OfferError> {
    let view = host.view.load_full();
    let (server, reference) = match reference {
        CompletionReference::Prompt { name, title } => {
            let prompt = view.prompt(&name).ok_or(OfferError::UnknownPrompt(name))?;
            let name = prompt.definition.name.clone();
            (
                prompt.server.as_str(),
                CompletionReference::Prompt { name, title },
            )
        }
        CompletionReference::Resource { uri } => {
            let (server, original) = server_of(&view, &uri)?;
            let uri = original.to_owned();
            (server, CompletionReference::Resource { uri })
        }
    };
    let (connection, _) = connection(&view, server)?;
    let mut result = connection
        .client
        .complete_with(reference, argument, context, options)
        .await
        .map_err(|error| OfferError::Server {
            server: server.to_owned(),
            error,
        })?;
    if host.options().clean_offers {
        for value in &mut result.completion.values {
            if let (std::borrow::Cow::Owned(clean), _) = toolwire_sanitize::text::clean(value) {
                *value = clean;
            }
        }
    }
    Ok(result)
}

/// The server a wrapped URI names, and the server's own URI; every URI is the own URI of the
/// only server when it is unprefixed ([`uris::wrap`]).
pub(super) fn server_of<'v, 'u>(
    view: &'v View,
    uri: &'u str,
) -> Result<(&'v str, &'u str), OfferError> {
    let unknown = || OfferError::UnknownUri(uri.to_owned());
    if let Some((_, server)) = view.server_of_prefix("") {
        return Ok((server, uri));
    }
    let (prefix, original) = uris::unwrap(uri).ok_or_else(unknown)?;
    let (_, server) = view.server_of_prefix(prefix).ok_or_else(unknown)?;
    Ok((server, original))
}

/// The connection to `server` and its prefix.
fn connection<'v>(view: &'v View, server: &str) -> Result<(&'v Connection, &'v str), OfferError> {
    let entry = view
        .servers
        .get(server)
        .ok_or_else(|| OfferError::NotRunning(server.to_owned()))?;
    let connection = entry
        .connection
        .as_deref()
        .ok_or_else(|| OfferError::NotRunning(server.to_owned()))?;
    Ok((connection, entry.config.prefix.as_str()))
}

/// A tool result's resource links and embedded resources under the URIs the host offers
/// them by (`toolwire://PREFIX/URI`), so that a link the model follows is read from the server
/// that gave it ([`Host::read_resource`](super::Host::read_resource)).
pub(super) fn wrap_result_uris(
    prefix: &str,
    result: &mut toolwire_client::protocol::CallToolResult,
) {
    for block in &mut result.content {
        match block {
            ContentBlock::ResourceLink(link) => link.uri = uris::wrap(prefix, &link.uri),
            ContentBlock::EmbeddedResource(embedded) => {
                wrap_contents(prefix, &mut embedded.resource)
            }
            _ => {}
        }
    }
}

/// A resource's contents under the URI the host offers it by.
fn wrap_contents(prefix: &str, contents: &mut ResourceContents) {
    let uri = match contents {
        ResourceContents::Text(t) => &mut t.uri,
        ResourceContents::Blob(b) => &mut b.uri,
    };
    *uri = uris::wrap(prefix, uri);
}

/// The SHA-256 (hex) of a result as the server sent it.
fn digest<T: serde::Serialize>(result: &T) -> String {
    crate::util::sha256_hex(&serde_json::to_vec(result).unwrap_or_default())
}
