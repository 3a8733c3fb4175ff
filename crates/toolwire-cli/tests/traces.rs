//! Traces end to end, as an operator runs them: a caller's `tools/call` with a W3C
//! `traceparent` in `_meta` goes to `toolwire gateway --http`, which calls `toolwire serve
//! --http`; both export their spans with OTLP to a real receiver (Arize Phoenix from PyPI,
//! installed on first use by `scripts/otel install`), whose API then shows one trace: the caller's span,
//! the gateway's SERVER span, its CLIENT span to the upstream, and the upstream's SERVER span,
//! each the parent of the next (OT-01, OT-03). And `--log-format json`: one JSON object per
//! line, the request's id and trace id on the lines logged while it is served.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/gateway.rs"]
mod support;

use support::{Killed, toolwire};
use toolwire_testkit::RegistryPart;

const TRACE: &str = "5c2a6a1e0d7a4c3b9e8f7a6b5c4d3e2f";
const CALLER_SPAN: &str = "a1b2c3d4e5f60718";
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/otel");
/// How long Phoenix may take to start (it is a Python web application).
const RECEIVER_STARTUP: Duration = Duration::from_secs(180);

/// A running receiver: stopped when dropped (its script stops it when its stdin closes).
struct Receiver {
    child: Child,
    url: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the receiver, installing it first when it is missing (a few minutes, once; it says
/// so on stderr).
fn receiver() -> Receiver {
    RegistryPart::Phoenix.path();
    let port = free_port();
    let mut child = Command::new("bash")
        .args([SCRIPT, "run", &port.to_string(), &free_port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("scripts/otel run starts");
    let (tx, lines) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let receiver = Receiver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + RECEIVER_STARTUP;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains("Uvicorn running on") => break,
            Ok(line) => seen.push(line),
            Err(_) => {
                panic!("the OTLP receiver did not start within {RECEIVER_STARTUP:?}: {seen:#?}")
            }
        }
    }
    std::thread::spawn(move || while lines.recv().is_ok() {});
    receiver
}

/// Stops a child as a service manager does (SIGTERM) and waits for it (at most 20 s), so that
/// it sends the spans it still holds.
async fn terminate(mut child: Killed) {
    let pid = child.0.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    let waited = tokio::task::spawn_blocking(move || child.0.wait());
    tokio::time::timeout(Duration::from_secs(20), waited)
        .await
        .expect("toolwire stops within 20 s of SIGTERM")
        .unwrap()
        .unwrap();
}

/// A `tools/call` of `tool` posted to `url` with the caller's `traceparent` in `_meta`: the
/// reply's JSON.
async fn call(url: &str, tool: &str, message: &str) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": 41, "method": "tools/call",
        "params": {"name": tool, "arguments": {"message": message}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "traceparent": format!("00-{TRACE}-{CALLER_SPAN}-01"),
        }}
    });
    let reply = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(reply.status(), 200);
    reply.json().await.unwrap()
}

