//! Audit events: one structured record per `tools/call`, whatever became of it — completed,
//! asked for input, became a task, reported an error, timed out, or was refused (a JSON-RPC
//! error, a 403). Each says when, who (principal), which tool (and a SHA-256 of its definition
//! as listed, so a changed tool is visible), what was asked (a SHA-256 of the canonical
//! arguments and a short preview with secrets redacted), what happened and how long it took,
//! with the W3C trace context of the request when it had one.
//!
//! Events always go to `tracing` (target `toolwire::audit`, level INFO); an [`AuditSink`] such
//! as [`JsonlAuditSink`] (a JSON Lines file) receives them as well. When nobody listens — the
//! target is filtered out and no sink is set — nothing is computed.

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How much of the canonical arguments the preview keeps.
const PREVIEW_BYTES: usize = 256;

/// One audit record.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[non_exhaustive]
pub struct AuditEvent {
    /// When the call arrived (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// The request id, as JSON text.
    pub request_id: String,
    /// Who called (with OAuth: issuer and subject), if known.
    pub principal: Option<String>,
    /// The tool called, as named in the request.
    pub tool: String,
    /// SHA-256 (hex) of the tool's definition as listed; `None` for an unknown tool.
    pub definition_sha256: Option<String>,
    /// SHA-256 (hex) of the canonical arguments (compact JSON, keys sorted).
    pub arguments_sha256: String,
    /// The start of the canonical arguments, control characters and secrets removed.
    pub arguments_preview: String,
    /// What became of the call.
    pub outcome: AuditOutcome,
    /// The JSON-RPC error code, for `error` and `refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// How long the server took, in microseconds.
    pub latency_us: u64,
    /// The W3C trace id of the request's `traceparent`, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The caller's span id from `traceparent`: the parent of this call's span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
}

/// What became of a call.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// A result without `isError`.
    Complete,
    /// An `input_required` result (MRTR).
    InputRequired,
    /// It became a task.
    Task,
    /// A result with `isError: true`.
    IsError,
    /// It ran out of time (an `isError` result too).
    TimedOut,
    /// The caller had used up its quota for the tool (an `isError` result that says when to
    /// retry).
    Limited,
    /// A JSON-RPC error.
    Error,
    /// Refused before it ran (insufficient scope).
    Refused,
}

impl AuditOutcome {
    /// The outcome as the audit record names it (`complete`, `is_error`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Complete => "complete",
            AuditOutcome::InputRequired => "input_required",
            AuditOutcome::Task => "task",
            AuditOutcome::IsError => "is_error",
            AuditOutcome::TimedOut => "timed_out",
            AuditOutcome::Limited => "limited",
            AuditOutcome::Error => "error",
            AuditOutcome::Refused => "refused",
        }
    }
}

/// The outcome as a word, the same as in the audit record.
impl std::fmt::Display for AuditOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where audit events go besides `tracing`: a file, a queue, a shared store.
pub trait AuditSink: Send + Sync + 'static {
    /// Takes one event; must not block for long (it runs on the request path).
    fn record(&self, event: &AuditEvent);

    /// Takes the record of a reload of the configuration (applied or refused); by default
    /// nothing is kept but the log line [`crate::Server::audit_reload`] writes.
    fn record_reload(&self, event: &crate::safety::reload::ReloadEvent) {
        let _ = event;
    }

    /// Makes every event recorded so far durable (before the process exits); by default
    /// nothing to do.
    fn flush(&self) {}
}

/// Appends events to a JSON Lines file. The request path serializes its event and appends the
/// line to a buffer in memory; a thread of the sink's own writes the buffer out at least every
/// 50 ms (sooner once 64 KiB wait) and syncs the file to disk at least every second (at once on
/// [`AuditSink::flush`]): a crash of the process loses at most the last 50 ms of events, a crash
/// of the machine at most the last second. If the writer falls 8 MiB behind, new events are dropped and counted
/// (logged at ERROR, and in [`JsonlAuditSink::dropped`]), never waited for.
pub struct JsonlAuditSink {
    shared: Arc<Shared>,
}

/// What the request path and the writer thread share.
struct Shared {
    /// Lines not yet written.
    pending: std::sync::Mutex<Vec<u8>>,
    /// Wakes the writer early (a full buffer, a flush, the end).
    wake: std::sync::Condvar,
    /// The file; held while a batch is written, so batches keep their order.
    file: std::sync::Mutex<Writer>,
    dropped: AtomicU64,
    closed: std::sync::atomic::AtomicBool,
    path: std::path::PathBuf,
}

