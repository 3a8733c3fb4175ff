//! The host's audit log: JSON Lines, one record per event, each carrying the SHA-256 of the
//! record before it, so [`verify`] finds a record edited, deleted, reordered or cut off.
//!
//! A record is one JSON object on one line: `seq` (from 1, never reset), `time` (RFC 3339,
//! UTC), `event`, the event's own fields, and `prev`: the SHA-256 (hex) of the previous
//! record's line as written, or 64 zeros for the very first. Beside the log, `PATH.head`
//! holds the `seq` and hash of the last record, so a log cut short at the end is caught too.
//! When the log passes its size limit it is renamed `PATH.N` (N = 1, 2, … oldest first) and a
//! new one starts; the chain runs on across the files.
//!
//! Every file of the log, and the directories made for it, are readable by their owner only:
//! records carry calls' arguments. Files of an existing log that others could read are made
//! private when it is opened.
//!
//! What this proves: nobody changed the log without also rewriting every record after the
//! change and the head. A host that must resist that too publishes [`AuditLog::head`]
//! elsewhere (a ticket, another machine) and checks it with [`verify`].

mod redact;
mod verify;

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::private;
use crate::util::sha256_hex;
use serde_json::{Map, Value};

pub use redact::{DEFAULT_REDACTED_KEYS, Redaction, RedactionError};
pub use verify::{Tampering, Verified, verify};

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The default size at which a log is rotated: 64 MiB.
pub const DEFAULT_ROTATE_BYTES: u64 = 64 * 1024 * 1024;

/// Where the chain stands: the last record's number and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The last record's `seq` (0 before the first).
    pub seq: u64,
    /// The SHA-256 (hex) of the last record's line ([`GENESIS`] before the first).
    pub hash: String,
}

/// An append-only, hash-chained JSON Lines log. Appends are serialized, written and synced
/// before [`AuditLog::append`] returns.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    rotate_bytes: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    bytes: u64,
    head: Head,
}

/// Why the log cannot be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file system refused.
    #[error("audit log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The existing log does not verify; appending would hide that.
    #[error("audit log {0}")]
    Tampered(Tampering),
    /// An event's fields use a name the record itself uses.
    #[error("an audit event may not set the field {0:?}")]
    ReservedField(String),
}

impl AuditLog {
    /// Opens (or creates) the log at `path`, after verifying what is there: a log that does
    /// not verify is not appended to.
    pub fn open(path: impl Into<PathBuf>) -> Result<AuditLog, AuditError> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            private::create_dir_all(dir).map_err(|source| AuditError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        // No other process appends while the log is read.
        let _reading = lock(&path, Lock::Exclusive).map_err(|source| AuditError::Io {
            path: lock_path(&path),
            source,
        })?;
        let head = match verify::verify_unlocked(&path) {
            Ok(verified) => verified.head,
            Err(Tampering::Missing { .. }) => Head {
                seq: 0,
                hash: GENESIS.to_owned(),
            },
            Err(tampering) => return Err(AuditError::Tampered(tampering)),
        };
        let io = |source| AuditError::Io {
            path: path.clone(),
            source,
        };
        make_log_private(&path).map_err(io)?;
        let file = private::open_append(&path).map_err(io)?;
        let bytes = file.metadata().map_err(io)?.len();
        Ok(AuditLog {
            path,
            rotate_bytes: DEFAULT_ROTATE_BYTES,
            state: Mutex::new(State { file, bytes, head }),
        })
    }

    /// Rotates the log once it reaches `bytes` (at least 4 KiB).
    pub fn rotate_at(mut self, bytes: u64) -> AuditLog {
        self.rotate_bytes = bytes.max(4096);
        self
    }

