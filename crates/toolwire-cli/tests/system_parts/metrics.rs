//! Metrics as Prometheus reads them: its own checker (`promtool check metrics`) on a real
//! scrape of `toolwire serve` after calls of every kind, and a real Prometheus server scraping a
//! running `toolwire serve` and counting a call through its query API.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolwire_testkit::SystemPart;

use crate::serve::{Killed, SERVING, call_add, get, serve};

/// `promtool check metrics` accepts a scrape taken after a call answered, a call refused for
/// its arguments, and a call of an unknown tool.
pub(crate) fn promtool_accepts_a_scrape_of_serve() {
    crate::block_on(async {
        let scratch = tempfile::tempdir().unwrap();
        let (_server, found) = serve(&scratch, &["--http", "127.0.0.1:0"], &[SERVING]);
        let addr = &found[0];
        call_add(addr).await;
        for (name, arguments) in [("add", r#"{"a":"two"}"#), ("nope", "{}")] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{name}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
            );
            // Answered or refused, each call is counted in the scrape.
            reqwest::Client::new()
                .post(format!("http://{addr}/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", name)
                .body(body)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .unwrap();
        }
        let (status, text) = get(&format!("http://{addr}/metrics")).await;
        assert_eq!(status, 200);
        assert!(
            text.contains("error_type="),
            "errors are in the scrape: {text}"
        );
        let mut child = Command::new(SystemPart::Promtool.path())
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "promtool check metrics: {}{}\n{text}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    });
}

/// A real Prometheus scrapes `toolwire serve --http` every second; its query API then counts
/// the call made.
pub(crate) fn prometheus_scrapes_serve_and_counts_a_call() {
    crate::block_on(prometheus_scrapes_serve());
}

async fn prometheus_scrapes_serve() {
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
    let prometheus = Command::new(SystemPart::Prometheus.path())
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