struct Writer {
    file: std::fs::File,
    /// The buffer swapped with the pending one, so neither is ever allocated again.
    spare: Vec<u8>,
    synced: Instant,
    unsynced: bool,
}

/// How long lines wait in memory at most.
const WRITE_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// How much waits before the writer is woken early.
const WRITE_AT: usize = 64 * 1024;
/// How much may wait before events are dropped.
const MAX_PENDING: usize = 8 * 1024 * 1024;
/// How often written lines are synced to disk while events keep coming.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// When a write of the audit log is synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syncing {
    /// Now: a flush, or the sink is closing.
    Now,
    /// If the last sync is [`SYNC_EVERY`] old.
    WhenDue,
}

impl std::fmt::Debug for JsonlAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlAuditSink")
            .field("path", &self.shared.path)
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl JsonlAuditSink {
    /// Opens (creating, appending) `path`. Events carry the calls' arguments: a new file is
    /// readable by its owner only (0600 on Unix) from its creation; an existing one keeps the
    /// mode it has (its operator may have opened it to a log shipper).
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_owned();
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path)?;
        let shared = Arc::new(Shared {
            pending: std::sync::Mutex::new(Vec::with_capacity(WRITE_AT)),
            wake: std::sync::Condvar::new(),
            file: std::sync::Mutex::new(Writer {
                file,
                spare: Vec::with_capacity(WRITE_AT),
                synced: Instant::now(),
                unsynced: false,
            }),
            dropped: AtomicU64::new(0),
            closed: std::sync::atomic::AtomicBool::new(false),
            path,
        });
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("toolwire-audit".into())
            .spawn(move || writer.run())?;
        Ok(JsonlAuditSink { shared })
    }

    /// How many events were dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for JsonlAuditSink {
    /// The writer writes what is left, syncs and ends.
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer thread: a batch every 50 ms or when woken, until the sink is dropped.
    fn run(&self) {
        loop {
            let closed = {
                let pending = self.pending();
                let (pending, _) = self
                    .wake
                    .wait_timeout_while(pending, WRITE_EVERY, |p| {
                        p.len() < WRITE_AT && !self.closed.load(Ordering::Acquire)
                    })
                    .unwrap_or_else(|e| e.into_inner());
                drop(pending);
                self.closed.load(Ordering::Acquire)
            };
            self.write_out(if closed {
                Syncing::Now
            } else {
                Syncing::WhenDue
            });
            if closed {
                return;
            }
        }
    }

    /// Writes what is pending; syncs when asked, or when the last sync is a second old.
    fn write_out(&self, sync: Syncing) {
        let mut writer = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let writer = &mut *writer;
        // Taken while the file is held: batches reach the file in the order they were taken.
        std::mem::swap(&mut *self.pending(), &mut writer.spare);
        if !writer.spare.is_empty() {
            if let Err(e) = writer.file.write_all(&writer.spare) {
                tracing::error!(path = %self.path.display(), error = %e, "cannot write the audit log");
            }
            writer.spare.clear();
            writer.unsynced = true;
        }
        if writer.unsynced && (sync == Syncing::Now || writer.synced.elapsed() >= SYNC_EVERY) {
            if let Err(e) = writer.file.sync_data() {
                tracing::error!(path = %self.path.display(), error = %e, "cannot sync the audit log");
            }
            writer.synced = Instant::now();
            writer.unsynced = false;
        }
    }
}

impl JsonlAuditSink {
    /// Adds a serialized line to what waits for the writer, or drops it if too much waits.
    fn append(&self, line: &[u8]) {
        let wake = {
            let mut pending = self.shared.pending();
            if pending.len() + line.len() > MAX_PENDING {
                drop(pending);
                let dropped = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::error!(dropped, "the audit log writer is behind: event dropped");
                return;
            }
            pending.extend_from_slice(line);
            pending.len() >= WRITE_AT
        };
        if wake {
            self.shared.wake.notify_one();
        }
    }
}

