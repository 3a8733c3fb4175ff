//! One consistent view of a [`Host`](super::Host): every configured server (its connection,
//! status and last lists) and the tools, prompts, resources and resource templates they offer
//! under the host's names. A refresh builds a new view and swaps it in whole, so that a call
//! never waits for a refresh and never sees half of one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::connect::Connection;
use super::list::{self, Listed};
use super::offers::{HostPrompt, HostResource, HostTemplate, Offers};
use super::{HostTool, ServerStatus};
use crate::config::ServerConfig;
use crate::names::{NameError, Names};
use crate::pins::PinState;
use crate::uris;

/// One configured server, as the last refresh of it left it.
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) config: ServerConfig,
    /// Its client; `None` while it could not be started (a stdio command that failed).
    pub(super) connection: Option<Arc<Connection>>,
    pub(super) status: ServerStatus,
    /// The tools it offers: its last list, or with [`HostOptions::keep_last_list`]
    /// (super::HostOptions::keep_last_list) its last good one while it fails.
    pub(super) listed: Arc<Vec<Listed>>,
    /// Its prompts, resources and templates, kept like its tools.
    pub(super) offers: Offers,
    /// Its prompts, resources and templates whose definition changed since pinned, as listed:
    /// withheld until approved.
    pub(super) withheld: super::offer_pins::Withheld,
}

/// Every server and tool at one moment.
#[derive(Default)]
pub(super) struct View {
    pub(super) servers: BTreeMap<String, Entry>,
    /// In order of their qualified names.
    pub(super) tools: Vec<HostTool>,
    /// Each listed tool's pin state by qualified name, as the list was checked.
    pub(super) pin_states: HashMap<String, PinState>,
    /// In order of their qualified names.
    pub(super) prompts: Vec<HostPrompt>,
    /// In order of their URIs.
    pub(super) resources: Vec<HostResource>,
    /// In order of their templates.
    pub(super) templates: Vec<HostTemplate>,
    /// Each prefix's server.
    pub(super) prefixes: BTreeMap<String, String>,
}

impl View {
    /// The tool a qualified name stands for.
    pub(super) fn tool(&self, qualified: &str) -> Option<&HostTool> {
        self.tools
            .binary_search_by(|t| t.qualified.as_str().cmp(qualified))
            .ok()
            .map(|i| &self.tools[i])
    }

    /// The prompt a qualified name stands for.
    pub(super) fn prompt(&self, qualified: &str) -> Option<&HostPrompt> {
        self.prompts
            .binary_search_by(|p| p.qualified.as_str().cmp(qualified))
            .ok()
            .map(|i| &self.prompts[i])
    }

    /// The server whose resources a wrapped URI's prefix names, with that server's prefix as
    /// configured ([`crate::uris::resolve`]).
    pub(super) fn server_of_prefix(&self, prefix: &str) -> Option<(&str, &str)> {
        let prefix = crate::uris::resolve(prefix, self.prefixes.keys().map(String::as_str))?;
        Some((prefix, self.prefixes.get(prefix)?.as_str()))
    }

    /// A view of `servers`, their tools and prompts named within `budget`.
    pub(super) fn of(servers: BTreeMap<String, Entry>, budget: usize) -> Result<View, NameError> {
        let prefixes = servers
            .values()
            .map(|e| (e.config.name.clone(), e.config.prefix.clone()))
            .collect();
        let listed = servers.values().flat_map(|e| e.listed.iter().cloned());
        let named = list::name(listed.collect(), &prefixes, budget)?;
        let offered = name(&servers, budget)?;
        Ok(View {
            servers,
            tools: named.tools,
            pin_states: named.pin_states,
            prompts: offered.prompts,
            resources: offered.resources,
            templates: offered.templates,
            prefixes: offered.prefixes,
        })
    }
}

