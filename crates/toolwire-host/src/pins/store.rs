//! Where pins are kept: in memory, in a state directory (one JSON file per server), or in
//! Redis shared by several processes (`RedisPins`, feature `redis`). Another shared store
//! implements [`PinStore`] and passes the contract suite (`contract`, feature
//! `contract-tests`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

/// A pinned definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Pin {
    /// Its canonical hash.
    pub hash: String,
    /// The definition, to show what changed.
    pub definition: Value,
    /// When it was pinned (RFC 3339).
    pub pinned_at: String,
}

impl Pin {
    pub(crate) fn new(hash: String, definition: &Value) -> Pin {
        Pin {
            hash,
            definition: definition.clone(),
            pinned_at: crate::util::now(),
        }
    }
}

/// Why pins could not be read or kept.
#[derive(Debug, thiserror::Error)]
#[error("pins of server {server:?} in {location}: {message}")]
pub struct PinStoreError {
    /// The server.
    pub server: String,
    /// Where they are kept: the file, or the store (never with its password).
    pub location: String,
    /// What went wrong.
    pub message: String,
}

/// Keeps pins per server.
pub trait PinStore: Send + Sync {
    /// Every pin of `server`, by tool name.
    fn load(&self, server: &str) -> Result<BTreeMap<String, Pin>, PinStoreError>;
    /// Pins `tool` of `server`, replacing its pin.
    fn save(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), PinStoreError>;
    /// Removes the pin of `tool` of `server`, if any.
    fn remove(&self, server: &str, tool: &str) -> Result<(), PinStoreError>;
    /// Pins the tools of `pins` that have no pin yet, and returns the pin each of them has
    /// now: one another process made meanwhile is kept (the first sight wins), so that two
    /// processes seeing a tool at once keep one pin and report the same change. A shared store
    /// does this in one step; the default reads, then saves what is missing.
    fn save_new(
        &self,
        server: &str,
        pins: &[(String, Pin)],
    ) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        let stored = self.load(server)?;
        let mut now = BTreeMap::new();
        for (tool, pin) in pins {
            let pin = match stored.get(tool) {
                Some(first) => first.clone(),
                None => {
                    self.save(server, tool, pin)?;
                    pin.clone()
                }
            };
            now.insert(tool.clone(), pin);
        }
        Ok(now)
    }
}

impl<T: PinStore + ?Sized> PinStore for std::sync::Arc<T> {
    fn load(&self, server: &str) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        (**self).load(server)
    }
    fn save(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), PinStoreError> {
        (**self).save(server, tool, pin)
    }
    fn remove(&self, server: &str, tool: &str) -> Result<(), PinStoreError> {
        (**self).remove(server, tool)
    }
    fn save_new(
        &self,
        server: &str,
        pins: &[(String, Pin)],
    ) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        (**self).save_new(server, pins)
    }
}

/// Pins in memory, gone with the process.
#[derive(Debug, Default)]
pub struct MemoryPins {
    pins: Mutex<HashMap<String, BTreeMap<String, Pin>>>,
}

