//! Checking a log's chain, across its rotated files, against its head.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{GENESIS, Head, head_path};
use crate::util::sha256_hex;

/// A log whose chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many records, in every file.
    pub records: u64,
    /// The files read, oldest first.
    pub files: Vec<PathBuf>,
    /// The last record's number and hash.
    pub head: Head,
}

/// What is wrong with a log. `line` counts from 1 within `file`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Tampering {
    /// There is no log at the path: no file, no rotated files and no head. Nothing was ever
    /// recorded there, as far as can be told (a log deleted with its head looks the same); a
    /// log deleted while its head remains is [`Tampering::Truncated`].
    #[error("{}: no such log", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("{}: cannot read it: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// A line is not a record.
    #[error("{}:{line}: not a record: {reason}", file.display())]
    Malformed {
        /// The file.
        file: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A record's content was changed: the next record's `prev` (or the head) no longer
    /// matches it, or the `prev` of the record after it was changed.
    #[error("{}:{line}: record {seq} was edited (the chain breaks after it)", file.display())]
    Edited {
        /// The file of the edited record.
        file: PathBuf,
        /// Its line.
        line: usize,
        /// Its number.
        seq: u64,
    },
    /// Records are missing before this line.
    #[error("{}:{line}: records {from} to {to} were deleted", file.display())]
    Deleted {
        /// The file.
        file: PathBuf,
        /// The line after the gap.
        line: usize,
        /// The first missing number.
        from: u64,
        /// The last missing number.
        to: u64,
    },
    /// A record is out of order: record `expected` should be at this line, and is elsewhere
    /// (`seq` is the number found here, when it comes too late).
    #[error("{}:{line}: records are out of order: record {expected} belongs here", file.display())]
    Reordered {
        /// The file.
        file: PathBuf,
        /// The line.
        line: usize,
        /// The number found at the line.
        seq: u64,
        /// The number that belongs there.
        expected: u64,
    },
    /// The log ends early: a line cut off, or the records after the last one gone.
    #[error("{}: the log was cut off: {detail}", file.display())]
    Truncated {
        /// The file.
        file: PathBuf,
        /// What is missing.
        detail: String,
    },
    /// The head file is missing or does not describe the log.
    #[error("{}: {detail}", file.display())]
    Head {
        /// The head file.
        file: PathBuf,
        /// What does not match.
        detail: String,
    },
}

/// Verifies the log at `path` with its rotated files and its head. Processes appending to it
/// meanwhile wait (a shared lock on `PATH.lock`).
pub fn verify(path: impl AsRef<Path>) -> Result<Verified, Tampering> {
    let path = path.as_ref();
    // Without the right to create the lock (a read-only copy), the log is read as it is.
    let _reading = super::lock(path, super::Lock::Shared).ok();
    verify_unlocked(path)
}

/// [`verify`] without the lock (the caller holds it).
pub(crate) fn verify_unlocked(path: &Path) -> Result<Verified, Tampering> {
    let unreadable = |p: &Path, e: std::io::Error| Tampering::Unreadable {
        path: p.to_owned(),
        error: e.to_string(),
    };
    let mut files = rotated(path).map_err(|e| unreadable(path, e))?;
    if path.exists() {
        files.push(path.to_owned());
    }
    // A head without a log: the log was deleted; the head check below says how much of it.
    if files.is_empty() && !head_path(path).exists() {
        return Err(Tampering::Missing {
            path: path.to_owned(),
        });
    }
    let mut chain = Chain {
        expected: 1,
        hash: GENESIS.to_owned(),
        last: None,
    };
    for file in &files {
        let text = std::fs::read(file).map_err(|e| unreadable(file, e))?;
        match chain.read_file(file, &text) {
            // A record missing here but present further on was moved, not deleted.
            Err(Tampering::Deleted {
                file,
                line,
                from,
                to,
            }) if appears(&files, from) => {
                return Err(Tampering::Reordered {
                    file,
                    line,
                    seq: to + 1,
                    expected: from,
                });
            }
            other => other?,
        }
    }
    let head = Head {
        seq: chain.expected - 1,
        hash: chain.hash.clone(),
    };
    check_head(path, &chain, &head)?;
    Ok(Verified {
        records: head.seq,
        files,
        head,
    })
}

