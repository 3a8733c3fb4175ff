//! `toolwire serve`'s metrics and health as an operator meets them: the endpoints on the MCP
//! address, moved with `--admin`, and a real Prometheus server (Debian's `prometheus`, installed
//! by `scripts/observe install`) scraping a running server.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A child process killed when the test ends, whatever happens.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolwire serve ARGS` with its state in `scratch`, and the first address it names after
/// each of `notes` on stderr (within 10 s).
fn serve(scratch: &tempfile::TempDir, args: &[&str], notes: &[&str]) -> (Killed, Vec<String>) {
    let mut all = vec!["serve"];
    all.extend(args);
    toolwire(scratch, &all, notes)
}

/// `toolwire ARGS`, as [`serve`].
fn toolwire(scratch: &tempfile::TempDir, args: &[&str], notes: &[&str]) -> (Killed, Vec<String>) {
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

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// Calls `add` on the server at `addr`.
async fn call_add(addr: &str) {
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

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

const SERVING: &str = "serving the example tools at ";
const ADMIN: &str = "admin endpoints at ";

#[tokio::test]
async fn serve_http_answers_metrics_healthz_and_readyz_on_its_address() {
    let scratch = tempfile::tempdir().unwrap();
    let (_server, found) = serve(&scratch, &["--http", "127.0.0.1:0"], &[SERVING]);
    let addr = &found[0];
    call_add(addr).await;
    let (status, metrics) = get(&format!("http://{addr}/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"gen_ai_tool_name="add",mcp_method_name="tools/call""#),
        "{metrics}"
    );
    assert_eq!(
        get(&format!("http://{addr}/healthz")).await,
        (200, "ok".into())
    );
    assert_eq!(
        get(&format!("http://{addr}/readyz")).await,
        (200, r#"{"ready":true}"#.into())
    );
}

#[tokio::test]
async fn serve_admin_moves_the_endpoints_off_the_mcp_address() {
    let scratch = tempfile::tempdir().unwrap();
    let args = ["--http", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    let (_server, found) = serve(&scratch, &args, &[ADMIN, SERVING]);
    let (admin, addr) = (&found[0], &found[1]);
    call_add(addr).await;
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(get(&format!("http://{addr}{path}")).await.0, 404, "{path}");
        assert_eq!(get(&format!("http://{admin}{path}")).await.0, 200, "{path}");
    }
}

#[tokio::test]
async fn serve_no_metrics_keeps_health_only() {
    let scratch = tempfile::tempdir().unwrap();
    let args = ["--http", "127.0.0.1:0", "--no-metrics"];
    let (_server, found) = serve(&scratch, &args, &[SERVING]);
    let addr = &found[0];
    assert_eq!(get(&format!("http://{addr}/metrics")).await.0, 404);
    assert_eq!(get(&format!("http://{addr}/healthz")).await.0, 200);
}

/// `toolwire gateway` with one upstream that works and one that cannot be reached: the
/// second is down in /metrics, and /readyz says the gateway is ready but degraded, naming it.
#[tokio::test]
async fn gateway_shows_an_upstream_that_fails_in_metrics_and_readyz() {
    let scratch = tempfile::tempdir().unwrap();
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = scratch.path().join("gateway.json");
    let servers = serde_json::json!({"mcpServers": {
        "local": {"command": BIN, "args": ["serve", "--data-dir", scratch.path().join("notes")], "prefix": "local"},
        "gone": {"url": format!("http://127.0.0.1:{nowhere}/mcp"), "prefix": "gone"},
    }});
    std::fs::write(&config, servers.to_string()).unwrap();
    let config = config.to_str().unwrap();
    let args = [
        "gateway",
        "--http",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--config",
        config,
    ];
    let (_gateway, found) = toolwire(&scratch, &args, &[ADMIN]);
    let admin = &found[0];
    let (status, metrics) = get(&format!("http://{admin}/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("toolwire_upstream_up{upstream=\"gone\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("toolwire_upstream_up{upstream=\"local\"} 1"),
        "{metrics}"
    );
    let (status, body) = get(&format!("http://{admin}/readyz")).await;
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["degraded"][0]["part"], "upstream:gone", "{body}");
}

/// `toolwire serve --admin ADDR` on stdio: a call made on stdin is in the admin address's
/// /metrics.
#[tokio::test]
async fn serve_on_stdio_has_metrics_only_on_its_admin_address() {
    use std::io::Write as _;
    let scratch = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"))
        .env_remove("RUST_LOG")
        .args(["serve", "--admin", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let _child = Killed(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the admin address");
        if line.contains(ADMIN) {
            break line;
        }
    };
    let admin = line
        .split(ADMIN)
        .nth(1)
        .unwrap()
        .trim_start_matches("http://");
    let admin = admin.split('/').next().unwrap().to_owned();
    writeln!(stdin, "{CALL}").unwrap();
    let (answered, answer) = mpsc::channel();
    std::thread::spawn(move || {
        let first = stdout.lines().map_while(Result::ok).next();
        let _ = answered.send(first);
    });
    let reply = answer
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert!(reply.contains(r#""id":1"#), "{reply}");
    let (status, metrics) = get(&format!("http://{admin}/metrics")).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"gen_ai_tool_name="add",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="pipe"} 1"#),
        "{metrics}"
    );
}

/// A real Prometheus scrapes `toolwire serve --http` every second; its query API then counts
/// the call made.
#[tokio::test]
async fn prometheus_scrapes_serve_and_counts_a_call() {
    if std::env::var("TOOLWIRE_SKIP_PROMETHEUS_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("TOOLWIRE_SKIP_PROMETHEUS_TESTS=1: this Prometheus test is skipped");
        return;
    }
    assert!(
        Command::new("prometheus")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "prometheus is missing: install it with `scripts/observe install` (Debian's prometheus \
         package, pinned), or set TOOLWIRE_SKIP_PROMETHEUS_TESTS=1 to skip this test"
    );
    let scratch = tempfile::tempdir().unwrap();
    let (_server, found) = serve(&scratch, &["--http", "127.0.0.1:0"], &[SERVING]);
    let addr = &found[0];
    call_add(addr).await;
    let config = scratch.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: toolwire\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    // A free port for Prometheus's own API: bound here, released, then given to it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!(
            "--storage.tsdb.path={}",
            scratch.path().join("tsdb").display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _prometheus = Killed(prometheus);
    // mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"}, URL-encoded.
    let query =
        "mcp_server_operation_duration_seconds_count%7Bmcp_method_name%3D%22tools%2Fcall%22%7D";
    let url = format!("http://127.0.0.1:{port}/api/v1/query?query={query}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    // Prometheus answers once it has started and has the sample once it has scraped: it is
    // asked again until then, within the deadline.
    while Instant::now() < deadline {
        let answer = reqwest::Client::new()
            .get(&url)
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        if let Ok(answer) = answer {
            last = answer.text().await.unwrap_or_default();
            let value: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
            let count = value["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok());
            if count.is_some_and(|c| c > 0.0) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("Prometheus did not count the call within 60 s; its last answer: {last}");
}