    /// Where the chain stands now.
    pub fn head(&self) -> Head {
        self.lock().head.clone()
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a record of `event` with `fields` (an object; `seq`, `time`, `event` and
    /// `prev` are the record's own) and returns its head.
    pub fn append(&self, event: &str, fields: Map<String, Value>) -> Result<Head, AuditError> {
        for reserved in ["seq", "time", "event", "prev"] {
            if fields.contains_key(reserved) {
                return Err(AuditError::ReservedField(reserved.to_owned()));
            }
        }
        let mut state = self.lock();
        // Other processes (two `toolwire call`s at once) append to the same log: the chain
        // runs on from whatever record is last, under a lock every appender takes.
        let _appending = self.lock_file()?;
        self.catch_up(&mut state)?;
        if state.bytes >= self.rotate_bytes {
            self.rotate(&mut state)?;
        }
        let mut record = fields;
        let seq = state.head.seq + 1;
        record.insert("seq".into(), seq.into());
        record.insert("time".into(), crate::util::now().into());
        record.insert("event".into(), event.into());
        record.insert("prev".into(), state.head.hash.clone().into());
        // A `Map` without `preserve_order` keeps its keys sorted: the line is canonical.
        let mut line = Value::Object(record).to_string();
        let hash = sha256_hex(line.as_bytes());
        line.push('\n');
        let io = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        state.file.write_all(line.as_bytes()).map_err(io)?;
        state.file.sync_data().map_err(io)?;
        state.bytes += line.len() as u64;
        state.head = Head { seq, hash };
        write_head(&self.path, &state.head).map_err(io)?;
        Ok(state.head.clone())
    }

    /// `PATH.lock`, locked for this process until the guard drops.
    fn lock_file(&self) -> Result<File, AuditError> {
        lock(&self.path, Lock::Exclusive).map_err(|source| AuditError::Io {
            path: lock_path(&self.path),
            source,
        })
    }

    /// When another process appended (or rotated) since this one last did, reopens the log
    /// and continues the chain from its last record.
    fn catch_up(&self, state: &mut State) -> Result<(), AuditError> {
        let io = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        let on_disk = match std::fs::metadata(&self.path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        let ours = state.file.metadata().map_err(io)?;
        if on_disk
            .as_ref()
            .is_some_and(|m| same_file(m, &ours) && m.len() == state.bytes)
        {
            return Ok(());
        }
        state.file = private::open_append(&self.path).map_err(io)?;
        state.bytes = state.file.metadata().map_err(io)?.len();
        state.head = match last_line(&self.path).map_err(io)? {
            Some(line) => Head {
                seq: serde_json::from_slice::<Value>(&line)
                    .ok()
                    .and_then(|r| r["seq"].as_u64())
                    .ok_or_else(|| {
                        AuditError::Tampered(Tampering::Malformed {
                            file: self.path.clone(),
                            line: 0,
                            reason: "the last record has no seq".into(),
                        })
                    })?,
                hash: sha256_hex(&line),
            },
            // Just rotated by another process: its head file says where the chain stands.
            None => read_head(&self.path)
                .map_err(io)?
                .unwrap_or(state.head.clone()),
        };
        Ok(())
    }

    fn rotate(&self, state: &mut State) -> Result<(), AuditError> {
        let io = |source| AuditError::Io {
            path: self.path.clone(),
            source,
        };
        let next = verify::rotated(&self.path).map_err(io)?.len() + 1;
        std::fs::rename(&self.path, verify::numbered(&self.path, next)).map_err(io)?;
        state.file = private::open_append(&self.path).map_err(io)?;
        state.bytes = 0;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `PATH.lock`: every process appending to the log holds it exclusively while it appends,
/// [`verify`] shared while it reads.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// How `PATH.lock` is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// By one process, which appends (or rotates).
    Exclusive,
    /// By any number of readers, while nobody appends.
    Shared,
}

/// Locks `PATH.lock` (created if missing), exclusively or shared, until the file is closed.
pub(crate) fn lock(path: &Path, how: Lock) -> std::io::Result<File> {
    let file = private::open(
        &lock_path(path),
        OpenOptions::new().create(true).truncate(false).write(true),
    )?;
    let operation = match how {
        Lock::Exclusive => rustix::fs::FlockOperation::LockExclusive,
        Lock::Shared => rustix::fs::FlockOperation::LockShared,
    };
    rustix::fs::flock(&file, operation)?;
    Ok(file)
}

/// Whether two metadata describe the same file (a rotation renames it away).
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        a.len() == b.len()
    }
}

/// The last line of the file at `path`, without its newline (`None` for an empty file), read
/// backwards so a long log is not read whole.
fn last_line(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut tail: Vec<u8> = Vec::new();
    // Skip the final newline, then read chunks until the one before it.
    loop {
        let start = end.saturating_sub(64 * 1024);
        let mut chunk = vec![0; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        let body = tail.strip_suffix(b"\n").unwrap_or(&tail);
        if let Some(i) = body.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(body[i + 1..].to_vec()));
        }
        if start == 0 {
            return Ok((!body.is_empty()).then(|| body.to_vec()));
        }
        end = start;
    }
}

/// The head file's `seq` and hash, if there is one.
fn read_head(path: &Path) -> std::io::Result<Option<Head>> {
    match std::fs::read_to_string(head_path(path)) {
        Ok(text) => Ok(text.split_once(' ').and_then(|(seq, hash)| {
            Some(Head {
                seq: seq.parse().ok()?,
                hash: hash.trim().to_owned(),
            })
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// `PATH.head`: where the chain stood after the last append.
pub(crate) fn head_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".head");
    PathBuf::from(name)
}

/// Replaces the head file (written whole, then renamed over the old one).
fn write_head(path: &Path, head: &Head) -> std::io::Result<()> {
    private::replace(
        &head_path(path),
        format!("{} {}\n", head.seq, head.hash).as_bytes(),
    )
}

/// Makes every file of the log at `path` that exists private: its rotations, itself and its
/// head (its lock is made private when it is taken).
fn make_log_private(path: &Path) -> std::io::Result<()> {
    for file in verify::rotated(path)? {
        private::make_private(&file)?;
    }
    private::make_private(path)?;
    private::make_private(&head_path(path))
}

#[cfg(test)]
mod tests;