/// Where the chain stands while reading.
struct Chain {
    expected: u64,
    hash: String,
    /// The file and line of the last record read, and the hash before it.
    last: Option<(PathBuf, usize, String)>,
}

impl Chain {
    fn read_file(&mut self, file: &Path, text: &[u8]) -> Result<(), Tampering> {
        if !text.is_empty() && !text.ends_with(b"\n") {
            return Err(Tampering::Truncated {
                file: file.to_owned(),
                detail: "its last line has no end".to_owned(),
            });
        }
        for (index, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            self.read_line(file, index + 1, line)?;
        }
        Ok(())
    }

    fn read_line(&mut self, file: &Path, line: usize, bytes: &[u8]) -> Result<(), Tampering> {
        let malformed = |reason: &str| Tampering::Malformed {
            file: file.to_owned(),
            line,
            reason: reason.to_owned(),
        };
        let record: Value = serde_json::from_slice(bytes).map_err(|e| malformed(&e.to_string()))?;
        let seq = record["seq"]
            .as_u64()
            .ok_or_else(|| malformed("no \"seq\" number"))?;
        let prev = record["prev"]
            .as_str()
            .ok_or_else(|| malformed("no \"prev\" hash"))?;
        if seq > self.expected {
            return Err(Tampering::Deleted {
                file: file.to_owned(),
                line,
                from: self.expected,
                to: seq - 1,
            });
        }
        if seq < self.expected {
            return Err(Tampering::Reordered {
                file: file.to_owned(),
                line,
                seq,
                expected: self.expected,
            });
        }
        if prev != self.hash {
            return Err(match &self.last {
                Some((file, line, _)) => Tampering::Edited {
                    file: file.clone(),
                    line: *line,
                    seq: seq - 1,
                },
                None => Tampering::Edited {
                    file: file.to_owned(),
                    line,
                    seq,
                },
            });
        }
        self.last = Some((file.to_owned(), line, self.hash.clone()));
        self.hash = sha256_hex(bytes);
        self.expected += 1;
        Ok(())
    }
}

/// The head file must name the last record. It may lag one record behind (a crash between
/// writing a record and its head), never more.
fn check_head(path: &Path, chain: &Chain, head: &Head) -> Result<(), Tampering> {
    let file = head_path(path);
    let mismatch = |detail: String| Tampering::Head {
        file: file.clone(),
        detail,
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && head.seq == 0 => return Ok(()),
        Err(e) => return Err(mismatch(format!("cannot read the head: {e}"))),
    };
    let (seq, hash) = text
        .trim()
        .split_once(' ')
        .and_then(|(s, h)| Some((s.parse::<u64>().ok()?, h)))
        .ok_or_else(|| mismatch(format!("not a head: {:?}", text.trim())))?;
    let last = chain.last.as_ref();
    if seq > head.seq {
        return Err(Tampering::Truncated {
            file: last.map_or_else(|| path.to_owned(), |(f, ..)| f.clone()),
            detail: format!("the head names record {seq}, the log ends at {}", head.seq),
        });
    }
    if seq == head.seq && hash != head.hash {
        let (file, line) = last.map_or((path.to_owned(), 0), |(f, l, _)| (f.clone(), *l));
        return Err(Tampering::Edited { file, line, seq });
    }
    let lagging = seq + 1 == head.seq && last.is_some_and(|(.., before)| *before == hash);
    if seq < head.seq && !lagging {
        return Err(mismatch(format!(
            "the head names record {seq}, but the log goes on to {}",
            head.seq
        )));
    }
    Ok(())
}

/// Whether any line of `files` is record `seq`.
fn appears(files: &[PathBuf], seq: u64) -> bool {
    files.iter().any(|file| {
        std::fs::read(file).is_ok_and(|text| {
            text.split(|&b| b == b'\n').any(|line| {
                serde_json::from_slice::<Value>(line).is_ok_and(|r| r["seq"].as_u64() == Some(seq))
            })
        })
    })
}

/// `PATH.1`, `PATH.2`, … that exist, oldest first.
pub(crate) fn rotated(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for n in 1.. {
        let file = numbered(path, n);
        if !file.exists() {
            break;
        }
        found.push(file);
    }
    Ok(found)
}

/// `PATH.N`.
pub(crate) fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}