impl MemoryPins {
    /// An empty store.
    pub fn new() -> MemoryPins {
        MemoryPins::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<String, Pin>>> {
        self.pins.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl PinStore for MemoryPins {
    fn load(&self, server: &str) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        Ok(self.lock().get(server).cloned().unwrap_or_default())
    }

    fn save(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), PinStoreError> {
        self.lock()
            .entry(server.to_owned())
            .or_default()
            .insert(tool.to_owned(), pin.clone());
        Ok(())
    }

    fn remove(&self, server: &str, tool: &str) -> Result<(), PinStoreError> {
        if let Some(pins) = self.lock().get_mut(server) {
            pins.remove(tool);
        }
        Ok(())
    }
}

/// Pins in `DIR/pins/NAME-HASH.json`, one file per server, replaced whole on every change
/// (written beside, then renamed), so a crash never leaves half a file. The directories and
/// files are readable by their owner only; ones others could read are made private when used.
#[derive(Debug)]
pub struct FilePins {
    dir: PathBuf,
    /// Serializes read-modify-write within the process.
    writing: Mutex<()>,
}

impl FilePins {
    /// Pins under the state directory `state_dir` (created when first written).
    pub fn new(state_dir: impl AsRef<Path>) -> FilePins {
        FilePins {
            dir: state_dir.as_ref().join("pins"),
            writing: Mutex::new(()),
        }
    }

    /// The file of `server`: its name made safe, and a hash so two names never share a file.
    pub fn file(&self, server: &str) -> PathBuf {
        let safe: String = server
            .chars()
            .take(40)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let hash = crate::util::sha256_hex(server.as_bytes());
        self.dir.join(format!("{safe}-{}.json", &hash[..12]))
    }

    fn error(&self, server: &str, message: impl std::fmt::Display) -> PinStoreError {
        PinStoreError {
            server: server.to_owned(),
            location: self.file(server).display().to_string(),
            message: message.to_string(),
        }
    }

    fn write(&self, server: &str, pins: &BTreeMap<String, Pin>) -> Result<(), PinStoreError> {
        let tools: serde_json::Map<String, Value> = pins
            .iter()
            .map(|(tool, pin)| {
                let entry = json!({
                    "hash": pin.hash, "definition": pin.definition, "pinnedAt": pin.pinned_at,
                });
                (tool.clone(), entry)
            })
            .collect();
        let text = serde_json::to_string_pretty(&json!({"server": server, "tools": tools}))
            .map_err(|e| self.error(server, e))?;
        // `pins/` is the store's own: made private whatever made it.
        crate::private::own_dir(&self.dir).map_err(|e| self.error(server, e))?;
        crate::private::replace(&self.file(server), (text + "\n").as_bytes())
            .map_err(|e| self.error(server, e))
    }
}

impl PinStore for FilePins {
    fn load(&self, server: &str) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        // Pins kept by an older version may be readable by others.
        crate::private::make_private(&self.dir)
            .and_then(|()| crate::private::make_private(&self.file(server)))
            .map_err(|e| self.error(server, e))?;
        let text = match std::fs::read_to_string(self.file(server)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.error(server, e)),
        };
        let root: Value = serde_json::from_str(&text)
            .map_err(|e| self.error(server, format!("not JSON: {e}")))?;
        if root["server"] != server {
            return Err(self.error(server, "the file belongs to another server"));
        }
        let Some(tools) = root["tools"].as_object() else {
            return Err(self.error(server, "no \"tools\" object"));
        };
        tools
            .iter()
            .map(|(tool, entry)| {
                let hash = entry["hash"].as_str();
                let at = entry["pinnedAt"].as_str();
                match (hash, at, entry.get("definition")) {
                    (Some(hash), Some(at), Some(definition)) => Ok((
                        tool.clone(),
                        Pin {
                            hash: hash.to_owned(),
                            definition: definition.clone(),
                            pinned_at: at.to_owned(),
                        },
                    )),
                    _ => Err(self.error(server, format!("the pin of {tool:?} is incomplete"))),
                }
            })
            .collect()
    }

    fn save(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), PinStoreError> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut pins = self.load(server)?;
        pins.insert(tool.to_owned(), pin.clone());
        self.write(server, &pins)
    }

    fn save_new(
        &self,
        server: &str,
        new: &[(String, Pin)],
    ) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut pins = self.load(server)?;
        let mut now = BTreeMap::new();
        let mut added = false;
        for (tool, pin) in new {
            let kept = pins.entry(tool.clone()).or_insert_with(|| {
                added = true;
                pin.clone()
            });
            now.insert(tool.clone(), kept.clone());
        }
        if added {
            self.write(server, &pins)?;
        }
        Ok(now)
    }

    fn remove(&self, server: &str, tool: &str) -> Result<(), PinStoreError> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut pins = self.load(server)?;
        if pins.remove(tool).is_some() {
            self.write(server, &pins)?;
        }
        Ok(())
    }
}
