//! The stdio transport (S-01…S-13): newline-delimited JSON-RPC on a byte stream. Requests run
//! concurrently and are answered as they finish; `notifications/cancelled` stops one and nothing
//! more is written for it (S-08); EOF ends listen streams with their closing result and returns
//! promptly (S-10). Only MCP messages are written; logs go through `tracing`, never to stdout.
//!
//! A connection that begins with a legacy `initialize` (2025-11-25 and earlier) becomes a legacy
//! session; `legacy.rs` serves it.
//!
//! stdio has no OAuth: whoever started the process is the caller. [`StdioConfig`] names
//! that caller's principal and, optionally, the scopes it holds, usually from the environment
//! ([`StdioConfig::from_env`]: `TOOLWIRE_PRINCIPAL`, `TOOLWIRE_SCOPES`), so that request state,
//! tasks and per-tool scopes work as over HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CancelledParams, ErrorObject, MessageKind, NOTIFICATION_CANCELLED, RawMessage, RequestId,
    RequestMeta,
};

use crate::error::{Error, Result};
use crate::legacy::is_legacy_initialize;
use crate::request::context::RequestContext;
use crate::request::frame::{Message, read_message};
use crate::request::last_meta::LastMeta;
use crate::request::outbound::{Frame, Outbound};
use crate::request::outcome::Final;
use crate::request::route::{CallFrame, Route};
use crate::server::Server;
use legacy::LegacyConnection;

mod legacy;
#[cfg(unix)]
mod pipes;

/// How long requests still running at EOF may take to finish before they are cancelled.
const EOF_GRACE: Duration = Duration::from_secs(2);

/// Bytes written to the client's queue and not yet written out, at most. A client that stops
/// reading stdout fills the pipe, then this; then every request waits to answer, and the
/// server stops reading stdin until the client reads again, instead of growing without bound.
const OUTPUT_BUDGET: u32 = 8 * 1024 * 1024;

/// Requests running at once on one connection, at most; past it the server reads no more
/// requests until one finishes.
const MAX_IN_FLIGHT: usize = 1024;

/// The environment variable naming the stdio caller's principal.
pub const PRINCIPAL_ENV: &str = "TOOLWIRE_PRINCIPAL";
/// The environment variable listing the stdio caller's scopes, space-separated.
pub const SCOPES_ENV: &str = "TOOLWIRE_SCOPES";

/// Who the process on the other end of stdio is. By default nobody in particular: no principal,
/// and no scope checks (every tool is visible and callable).
#[derive(Debug, Clone, Default)]
pub struct StdioConfig {
    principal: Option<Arc<str>>,
    scopes: Option<Arc<[String]>>,
}

/// The caller as a person reads it: `anyone (no principal, no scope checks)`, or
/// `principal alice, scopes notes:read notes:write`.
impl std::fmt::Display for StdioConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.principal {
            Some(principal) => write!(f, "principal {principal}")?,
            None => f.write_str("anyone (no principal")?,
        }
        match (&self.scopes, &self.principal) {
            (Some(scopes), Some(_)) if scopes.is_empty() => f.write_str(", no scopes"),
            (Some(scopes), Some(_)) => write!(f, ", scopes {}", scopes.join(" ")),
            (Some(scopes), None) if scopes.is_empty() => f.write_str(", no scopes)"),
            (Some(scopes), None) => write!(f, ", scopes {})", scopes.join(" ")),
            (None, Some(_)) => f.write_str(", no scope checks"),
            (None, None) => f.write_str(", no scope checks)"),
        }
    }
}