impl AuditSink for JsonlAuditSink {
    fn record(&self, event: &AuditEvent) {
        thread_local! {
            /// Where this thread serializes its events, so no line allocates.
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        LINE.with_borrow_mut(|line| {
            line.clear();
            if let Err(e) = serde_json::to_writer(&mut *line, event) {
                tracing::error!(error = %e, "cannot serialize an audit event");
                return;
            }
            line.push(b'\n');
            self.append(line);
            if line.capacity() > 64 * 1024 {
                *line = Vec::new();
            }
        });
    }

    fn record_reload(&self, event: &crate::safety::reload::ReloadEvent) {
        match serde_json::to_vec(event) {
            Ok(mut line) => {
                line.push(b'\n');
                self.append(&line);
            }
            Err(e) => tracing::error!(error = %e, "cannot serialize a reload's audit record"),
        }
    }

    /// Writes and syncs every event recorded before it returns.
    fn flush(&self) {
        self.shared.write_out(Syncing::Now);
    }
}

/// What the audit record of a call knows before the call runs.
pub(crate) struct CallSeen<'a> {
    /// When the call arrived (ISO-8601 UTC).
    pub(crate) time: String,
    pub(crate) request_id: String,
    pub(crate) principal: Option<&'a str>,
    pub(crate) tool: &'a str,
    /// SHA-256 (hex) of the tool's definition as listed; `None` for an unknown tool.
    pub(crate) definition_sha256: Option<String>,
    pub(crate) arguments: &'a Value,
    /// The W3C `traceparent` the request carried in `_meta`, if any.
    pub(crate) traceparent: Option<&'a str>,
}

/// The audit of one call in progress: what is known before it runs.
pub(crate) struct Pending {
    started: Instant,
    event: AuditEvent,
}

/// Whether anyone listens: a sink, or a subscriber that wants `toolwire::audit` events.
pub(crate) fn wanted(sink: Option<&Arc<dyn AuditSink>>) -> bool {
    sink.is_some() || tracing::enabled!(target: "toolwire::audit", tracing::Level::INFO)
}

impl Pending {
    /// Starts the record of a call of `tool` with `arguments`.
    pub(crate) fn start(call: CallSeen<'_>) -> Pending {
        let CallSeen {
            time,
            request_id,
            principal,
            tool,
            definition_sha256,
            arguments,
            traceparent,
        } = call;
        let canonical = serde_json::to_string(arguments).unwrap_or_default();
        let digest = toolwire_protocol::hex::encode(&Sha256::digest(canonical.as_bytes()));
        let (trace_id, parent_span_id) = traceparent.and_then(parse_traceparent).unzip();
        Pending {
            started: Instant::now(),
            event: AuditEvent {
                time,
                request_id,
                principal: principal.map(str::to_owned),
                tool: tool.to_owned(),
                definition_sha256,
                arguments_sha256: digest,
                arguments_preview: crate::safety::output::preview(&canonical, PREVIEW_BYTES),
                outcome: AuditOutcome::Complete,
                error_code: None,
                latency_us: 0,
                trace_id,
                parent_span_id,
            },
        }
    }

    /// Emits the event with its outcome.
    pub(crate) fn finish(
        mut self,
        outcome: AuditOutcome,
        error_code: Option<i64>,
        sink: Option<&Arc<dyn AuditSink>>,
    ) {
        let event = &mut self.event;
        event.outcome = outcome;
        event.error_code = error_code;
        event.latency_us = self.started.elapsed().as_micros() as u64;
        tracing::info!(
            target: "toolwire::audit",
            time = %event.time,
            request_id = %event.request_id,
            principal = event.principal.as_deref(),
            tool = %event.tool,
            definition_sha256 = event.definition_sha256.as_deref(),
            arguments_sha256 = %event.arguments_sha256,
            arguments_preview = %event.arguments_preview,
            outcome = %event.outcome,
            error_code = event.error_code,
            latency_us = event.latency_us,
            trace_id = event.trace_id.as_deref(),
            "tools/call"
        );
        if let Some(sink) = sink {
            sink.record(event);
        }
    }
}

