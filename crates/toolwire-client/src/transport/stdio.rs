//! stdio, the client side: a child process speaking newline-delimited JSON-RPC.
//! Many requests run at once and answers are matched by id; progress and subscription
//! notifications are routed to their request (S-06); server requests and unsolicited
//! notifications (legacy servers) go to the client's incoming queue; stderr is read as logs, never
//! as an error signal (S-04); a dropped request sends `notifications/cancelled` (S-07); a crashed
//! server is started again on the next request (S-11); `close` closes stdin, then SIGTERM, then
//! SIGKILL (S-09), to the server's own process group, so what it started goes with it.
//! Its rules are under “stdio transport” in docs/requirements.md.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    CancelledParams, META_FIELD, META_SUBSCRIPTION_ID, NOTIFICATION_CANCELLED,
    NOTIFICATION_PROGRESS, Notification,
};

use super::command::StdioCommand;
use super::group::ProcessGroup;
use super::lines::{Line, Lines};
use super::{Failure, Outgoing, Reply};
use crate::error::{Error, Result};

/// How many messages wait for one request's consumer (its `request` loop, or a listen task).
/// Beyond it, progress is dropped: it is cumulative, so only intermediate values are lost, and
/// one slot stays free for the response. Anything else (the response, subscription
/// notifications) waits for room: the consumers in this crate never stall, and the wait slows
/// the server (its stdout pipe fills) instead of growing memory.
const ROUTE_CAPACITY: usize = 256;

/// How many messages that belong to no request wait for the client (which never stalls on
/// them; the same backpressure applies).
const INCOMING_CAPACITY: usize = 256;

/// A message that belongs to no request, with the request a server request is related to
/// when that can be told (the one request in flight).
pub(crate) type Incoming = (Value, Option<i64>);

/// Messages for one in-flight request: notifications, then its response.
#[derive(Debug, Clone)]
struct Route {
    tx: mpsc::Sender<Value>,
    /// Set once progress was dropped, so that is logged once per request.
    dropped: Arc<AtomicBool>,
    /// A request a server may ask the client about while it handles it (a tool call, a prompt,
    /// a resource read), as lists and pings are not.
    asks: bool,
}

impl Route {
    fn new(method: &str) -> (Self, mpsc::Receiver<Value>) {
        let (tx, rx) = mpsc::channel(ROUTE_CAPACITY);
        let dropped = Arc::default();
        let asks = matches!(method, "tools/call" | "prompts/get" | "resources/read");
        (Route { tx, dropped, asks }, rx)
    }

    /// Queues a progress notification if that leaves room for the response. The reader is the
    /// only sender, so the room cannot be taken between the check and the send.
    fn offer_progress(&self, message: Value, id: i64) {
        if self.tx.capacity() > 1 {
            let _ = self.tx.try_send(message);
        } else if !self.dropped.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                request = id,
                "progress arrives faster than it is consumed; dropping intermediate values"
            );
        }
    }
}

type Routes = Arc<Mutex<HashMap<i64, Route>>>;

#[derive(Debug)]
struct Process {
    child: Child,
    lines: mpsc::UnboundedSender<String>,
    /// Routes by request id (and progress token / subscription id, which are the request id).
    routes: Routes,
    /// Set when stdout reaches EOF: the process is gone or going. Set and read under the
    /// `routes` lock, so a route is never added after the last clear.
    closed: Arc<AtomicBool>,
    /// Closes the server's stdin (the writer task ends), whoever still holds a sender.
    close_stdin: CancellationToken,
    /// The server and what it started; killed when dropped (a restart, a dropped client).
    group: ProcessGroup,
    /// Its sandbox's private temporary directory, removed when the process is.
    _sandbox: Option<toolwire_sandbox::Launch>,
    /// Its last stderr lines, for the error when it exits without answering.
    tail: Arc<StderrTail>,
}

/// The last few stderr lines of a server (at most 10, each cut at 512 bytes): when a server
/// exits before answering, its own words on why (a bad configuration, a missing variable) are
/// what the person needs to see.
#[derive(Default)]
struct StderrTail {
    lines: Mutex<std::collections::VecDeque<String>>,
    ended: AtomicBool,
    end: tokio::sync::Notify,
}