/// The spans of `trace` the receiver holds, once it holds at least `count` of them (it stores
/// what it receives in the background; asked again every 200 ms for at most 30 s).
async fn spans_of(receiver: &Receiver, trace: &str, count: usize) -> Vec<Value> {
    let url = format!("{}/v1/projects/default/spans?limit=1000", receiver.url);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let spans: Vec<Value> = all["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s["context"]["trace_id"] == trace)
            .collect();
        if spans.len() >= count || Instant::now() > deadline {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The one span of `spans` named `name` whose parent is `parent`.
fn child_of<'a>(spans: &'a [Value], name: &str, parent: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == name && s["parent_id"] == parent)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one span {name:?} under {parent}: {}",
        serde_json::to_string_pretty(spans).unwrap()
    );
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_through_the_gateway_is_one_trace_from_the_caller_to_the_upstream() {
    let receiver = receiver();
    let endpoint = receiver.url.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = toolwire(&dir);
    upstream
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--otlp-endpoint",
            &endpoint,
        ])
        .arg("--data-dir")
        .arg(dir.path().join("notes"))
        .env("OTEL_SERVICE_NAME", "upstream");
    let (upstream, upstream_url) =
        support::started_drained(upstream, "serving the example tools at ");
    let config = json!({"mcpServers": {"up": {"url": upstream_url, "prefix": "up"}}});
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file)
        // The standard variable works as the flag does.
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "gateway");
    let (gateway, url) = support::started_drained(gateway, "the gateway serves at ");

    let reply = call(&url, "up__echo", "traced").await;
    assert!(reply["result"].to_string().contains("traced"), "{reply}");
    // Their last spans are sent as they stop.
    terminate(gateway).await;
    terminate(upstream).await;

    let spans = spans_of(&receiver, TRACE, 3).await;
    let served = child_of(&spans, "tools/call up__echo", CALLER_SPAN);
    let forwarded = child_of(
        &spans,
        "tools/call echo",
        served["context"]["span_id"].as_str().unwrap(),
    );
    let upstream = child_of(
        &spans,
        "tools/call echo",
        forwarded["context"]["span_id"].as_str().unwrap(),
    );
    for (span, key, want) in [
        (served, "gen_ai.tool.name", "up__echo"),
        (served, "network.transport", "tcp"),
        (served, "jsonrpc.request.id", "41"),
        (forwarded, "gen_ai.tool.name", "echo"),
        (upstream, "gen_ai.tool.name", "echo"),
        (upstream, "gen_ai.operation.name", "execute_tool"),
        (upstream, "mcp.method.name", "tools/call"),
    ] {
        let attributes = &span["attributes"];
        let value = attributes
            .get(key)
            .or_else(|| key.split('.').try_fold(attributes, |v, part| v.get(part)));
        assert_eq!(
            value
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| value.map(Value::to_string))
                .as_deref(),
            Some(want),
            "{key} of {}",
            serde_json::to_string_pretty(span).unwrap()
        );
    }
}

#[test]
fn json_logs_carry_the_request_id_and_trace_id_on_every_line_of_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut serve = toolwire(&dir);
    serve
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("notes"))
        .env("TOOLWIRE_LOG_FORMAT", "json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = serve.spawn().unwrap();
    let request = json!({
        "jsonrpc": "2.0", "id": "req-7", "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "logged"}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "traceparent": format!("00-{TRACE}-{CALLER_SPAN}-01"),
        }}
    });
    // A second call without a trace context of its own: its lines carry a new trace id.
    let mut untraced = request.clone();
    untraced["id"] = json!("req-8");
    untraced["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("traceparent");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{request}").unwrap();
        writeln!(stdin, "{untraced}").unwrap();
        // stdin closes here: the server answers and stops.
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("logged"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<Value> = stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    assert!(!lines.is_empty(), "some lines: {stderr}");
    // The audit event is logged while the call is served.
    let during: Vec<&Value> = lines
        .iter()
        .filter(|line| line["target"] == "toolwire::audit")
        .collect();
    assert_eq!(during.len(), 2, "{stderr}");
    let of = |id: &str| {
        *during
            .iter()
            .find(|line| line["span"]["jsonrpc.request.id"] == id)
            .unwrap_or_else(|| panic!("the lines of {id}: {stderr}"))
    };
    assert_eq!(of("req-7")["span"]["trace_id"], TRACE);
    let new = of("req-8")["span"]["trace_id"].as_str().unwrap_or_default();
    assert!(
        new.len() == 32 && new != TRACE && new.bytes().all(|b| b.is_ascii_hexdigit()),
        "a trace id of its own: {new:?}"
    );
    for line in during {
        // Words, not Rust's debug text.
        assert_eq!(line["outcome"], "complete", "{line}");
        assert!(
            line.get("principal").is_none(),
            "no empty principal: {line}"
        );
    }
    // The lines outside any request (the start) have no span.
    assert!(
        lines.iter().any(|line| line.get("span").is_none()),
        "{stderr}"
    );
}
