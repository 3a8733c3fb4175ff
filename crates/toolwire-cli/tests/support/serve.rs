//! `toolwire serve` (or any `toolwire` command) started for a test, the addresses it prints,
//! and the HTTP calls the metrics tests make to it.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A child process killed when the test ends, whatever happens.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolwire serve ARGS` with its state in `scratch`, and the first address it names after
/// each of `notes` on stderr (within 10 s).
pub(crate) fn serve(
    scratch: &tempfile::TempDir,
    args: &[&str],
    notes: &[&str],
) -> (Killed, Vec<String>) {
    let mut all = vec!["serve"];
    all.extend(args);
    toolwire(scratch, &all, notes)
}

/// `toolwire ARGS`, as [`serve`].
pub(crate) fn toolwire(
    scratch: &tempfile::TempDir,
    args: &[&str],
    notes: &[&str],
) -> (Killed, Vec<String>) {
    let mut child = Command::new(BIN)
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"))
        .env_remove("RUST_LOG")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut found = Vec::new();
    for note in notes {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line with {note:?} within 10 s"));
            if let Some(rest) = line.split(note).nth(1) {
                let url = rest.split_whitespace().next().unwrap();
                let addr = url.trim_start_matches("http://").split('/').next().unwrap();
                found.push(addr.trim_end_matches(',').to_owned());
                break;
            }
        }
    }
    std::thread::spawn(move || while lines.recv().is_ok() {});
    (child, found)
}

pub(crate) const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// Calls `add` on the server at `addr`.
pub(crate) async fn call_add(addr: &str) {
    let reply = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "add")
        .body(CALL)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
}

pub(crate) async fn get(url: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

pub(crate) const SERVING: &str = "serving the example tools at ";
pub(crate) const ADMIN: &str = "admin endpoints at ";