impl StdioConfig {
    /// The caller's principal: binds its request state and owns its tasks.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into().into());
        self
    }

    /// The scopes the caller holds: tools, prompts and resources that need others are hidden
    /// and refused, as for an OAuth token with these scopes.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }

    /// From the environment (A-01: stdio takes its credentials from the environment):
    /// `TOOLWIRE_PRINCIPAL` and `TOOLWIRE_SCOPES` (space-separated). Unset means none; set but
    /// empty or not Unicode is an [`Error::Environment`] naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var_os(name))
    }

    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Self> {
        let read = |variable: &'static str| -> Result<Option<String>> {
            match var(variable) {
                None => Ok(None),
                Some(value) => value
                    .into_string()
                    .map(Some)
                    .map_err(|_| Error::Environment {
                        variable,
                        problem: "not valid Unicode",
                    }),
            }
        };
        let mut config = StdioConfig::default();
        if let Some(principal) = read(PRINCIPAL_ENV)? {
            if principal.trim().is_empty() {
                return Err(Error::Environment {
                    variable: PRINCIPAL_ENV,
                    problem: "set but empty",
                });
            }
            config = config.principal(principal.trim());
        }
        if let Some(scopes) = read(SCOPES_ENV)? {
            config = config.scopes(scopes.split_ascii_whitespace());
        }
        Ok(config)
    }
}

/// Serves `server` on the process's stdin and stdout until stdin closes or the server shuts down.
pub async fn serve(server: Server) -> Result<()> {
    serve_with(server, StdioConfig::default()).await
}

/// [`serve`] for the caller `config` describes.
///
/// Where stdin and stdout are pipes (a client that started this process), they are driven by
/// the runtime's reactor rather than its blocking thread pool, and made blocking again when
/// serving ends. Serving runs as a task of the runtime, so that with `#[tokio::main]` the
/// reading happens on a worker thread, beside the requests it starts, instead of on the main
/// thread: each message then costs no thread hand-off.
pub async fn serve_with(server: Server, config: StdioConfig) -> Result<()> {
    let serving = tokio::spawn(async move {
        #[cfg(unix)]
        {
            let (reader, writer, _restore) = pipes::open();
            serve_io_with(server, reader, writer, config).await
        }
        #[cfg(not(unix))]
        serve_io_with(server, tokio::io::stdin(), tokio::io::stdout(), config).await
    });
    match serving.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(std::io::Error::other(e).into()),
    }
}

/// Serves `server` on any byte stream pair (a child's pipes, an in-memory duplex in tests).
pub async fn serve_io<R, W>(server: Server, reader: R, writer: W) -> Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_io_with(server, reader, writer, StdioConfig::default()).await
}

/// [`serve_io`] for the caller `config` describes.
pub async fn serve_io_with<R, W>(
    server: Server,
    reader: R,
    writer: W,
    config: StdioConfig,
) -> Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Frame>(1024);
    let writer = tokio::spawn(write_frames(writer, rx));
    let mut connection = Connection {
        closing: server.shutdown_token().child_token(),
        server,
        tx: Outbound::bounded(tx, OUTPUT_BUDGET),
        inflight: Arc::new(Mutex::new(HashMap::new())),
        generation: 0,
        tasks: JoinSet::new(),
        legacy: None,
        caller: config,
        last_meta: LastMeta::default(),
    };
    let mut lines = LineReader::new(reader, connection.server.config().max_message_bytes);
    loop {
        if connection.tasks.len() >= MAX_IN_FLIGHT {
            // Backpressure: no more requests until one finishes.
            tokio::select! {
                _ = connection.tasks.join_next() => continue,
                _ = connection.closing.cancelled() => break,
            }
        }
        let line = tokio::select! {
            line = lines.next() => line,
            _ = connection.closing.cancelled() => break,
        };
        match line {
            Ok(Some(Line::Message(bytes))) => connection.handle(&bytes).await,
            Ok(Some(Line::TooLong)) => {
                let max = connection.server.config().max_message_bytes;
                let error = ErrorObject::invalid_request(format!("message exceeds {max} bytes"));
                connection.send_error(None, &error).await;
            }
            Ok(None) => {
                tracing::debug!("stdin closed; closing listen streams and finishing requests");
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "stdin failed; stopping");
                break;
            }
        }
        while connection.tasks.try_join_next().is_some() {}
    }
    connection.close().await;
    writer.await.map_err(std::io::Error::other)??;
    Ok(())
}