impl StderrTail {
    const LINES: usize = 10;
    const LINE_BYTES: usize = 512;

    fn push(&self, line: &str) {
        // Escapes and controls out: a server's text never reaches the terminal raw.
        let mut clean = toolwire_sanitize::text::clean(line).0.into_owned();
        toolwire_sanitize::text::truncate(&mut clean, Self::LINE_BYTES, "…");
        if clean.trim().is_empty() {
            return;
        }
        let mut lines = lock(&self.lines);
        if lines.len() == Self::LINES {
            lines.pop_front();
        }
        lines.push_back(clean);
    }

    fn close(&self) {
        self.ended.store(true, Ordering::Release);
        self.end.notify_waiters();
    }

    /// The lines, once stderr ended or `wait` passed.
    async fn read(&self, wait: Duration) -> Vec<String> {
        let ended = self.end.notified();
        if !self.ended.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(wait, ended).await;
        }
        lock(&self.lines).iter().cloned().collect()
    }
}

impl std::fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrTail").finish_non_exhaustive()
    }
}

/// Why a request got no answer: the server's exit status when it is known, and its last
/// stderr lines when it had any.
fn exited(status: Option<std::process::ExitStatus>, lines: &[String]) -> Failure {
    let mut why = "the server exited before answering".to_owned();
    match status.map(|s| (s.code(), signal_of(s))) {
        Some((Some(code), _)) => why.push_str(&format!(" (exit status {code})")),
        Some((None, Some(signal))) => why.push_str(&format!(" (killed by signal {signal})")),
        _ => {}
    }
    if !lines.is_empty() {
        // One line: error messages are printed on one line (a newline would be shown escaped).
        why.push_str("; its last words on stderr: ");
        why.push_str(&lines.join(" | "));
    }
    Failure::Lost(why)
}

