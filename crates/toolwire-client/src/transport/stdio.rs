//! stdio, the client side (CHECKLIST §3): a child process speaking newline-delimited JSON-RPC.
//! Many requests run at once, answers are matched by id, progress and subscription
//! notifications are routed to their request (S-06); stderr is read as logs (S-04); a dropped
//! request sends `notifications/cancelled` (S-07); a crashed server is restarted and the
//! request retried once (S-11); `close` closes stdin, then SIGTERM, then SIGKILL (S-09).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::Outgoing;
use crate::error::{Error, Result};

/// How to start the server.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

/// Messages for one in-flight request: notifications, then its response.
type Route = mpsc::UnboundedSender<Value>;

#[derive(Debug)]
struct Process {
    child: Child,
    lines: mpsc::UnboundedSender<String>,
    /// Routes by request id (and progress token / subscription id, which are the request id).
    routes: Arc<Mutex<HashMap<i64, Route>>>,
}

/// A child-process server.
#[derive(Debug)]
pub(crate) struct StdioTransport {
    command: StdioCommand,
    process: tokio::sync::Mutex<Option<Process>>,
}

impl StdioTransport {
    pub(crate) async fn spawn(command: StdioCommand) -> Result<Self> {
        let process = start(&command)?;
        Ok(StdioTransport {
            command,
            process: tokio::sync::Mutex::new(Some(process)),
        })
    }

    /// Registers a route for `id` and writes the request, restarting a dead server first.
    async fn submit(&self, out: &Outgoing<'_>) -> Result<(mpsc::UnboundedReceiver<Value>, Cancel)> {
        let mut guard = self.process.lock().await;
        let alive = match guard.as_mut() {
            Some(p) => p.child.try_wait().map(|s| s.is_none()).unwrap_or(false),
            None => false,
        };
        if !alive {
            tracing::warn!(program = %self.command.program, "the server is not running; starting it (S-11)");
            *guard = Some(start(&self.command)?);
        }
        let process = guard.as_ref().expect("just started");
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&process.routes).insert(out.id, tx);
        process
            .lines
            .send(out.body.clone())
            .map_err(|_| Error::Transport("the server's stdin is closed".into()))?;
        let cancel = Cancel {
            id: out.id,
            lines: process.lines.clone(),
            routes: process.routes.clone(),
            done: false,
        };
        Ok((rx, cancel))
    }

    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_notification: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Value> {
        // A request lost to a crash is re-issued once on a fresh process (S-11).
        for attempt in 0..2 {
            let (mut rx, mut cancel) = self.submit(out).await?;
            while let Some(message) = rx.recv().await {
                if message.get("result").is_some() || message.get("error").is_some() {
                    cancel.done = true;
                    return Ok(message);
                }
                on_notification(message);
            }
            cancel.done = true;
            if attempt == 0 {
                tracing::warn!("the server exited with a request in flight; retrying it");
            }
        }
        Err(Error::Transport(
            "the server exited before answering".into(),
        ))
    }

    /// Closes stdin, waits, then SIGTERM, then SIGKILL (S-09).
    pub(crate) async fn close(&self, grace: Duration) {
        let Some(mut process) = self.process.lock().await.take() else {
            return;
        };
        drop(process.lines);
        if tokio::time::timeout(grace, process.child.wait())
            .await
            .is_ok()
        {
            return;
        }
        #[cfg(unix)]
        if let Some(pid) = process.child.id() {
            let pid = rustix::process::Pid::from_raw(pid as i32);
            if let Some(pid) = pid {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            if tokio::time::timeout(grace, process.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = process.child.kill().await;
    }
}

/// Sends `notifications/cancelled` if the request is dropped before its answer (S-07).
struct Cancel {
    id: i64,
    lines: mpsc::UnboundedSender<String>,
    routes: Arc<Mutex<HashMap<i64, Route>>>,
    done: bool,
}

impl Drop for Cancel {
    fn drop(&mut self) {
        lock(&self.routes).remove(&self.id);
        if !self.done {
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": self.id}});
            let _ = self.lines.send(cancel.to_string());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn start(command: &StdioCommand) -> Result<Process> {
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Transport(format!("cannot start {}: {e}", command.program)))?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (lines, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if stdin.write_all(line.as_bytes()).await.is_err()
                || stdin.write_all(b"\n").await.is_err()
            {
                break;
            }
            if rx.is_empty() && stdin.flush().await.is_err() {
                break;
            }
        }
    });
    let routes: Arc<Mutex<HashMap<i64, Route>>> = Arc::default();
    let reader_routes = routes.clone();
    tokio::spawn(async move {
        let mut stdout = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = stdout.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                tracing::warn!(%line, "the server wrote a line that is not JSON");
                continue;
            };
            let key = route_key(&message);
            let route = key.and_then(|k| lock(&reader_routes).get(&k).cloned());
            match route {
                Some(route) => {
                    let _ = route.send(message);
                }
                None => tracing::debug!(%line, "a message for no request in flight"),
            }
        }
        // EOF: every request still waiting learns the server is gone.
        lock(&reader_routes).clear();
    });
    let program = command.program.clone();
    tokio::spawn(async move {
        let mut stderr = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = stderr.next_line().await {
            tracing::info!(server = %program, "{line}");
        }
    });
    Ok(Process {
        child,
        lines,
        routes,
    })
}

/// The request a message belongs to: its id, or the progress token or subscription id it
/// carries (the client uses the request id for both).
fn route_key(message: &Value) -> Option<i64> {
    if let Some(id) = message.get("id").and_then(Value::as_i64) {
        return Some(id);
    }
    let params = message.get("params")?;
    params
        .get("progressToken")
        .and_then(Value::as_i64)
        .or_else(|| params["_meta"]["io.modelcontextprotocol/subscriptionId"].as_i64())
}