struct Connection {
    server: Server,
    /// The writer's queue, bounded in frames and in bytes.
    tx: Outbound,
    /// Cancellation tokens of running requests by id, for `notifications/cancelled`.
    inflight: Arc<Mutex<HashMap<RequestId, (u64, CancellationToken)>>>,
    /// Tags each admitted request, so a finishing request only removes its own entry.
    generation: u64,
    /// Fires at EOF or server shutdown: listen streams close (L-10).
    closing: CancellationToken,
    tasks: JoinSet<()>,
    /// Set once a legacy client initialized this connection.
    legacy: Option<LegacyConnection>,
    /// Who is on the other end.
    caller: StdioConfig,
    /// The `_meta` the client sent last, kept read.
    last_meta: LastMeta,
}

impl Connection {
    async fn handle(&mut self, bytes: &[u8]) {
        let max_depth = self.server.config().max_json_depth;
        let raw = match read_message(bytes, max_depth, Some(&self.last_meta)) {
            Ok(Message::Raw(raw)) => raw,
            Ok(Message::Call(call)) => {
                let CallFrame { id, meta, route } = *call;
                let started = self
                    .server
                    .check_version(&meta)
                    .and_then(|()| self.start(id.clone(), meta, route));
                match started {
                    Ok(Some(reply)) => self.send_final(reply).await,
                    Ok(None) => {}
                    Err(error) => self.send_error(Some(&id), &error).await,
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e.error, "unreadable stdio line");
                return self.send_error(e.id.as_ref(), &e.error).await;
            }
        };
        match raw.kind() {
            Err(why) => {
                self.send_error(
                    raw.request_id().as_ref(),
                    &ErrorObject::invalid_request(why),
                )
                .await
            }
            Ok(MessageKind::Notification) => self.notification(&raw),
            Ok(MessageKind::Response) => self.response(&raw),
            Ok(MessageKind::Request(id)) => match self.request(id.clone(), &raw) {
                Ok(Some(reply)) => self.send_final(reply).await,
                Ok(None) => {}
                Err(error) => self.send_error(Some(&id), &error).await,
            },
        }
    }

    /// Admits a request and runs it in its own task, or answers it at once (the reply to
    /// write).
    fn request(
        &mut self,
        id: RequestId,
        raw: &RawMessage<'_>,
    ) -> Result<Option<Final>, ErrorObject> {
        let method = raw.method.as_deref().unwrap_or_default();
        tracing::debug!(%id, method, "stdio request");
        if self.server.serves_legacy() && is_legacy_initialize(method, raw.params) {
            return self.legacy_initialize(&id, raw.params).map(Some);
        }
        let (meta, call) = match self.server.admit(method, raw) {
            Ok(admitted) => admitted,
            // Without a 2026-07-28 `_meta`, an initialized legacy client's request.
            Err(error) => return self.legacy_request(id, method, raw.params, error),
        };
        self.start(id, meta, call)
    }

    /// Runs an admitted request: at once when it finishes on its first poll (the reply to
    /// write), else in its own task.
    ///
    /// Most tools answer without waiting on anything (no I/O, no input asked), and for those a
    /// task, an entry in the in-flight map and a cancellation select are pure cost: in
    /// callgrind, 7,100 of the 40,600 instructions of the bench's stdio echo request. A
    /// request that is still pending after the first poll is tracked and spawned, and its task
    /// polls it again with its own waker (a future only wakes the waker of its latest poll). An
    /// answered request cannot have been cancelled: nothing else ran in between.
    fn start(
        &mut self,
        id: RequestId,
        meta: impl Into<Arc<RequestMeta>>,
        call: Route,
    ) -> Result<Option<Final>, ErrorObject> {
        self.check_unused(&id)?;
        let cancel = CancellationToken::new();
        let ctx = RequestContext::new(
            id.clone(),
            meta,
            cancel.clone(),
            self.closing.clone(),
            Some(self.tx.clone()),
            self.server.config().logging,
        )
        .with_principal(self.caller.principal.clone())
        .with_scopes(self.caller.scopes.clone())
        .with_incoming(crate::request::incoming::Incoming::stdio());
        let server = self.server.clone();
        let request_id = id.clone();
        let mut work = Box::pin(async move {
            let finisher = ctx.clone();
            let done = server.run(&request_id, call, ctx).await;
            finisher.finish().await;
            done
        });
        let mut first = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(done) = work.as_mut().poll(&mut first) {
            return Ok(done);
        }
        let generation = self.track(&id, &cancel);
        self.spawn(id, generation, cancel, work);
        Ok(None)
    }

