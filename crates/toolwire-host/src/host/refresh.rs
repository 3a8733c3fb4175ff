//! Refreshing a host: a server started if it has not been, its tools listed and checked
//! against its pins, then its prompts, resources and templates listed, and the host's view
//! rebuilt with them. Each server is refreshed on its
//! own and merged into the view when its list is in, so a slow server holds up only its own
//! list, and calls go on meanwhile on the view they started with.

use std::sync::Arc;
use std::time::SystemTime;

use super::connect::{self, Connection};
use super::list::{self, Listing};
use super::offer_pins::{self, OfferKind, OfferPins};
use super::offers::{self, Offers};
use super::view::{Entry, View};
use super::{Host, HostError, HostEvent, ServerState, ServerStatus};
use crate::pins::PinReport;

impl Host {
    /// Refreshes the server named `name`: starts it if it has not been, lists its tools and
    /// its prompts, resources and templates, and puts them in the view. A failure to list its
    /// tools is recorded in its status (and the audit log); its other lists cannot fail it
    /// ([`offers::list`]).
    pub(super) async fn refresh_one(&self, name: &str) -> Result<(), HostError> {
        let Some(connection) = self.started(name).await else {
            return Ok(());
        };
        let previous = self.view.load().servers.get(name).map(|e| e.offers.clone());
        let previous = previous.unwrap_or_default();
        let client = &connection.client;
        let (tools, offers) = if client.era().is_some() {
            futures::join!(client.refresh_tools(), offers::list(&connection, &previous))
        } else {
            // The first request settles the server's era (over HTTP a legacy server is known
            // by how it refuses it): the others wait for it rather than each settling it.
            match client.refresh_tools().await {
                Ok(tools) => (Ok(tools), offers::list(&connection, &previous).await),
                Err(error) => (Err(error), previous),
            }
        };
        match tools {
            Ok(tools) => {
                let hold_new = self.options.hold_new;
                let listing = list::check(tools, &connection, (&self.pins, hold_new))?;
                let offers = offer_pins::check(name, offers, (&self.pins, hold_new))?;
                self.listed(name, connection, listing, offers)
            }
            Err(error) => self.failed(name, Some(connection), error.to_string()),
        }
    }

    /// The server's connection, started now if it had none; `None` if there is no such
    /// server or it could not be started (recorded).
    async fn started(&self, name: &str) -> Option<Arc<Connection>> {
        let entry = self.view.load().servers.get(name).cloned()?;
        if let Some(connection) = entry.connection {
            return Some(connection);
        }
        // One start at a time, so that two refreshes never start one server twice.
        let _starting = self.starting.lock().await;
        if let Some(connection) = self.view.load().servers.get(name)?.connection.clone() {
            return Some(connection);
        }
        let watch = self.refusal_watch(name);
        match connect::open(&entry.config, &self.options, watch).await {
            Ok(client) => {
                self.record_start(&entry.config);
                let connection = Arc::new(Connection::new(entry.config, client));
                let kept = connection.clone();
                let updated = self.update(name, |entry| entry.connection = Some(kept));
                if let Err(error) = updated {
                    tracing::error!(server = %name, %error, "a started server could not be added");
                }
                Some(connection)
            }
            Err(error) => {
                if let Err(e) = self.failed(name, None, error.to_string()) {
                    tracing::error!(server = %name, error = %e, "a failed start could not be recorded");
                }
                None
            }
        }
    }

    /// Records a server that could not be started or listed; its tools leave the view unless
    /// the host keeps last lists.
    fn failed(
        &self,
        name: &str,
        connection: Option<Arc<Connection>>,
        error: String,
    ) -> Result<(), HostError> {
        self.record(HostEvent::ServerFailed {
            server: name,
            error: &error,
        });
        let keep = self.options.keep_last_list;
        self.update(name, |entry| {
            if connection.is_some() {
                entry.connection = connection;
            }
            if !keep {
                entry.listed = Arc::default();
                entry.offers = Offers::default();
            }
            entry.status.state = ServerState::Failed { error };
        })
    }

