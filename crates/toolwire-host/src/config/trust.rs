//! The person's decisions about project files, each bound to the file's path and the hash of
//! its contents: a file that changes is asked about again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Whether a project file may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Its servers may be started and its variables expanded.
    Trusted,
    /// Not used.
    Refused,
}

/// One decision: the file (where it really is), the hash of the contents it was made for,
/// what was decided and when (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustRecord {
    /// The file, as a canonical path.
    pub file: PathBuf,
    /// The SHA-256 of the contents decided about, lowercase hex.
    pub sha256: String,
    /// What was decided.
    pub decision: Decision,
    /// When.
    pub at: String,
}

/// Decisions could not be read or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// The store's file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The store's file is not what Toolwire writes.
    #[error("{}: not a list of trusted files ({source}); move it away to start afresh", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// Keeps the decisions, one per file. A host shared by several processes (or people) implements
/// it over whatever they share.
pub trait TrustStore: Send + Sync {
    /// The decision kept for `file` (a canonical path), whatever contents it was made for.
    fn get(&self, file: &Path) -> Result<Option<TrustRecord>, TrustError>;
    /// Keeps `record`, replacing any earlier decision for its file.
    fn set(&self, record: TrustRecord) -> Result<(), TrustError>;
    /// Forgets the decision for `file`; whether there was one.
    fn forget(&self, file: &Path) -> Result<bool, TrustError>;
    /// Every decision, by file.
    fn list(&self) -> Result<Vec<TrustRecord>, TrustError>;
}

/// Decisions kept in memory, gone with the process.
#[derive(Debug, Default)]
pub struct MemoryTrust {
    records: Mutex<BTreeMap<PathBuf, TrustRecord>>,
}

impl MemoryTrust {
    /// No decisions yet.
    pub fn new() -> MemoryTrust {
        MemoryTrust::default()
    }

    fn records(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, TrustRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TrustStore for MemoryTrust {
    fn get(&self, file: &Path) -> Result<Option<TrustRecord>, TrustError> {
        Ok(self.records().get(file).cloned())
    }

    fn set(&self, record: TrustRecord) -> Result<(), TrustError> {
        self.records().insert(record.file.clone(), record);
        Ok(())
    }

    fn forget(&self, file: &Path) -> Result<bool, TrustError> {
        Ok(self.records().remove(file).is_some())
    }

    fn list(&self) -> Result<Vec<TrustRecord>, TrustError> {
        Ok(self.records().values().cloned().collect())
    }
}

/// Decisions kept in `DIR/trust.json`, readable by the person only, replaced whole on every
/// change under a lock every process takes, so two commands deciding at once both keep their
/// decision.
#[derive(Debug)]
pub struct FileTrust {
    path: PathBuf,
}

/// The file's shape.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    files: BTreeMap<PathBuf, StoredRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredRecord {
    sha256: String,
    decision: Decision,
    at: String,
}

impl FileTrust {
    /// Decisions under the state directory `state_dir`.
    pub fn new(state_dir: impl AsRef<Path>) -> FileTrust {
        FileTrust {
            path: state_dir.as_ref().join("trust.json"),
        }
    }