    /// -32600 if a request with this id is still running (B-03).
    fn check_unused(&self, id: &RequestId) -> Result<(), ErrorObject> {
        let inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        if inflight.contains_key(id) {
            return Err(ErrorObject::invalid_request(format!(
                // B-03
                "request id {id} is already in use"
            )));
        }
        Ok(())
    }

    /// Notes a request as in flight, for `notifications/cancelled`.
    fn track(&mut self, id: &RequestId, cancel: &CancellationToken) -> u64 {
        self.generation += 1;
        let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
        inflight.insert(id.clone(), (self.generation, cancel.clone()));
        self.generation
    }

    /// Runs a tracked request's work in its own task and writes its final message, unless it
    /// is cancelled first.
    fn spawn(
        &mut self,
        id: RequestId,
        generation: u64,
        cancel: CancellationToken,
        work: BoxFuture<'static, Option<Final>>,
    ) {
        let (tx, inflight) = (self.tx.clone(), self.inflight.clone());
        self.tasks.spawn(async move {
            let done = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                done = work => done,
            };
            {
                // Only this request's entry: after a cancel the client may reuse the id at once.
                let mut inflight = inflight.lock().unwrap_or_else(|p| p.into_inner());
                if inflight.get(&id).is_some_and(|(g, _)| *g == generation) {
                    inflight.remove(&id);
                }
            }
            if let Some(Final {
                json, error_code, ..
            }) = done
            {
                let _ = tx
                    .send(Frame {
                        json,
                        last: true,
                        error_code,
                        cancel,
                        charge: None,
                    })
                    .await;
            }
        });
    }

    /// Writes the reply to a request answered at once.
    async fn send_final(&self, done: Final) {
        let frame = Frame {
            json: done.json,
            last: true,
            error_code: done.error_code,
            cancel: CancellationToken::new(),
            charge: None,
        };
        let _ = self.tx.send(frame).await;
    }

    /// `notifications/cancelled` stops the named request (S-07); other notifications are ignored.
    fn notification(&self, raw: &RawMessage<'_>) {
        if raw.method.as_deref() != Some(NOTIFICATION_CANCELLED) {
            return;
        }
        // Malformed cancellations are ignored (P-04).
        let Some(params) = raw
            .params
            .and_then(|p| serde_json::from_str::<CancelledParams>(p.get()).ok())
        else {
            return;
        };
        let token = self
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&params.request_id);
        if let Some((_, token)) = token {
            tracing::debug!(id = %params.request_id, reason = params.reason.as_deref(), "request cancelled by the client");
            token.cancel();
        }
    }

    async fn send_error(&self, id: Option<&RequestId>, error: &ErrorObject) {
        self.send_final(Final::error(id, error)).await;
    }

    /// EOF or shutdown: close listen streams, give running requests a moment, then stop.
    async fn close(mut self) {
        self.closing.cancel();
        if let Some(legacy) = &self.legacy {
            legacy.close();
        }
        let drained = tokio::time::timeout(EOF_GRACE, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            for token in self
                .inflight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
            {
                token.1.cancel();
            }
            self.tasks.shutdown().await;
        }
    }
}