    /// Whether `report` only says that offers are new to pins kept in memory (all `listed`
    /// of them, when their count is given): a first listing, which changes nothing a later run
    /// could compare with.
    fn first_sight(&self, report: &PinReport, listed: Option<usize>) -> bool {
        !self.pins_kept
            && report.changed.is_empty()
            && report.removed.is_empty()
            && listed.is_none_or(|listed| report.new.len() == listed)
    }

    /// Records a server's list (and how it differs from its pins), and puts its tools and its
    /// offers in the view.
    fn listed(
        &self,
        name: &str,
        connection: Arc<Connection>,
        listing: Listing,
        (offers, offer_pins, withheld): (Offers, OfferPins, offer_pins::Withheld),
    ) -> Result<(), HostError> {
        let Listing {
            tools,
            hidden,
            report,
        } = listing;
        if report != PinReport::default() && !self.first_sight(&report, Some(tools.len())) {
            self.record(HostEvent::tools_changed(name, &report));
        }
        for kind in OfferKind::ALL {
            let report = offer_pins.of(kind);
            if *report != PinReport::default() && !self.first_sight(report, None) {
                self.record(HostEvent::tools_changed(&kind.pin_key(name), report));
            }
        }
        let client = &connection.client;
        self.record(HostEvent::ServerListed {
            server: name,
            protocol_version: &client.protocol_version(),
            tools: tools.len(),
        });
        let status = ServerStatus {
            name: name.to_owned(),
            state: ServerState::Connected { tools: tools.len() },
            pins: report,
            offer_pins,
            era: client.era(),
            authorized: client.authorized(),
            hidden,
            listed_at: Some(SystemTime::now()),
            list_ttl: client.tools_ttl(),
            sandbox: sandbox_status(&connection.config),
        };
        self.update(name, |entry| {
            entry.connection = Some(connection);
            entry.listed = Arc::new(tools);
            entry.offers = offers;
            entry.withheld = withheld;
            entry.status = status;
        })
    }

    /// Changes the entry of `name` with `change` and swaps in the view rebuilt from it. One
    /// change at a time; the rebuild does no I/O.
    pub(super) fn update(
        &self,
        name: &str,
        change: impl FnOnce(&mut Entry),
    ) -> Result<(), HostError> {
        let _merging = self.merging.lock().unwrap_or_else(|e| e.into_inner());
        let mut servers = self.view.load().servers.clone();
        let Some(entry) = servers.get_mut(name) else {
            return Ok(());
        };
        change(entry);
        let view = View::of(servers, self.options.name_budget)?;
        self.view.store(Arc::new(view));
        Ok(())
    }
}

/// How the sandbox of the server `config` configures stands.
fn sandbox_status(config: &crate::config::ServerConfig) -> crate::config::SandboxStatus {
    config.sandbox.status(&config.name, &config.transport)
}

impl Host {
    /// Records a local server's start, with its sandbox and the profile it runs under.
    fn record_start(&self, config: &crate::config::ServerConfig) {
        let crate::config::Transport::Stdio { args, cwd, .. } = &config.transport else {
            return;
        };
        let profile = config.sandbox.profile(&config.name, args, cwd.as_deref());
        self.record(HostEvent::ServerStarted {
            server: &config.name,
            sandbox: &sandbox_status(config),
            profile: profile.as_ref(),
        });
    }
}

/// The entry of a configured server before its first refresh.
pub(super) fn unrefreshed(config: crate::config::ServerConfig) -> Entry {
    Entry {
        status: ServerStatus {
            name: config.name.clone(),
            state: ServerState::Failed {
                error: "not started yet".into(),
            },
            pins: PinReport::default(),
            offer_pins: OfferPins::default(),
            era: None,
            hidden: Vec::new(),
            authorized: None,
            listed_at: None,
            list_ttl: None,
            sandbox: sandbox_status(&config),
        },
        connection: None,
        listed: Arc::default(),
        offers: Offers::default(),
        withheld: Default::default(),
        config,
    }
}