/// The trace id and parent span id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`);
/// `None` for anything malformed or all-zero ids (W3C Trace Context §3.2).
pub(crate) fn parse_traceparent(value: &str) -> Option<(String, String)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let is_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !is_hex(version, 2) || version == "ff" || !is_hex(flags, 2) {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    if !is_hex(trace, 32) || !is_hex(parent, 16) {
        return None;
    }
    if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
        return None;
    }
    Some((trace.to_owned(), parent.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The audit log line says the outcome in the record's own word, never Rust's debug text
    /// (`Complete`).
    #[test]
    fn an_outcome_reads_as_the_records_word() {
        for outcome in [
            AuditOutcome::Complete,
            AuditOutcome::InputRequired,
            AuditOutcome::Task,
            AuditOutcome::IsError,
            AuditOutcome::TimedOut,
            AuditOutcome::Limited,
            AuditOutcome::Error,
            AuditOutcome::Refused,
        ] {
            let word = serde_json::to_value(outcome).unwrap();
            assert_eq!(word, outcome.to_string().as_str(), "{outcome:?}");
        }
    }
    use serde_json::json;

    #[test]
    fn traceparents_are_read_strictly() {
        assert_eq!(
            parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            Some((
                "0af7651916cd43dd8448eb211c80319c".into(),
                "b7ad6b7169203331".into()
            ))
        );
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn arguments_are_digested_canonically_and_previewed_without_secrets() {
        let a = Pending::start(CallSeen {
            time: "t".into(),
            request_id: "1".into(),
            principal: None,
            tool: "x",
            definition_sha256: None,
            arguments: &json!({"b": 1, "a": "AKIAIOSFODNN7EXAMPLE"}),
            traceparent: None,
        });
        let b = Pending::start(CallSeen {
            time: "t".into(),
            request_id: "1".into(),
            principal: None,
            tool: "x",
            definition_sha256: None,
            arguments: &serde_json::from_str::<Value>(r#"{ "a" : "AKIAIOSFODNN7EXAMPLE", "b":1 }"#)
                .unwrap(),
            traceparent: None,
        });
        assert_eq!(
            a.event.arguments_sha256, b.event.arguments_sha256,
            "key order and spacing"
        );
        assert_eq!(a.event.arguments_sha256.len(), 64);
        assert_eq!(
            a.event.arguments_preview,
            r#"{"a":"[REDACTED:aws-access-key]","b":1}"#
        );
        let long = Pending::start(CallSeen {
            time: "t".into(),
            request_id: "1".into(),
            principal: None,
            tool: "x",
            definition_sha256: None,
            arguments: &json!({"s": "x".repeat(1000)}),
            traceparent: None,
        });
        assert!(
            long.event.arguments_preview.len() < 300,
            "{}",
            long.event.arguments_preview.len()
        );
    }

    #[test]
    fn the_jsonl_sink_writes_one_line_per_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink: Arc<dyn AuditSink> = Arc::new(JsonlAuditSink::open(&path).unwrap());
        for i in 0..3 {
            let pending = Pending::start(CallSeen {
                time: "t".into(),
                request_id: i.to_string(),
                principal: Some("alice"),
                tool: "echo",
                definition_sha256: Some("ab".into()),
                arguments: &json!({"i": i}),
                traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            });
            pending.finish(AuditOutcome::Complete, None, Some(&sink));
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let lines = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() == 3 || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let events: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(events.len(), 3);
        assert_eq!(events[2]["request_id"], "2");
        assert_eq!(events[0]["principal"], "alice");
        assert_eq!(events[0]["outcome"], "complete");
        assert_eq!(events[0]["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    }

    #[test]
    fn concurrent_events_are_whole_lines_and_flush_writes_them_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink: Arc<dyn AuditSink> = Arc::new(JsonlAuditSink::open(&path).unwrap());
        std::thread::scope(|scope| {
            for t in 0..4 {
                let sink = &sink;
                scope.spawn(move || {
                    for i in 0..500 {
                        let pending = Pending::start(CallSeen {
                            time: "t".into(),
                            request_id: format!("{t}-{i}"),
                            principal: None,
                            tool: "echo",
                            definition_sha256: None,
                            arguments: &json!({"text": "x".repeat(i % 300)}),
                            traceparent: None,
                        });
                        pending.finish(AuditOutcome::Complete, None, Some(sink));
                    }
                });
            }
        });
        // No waiting: flush returns once every line is in the file.
        sink.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        let ids: std::collections::HashSet<String> = text
            .lines()
            .map(|l| {
                let event: Value = serde_json::from_str(l).unwrap();
                event["request_id"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(text.lines().count(), 2000);
        assert_eq!(ids.len(), 2000);
        // Events recorded after a flush are written when the sink is dropped.
        Pending::start(CallSeen {
            time: "t".into(),
            request_id: "last".into(),
            principal: None,
            tool: "echo",
            definition_sha256: None,
            arguments: &json!({}),
            traceparent: None,
        })
        .finish(AuditOutcome::Complete, None, Some(&sink));
        drop(sink);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read_to_string(&path).unwrap().contains("\"last\"") {
            assert!(Instant::now() < deadline, "the last event was not written");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
