//! What a server offers, as values: tools ([`tool`]) checked into the [`registry`]; prompts
//! ([`prompt`]) and resources ([`resource`]), registered through one shape ([`offered`], which
//! also names the change bus's messages), with their completers; who may see
//! what ([`visibility`]). Every list is a [`catalog`]. The methods that serve them
//! (`tools/call`, tasks, the list, get, read and complete methods) are the server's.

pub(crate) mod catalog;
pub(crate) mod offered;
pub(crate) mod prompt;
pub(crate) mod registry;
pub(crate) mod resource;
pub(crate) mod tool;
pub(crate) mod visibility;