/// Writes frames as lines, batching what is queued into one write; frames of cancelled
/// requests are dropped (S-08).
async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Frame>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(16 * 1024);
    while let Some(frame) = rx.recv().await {
        let mut next = Some(frame);
        while let Some(frame) = next {
            if !frame.cancel.is_cancelled() {
                buf.extend_from_slice(frame.json.as_bytes());
                buf.push(b'\n');
            }
            next = rx.try_recv().ok();
        }
        if !buf.is_empty() {
            writer.write_all(&buf).await?;
            writer.flush().await?;
            buf.clear();
        }
    }
    writer.flush().await
}

/// A line of input: a message, or the fact that one was longer than allowed.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Message(Vec<u8>),
    TooLong,
}

/// Reads newline-delimited messages with a length bound; blank lines are skipped and a
/// trailing `\r` is dropped.
struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(reader: R, max: usize) -> Self {
        LineReader {
            inner: BufReader::with_capacity(64 * 1024, reader),
            max,
        }
    }

    async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let mut line = Vec::new();
            let mut too_long = false;
            let eof = loop {
                let available = self.inner.fill_buf().await?;
                if available.is_empty() {
                    break true;
                }
                let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                    Some(i) => (&available[..i], i + 1),
                    None => (available, available.len()),
                };
                if !too_long {
                    if line.len() + chunk.len() > self.max {
                        too_long = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                let newline = found > chunk.len();
                self.inner.consume(found);
                if newline {
                    break false;
                }
            };
            if too_long {
                return Ok(Some(Line::TooLong));
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                if eof {
                    return Ok(None);
                }
                continue;
            }
            return Ok(Some(Line::Message(line)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_comes_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let none = StdioConfig::from_vars(env(&[])).unwrap();
        assert!(none.principal.is_none() && none.scopes.is_none());
        let set = StdioConfig::from_vars(env(&[
            (PRINCIPAL_ENV, " ada "),
            (SCOPES_ENV, "math  tools:read"),
        ]))
        .unwrap();
        assert_eq!(set.principal.as_deref(), Some("ada"));
        assert_eq!(set.scopes.as_deref().unwrap(), ["math", "tools:read"]);
        let no_scopes = StdioConfig::from_vars(env(&[(SCOPES_ENV, "")])).unwrap();
        assert_eq!(
            no_scopes.scopes.as_deref().unwrap().len(),
            0,
            "set but empty: no scopes"
        );
        // A typed error, so that `?` takes it into anyhow or a `main`'s error as any other.
        let err: crate::Error = StdioConfig::from_vars(env(&[(PRINCIPAL_ENV, "  ")])).unwrap_err();
        assert!(
            matches!(
                err,
                crate::Error::Environment {
                    variable: PRINCIPAL_ENV,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "TOOLWIRE_PRINCIPAL is set but empty");
    }

    #[test]
    fn the_caller_reads_as_words() {
        let said = |config: StdioConfig| config.to_string();
        assert_eq!(
            said(StdioConfig::default()),
            "anyone (no principal, no scope checks)"
        );
        assert_eq!(
            said(StdioConfig::default().principal("ada").scopes(["a", "b"])),
            "principal ada, scopes a b"
        );
        assert_eq!(
            said(StdioConfig::default().principal("ada")),
            "principal ada, no scope checks"
        );
        let none: [&str; 0] = [];
        assert_eq!(
            said(StdioConfig::default().scopes(none)),
            "anyone (no principal, no scopes)"
        );
    }

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn splits_bounds_and_skips_blanks() {
        let msg = |s: &str| Line::Message(s.as_bytes().to_vec());
        assert_eq!(
            lines(b"a\nbb\r\n\n  \ncc", 10).await,
            [msg("a"), msg("bb"), msg("cc")]
        );
        assert_eq!(
            lines(b"short\nmuch too long line\nok\n", 5).await,
            [msg("short"), Line::TooLong, msg("ok")]
        );
        assert_eq!(lines(b"", 5).await, []);
        assert_eq!(lines(b"\n\n", 5).await, []);
    }
}
