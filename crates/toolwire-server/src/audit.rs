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
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
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

/// Where audit events go besides `tracing`: a file, a queue, a shared store.
pub trait AuditSink: Send + Sync + 'static {
    /// Takes one event; must not block for long (it runs on the request path).
    fn record(&self, event: &AuditEvent);

    /// Makes every event recorded so far durable (before the process exits); by default
    /// nothing to do.
    fn flush(&self) {}
}

/// What the writer thread of a [`JsonlAuditSink`] receives.
enum Line {
    Event(Box<AuditEvent>),
    /// Answer once everything before it is written and flushed.
    Flush(SyncSender<()>),
}

/// Appends events to a JSON Lines file from a thread of its own: the request path only hands
/// the event over. If the writer falls 10,000 events behind, new events are dropped and
/// counted (logged at ERROR, and in [`JsonlAuditSink::dropped`]), never waited for.
pub struct JsonlAuditSink {
    queue: SyncSender<Line>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for JsonlAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlAuditSink")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl JsonlAuditSink {
    /// Opens (creating, appending) `path`.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_owned();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let (queue, events) = std::sync::mpsc::sync_channel(10_000);
        std::thread::Builder::new()
            .name("toolwire-audit".into())
            .spawn(move || write_lines(file, &path, events))?;
        Ok(JsonlAuditSink {
            queue,
            dropped: Arc::default(),
        })
    }

    /// How many events were dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write_lines(file: std::fs::File, path: &Path, lines: Receiver<Line>) {
    let mut out = std::io::BufWriter::new(file);
    while let Ok(first) = lines.recv() {
        // Write what is queued, then flush once: a line per event, at most one flush per batch.
        let mut waiting = Vec::new();
        for line in std::iter::once(first).chain(lines.try_iter()) {
            let event = match line {
                Line::Event(event) => event,
                Line::Flush(done) => {
                    waiting.push(done);
                    continue;
                }
            };
            let written = serde_json::to_writer(&mut out, &event)
                .map_err(std::io::Error::other)
                .and_then(|()| out.write_all(b"\n"));
            if let Err(e) = written {
                tracing::error!(path = %path.display(), error = %e, "cannot write the audit log");
            }
        }
        if let Err(e) = out.flush().and_then(|()| out.get_ref().sync_data()) {
            tracing::error!(path = %path.display(), error = %e, "cannot write the audit log");
        }
        for done in waiting {
            let _ = done.send(());
        }
    }
}

impl AuditSink for JsonlAuditSink {
    fn record(&self, event: &AuditEvent) {
        match self.queue.try_send(Line::Event(Box::new(event.clone()))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::error!(dropped, "the audit log writer is behind: event dropped");
            }
        }
    }

    /// Waits (at most 5 s) until every event recorded before is written and synced.
    fn flush(&self) {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if self.queue.send(Line::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
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
    pub(crate) fn start(
        time: String,
        request_id: String,
        principal: Option<&str>,
        tool: &str,
        definition_sha256: Option<String>,
        arguments: &Value,
        traceparent: Option<&str>,
    ) -> Pending {
        let canonical = serde_json::to_string(arguments).unwrap_or_default();
        let digest = hex(&Sha256::digest(canonical.as_bytes()));
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
                arguments_preview: crate::output::preview(&canonical, PREVIEW_BYTES),
                outcome: AuditOutcome::Complete,
                error_code: None,
                latency_us: 0,
                trace_id,
                parent_span_id,
            },
        }
    }

    /// The trace ids, for the call's span.
    pub(crate) fn trace(&self) -> (Option<&str>, Option<&str>) {
        (
            self.event.trace_id.as_deref(),
            self.event.parent_span_id.as_deref(),
        )
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
            principal = event.principal.as_deref().unwrap_or(""),
            tool = %event.tool,
            definition_sha256 = event.definition_sha256.as_deref().unwrap_or(""),
            arguments_sha256 = %event.arguments_sha256,
            arguments_preview = %event.arguments_preview,
            outcome = ?event.outcome,
            error_code = event.error_code,
            latency_us = event.latency_us,
            trace_id = event.trace_id.as_deref().unwrap_or(""),
            "tools/call"
        );
        if let Some(sink) = sink {
            sink.record(event);
        }
    }
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
        let a = Pending::start(
            "t".into(),
            "1".into(),
            None,
            "x",
            None,
            &json!({"b": 1, "a": "AKIAIOSFODNN7EXAMPLE"}),
            None,
        );
        let b = Pending::start(
            "t".into(),
            "1".into(),
            None,
            "x",
            None,
            &serde_json::from_str::<Value>(r#"{ "a" : "AKIAIOSFODNN7EXAMPLE", "b":1 }"#).unwrap(),
            None,
        );
        assert_eq!(
            a.event.arguments_sha256, b.event.arguments_sha256,
            "key order and spacing"
        );
        assert_eq!(a.event.arguments_sha256.len(), 64);
        assert_eq!(
            a.event.arguments_preview,
            r#"{"a":"[REDACTED:aws-access-key]","b":1}"#
        );
        let long = Pending::start(
            "t".into(),
            "1".into(),
            None,
            "x",
            None,
            &json!({"s": "x".repeat(1000)}),
            None,
        );
        assert!(
            long.event.arguments_preview.len() < 300,
            "{}",
            long.event.arguments_preview.len()
        );
    }

    #[test]
    fn the_jsonl_sink_writes_one_line_per_event() {
        let path =
            std::env::temp_dir().join(format!("toolwire-audit-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sink: Arc<dyn AuditSink> = Arc::new(JsonlAuditSink::open(&path).unwrap());
        for i in 0..3 {
            let pending = Pending::start(
                "t".into(),
                i.to_string(),
                Some("alice"),
                "echo",
                Some("ab".into()),
                &json!({"i": i}),
                Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            );
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
        let _ = std::fs::remove_file(&path);
    }
}
