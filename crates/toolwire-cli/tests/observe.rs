//! `toolwire serve`'s metrics and health as an operator meets them: the endpoints on the MCP
//! address, moved with `--admin`, and the gateway's upstreams in them. A real Prometheus
//! scraping a running server is in tests/system_parts/metrics.rs.

#[path = "support/serve.rs"]
mod serve;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serve::{ADMIN, BIN, CALL, Killed, SERVING, call_add, get, serve, toolwire};

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
        "local": {"command": BIN, "args": ["serve", "--data-dir", made(scratch.path().join("notes"))], "prefix": "local"},
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

/// Behind a proxy (`forwarded_header`), the health probes and metrics come straight to the
/// instance with no forwarding header, as a load balancer's or Kubernetes' probe does, and
/// are answered; an MCP request without it is still refused; the `try:` line the server prints
/// works as printed.
#[tokio::test]
async fn behind_a_proxy_probes_need_no_forwarding_header_and_the_try_line_works() {
    let scratch = tempfile::tempdir().unwrap();
    let config = scratch.path().join("serve.toml");
    std::fs::write(
        &config,
        "[limits]\nforwarded_header = \"x-forwarded-for\"\n",
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"))
        .env_remove("RUST_LOG")
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let _child = Killed(child);
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut addr, mut try_line) = (None, None);
    while addr.is_none() || try_line.is_none() {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the server prints its address and a try line");
        if let Some(rest) = line.split(SERVING).nth(1) {
            let url = rest.split_whitespace().next().unwrap();
            addr = Some(
                url.trim_start_matches("http://")
                    .split('/')
                    .next()
                    .unwrap()
                    .to_owned(),
            );
        }
        if let Some(command) = line.strip_prefix("try: ") {
            try_line = Some(command.to_owned());
        }
    }
    let addr = addr.unwrap();
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(get(&format!("http://{addr}{path}")).await.0, 200, "{path}");
    }
    let direct = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "add")
        .body(CALL)
        .send()
        .await
        .unwrap();
    assert_eq!(
        direct.status(),
        400,
        "an MCP request still needs the header"
    );
    let try_line = try_line.unwrap();
    assert!(
        try_line.contains("x-forwarded-for: 127.0.0.1"),
        "{try_line}"
    );
    let out = Command::new("sh").args(["-c", &try_line]).output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains(r#""structuredContent":{"sum":5}"#),
        "{try_line}\n{answer}"
    );
}

/// `path`, made: a directory given to a sandboxed server is granted to it when it exists (one
/// not made yet is granted through the directory it would be made in, which here also holds
/// Toolwire's state, hidden from servers).
fn made(path: std::path::PathBuf) -> std::path::PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    path
}