/// A list of a [`Host`](super::Host) at one moment, as a slice of `$item` in order of
/// `$key`, that stays as it is while the host refreshes.
macro_rules! snapshot {
    ($(#[$doc:meta])* $name:ident, $item:ty, $field:ident, $key:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name(pub(super) Arc<View>);

        impl std::ops::Deref for $name {
            type Target = [$item];

            fn deref(&self) -> &[$item] {
                &self.0.$field
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_list()
                    .entries(self.0.$field.iter().map(|t| &t.$key))
                    .finish()
            }
        }
    };
}

snapshot!(
    /// The tools of a [`Host`](super::Host) at one moment: a slice, in order of their
    /// qualified names, that stays as it is while the host refreshes.
    Tools, HostTool, tools, qualified
);
impl Tools {
    /// The pin state of a tool of this snapshot, as of the same moment
    /// ([`Host::pin_state`](super::Host::pin_state) reads the host's current view instead).
    pub fn pin_state(&self, qualified: &str) -> Option<&PinState> {
        self.0.pin_states.get(qualified)
    }
}

snapshot!(
    /// The prompts of a [`Host`](super::Host) at one moment: a slice, in order of their
    /// qualified names, that stays as it is while the host refreshes.
    Prompts, HostPrompt, prompts, qualified
);
snapshot!(
    /// The resources of a [`Host`](super::Host) at one moment: a slice, in order of their
    /// URIs (`toolwire://PREFIX/URI`), that stays as it is while the host refreshes.
    Resources, HostResource, resources, uri
);
snapshot!(
    /// The resource templates of a [`Host`](super::Host) at one moment: a slice, in order of
    /// their templates (`toolwire://PREFIX/TEMPLATE`), that stays as it is while the host
    /// refreshes.
    ResourceTemplates, HostTemplate, templates, uri_template
);

/// Every server's offers under the names the model sees, each list in order of those names.
#[derive(Default)]
struct Named {
    prompts: Vec<HostPrompt>,
    resources: Vec<HostResource>,
    templates: Vec<HostTemplate>,
    /// Each prefix's server: whose resources a wrapped URI names.
    prefixes: BTreeMap<String, String>,
}

/// Names the offers of `servers`: prompts within `budget`, resources and templates wrapped
/// with their server's prefix. A server whose prefix another server (before it by name)
/// already has offers no resources: its URIs could not be told apart. The configuration
/// refuses such prefixes; a configuration made in code may not have been checked.
fn name(servers: &BTreeMap<String, Entry>, budget: usize) -> Result<Named, NameError> {
    let mut named = Named::default();
    for entry in servers.values() {
        let (prefix, server) = (&entry.config.prefix, &entry.config.name);
        let taken = named
            .prefixes
            .entry(prefix.clone())
            .or_insert_with(|| server.clone());
        if taken != server {
            if !entry.offers.resources.is_empty() || !entry.offers.templates.is_empty() {
                tracing::warn!(%server, %prefix, "server {server}: its resources are not offered: server {taken} has the same prefix");
            }
            continue;
        }
        let mut seen = HashSet::new();
        for resource in &entry.offers.resources {
            if seen.insert(&resource.uri) {
                named.resources.push(HostResource {
                    uri: uris::wrap(prefix, &resource.uri),
                    server: server.clone(),
                    definition: resource.clone(),
                });
            }
        }
        let mut seen = HashSet::new();
        for template in &entry.offers.templates {
            if seen.insert(&template.uri_template) {
                named.templates.push(HostTemplate {
                    uri_template: uris::wrap_template(prefix, &template.uri_template),
                    server: server.clone(),
                    definition: template.clone(),
                });
            }
        }
    }
    named.prompts = name_prompts(servers, budget)?;
    named.resources.sort_by(|a, b| a.uri.cmp(&b.uri));
    named
        .templates
        .sort_by(|a, b| a.uri_template.cmp(&b.uri_template));
    Ok(named)
}

/// Every server's prompts under their qualified names, in order; the first of two prompts of
/// one server with the same name wins.
fn name_prompts(
    servers: &BTreeMap<String, Entry>,
    budget: usize,
) -> Result<Vec<HostPrompt>, NameError> {
    let names = Names::build(
        budget,
        servers.values().flat_map(|e| {
            let (server, prefix) = (e.config.name.as_str(), e.config.prefix.as_str());
            e.offers
                .prompts
                .iter()
                .map(move |p| (server, prefix, p.name.as_str()))
        }),
    )?;
    let mut seen = HashSet::new();
    let mut prompts: Vec<HostPrompt> = servers
        .values()
        .flat_map(|e| e.offers.prompts.iter().map(move |p| (&e.config.name, p)))
        .filter_map(|(server, prompt)| {
            let qualified = names.qualified(server, &prompt.name)?.to_owned();
            seen.insert(qualified.clone()).then(|| HostPrompt {
                qualified,
                server: server.clone(),
                definition: prompt.clone(),
            })
        })
        .collect();
    prompts.sort_by(|a, b| a.qualified.cmp(&b.qualified));
    Ok(prompts)
}
