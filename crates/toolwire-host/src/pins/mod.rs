//! Pinning tool definitions against silent changes.
//!
//! The first time a host sees a tool, it stores a canonical hash of the tool's definition
//! (and the definition itself, to show what changed later). When a server lists a tool whose
//! definition differs from its pin, calls to it are blocked until a person looks at the
//! [`Change`]s and re-approves it with [`Pins::approve`]. New and removed tools are reported.
//!
//! The hash covers the whole definition as listed (name, title, description, both schemas,
//! annotations, icons, execution) except `_meta` entries outside `dev.toolwire/`: those are the
//! server's own bookkeeping, free to change, and neither the model nor the policy reads them.

#[cfg(any(test, feature = "contract-tests"))]
pub mod contract;
mod diff;
#[cfg(feature = "redis")]
mod redis;
mod store;

use std::collections::BTreeMap;

use serde_json::Value;

pub use diff::{Change, diff};
#[cfg(feature = "redis")]
pub use redis::RedisPins;
pub use store::{FilePins, MemoryPins, Pin, PinStore, PinStoreError};

/// The canonical hash (SHA-256, hex) of a tool definition.
pub fn definition_hash(definition: &Value) -> String {
    let canonical = canonical(definition).to_string();
    crate::util::sha256_hex(canonical.as_bytes())
}

/// What the hash covers: the definition without `_meta` entries outside `dev.toolwire/`.
/// (`serde_json`'s map keeps keys sorted, so the text is canonical.)
fn canonical(definition: &Value) -> Value {
    let mut definition = definition.clone();
    if let Some(Value::Object(meta)) = definition.get_mut("_meta") {
        meta.retain(|k, _| k.starts_with("dev.toolwire/"));
        if meta.is_empty() {
            definition.as_object_mut().map(|d| d.remove("_meta"));
        }
    }
    definition
}

/// What a server's list looks like against its pins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PinReport {
    /// Tools seen for the first time, now pinned.
    pub new: Vec<String>,
    /// Tools whose definition differs from the pin: blocked until approved.
    pub changed: Vec<Changed>,
    /// Pinned tools the server no longer lists (their pins are kept).
    pub removed: Vec<String>,
}

/// A tool whose definition changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    /// The tool's name as the server lists it.
    pub tool: String,
    /// The pinned hash; empty for a new name held until approved
    /// ([`Pins::check_holding`]).
    pub pinned: String,
    /// The hash of the definition listed now.
    pub listed: String,
    /// What changed, path by path.
    pub changes: Vec<Change>,
}

/// The pins of every server, over a [`PinStore`].
#[derive(Debug)]
pub struct Pins<S: PinStore> {
    store: S,
}

/// Whether a tool may be called as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinState {
    /// Its definition is the pinned one (the hash).
    Pinned(String),
    /// Its definition changed since it was pinned: blocked until approved.
    Changed {
        /// The pinned hash.
        pinned: String,
        /// The listed hash.
        listed: String,
    },
    /// It was never seen (a list has not been checked since it appeared).
    Unknown,
}

impl<S: PinStore> Pins<S> {
    /// Pins kept in `store`.
    pub fn new(store: S) -> Pins<S> {
        Pins { store }
    }

    /// Checks a server's listed tools (name → definition) against its pins: new tools are
    /// pinned, changed ones reported with what changed, missing ones reported.
    pub fn check(
        &self,
        server: &str,
        listed: &BTreeMap<String, Value>,
    ) -> Result<PinReport, PinStoreError> {
        self.check_holding(server, listed, false)
    }

    /// [`Pins::check`], and with `hold_new` a tool new to a server that has pins already is
    /// not pinned but reported changed (from nothing: [`Changed::pinned`] is empty), to be
    /// approved as a changed one is. A server with no pins yet has its list pinned as it is.
    pub fn check_holding(
        &self,
        server: &str,
        listed: &BTreeMap<String, Value>,
        hold_new: bool,
    ) -> Result<PinReport, PinStoreError> {
        let pinned = self.store.load(server)?;
        let hold_new = hold_new && !pinned.is_empty();
        let mut report = PinReport::default();
        let mut new = Vec::new();
        let mut hashes = BTreeMap::new();
        for (tool, definition) in listed {
            let hash = definition_hash(definition);
            match pinned.get(tool) {
                None if hold_new => report.changed.push(Changed {
                    tool: tool.clone(),
                    pinned: String::new(),
                    listed: hash.clone(),
                    changes: diff(&Value::Null, definition),
                }),
                None => new.push((tool.clone(), Pin::new(hash.clone(), definition))),
                Some(pin) if pin.hash != hash => report.changed.push(Changed {
                    tool: tool.clone(),
                    pinned: pin.hash.clone(),
                    listed: hash.clone(),
                    changes: diff(&pin.definition, definition),
                }),
                Some(_) => {}
            }
            hashes.insert(tool, hash);
        }
        if !new.is_empty() {
            // Another process may have pinned one of them since the load: its pin stands.
            for (tool, pin) in self.store.save_new(server, &new)? {
                let listed_hash = &hashes[&tool];
                if pin.hash == *listed_hash {
                    report.new.push(tool);
                } else {
                    report.changed.push(Changed {
                        changes: diff(&pin.definition, &listed[&tool]),
                        tool,
                        pinned: pin.hash,
                        listed: listed_hash.clone(),
                    });
                }
            }
            report.changed.sort_by(|a, b| a.tool.cmp(&b.tool));
        }
        report.removed = pinned
            .keys()
            .filter(|t| !listed.contains_key(*t))
            .cloned()
            .collect();
        Ok(report)
    }

    /// Whether `tool` of `server`, listed as `definition`, may be called.
    pub fn state(
        &self,
        server: &str,
        tool: &str,
        definition: &Value,
    ) -> Result<PinState, PinStoreError> {
        let listed = definition_hash(definition);
        Ok(match self.store.load(server)?.get(tool) {
            None => PinState::Unknown,
            Some(pin) if pin.hash == listed => PinState::Pinned(listed),
            Some(pin) => PinState::Changed {
                pinned: pin.hash.clone(),
                listed,
            },
        })
    }

    /// A person looked at the change and accepts `definition` as the tool's new pin.
    pub fn approve(
        &self,
        server: &str,
        tool: &str,
        definition: &Value,
    ) -> Result<String, PinStoreError> {
        let pin = Pin::new(definition_hash(definition), definition);
        self.store.save(server, tool, &pin)?;
        Ok(pin.hash)
    }

    /// Forgets a tool's pin (a removed tool a person no longer wants reported); `false` when
    /// there was no such pin, so that a mistyped name is not taken for done.
    pub fn forget(&self, server: &str, tool: &str) -> Result<bool, PinStoreError> {
        if !self.store.load(server)?.contains_key(tool) {
            return Ok(false);
        }
        self.store.remove(server, tool)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
