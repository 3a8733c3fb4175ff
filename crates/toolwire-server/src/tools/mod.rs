//! What a server offers and how it is called: tools as values ([`tool`]) checked into the
//! [`registry`], `tools/call` ([`call`]) and calls that become [`tasks`]; prompts ([`prompt`])
//! and resources ([`resource`]), registered through one shape ([`offered`], which also names
//! the change bus's messages), with their list, get and read methods ([`offers`]) and `completion/complete`
//! ([`completion`]).
//! Every list is a [`catalog`].

pub(crate) mod call;
pub(crate) mod catalog;
pub(crate) mod completion;
pub(crate) mod offered;
pub(crate) mod offers;
pub(crate) mod prompt;
pub(crate) mod registry;
pub(crate) mod resource;
pub(crate) mod task_watch;
pub(crate) mod tasks;
pub(crate) mod tool;
pub(crate) mod visibility;
