//! One consistent view of a [`Host`](super::Host): every configured server (its connection,
//! status and last list) and the tools they offer under their qualified names. A refresh
//! builds a new view and swaps it in whole, so that a call never waits for a refresh and
//! never sees half of one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::connect::Connection;
use super::list::{self, Listed};
use super::{HostTool, ServerStatus};
use crate::config::ServerConfig;
use crate::names::NameError;
use crate::pins::PinState;

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
}

/// Every server and tool at one moment.
#[derive(Default)]
pub(super) struct View {
    pub(super) servers: BTreeMap<String, Entry>,
    /// In order of their qualified names.
    pub(super) tools: Vec<HostTool>,
    /// Each listed tool's pin state by qualified name, as the list was checked.
    pub(super) pin_states: HashMap<String, PinState>,
}

impl View {
    /// The tool a qualified name stands for.
    pub(super) fn tool(&self, qualified: &str) -> Option<&HostTool> {
        self.tools
            .binary_search_by(|t| t.qualified.as_str().cmp(qualified))
            .ok()
            .map(|i| &self.tools[i])
    }

    /// A view of `servers`, their tools named within `budget`.
    pub(super) fn of(servers: BTreeMap<String, Entry>, budget: usize) -> Result<View, NameError> {
        let prefixes = servers
            .values()
            .map(|e| (e.config.name.clone(), e.config.prefix.clone()))
            .collect();
        let listed = servers.values().flat_map(|e| e.listed.iter().cloned());
        let named = list::name(listed.collect(), &prefixes, budget)?;
        Ok(View {
            servers,
            tools: named.tools,
            pin_states: named.pin_states,
        })
    }
}

/// The tools of a [`Host`](super::Host) at one moment: a slice, in order of their qualified
/// names, that stays as it is while the host refreshes.
#[derive(Clone)]
pub struct Tools(pub(super) Arc<View>);

impl std::ops::Deref for Tools {
    type Target = [HostTool];

    fn deref(&self) -> &[HostTool] {
        &self.0.tools
    }
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.tools.iter().map(|t| &t.qualified))
            .finish()
    }
}