    /// The file the decisions are kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> TrustError {
        TrustError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<Stored, TrustError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| TrustError::Corrupt {
                path: self.path.clone(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::default()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Reads, changes and writes the file under the lock.
    fn change<T>(&self, change: impl FnOnce(&mut Stored) -> T) -> Result<T, TrustError> {
        if let Some(dir) = self.path.parent() {
            crate::private::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let _locked = crate::audit::lock(&self.path, crate::audit::Lock::Exclusive)
            .map_err(|e| self.io(e))?;
        let mut stored = self.read()?;
        let out = change(&mut stored);
        let text = serde_json::to_vec_pretty(&stored).map_err(|source| TrustError::Corrupt {
            path: self.path.clone(),
            source,
        })?;
        crate::private::replace(&self.path, &text).map_err(|e| self.io(e))?;
        Ok(out)
    }
}

impl TrustStore for FileTrust {
    fn get(&self, file: &Path) -> Result<Option<TrustRecord>, TrustError> {
        Ok(self.read()?.files.remove(file).map(|r| record(file, r)))
    }

    fn set(&self, record: TrustRecord) -> Result<(), TrustError> {
        self.change(|stored| {
            stored.files.insert(
                record.file,
                StoredRecord {
                    sha256: record.sha256,
                    decision: record.decision,
                    at: record.at,
                },
            );
        })
    }

    fn forget(&self, file: &Path) -> Result<bool, TrustError> {
        self.change(|stored| stored.files.remove(file).is_some())
    }

    fn list(&self) -> Result<Vec<TrustRecord>, TrustError> {
        Ok(self
            .read()?
            .files
            .into_iter()
            .map(|(file, r)| record(&file, r))
            .collect())
    }
}

fn record(file: &Path, stored: StoredRecord) -> TrustRecord {
    TrustRecord {
        file: file.to_owned(),
        sha256: stored.sha256,
        decision: stored.decision,
        at: stored.at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(file: &str, sha256: &str, decision: Decision) -> TrustRecord {
        TrustRecord {
            file: PathBuf::from(file),
            sha256: sha256.into(),
            decision,
            at: "2026-12-04T00:00:00.000Z".into(),
        }
    }

    /// What every store must do.
    fn contract(store: &dyn TrustStore) {
        assert_eq!(store.get(Path::new("/p/.mcp.json")).unwrap(), None);
        store
            .set(record("/p/.mcp.json", "aa", Decision::Trusted))
            .unwrap();
        store
            .set(record("/q/.mcp.json", "bb", Decision::Refused))
            .unwrap();
        assert_eq!(
            store.get(Path::new("/p/.mcp.json")).unwrap(),
            Some(record("/p/.mcp.json", "aa", Decision::Trusted))
        );
        // A new decision replaces the old one: one per file.
        store
            .set(record("/p/.mcp.json", "cc", Decision::Refused))
            .unwrap();
        assert_eq!(
            store.get(Path::new("/p/.mcp.json")).unwrap(),
            Some(record("/p/.mcp.json", "cc", Decision::Refused))
        );
        assert_eq!(store.list().unwrap().len(), 2);
        assert!(store.forget(Path::new("/p/.mcp.json")).unwrap());
        assert!(!store.forget(Path::new("/p/.mcp.json")).unwrap());
        assert_eq!(
            store.list().unwrap(),
            [record("/q/.mcp.json", "bb", Decision::Refused)]
        );
    }

    /// A directory not made yet, in a scratch directory removed on drop.
    fn temp_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join(name);
        (scratch, dir)
    }

    #[test]
    fn memory_keeps_the_contract() {
        contract(&MemoryTrust::new());
    }

    #[test]
    fn a_file_keeps_the_contract_across_instances_and_privately() {
        let (_scratch, dir) = temp_dir("file");
        contract(&FileTrust::new(dir.join("state")));
        // Another instance (another process) sees the same decisions.
        let again = FileTrust::new(dir.join("state"));
        assert_eq!(again.list().unwrap().len(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.join("state")), 0o700);
            assert_eq!(mode(again.path()), 0o600);
        }
    }

    #[test]
    fn decisions_made_at_once_from_many_instances_are_all_kept() {
        let (_scratch, dir) = temp_dir("race");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let store = FileTrust::new(&dir);
                    for j in 0..10 {
                        let file = format!("/p{i}/{j}/.mcp.json");
                        store.set(record(&file, "aa", Decision::Trusted)).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(FileTrust::new(&dir).list().unwrap().len(), 80);
    }

    #[test]
    fn a_damaged_file_is_an_error_that_says_what_to_do() {
        let (_scratch, dir) = temp_dir("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("trust.json"), "{not json").unwrap();
        let error = FileTrust::new(&dir)
            .get(Path::new("/p/.mcp.json"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("move it away"), "{error}");
    }
}