/// The signal that ended a process, on Unix.
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(&status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// A child-process server.
#[derive(Debug)]
pub(crate) struct StdioTransport {
    command: StdioCommand,
    process: tokio::sync::Mutex<Option<Process>>,
    /// How many times the server was started; a change means a new process (S-11, L-12).
    generation: AtomicU64,
    /// Server requests and notifications that belong to no request.
    incoming: mpsc::Sender<Incoming>,
    /// Set by `close`: no restart after it.
    closing: AtomicBool,
}

impl StdioTransport {
    /// Starts the server; the receiver gets the messages that belong to no request.
    pub(crate) fn spawn(command: StdioCommand) -> Result<(Self, mpsc::Receiver<Incoming>)> {
        let (incoming, rx) = mpsc::channel(INCOMING_CAPACITY);
        let process = start(&command, incoming.clone())?;
        let transport = StdioTransport {
            command,
            process: tokio::sync::Mutex::new(Some(process)),
            generation: AtomicU64::new(1),
            incoming,
            closing: AtomicBool::new(false),
        };
        Ok((transport, rx))
    }

    /// Whether `close` was called: nothing starts the server again.
    pub(crate) fn is_closed(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// The current process's generation (1 for the first).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The server's process id, while it runs.
    pub(crate) async fn pid(&self) -> Option<u32> {
        self.process
            .lock()
            .await
            .as_ref()
            .and_then(|p| p.child.id())
    }

    /// The running process, started again first if it died (S-11).
    async fn live(&self) -> Result<tokio::sync::MutexGuard<'_, Option<Process>>> {
        let mut guard = self.process.lock().await;
        let alive = match guard.as_mut() {
            Some(p) => {
                !p.closed.load(Ordering::Acquire)
                    && p.child.try_wait().map(|s| s.is_none()).unwrap_or(false)
            }
            None => false,
        };
        if !alive {
            if self.closing.load(Ordering::Acquire) {
                return Err(Error::Transport("the client was closed".into()));
            }
            // S-11
            tracing::warn!(server = %self.command.shown_name(), "the server is not running; starting it again");
            *guard = Some(start(&self.command, self.incoming.clone())?);
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(guard)
    }

    /// Ensures a live process and returns its generation.
    pub(crate) async fn ensure_running(&self) -> Result<u64> {
        drop(self.live().await?);
        Ok(self.generation())
    }

    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_message: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Reply, Failure> {
        let id = out
            .id
            .ok_or_else(|| Error::Transport("a request needs an id".into()))?;
        let (mut rx, mut cancel, tail, generation) = {
            let guard = self.live().await?;
            let process = guard.as_ref().expect("live() leaves a process");
            let (route, rx) = Route::new(out.method);
            {
                let mut routes = lock(&process.routes);
                if process.closed.load(Ordering::Acquire) {
                    return Err(Failure::Lost("the server exited".into()));
                }
                routes.insert(id, route);
            }
            process
                .lines
                .send(out.body.clone())
                .map_err(|_| Failure::Lost("the server's stdin is closed".into()))?;
            let cancel = Cancel {
                id,
                lines: process.lines.clone(),
                routes: process.routes.clone(),
                done: false,
            };
            (rx, cancel, process.tail.clone(), self.generation())
        };
        while let Some(message) = rx.recv().await {
            if message.get("method").is_none() {
                cancel.done = true;
                return Ok(Reply {
                    message: super::Message::Tree(message),
                    status: 200,
                    session: None,
                });
            }
            on_message(message);
        }
        cancel.done = true;
        // Stdout ended: the process is gone or going. Its status and its last words say why.
        let wait = Duration::from_millis(500);
        let (lines, status) = tokio::join!(tail.read(wait), self.exit_status(generation, wait));
        Err(exited(status, &lines))
    }

    /// The exit status of the process of `generation`, once it exits within `wait`; `None` if
    /// it has not, or was replaced since.
    async fn exit_status(
        &self,
        generation: u64,
        wait: Duration,
    ) -> Option<std::process::ExitStatus> {
        let mut guard = self.process.lock().await;
        if self.generation() != generation {
            return None;
        }
        let child = &mut guard.as_mut()?.child;
        tokio::time::timeout(wait, child.wait()).await.ok()?.ok()
    }

    /// Writes a notification or a response to the running process; never starts one (a new
    /// process did not ask for an answer).
    pub(crate) async fn send(&self, out: &Outgoing<'_>) -> Result<()> {
        let guard = self.process.lock().await;
        let process = guard
            .as_ref()
            .filter(|p| !p.closed.load(Ordering::Acquire))
            .ok_or_else(|| Error::Transport("the server is not running".into()))?;
        process
            .lines
            .send(out.body.clone())
            .map_err(|_| Error::Transport("the server's stdin is closed".into()))
    }

    /// Closes stdin and waits; then stops the server's process group: SIGTERM, a wait, SIGKILL
    /// (S-09). The group holds what the server started (the real server behind an `npx` or
    /// `sh -c` wrapper, helpers), which must not outlive it.
    pub(crate) async fn close(&self, grace: Duration) {
        self.closing.store(true, Ordering::Release);
        let Some(mut process) = self.process.lock().await.take() else {
            return;
        };
        // Requests still in flight hold senders; the token closes stdin regardless.
        process.close_stdin.cancel();
        drop(process.lines);
        let exited = tokio::time::timeout(grace, process.child.wait())
            .await
            .is_ok();
        if !exited {
            // Common and harmless (wrappers such as npx stay until signalled): the next step
            // of closing, not a fault.
            tracing::info!(server = %self.command.shown_name(), "the server did not exit when its stdin closed; sending SIGTERM");
        }
        if !process.group.terminate(&mut process.child, grace).await {
            tracing::warn!(server = %self.command.shown_name(), "the server ignored SIGTERM; killing it");
        }
        let _ = process.child.kill().await;
    }
}

/// Sends `notifications/cancelled` if the request is dropped before its answer (S-07, L-09).
struct Cancel {
    id: i64,
    lines: mpsc::UnboundedSender<String>,
    routes: Routes,
    done: bool,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        lock(&self.routes).remove(&self.id);
        if !self.done {
            let cancel = Notification::new(
                NOTIFICATION_CANCELLED,
                CancelledParams {
                    request_id: self.id.into(),
                    reason: None,
                    meta: None,
                },
            );
            let _ = self.lines.send(crate::transport::body_of(&cancel));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn start(command: &StdioCommand, incoming: mpsc::Sender<Incoming>) -> Result<Process> {
    let (mut builder, launch) = command.process()?;
    builder
        .env_clear()
        .envs(command.environment())
        .envs(
            launch
                .iter()
                .flat_map(|l| l.env.iter().cloned())
                .filter(|(name, _)| {
                    // The configuration's own values win over the sandbox's.
                    !command.env.iter().any(|(set, _)| name == set.as_str())
                        && !command.inherit.iter().any(|set| name == set.as_str())
                }),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so that closing reaches what it starts (see `ProcessGroup`). It
    // also keeps a terminal's Ctrl-C from reaching the server behind the client's back: the
    // client decides when the server stops.
    #[cfg(unix)]
    builder.process_group(0);
    if let Some(dir) = &command.cwd {
        builder.current_dir(dir);
    }
    let mut child = builder
        .spawn()
        .map_err(|e| Error::Transport(format!("cannot start {}: {e}", command.program)))?;
    let group = ProcessGroup::of(&child);
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (lines, rx) = mpsc::unbounded_channel::<String>();
    let close_stdin = CancellationToken::new();
    tokio::spawn(write_stdin(stdin, rx, close_stdin.clone()));
    let routes: Routes = Arc::default();
    let closed = Arc::new(AtomicBool::new(false));
    tokio::spawn(read_stdout(
        stdout,
        routes.clone(),
        closed.clone(),
        incoming,
    ));
    let tail = Arc::new(StderrTail::default());
    tokio::spawn(drain_stderr(
        stderr,
        command.shown_name().to_owned(),
        tail.clone(),
    ));
    Ok(Process {
        child,
        lines,
        routes,
        closed,
        close_stdin,
        group,
        _sandbox: launch,
        tail,
    })
}

/// Writes the client's lines to the server's stdin until the token closes it.
async fn write_stdin(
    mut stdin: ChildStdin,
    mut rx: mpsc::UnboundedReceiver<String>,
    closing: CancellationToken,
) {
    loop {
        let line = tokio::select! {
            biased;
            () = closing.cancelled() => break,
            line = rx.recv() => match line {
                Some(line) => line,
                None => break,
            },
        };
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.write_all(b"\n").await.is_err()
        {
            break;
        }
        if rx.is_empty() && stdin.flush().await.is_err() {
            break;
        }
    }
}

/// Reads the server's messages and hands each to its request or to the client, until EOF.
async fn read_stdout(
    stdout: ChildStdout,
    routes: Routes,
    closed: Arc<AtomicBool>,
    incoming: mpsc::Sender<Incoming>,
) {
    // Lines are bytes (a stray invalid byte spoils one line, not the stream) and bounded: an
    // oversized one is skipped, not buffered without end, and reading goes on.
    let mut stdout = FramedRead::new(stdout, Lines::new(crate::sse::MAX_EVENT_BYTES));
    while let Some(line) = stdout.next().await {
        let line = match line {
            Ok(Line::Complete(line)) => line,
            Ok(Line::TooLong) => {
                tracing::warn!("the server wrote a line longer than 64 MiB; skipped");
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, "reading the server's stdout failed");
                break;
            }
        };
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            let line = String::from_utf8_lossy(&line);
            tracing::warn!(%line, "the server wrote a line that is not JSON");
            continue;
        };
        dispatch(message, &routes, &incoming).await;
    }
    // EOF: the process is gone; every request still waiting learns it.
    let mut routes = lock(&routes);
    closed.store(true, Ordering::Release);
    routes.clear();
}

/// Hands a message to the request it belongs to, or to the client. Progress for a request
/// whose consumer has fallen [`ROUTE_CAPACITY`] behind is dropped; anything else waits for
/// room, which slows the server down (its stdout fills) rather than growing memory.
async fn dispatch(message: Value, routes: &Routes, incoming: &mpsc::Sender<Incoming>) {
    let key = route_key(&message);
    // A response ends its request: its route goes now, not when the request's task next
    // runs, so that a server request read after it sees only the requests still in flight.
    let take = |routes: &mut HashMap<i64, Route>, k: i64| match message.get("method") {
        None => routes.remove(&k),
        Some(_) => routes.get(&k).cloned(),
    };
    match key.and_then(|k| Some((k, take(&mut lock(routes), k)?))) {
        Some((id, route)) if message["method"] == NOTIFICATION_PROGRESS => {
            route.offer_progress(message, id);
        }
        Some((_, route)) => {
            let _ = route.tx.send(message).await;
        }
        None if message.get("method").is_some() => {
            // A server request names no request of ours; on stdio it belongs to a call only
            // when that call alone is in flight.
            let related = match message.get("id") {
                Some(_) => only_one(&lock(routes)),
                None => None,
            };
            let _ = incoming.send((message, related)).await;
        }
        None => tracing::debug!(%message, "a response for no request in flight"),
    }
}

/// The id of the one call in flight (a request a server may ask about), if exactly one is.
fn only_one(routes: &HashMap<i64, Route>) -> Option<i64> {
    let mut ids = routes.iter().filter(|(_, r)| r.asks).map(|(id, _)| id);
    match (ids.next(), ids.next()) {
        (Some(id), None) => Some(*id),
        _ => None,
    }
}

/// Drains the server's stderr to the end whatever it holds, so the server never blocks on a
/// full pipe; lines are shown lossily and cut at 8 KiB (S-04: logs, not errors).
async fn drain_stderr(stderr: ChildStderr, program: String, tail: Arc<StderrTail>) {
    let mut stderr = FramedRead::new(stderr, Lines::new(8 << 10));
    while let Some(line) = stderr.next().await {
        match line {
            Ok(Line::Complete(line)) => {
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end();
                super::stderr::relay_log_line(&program, line);
                tail.push(line);
            }
            Ok(Line::TooLong) => {
                tracing::info!(server = %program, "(a stderr line longer than 8 KiB, skipped)");
            }
            Err(_) => break,
        }
    }
    tail.close();
}

/// The request a message belongs to: a response's id, or the progress token or subscription id
/// a notification carries (the client uses the request id for both). Server requests (a method
/// and an id) belong to no request.
fn route_key(message: &Value) -> Option<i64> {
    if message.get("method").is_none() {
        return message.get("id").and_then(Value::as_i64);
    }
    if message.get("id").is_some() {
        return None;
    }
    let params = message.get("params")?;
    params
        .get("progressToken")
        .and_then(Value::as_i64)
        .or_else(|| params[META_FIELD][META_SUBSCRIPTION_ID].as_i64())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn a_server_request_is_related_to_the_one_call_in_flight() {
        let routes: Routes = Arc::default();
        let (incoming, mut received) = mpsc::channel(4);
        let (call, _call_rx) = Route::new("tools/call");
        let (list, _list_rx) = Route::new("tools/list");
        lock(&routes).insert(5, call.clone());
        lock(&routes).insert(6, list);
        let asking = json!({"jsonrpc": "2.0", "id": "q", "method": "roots/list"});
        // A list in flight beside the call does not count.
        dispatch(asking.clone(), &routes, &incoming).await;
        assert_eq!(received.recv().await.unwrap().1, Some(5));
        // Two calls: the request could be either's.
        lock(&routes).insert(7, call);
        dispatch(asking.clone(), &routes, &incoming).await;
        assert_eq!(received.recv().await.unwrap().1, None);
        // A response ends its call at once: the request read next is the other call's.
        dispatch(
            json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
            &routes,
            &incoming,
        )
        .await;
        assert!(!lock(&routes).contains_key(&7));
        dispatch(asking, &routes, &incoming).await;
        assert_eq!(received.recv().await.unwrap().1, Some(5));
    }

    #[test]
    fn routes_responses_notifications_and_server_requests() {
        assert_eq!(
            route_key(&json!({"jsonrpc": "2.0", "id": 7, "result": {}})),
            Some(7)
        );
        assert_eq!(
            route_key(
                &json!({"method": "notifications/progress", "params": {"progressToken": 3, "progress": 1}})
            ),
            Some(3)
        );
        assert_eq!(
            route_key(
                &json!({"method": "notifications/tools/list_changed", "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 9}}})
            ),
            Some(9)
        );
        // A legacy server's request to the client must not be taken for the answer to ours.
        assert_eq!(
            route_key(&json!({"method": "elicitation/create", "id": 7, "params": {}})),
            None
        );
        assert_eq!(
            route_key(&json!({"method": "notifications/tools/list_changed"})),
            None
        );
    }
}
