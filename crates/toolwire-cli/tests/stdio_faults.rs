//! Faults on stdio that must neither crash the server nor grow its memory, against `toolwire serve`
//! as a real child process: a 100 MB line, invalid UTF-8, a line cut by EOF, and a client that
//! stops reading its stdout. The server's memory is read from /proc.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// `toolwire serve` on stdio, answering already, with state and data directories of its own:
/// the tests run at once, and servers sharing one handle database raced to create it (in CI,
/// one exited before it read a line).
/// The scratch directory holding them is removed when the first value is dropped.
fn serve() -> (tempfile::TempDir, Child, ChildStdin, BufReader<ChildStdout>) {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin
        .write_all(request(0, "server/discover", json!({})).as_bytes())
        .unwrap();
    assert_eq!(read_reply(&mut stdout)["id"], 0, "the server answers");
    (scratch, child, stdin, stdout)
}

fn request(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stdio-faults", "version": "0"}
    });
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    format!("{line}\n")
}

fn echo(id: u64, message: &str) -> String {
    request(
        id,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": message}}),
    )
}

fn read_reply(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    assert!(
        stdout.read_line(&mut line).unwrap() > 0,
        "the server closed stdout"
    );
    serde_json::from_str(&line).unwrap()
}

/// The child's memory in KiB: `VmRSS` (now), `VmHWM` (its peak) or `RssAnon` (its own pages,
/// without its binary's).
fn memory_kb(child: &Child, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

/// Closes stdin and waits for a clean exit, at most 10 s.
fn finish(mut child: Child, stdin: ChildStdin) {
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not exit after EOF");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_100_mb_line_is_refused_and_memory_stays_bounded() {
    let (_scratch, child, mut stdin, mut stdout) = serve();
    stdin
        .write_all(request(1, "server/discover", json!({})).as_bytes())
        .unwrap();
    assert_eq!(read_reply(&mut stdout)["id"], 1);
    let before = memory_kb(&child, "VmRSS:");
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 1024 * 1024];
        for _ in 0..100 {
            stdin.write_all(&chunk).unwrap();
        }
        stdin.write_all(b"\n").unwrap();
        stdin
            .write_all(request(2, "server/discover", json!({})).as_bytes())
            .unwrap();
        stdin
    });
    let refused = read_reply(&mut stdout);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["id"].is_null(), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message exceeds"),
        "{refused}"
    );
    let next = read_reply(&mut stdout);
    assert_eq!(next["id"], 2, "still serving: {next}");
    let stdin = writer.join().unwrap();
    let peak = memory_kb(&child, "VmHWM:");
    assert!(
        peak < before + 20 * 1024,
        "peak memory {peak} KiB, {before} KiB before the 100 MB line: the line was not held"
    );
    finish(child, stdin);
}

#[test]
fn invalid_utf8_and_a_line_cut_by_eof_get_errors() {
    let (_scratch, child, mut stdin, mut stdout) = serve();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\",\"params\":{}}\n")
        .unwrap();
    let reply = read_reply(&mut stdout);
    assert_eq!(
        reply["error"]["code"], -32700,
        "invalid UTF-8 is a parse error: {reply}"
    );
    stdin
        .write_all(request(2, "server/discover", json!({})).as_bytes())
        .unwrap();
    assert_eq!(read_reply(&mut stdout)["id"], 2, "still serving");
    // Half a request, then EOF.
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":3,"meth"#)
        .unwrap();
    drop(stdin);
    let reply = read_reply(&mut stdout);
    assert_eq!(reply["error"]["code"], -32700, "the cut line: {reply}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing after the cut line's error");
    let mut child = child;
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_client_that_stops_reading_holds_the_server_back() {
    let (_scratch, child, stdin, mut stdout) = serve();
    // What the server holds before the flood: its code, runtime and tools (tens of MiB for a
    // debug build, more as the program grows), which the bound below does not count.
    let idle = memory_kb(&child, "RssAnon:");
    let message = "m".repeat(256 * 1024);
    let written = Arc::new(AtomicU64::new(0));
    // 72 MiB of replies if nothing held the server back; within the example server's rate
    // limit (300 calls a minute).
    let calls = 290u64;
    let counter = written.clone();
    let writer = std::thread::spawn(move || {
        let mut stdin = stdin;
        for id in 1..=calls {
            let line = echo(id, &message);
            stdin.write_all(line.as_bytes()).unwrap();
            counter.fetch_add(line.len() as u64, Ordering::SeqCst);
        }
        stdin
    });
    // Nobody reads stdout: the server's queue fills, then it stops reading stdin.
    let mut last = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = written.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server kept reading: {now} bytes"
        );
        last = now;
    }
    assert!(
        last < 16 * 1024 * 1024,
        "the server read {last} bytes of requests while its client read nothing"
    );
    // Unbounded, the server would hold every request and reply (144 MiB); held back, the
    // requests it read (under 16 MiB, checked above) and the replies queued for them, each
    // parsed or serialized once more on the way: under 48 MiB more than when idle. Counted in
    // the process's own memory (anonymous pages), not the resident pages of its binary, which
    // grow with every crate linked in.
    let held = memory_kb(&child, "RssAnon:");
    assert!(
        held.saturating_sub(idle) < 48 * 1024,
        "{held} KiB of the process's own memory ({idle} KiB idle) while {last} bytes of \
         requests wait for their replies"
    );
    // The client reads again: every reply arrives, in order, and the rest is served.
    for id in 1..=calls {
        let reply = read_reply(&mut stdout);
        assert_eq!(reply["id"], id);
        let text = reply["result"]["content"][0]["text"].as_str();
        assert_eq!(text.map(str::len), Some(256 * 1024), "{id}: {text:?}");
    }
    let stdin = writer.join().unwrap();
    finish(child, stdin);
}
