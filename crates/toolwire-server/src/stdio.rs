//! The stdio transport (CHECKLIST §3): newline-delimited JSON-RPC on a byte stream. Requests run
//! concurrently and are answered as they finish; `notifications/cancelled` stops one and nothing
//! more is written for it (S-08); EOF ends listen streams with their closing result and returns
//! promptly (S-10). Only MCP messages are written; logs go through `tracing`, never to stdout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CancelledParams, ErrorObject, MessageKind, NOTIFICATION_CANCELLED, RawMessage, RequestId,
};

use crate::context::{Frame, Outbound, RequestContext};
use crate::dispatch::{Final, read_frame};
use crate::error::Result;
use crate::server::Server;

/// How long requests still running at EOF may take to finish before they are cancelled.
const EOF_GRACE: Duration = Duration::from_secs(2);

/// Serves `server` on the process's stdin and stdout until stdin closes or the server shuts down.
pub async fn serve(server: Server) -> Result<()> {
    serve_io(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves `server` on any byte stream pair (a child's pipes, an in-memory duplex in tests).
pub async fn serve_io<R, W>(server: Server, reader: R, writer: W) -> Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Frame>(1024);
    let writer = tokio::spawn(write_frames(writer, rx));
    let mut connection = Connection {
        closing: server.shutdown_token().child_token(),
        server,
        tx,
        inflight: Arc::new(Mutex::new(HashMap::new())),
        generation: 0,
        tasks: JoinSet::new(),
    };
    let mut lines = LineReader::new(reader, connection.server.inner.config.max_message_bytes);
    loop {
        let line = tokio::select! {
            line = lines.next() => line,
            _ = connection.closing.cancelled() => break,
        };
        match line {
            Ok(Some(Line::Message(bytes))) => connection.handle(&bytes).await,
            Ok(Some(Line::TooLong)) => {
                let max = connection.server.inner.config.max_message_bytes;
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
    tx: mpsc::Sender<Frame>,
    /// Cancellation tokens of running requests by id, for `notifications/cancelled`.
    inflight: Arc<Mutex<HashMap<RequestId, (u64, CancellationToken)>>>,
    /// Tags each admitted request, so a finishing request only removes its own entry.
    generation: u64,
    /// Fires at EOF or server shutdown: listen streams close (L-10).
    closing: CancellationToken,
    tasks: JoinSet<()>,
}

impl Connection {
    async fn handle(&mut self, bytes: &[u8]) {
        let raw = match read_frame(bytes, self.server.inner.config.max_json_depth) {
            Ok(raw) => raw,
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
            Ok(MessageKind::Response) => {
                tracing::warn!(
                    "ignoring a JSON-RPC response: this server sends no requests (B-09)"
                );
            }
            Ok(MessageKind::Request(id)) => {
                if let Err(error) = self.request(id.clone(), &raw) {
                    self.send_error(Some(&id), &error).await;
                }
            }
        }
    }

    /// Admits a request and runs it in its own task.
    fn request(&mut self, id: RequestId, raw: &RawMessage<'_>) -> Result<(), ErrorObject> {
        let method = raw.method.as_deref().unwrap_or_default();
        tracing::debug!(%id, method, "stdio request");
        let (meta, call) = self.server.admit(method, raw)?;
        let cancel = CancellationToken::new();
        self.generation += 1;
        let generation = self.generation;
        {
            let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            if inflight.contains_key(&id) {
                return Err(ErrorObject::invalid_request(format!(
                    "request id {id} is already in use (B-03)"
                )));
            }
            inflight.insert(id.clone(), (generation, cancel.clone()));
        }
        let ctx = RequestContext::new(
            id.clone(),
            meta,
            cancel.clone(),
            self.closing.clone(),
            Some(Outbound(self.tx.clone())),
            self.server.inner.config.logging,
        );
        let (server, tx, inflight) = (self.server.clone(), self.tx.clone(), self.inflight.clone());
        self.tasks.spawn(async move {
            let finisher = ctx.clone();
            let done = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                done = server.run(&id, call, ctx) => done,
            };
            finisher.finish().await;
            {
                // Only this request's entry: after a cancel the client may reuse the id at once.
                let mut inflight = inflight.lock().unwrap_or_else(|p| p.into_inner());
                if inflight.get(&id).is_some_and(|(g, _)| *g == generation) {
                    inflight.remove(&id);
                }
            }
            if let Some(Final { json, error_code }) = done {
                let _ = tx
                    .send(Frame {
                        json,
                        last: true,
                        error_code,
                        cancel,
                    })
                    .await;
            }
        });
        Ok(())
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
        let Final { json, error_code } = Final::error(id, error);
        let frame = Frame {
            json,
            last: true,
            error_code,
            cancel: CancellationToken::new(),
        };
        let _ = self.tx.send(frame).await;
    }

    /// EOF or shutdown: close listen streams, give running requests a moment, then stop.
    async fn close(mut self) {
        self.closing.cancel();
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
