//! A host given a new configuration while it runs: servers added, removed and changed, the
//! approval rules and the audit redaction replaced. Everything is checked first
//! ([`Host::prepare`]), then swapped in one step ([`Host::apply`]); a server left as it was
//! keeps its connection and its list, a changed one is started again from its new entry.
//! Calls in flight hold the connection they started on: a removed or changed server's old
//! connection is closed once the last of them ends (or after [`RETIRE_WAIT`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::connect::Connection;
use super::view::View;
use super::{Host, HostError, HostEvent, refresh};
use crate::audit::Redaction;
use crate::config::{ApprovalRules, AuditConfig, HostConfig, ServerConfig};
use crate::policy::Policy;

/// The longest an old connection waits for its calls in flight before it is closed.
pub const RETIRE_WAIT: Duration = Duration::from_secs(600);
/// How often a retired connection looks whether its calls in flight have ended.
const RETIRE_POLL: Duration = Duration::from_millis(100);

/// The file's settings for every server: its top-level approval rules and audit settings.
pub(super) type TopSettings = (ApprovalRules, AuditConfig);

/// Which servers a reconfiguration adds, removes and changes, by name, each list in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerChanges {
    /// Servers of the new configuration that the host did not have.
    pub added: Vec<String>,
    /// Servers the new configuration no longer has.
    pub removed: Vec<String>,
    /// Servers whose entry changed (how to reach them, their prefix, filter, trust, time
    /// limits or approval rules): started again.
    pub changed: Vec<String>,
}

impl ServerChanges {
    /// Whether no server is added, removed or changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// A new configuration, checked and ready for [`Host::apply`]: nothing of the host changed
/// yet.
pub struct Reconfiguration {
    servers: Vec<ServerConfig>,
    top: TopSettings,
    policy: Policy,
    redaction: Option<Redaction>,
    changes: ServerChanges,
    approval_changed: bool,
}

impl std::fmt::Debug for Reconfiguration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconfiguration")
            .field("changes", &self.changes)
            .field("approval_changed", &self.approval_changed)
            .finish_non_exhaustive()
    }
}

impl Reconfiguration {
    /// The servers it adds, removes and changes.
    pub fn changes(&self) -> &ServerChanges {
        &self.changes
    }

    /// Whether the top-level approval rules or the audit settings differ from the host's.
    pub fn approval_changed(&self) -> bool {
        self.approval_changed
    }
}

impl Host {
    /// Checks `config` as [`Host::new`] would (the approval rules, the audit redaction, the
    /// servers' prefixes) and compares its servers with the host's, changing nothing: what
    /// [`Host::apply`] then puts in place.
    pub fn prepare(&self, config: &HostConfig) -> Result<Reconfiguration, HostError> {
        let policy = Policy::new(config, self.remembered.clone())?;
        // A redaction the host was given stays; else it follows the file's `audit` key.
        let redaction = match &self.options.redaction {
            Some(_) => None,
            None => Some(Redaction::new(&config.audit)?),
        };
        crate::names::check_prefixes(
            config
                .servers
                .iter()
                .map(|s| (s.name.as_str(), s.prefix.as_str())),
        )?;
        let view = self.view.load();
        let mut changes = ServerChanges::default();
        for server in &config.servers {
            match view.servers.get(&server.name) {
                None => changes.added.push(server.name.clone()),
                Some(entry) if entry.config != *server => {
                    changes.changed.push(server.name.clone());
                }
                Some(_) => {}
            }
        }
        changes.removed = view
            .servers
            .keys()
            .filter(|name| !config.servers.iter().any(|s| &s.name == *name))
            .cloned()
            .collect();
        let top = (config.approval.clone(), config.audit.clone());
        let approval_changed = **self.top.load() != top;
        Ok(Reconfiguration {
            servers: config.servers.clone(),
            top,
            policy,
            redaction,
            changes,
            approval_changed,
        })
    }

    /// Puts a prepared configuration in place in one step: the view without the removed
    /// servers, with the added and changed ones not yet started (a refresh of each starts
    /// it, [`Host::refresh_server`]), the new rules and redaction. Fails, changing nothing,
    /// only when the servers' names cannot all be made (their prefixes, checked by
    /// [`Host::prepare`], make this unlikely). The old connections of removed and changed
    /// servers are closed once their calls in flight end; needs a Tokio runtime.
    pub fn apply(&self, next: Reconfiguration) -> Result<ServerChanges, HostError> {
        let Reconfiguration {
            servers: configs,
            top,
            policy,
            redaction,
            changes,
            approval_changed: _,
        } = next;
        let retired = {
            let _merging = self.merging.lock().unwrap_or_else(|e| e.into_inner());
            let current = self.view.load();
            let mut servers = BTreeMap::new();
            let mut retired = Vec::new();
            for config in configs {
                match current.servers.get(&config.name) {
                    Some(entry) if entry.config == config => {
                        servers.insert(config.name.clone(), entry.clone());
                    }
                    other => {
                        retired.extend(other.and_then(|e| e.connection.clone()));
                        servers.insert(config.name.clone(), refresh::unrefreshed(config));
                    }
                }
            }
            for name in &changes.removed {
                retired.extend(current.servers.get(name).and_then(|e| e.connection.clone()));
            }
            let view = View::of(servers, self.options.name_budget)?;
            self.view.store(Arc::new(view));
            self.policy.store(Arc::new(policy));
            self.top.store(Arc::new(top));
            if let Some(redaction) = redaction {
                self.redaction.store(Arc::new(redaction));
            }
            retired
        };
        for connection in retired {
            retire(connection);
        }
        Ok(changes)
    }

    /// Appends the record of a reload to the audit log: applied with what changed, or
    /// refused with the reason (`refused`); `file_sha256` is the file's hash as read.
    pub fn record_reload(&self, file_sha256: &str, changes: &[String], refused: Option<&str>) {
        self.record(HostEvent::ConfigReloaded {
            outcome: if refused.is_some() {
                "refused"
            } else {
                "applied"
            },
            file_sha256,
            changes,
            reason: refused,
        });
    }
}

/// Closes `connection` once no call holds it (at most [`RETIRE_WAIT`] from now).
fn retire(connection: Arc<Connection>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        // Without a runtime the last holder's drop ends it (a stdio process is killed then).
        return;
    };
    runtime.spawn(async move {
        let deadline = tokio::time::Instant::now() + RETIRE_WAIT;
        while Arc::strong_count(&connection) > 1 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(RETIRE_POLL).await;
        }
        tracing::debug!(server = %connection.config.name, "an old connection closed after a reconfiguration");
        connection.client.close().await;
    });
}
