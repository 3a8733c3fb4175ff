//! End-to-end tests against the real `conformance-server` binary as a child process: stdio
//! framing and lifecycle (S-01…S-10), and Streamable HTTP on 127.0.0.1 port 0.

#![allow(unreachable_pub)]

mod client;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_conformance-server");

fn request(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "0"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: ChildStderr,
}

impl Stdio_ {
    fn spawn() -> Stdio_ {
        let mut child = Command::new(BIN)
            .arg("--stdio")
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("conformance-server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = child.stderr.take().unwrap();
        Stdio_ {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next stdout line, which must be a JSON-RPC message (S-02).
    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.stdout.next_line())
            .await
            .expect("a line within 10 s")
            .unwrap()
            .expect("stdout open");
        let msg: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries only JSON ({e}): {line}"));
        assert_eq!(msg["jsonrpc"], "2.0");
        assert!(
            msg.get("id").is_none() || msg.get("method").is_none(),
            "never a request on stdout (S-05): {line}"
        );
        msg
    }
}

#[tokio::test]
async fn stdio_child_serves_concurrently_survives_garbage_and_exits_on_eof() {
    let mut s = Stdio_::spawn();
    s.send("this is not json").await;
    let error = s.recv().await;
    assert_eq!(error["error"]["code"], -32700);
    assert!(error.get("id").is_none());

    s.send(
        &request(
            1,
            "tools/call",
            json!({"name": "test_tool_with_progress", "_meta": {}}),
        )
        .to_string()
        .replace("\"_meta\":{", "\"_meta\":{\"progressToken\":\"tok\","),
    )
    .await;
    s.send(&request(2, "tools/call", json!({"name": "test_simple_text"})).to_string())
        .await;
    let mut order = Vec::new();
    let mut progress = Vec::new();
    while order.len() < 2 {
        let m = s.recv().await;
        match m.get("id").and_then(Value::as_i64) {
            Some(id) => order.push(id),
            None => {
                assert_eq!(m["method"], "notifications/progress");
                assert_eq!(m["params"]["progressToken"], "tok");
                progress.push(m["params"]["progress"].as_f64().unwrap());
            }
        }
    }
    assert_eq!(order, [2, 1], "the quick call is answered first");
    assert_eq!(progress, [0.0, 50.0, 100.0]);

    s.send(&request(3, "tools/call", json!({"name": "test_missing_capability"})).to_string())
        .await;
    let m = s.recv().await;
    assert_eq!(m["error"]["code"], -32021);
    assert_eq!(
        m["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );

    // EOF: the server exits promptly and cleanly (S-10).
    drop(s.stdin);
    let status = tokio::time::timeout(Duration::from_secs(5), s.child.wait())
        .await
        .expect("exits on EOF")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(s.stdout.next_line().await.unwrap().is_none());
    let mut logs = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s.stderr, &mut logs)
        .await
        .unwrap();
    assert!(!logs.is_empty(), "logs go to stderr (S-02)");
}

#[tokio::test]
async fn stdio_child_cancellation_sends_nothing_more() {
    let mut s = Stdio_::spawn();
    let call = request(
        9,
        "tools/call",
        json!({"name": "test_tool_with_progress", "_meta": {}}),
    )
    .to_string()
    .replace("\"_meta\":{", "\"_meta\":{\"progressToken\":9,");
    s.send(&call).await;
    let first = s.recv().await;
    assert_eq!(first["method"], "notifications/progress");
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
            .to_string(),
    )
    .await;
    s.send(&request(10, "server/discover", json!({})).to_string())
        .await;
    let next = s.recv().await;
    assert_eq!(
        next["id"], 10,
        "nothing more for the cancelled request (S-08): {next}"
    );
    let quiet = tokio::time::timeout(Duration::from_millis(400), s.stdout.next_line()).await;
    assert!(quiet.is_err(), "no late progress or result: {quiet:?}");
}

#[tokio::test]
async fn http_child_binds_port_zero_and_stops_on_interrupt() {
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(10), stderr.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("announces its address");
        if let Some(url) = line.strip_prefix("conformance-server: listening on ") {
            break url.to_owned();
        }
    };
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let body = request(1, "server/discover", json!({}));
    let resp = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let reply: Value = resp.json().await.unwrap();
    assert_eq!(reply["result"]["supportedVersions"], json!(["2026-07-28"]));
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("stops on SIGINT")
        .unwrap();
    assert!(status.success(), "{status}");
}
