//! Prompts, resources and templates pinned as tools are: the first definition seen of each is
//! pinned; one whose definition changed since is withheld (left out of the host's lists) until a
//! person approves the change ([`Host::approve_offer`]), and reported with what changed
//! ([`ServerStatus::offer_pins`](super::ServerStatus::offer_pins)). Each kind's pins are kept
//! in the same store as tools', under the server's name and the kind (`fs#prompts`), so that a
//! prompt and a tool of one name never share a pin.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::offers::Offers;
use super::{Host, HostError, HostEvent};
use crate::pins::{PinReport, PinStore, PinStoreError, Pins};

/// A kind of offer that is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum OfferKind {
    /// Prompts, by name.
    Prompt,
    /// Resources, by URI.
    Resource,
    /// Resource templates, by URI template.
    Template,
}

impl OfferKind {
    /// Every kind.
    pub const ALL: [OfferKind; 3] = [OfferKind::Prompt, OfferKind::Resource, OfferKind::Template];

    /// The kind in words (`prompt`, `resource`, `template`).
    pub fn as_str(self) -> &'static str {
        match self {
            OfferKind::Prompt => "prompt",
            OfferKind::Resource => "resource",
            OfferKind::Template => "template",
        }
    }

    /// Where `server`'s pins of this kind are kept in the pin store.
    pub fn pin_key(self, server: &str) -> String {
        let kind = match self {
            OfferKind::Prompt => "prompts",
            OfferKind::Resource => "resources",
            OfferKind::Template => "templates",
        };
        format!("{server}#{kind}")
    }
}

/// One server's prompts, resources and templates against their pins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferPins {
    /// Its prompts' (`Changed::tool` is the prompt's name).
    pub prompts: PinReport,
    /// Its resources' (`Changed::tool` is the resource's URI).
    pub resources: PinReport,
    /// Its templates' (`Changed::tool` is the URI template).
    pub templates: PinReport,
}

impl OfferPins {
    /// The report of `kind`.
    pub fn of(&self, kind: OfferKind) -> &PinReport {
        match kind {
            OfferKind::Prompt => &self.prompts,
            OfferKind::Resource => &self.resources,
            OfferKind::Template => &self.templates,
        }
    }

    fn of_mut(&mut self, kind: OfferKind) -> &mut PinReport {
        match kind {
            OfferKind::Prompt => &mut self.prompts,
            OfferKind::Resource => &mut self.resources,
            OfferKind::Template => &mut self.templates,
        }
    }
}

/// The definitions of `offers` of `kind`, by name, URI or URI template.
pub(super) fn definitions(offers: &Offers, kind: OfferKind) -> BTreeMap<String, Value> {
    fn by<T: serde::Serialize>(
        items: &[T],
        key: impl Fn(&T) -> &String,
    ) -> BTreeMap<String, Value> {
        items
            .iter()
            .map(|item| {
                (
                    key(item).clone(),
                    serde_json::to_value(item).unwrap_or(Value::Null),
                )
            })
            .collect()
    }
    match kind {
        OfferKind::Prompt => by(&offers.prompts, |p| &p.name),
        OfferKind::Resource => by(&offers.resources, |r| &r.uri),
        OfferKind::Template => by(&offers.templates, |t| &t.uri_template),
    }
}

/// The definitions withheld for approval, by kind and name, as listed.
pub(super) type Withheld = HashMap<(OfferKind, String), Value>;

/// `offers` of `server` checked against their pins (the new ones pinned): what may be served,
/// the changed ones left out (their listed definitions kept for approval), and the reports.
pub(super) fn check(
    server: &str,
    mut offers: Offers,
    (pins, hold_new): (&Pins<std::sync::Arc<dyn PinStore>>, bool),
) -> Result<(Offers, OfferPins, Withheld), PinStoreError> {
    let mut report = OfferPins::default();
    let mut kept = Withheld::new();
    for kind in OfferKind::ALL {
        let mut listed = definitions(&offers, kind);
        let checked = pins.check_holding(&kind.pin_key(server), &listed, hold_new)?;
        let withheld: Vec<&String> = checked.changed.iter().map(|c| &c.tool).collect();
        for name in &withheld {
            if let Some(definition) = listed.remove(*name) {
                kept.insert((kind, (*name).clone()), definition);
            }
        }
        match kind {
            OfferKind::Prompt => offers.prompts.retain(|p| !withheld.contains(&&p.name)),
            OfferKind::Resource => offers.resources.retain(|r| !withheld.contains(&&r.uri)),
            OfferKind::Template => offers
                .templates
                .retain(|t| !withheld.contains(&&t.uri_template)),
        }
        *report.of_mut(kind) = checked;
    }
    Ok((offers, report, kept))
}

impl Host {
    /// Accepts the listed definition of `server`'s changed `kind` named `name` (a prompt's
    /// name, a resource's URI, a template's URI template, as the server lists it) as its new
    /// pin, after a person reviewed [`ServerStatus::offer_pins`](super::ServerStatus::offer_pins);
    /// only when its listed definition's hash is `reviewed`, if given. The server is listed
    /// again, so that it is offered at once. `false`, approving nothing, when it is not waiting
    /// or is no longer the one reviewed. The audit log records it.
    pub async fn approve_offer(
        &self,
        server: &str,
        kind: OfferKind,
        name: &str,
        reviewed: Option<&str>,
    ) -> Result<bool, HostError> {
        let listed = self
            .view
            .load()
            .servers
            .get(server)
            .and_then(|entry| entry.withheld.get(&(kind, name.to_owned())).cloned());
        let Some(listed) = listed else {
            return Ok(false);
        };
        let hash = crate::pins::definition_hash(&listed);
        if reviewed.is_some_and(|reviewed| reviewed != hash) {
            return Ok(false);
        }
        self.pins.approve(&kind.pin_key(server), name, &listed)?;
        self.record(HostEvent::ChangeApproved {
            server,
            tool: &format!("{} {name}", kind.as_str()),
            hash: &hash,
        });
        self.refresh_one(server).await?;
        Ok(true)
    }
}
