//! The steps of a refresh that read no host state: a server's
//! list filtered by its configuration and checked against its pins, then every server's tools
//! named for the model.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use toolwire_client::protocol::Tool;

use super::connect::Connection;
use super::{Hidden, HostTool};
use crate::config::ServerConfig;
use crate::glob::Globs;
use crate::names::{NameError, Names};
use crate::pins::{PinReport, PinState, PinStore, PinStoreError, Pins, definition_hash};

/// A listed tool the model may see, before it is named.
#[derive(Clone)]
pub(super) struct Listed {
    pub(super) server: String,
    pub(super) definition: Arc<Tool>,
    /// The definition as JSON: what was hashed, and what the policy reads.
    pub(super) listed: Arc<Value>,
    /// `None` for a second tool of the same name, whose definition was not checked.
    pub(super) pin: Option<PinState>,
}

/// One server's list, filtered and checked against its pins.
pub(super) struct Listing {
    /// The tools the model may see.
    pub(super) tools: Vec<Listed>,
    /// The others, with the reason.
    pub(super) hidden: Vec<Hidden>,
    /// The list against the pins.
    pub(super) report: PinReport,
}

/// `tools` of `connection`'s server: those its configuration lets through, each with its pin
/// state, and the others with the reason (the configuration's, or the client's refusal).
pub(super) fn check(
    tools: Vec<Tool>,
    connection: &Connection,
    (pins, hold_new): (&Pins<Arc<dyn PinStore>>, bool),
) -> Result<Listing, PinStoreError> {
    let server = &connection.config.name;
    let (tools, mut hidden) = filter(tools, &connection.config);
    let mut definitions: BTreeMap<String, Value> = tools
        .iter()
        .map(|t| {
            let listed = serde_json::to_value(t).unwrap_or(Value::Null);
            (t.name.clone(), listed)
        })
        .collect();
    let report = pins.check_holding(server, &definitions, hold_new)?;
    let tools = tools
        .into_iter()
        .map(|definition| {
            let listed = definitions.remove(&definition.name);
            let pin = listed.as_ref().map(|listed| {
                match report.changed.iter().find(|c| c.tool == definition.name) {
                    Some(c) => PinState::Changed {
                        pinned: c.pinned.clone(),
                        listed: c.listed.clone(),
                    },
                    None => PinState::Pinned(definition_hash(listed)),
                }
            });
            Listed {
                server: server.clone(),
                definition: Arc::new(definition),
                listed: Arc::new(listed.unwrap_or(Value::Null)),
                pin,
            }
        })
        .collect();
    hidden.extend(
        connection
            .client
            .dropped_tools()
            .into_iter()
            .map(|(tool, problem)| Hidden {
                tool,
                reason: format!("its definition is refused: {problem}"),
            }),
    );
    Ok(Listing {
        tools,
        hidden,
        report,
    })
}

/// Every server's tools under the names the model sees.
pub(super) struct Named {
    /// The tools, in order of their qualified names.
    pub(super) tools: Vec<HostTool>,
    /// Each tool's pin state, by qualified name.
    pub(super) pin_states: HashMap<String, PinState>,
}

/// Every listed tool under its qualified name, in order, and each one's pin state by that
/// name: the names within `budget`, each server's starting with its prefix.
pub(super) fn name(
    listed: Vec<Listed>,
    prefixes: &BTreeMap<String, String>,
    budget: usize,
) -> Result<Named, NameError> {
    let names = Names::build(
        budget,
        listed.iter().map(|t| {
            let server = t.server.as_str();
            let prefix = prefixes.get(server).map_or(server, String::as_str);
            (server, prefix, t.definition.name.as_str())
        }),
    )?;
    let mut pin_states = HashMap::new();
    let mut tools: Vec<HostTool> = listed
        .into_iter()
        .filter_map(|t| {
            let qualified = names.qualified(&t.server, &t.definition.name)?.to_owned();
            if let Some(pin) = t.pin {
                pin_states.insert(qualified.clone(), pin);
            }
            Some(HostTool {
                qualified,
                server: t.server,
                definition: t.definition,
                listed: t.listed,
            })
        })
        .collect();
    tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
    Ok(Named { tools, pin_states })
}

/// The tools of `server`'s list that its `tools.allow` / `tools.deny` let through, and the
/// others with the reason.
fn filter(tools: Vec<Tool>, server: &ServerConfig) -> (Vec<Tool>, Vec<Hidden>) {
    // The configuration checked the patterns; a pattern that fails here keeps nothing.
    let allow = Globs::new(&server.tools.allow).ok();
    let deny = Globs::new(&server.tools.deny).ok();
    let mut hidden = Vec::new();
    let kept = tools
        .into_iter()
        .filter(|t| {
            let reason = match (&allow, &deny) {
                (Some(a), _) if !a.is_empty() && !a.matches(&t.name) => {
                    "not in the configuration's tools.allow".to_owned()
                }
                (Some(_), Some(d)) => match d.first_match(&t.name) {
                    Some(pattern) => {
                        format!("matches {pattern:?} of the configuration's tools.deny")
                    }
                    None => return true,
                },
                _ => "the configuration's tool patterns do not compile".to_owned(),
            };
            hidden.push(Hidden {
                tool: t.name.clone(),
                reason,
            });
            false
        })
        .collect();
    (kept, hidden)
}
