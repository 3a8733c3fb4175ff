//! "Allow always" answers, each bound to the definition hash it was given for.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value};

/// Why "allow always" answers could not be read or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RememberError {
    /// The file system refused.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file holds something other than JSON.
    #[error("{}: not JSON: {source}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// Where the JSON breaks.
        source: serde_json::Error,
    },
    /// Another store's own failure (a store shared by several hosts).
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),
}

/// Keeps "allow always" answers. A shared store for several host processes implements it.
pub trait Remembered: Send + Sync {
    /// Whether `qualified` of `server` was allowed always while its definition hashed to `hash`.
    fn allowed(&self, server: &str, qualified: &str, hash: &str) -> bool;
    /// Remembers that it was.
    fn remember(&self, server: &str, qualified: &str, hash: &str) -> Result<(), RememberError>;
}

impl<T: Remembered + ?Sized> Remembered for std::sync::Arc<T> {
    fn allowed(&self, server: &str, qualified: &str, hash: &str) -> bool {
        (**self).allowed(server, qualified, hash)
    }
    fn remember(&self, server: &str, qualified: &str, hash: &str) -> Result<(), RememberError> {
        (**self).remember(server, qualified, hash)
    }
}

/// Answers kept in memory, gone with the process.
#[derive(Debug, Default)]
pub struct MemoryRemembered {
    allowed: Mutex<HashSet<(String, String, String)>>,
}

impl MemoryRemembered {
    /// Nothing remembered yet.
    pub fn new() -> MemoryRemembered {
        MemoryRemembered::default()
    }
}

impl Remembered for MemoryRemembered {
    fn allowed(&self, server: &str, qualified: &str, hash: &str) -> bool {
        let key = (server.to_owned(), qualified.to_owned(), hash.to_owned());
        self.allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
    }

    fn remember(&self, server: &str, qualified: &str, hash: &str) -> Result<(), RememberError> {
        let key = (server.to_owned(), qualified.to_owned(), hash.to_owned());
        self.allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
        Ok(())
    }
}

/// Answers kept in `DIR/approvals.json` (`{server: {qualified name: hash}}`), replaced whole
/// on every change, readable by its owner only (a file others could read is made private when
/// it is read). Only the latest hash of a tool is kept: approving a new definition forgets
/// the old one.
#[derive(Debug)]
pub struct FileRemembered {
    path: PathBuf,
    cache: Mutex<Option<BTreeMap<String, BTreeMap<String, String>>>>,
}

impl FileRemembered {
    /// Answers under the state directory `state_dir`.
    pub fn new(state_dir: impl AsRef<Path>) -> FileRemembered {
        FileRemembered {
            path: state_dir.as_ref().join("approvals.json"),
            cache: Mutex::new(None),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>, RememberError> {
        let io = |source| RememberError::Io {
            path: self.path.clone(),
            source,
        };
        // Answers kept by an older version may be readable by others.
        crate::private::make_private(&self.path).map_err(io)?;
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(io(e)),
        };
        let value: Value =
            serde_json::from_str(&text).map_err(|source| RememberError::NotJson {
                path: self.path.clone(),
                source,
            })?;
        let mut all = BTreeMap::new();
        for (server, tools) in value.as_object().into_iter().flatten() {
            let tools = tools
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(t, h)| Some((t.clone(), h.as_str()?.to_owned())))
                .collect();
            all.insert(server.clone(), tools);
        }
        Ok(all)
    }
}

impl Remembered for FileRemembered {
    fn allowed(&self, server: &str, qualified: &str, hash: &str) -> bool {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.is_none() {
            match self.read() {
                Ok(all) => *cache = Some(all),
                // An unreadable file allows nothing: the person is asked.
                Err(e) => {
                    tracing::warn!(
                        "cannot read the remembered \"always\" answers: {e}; calls are asked about"
                    );
                    return false;
                }
            }
        }
        cache
            .as_ref()
            .and_then(|all| all.get(server)?.get(qualified))
            .is_some_and(|h| h == hash)
    }

    fn remember(&self, server: &str, qualified: &str, hash: &str) -> Result<(), RememberError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        all.entry(server.to_owned())
            .or_default()
            .insert(qualified.to_owned(), hash.to_owned());
        // Pretty, keys in order (`{:#}` is `to_string_pretty`, which cannot fail on strings).
        let text = format!("{:#}\n", as_json(&all));
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::private::create_dir_all(dir).map_err(|source| RememberError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        crate::private::replace(&self.path, text.as_bytes()).map_err(|source| {
            RememberError::Io {
                path: self.path.clone(),
                source,
            }
        })?;
        *cache = Some(all);
        Ok(())
    }
}

/// `{server: {qualified name: hash}}` as JSON.
fn as_json(all: &BTreeMap<String, BTreeMap<String, String>>) -> Value {
    let servers = all.iter().map(|(server, tools)| {
        let tools: Map<String, Value> = tools
            .iter()
            .map(|(tool, hash)| (tool.clone(), Value::String(hash.clone())))
            .collect();
        (server.clone(), Value::Object(tools))
    });
    Value::Object(servers.collect())
}
