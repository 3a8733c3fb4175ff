//! Live reload as an operator uses it: `toolwire gateway` and `toolwire serve` given SIGHUP
//! (or `--watch-config`) after their file changed. What reloads takes effect while calls in
//! flight finish and listen streams stay open; what needs a restart, and a file that does not
//! load, are refused with the reason, on stderr and in the audit log, the old configuration
//! still serving.
#![cfg(unix)]

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwire_client::protocol::SubscriptionFilter;
use toolwire_client::{CallOptions, Client, ClientBuilder, Notification};

#[path = "support/gateway.rs"]
mod support;

use support::{BIN, Killed, toolwire};

/// How long an effect of a reload may take to be seen.
const EFFECT: Duration = Duration::from_secs(30);

/// A `toolwire serve` on stdio, as an upstream of the gateway, with its notes in `DIR/NAME`.
fn upstream(dir: &tempfile::TempDir, name: &str) -> Value {
    json!({
        "command": BIN,
        "args": ["serve", "--data-dir", made(dir.path().join(name))],
        "prefix": name,
    })
}

/// Writes the gateway's file: `upstreams` by name, and `gateway` as its downstream settings.
fn write_gateway(file: &std::path::Path, upstreams: Value, gateway: Value) {
    let config = json!({"mcpServers": upstreams, "gateway": gateway});
    std::fs::write(file, config.to_string()).unwrap();
}

/// Sends `signal` to the process.
fn signal(child: &Killed, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (at most [`EFFECT`]) for a stderr line containing every one of `needles`.
fn line_with(lines: &mpsc::Receiver<String>, needles: &[&str]) -> String {
    let deadline = Instant::now() + EFFECT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if needles.iter().all(|n| line.contains(n)) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no line with {needles:?} within {EFFECT:?}; stderr: {seen:#?}"),
        }
    }
}

/// A client of `url`.
fn client_of(url: &str) -> Client {
    ClientBuilder::new("reload-test", "1")
        .timeout(Duration::from_secs(30))
        .http(url)
        .unwrap()
}

/// The names the server lists now.
async fn names(client: &Client) -> Vec<String> {
    client
        .refresh_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// Lists again until `done` holds of the names (at most [`EFFECT`]), polling with a deadline.
async fn until_listed(client: &Client, what: &str, done: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + EFFECT;
    loop {
        let now = names(client).await;
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the list is {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the audit file's line with every one of `needles`: the record, as JSON.
async fn audit_record(file: &std::path::Path, needles: &[&str]) -> Value {
    let deadline = Instant::now() + EFFECT;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
            return serde_json::from_str(line).expect("a JSON line");
        }
        assert!(
            Instant::now() < deadline,
            "no audit record with {needles:?} in {}: {text}",
            file.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn has(names: &[String], name: &str) -> bool {
    names.iter().any(|n| n == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_reloads_upstreams_and_rules_on_sighup_without_dropping_calls_or_streams() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    let settings = json!({"audit": {"file": "gateway-audit.jsonl"}});
    write_gateway(
        &file,
        json!({"one": upstream(&dir, "one")}),
        settings.clone(),
    );
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    let started = support::start(gateway, "the gateway serves at ");
    let (child, lines) = (started.child, started.lines);
    let client = client_of(&started.url);
    let listed = names(&client).await;
    assert!(has(&listed, "one__echo"), "{listed:?}");
    assert!(!has(&listed, "two__echo"), "{listed:?}");

    // A listen stream open, and a slow call in flight (it has reported progress).
    let mut stream = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .expect("listen");
    let (progressed, first_progress) = tokio::sync::oneshot::channel();
    let progressed = std::sync::Mutex::new(Some(progressed));
    let slow = tokio::spawn({
        let client = client.clone();
        let options = CallOptions::default().on_progress(move |_| {
            if let Some(tx) = progressed.lock().unwrap().take() {
                let _ = tx.send(());
            }
        });
        async move {
            client
                .call_tool_with(
                    "one__count_slowly",
                    json!({"to": 20, "delay_ms": 100}),
                    options,
                )
                .await
        }
    });
    tokio::time::timeout(EFFECT, first_progress)
        .await
        .expect("the slow call reports progress")
        .unwrap();

    // A second upstream and a rule denying one of its tools.
    let denying = json!({
        "audit": {"file": "gateway-audit.jsonl"},
        "policy": {"rules": [{"deny": "tool.name == \"two__echo\"", "why": "not here"}]},
    });
    write_gateway(
        &file,
        json!({"one": upstream(&dir, "one"), "two": upstream(&dir, "two")}),
        denying.clone(),
    );
    signal(&child, "HUP");
    line_with(&lines, &["reloaded", "upstreams added: two"]);
    until_listed(&client, "two's tools served, two__echo denied", |n| {
        has(n, "two__add") && !has(n, "two__echo") && has(n, "one__echo")
    })
    .await;
    let notified = tokio::time::timeout(EFFECT, stream.next())
        .await
        .expect("the listen stream hears of the change");
    assert!(
        matches!(notified, Some(Ok(Notification::ToolsListChanged))),
        "{notified:?}"
    );
    let slow = tokio::time::timeout(EFFECT, slow)
        .await
        .expect("the slow call ends")
        .unwrap()
        .expect("the slow call completed");
    assert_ne!(slow.is_error, Some(true), "{slow:?}");
    assert!(format!("{slow:?}").contains("Counted to 20."), "{slow:?}");
    let audit = dir.path().join("state/gateway-audit.jsonl");
    let applied = audit_record(&audit, &["\"reload\"", "applied", "two"]).await;
    assert_eq!(applied["upstreams_added"], json!(["two"]), "{applied}");
    assert!(
        applied["changed"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("gateway.policy"))),
        "{applied}"
    );
    assert_eq!(
        applied["file_sha256"].as_str().map(str::len),
        Some(64),
        "{applied}"
    );

    // The upstream removed: its tools leave the list.
    write_gateway(
        &file,
        json!({"one": upstream(&dir, "one")}),
        denying.clone(),
    );
    signal(&child, "HUP");
    until_listed(&client, "two's tools gone", |n| {
        !n.iter().any(|t| t.starts_with("two__")) && has(n, "one__echo")
    })
    .await;

    // A rule that does not compile: refused, the old configuration still serving.
    let broken = json!({
        "audit": {"file": "gateway-audit.jsonl"},
        "policy": {"rules": [{"deny": "tool.name ==", "why": "broken"}]},
    });
    write_gateway(&file, json!({"one": upstream(&dir, "one")}), broken);
    signal(&child, "HUP");
    line_with(&lines, &["reload refused", "gateway.policy"]);
    let refused = audit_record(&audit, &["\"reload\"", "refused"]).await;
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("gateway.policy")),
        "{refused}"
    );
    let answer = client
        .call_tool("one__echo", json!({"message": "still here"}))
        .await
        .expect("the old configuration serves");
    assert!(format!("{answer:?}").contains("still here"), "{answer:?}");

    // A store URL is read at start only: refused, naming the key.
    let stored = json!({
        "audit": {"file": "gateway-audit.jsonl"},
        "store": {"url": "redis://127.0.0.1:1/0"},
    });
    write_gateway(&file, json!({"one": upstream(&dir, "one")}), stored);
    signal(&child, "HUP");
    line_with(
        &lines,
        &[
            "reload refused",
            "gateway.store.url: changing it needs a restart",
        ],
    );

    // The host's hash-chained log records each reload and stays verifiable.
    let verified = toolwire(&dir)
        .args(["audit", "verify"])
        .output()
        .expect("toolwire audit verify runs");
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
    let host_log = std::fs::read_to_string(dir.path().join("state/audit.jsonl")).unwrap();
    assert!(host_log.contains("config_reloaded"), "{host_log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_with_watch_config_reloads_when_its_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    write_gateway(&file, json!({"one": upstream(&dir, "one")}), json!({}));
    let mut gateway = toolwire(&dir);
    gateway
        .args([
            "gateway",
            "--watch-config",
            "--http",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&file);
    let started = support::start(gateway, "the gateway serves at ");
    let (_child, lines) = (started.child, started.lines);
    let client = client_of(&started.url);
    until_listed(&client, "one's tools", |n| has(n, "one__echo")).await;

    write_gateway(
        &file,
        json!({"one": upstream(&dir, "one"), "two": upstream(&dir, "two")}),
        json!({}),
    );
    until_listed(&client, "two's tools, without a signal", |n| {
        has(n, "two__echo")
    })
    .await;
    line_with(&lines, &["reloaded", "upstreams added: two"]);
}

/// `toolwire serve --http` on `DIR/serve.toml`.
fn serve(dir: &tempfile::TempDir, file: &std::path::Path) -> support::Started {
    let mut serve = toolwire(dir);
    serve
        .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(file);
    support::start(serve, "serving the example tools at ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reloads_a_tools_rate_limit_and_the_flood_limit_and_refuses_a_new_store_url() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(
        &file,
        "[audit]\nfile = \"audit.jsonl\"\n\n[tools.add]\nrate_limit = { calls = 100, period_seconds = 3600 }\n",
    )
    .unwrap();
    let started = serve(&dir, &file);
    let (child, lines) = (started.child, started.lines);
    let client = client_of(&started.url);
    let add = || client.call_tool("add", json!({"a": 2, "b": 3}));
    for _ in 0..2 {
        let answer = add().await.expect("add");
        assert_ne!(answer.is_error, Some(true), "{answer:?}");
    }

    // One call an hour from now on.
    std::fs::write(
        &file,
        "[audit]\nfile = \"audit.jsonl\"\n\n[tools.add]\nrate_limit = { calls = 1, period_seconds = 3600 }\n",
    )
    .unwrap();
    signal(&child, "HUP");
    line_with(&lines, &["reloaded", "tools changed: add"]);
    // The reload is applied before it is said: the new quota holds at once (the old one
    // had 98 calls left; a new limit starts its callers afresh).
    let first = add().await.expect("add");
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let second = add().await.expect("add");
    assert!(
        format!("{second:?}").contains("each caller may make 1 call per 3600 s"),
        "the new limit holds: {second:?}"
    );
    let audit = dir.path().join("state/audit.jsonl");
    audit_record(&audit, &["\"reload\"", "applied"]).await;

    // The store is chosen at start: a new [store] url is refused, naming the key.
    std::fs::write(
        &file,
        "[audit]\nfile = \"audit.jsonl\"\n\n[store]\nurl = \"redis://127.0.0.1:1/0\"\n",
    )
    .unwrap();
    signal(&child, "HUP");
    line_with(
        &lines,
        &["reload refused", "store.url: changing it needs a restart"],
    );
    let refused = audit_record(&audit, &["\"reload\"", "refused"]).await;
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("store.url")),
        "{refused}"
    );
    // The old configuration still serves: still limited, still answering.
    let answer = client
        .call_tool("echo", json!({"message": "still here"}))
        .await
        .expect("echo");
    assert!(format!("{answer:?}").contains("still here"), "{answer:?}");

    // The HTTP flood limit: one request a second from now on.
    std::fs::write(
        &file,
        "[audit]\nfile = \"audit.jsonl\"\n\n[limits]\nhttp_requests_per_second = 1\nhttp_burst = 1\n",
    )
    .unwrap();
    signal(&child, "HUP");
    line_with(&lines, &["reloaded", "limits changed"]);
    let flooded = async {
        for _ in 0..3 {
            if let Err(error) = client.call_tool("echo", json!({"message": "again"})).await {
                return format!("{error:?}");
            }
        }
        String::new()
    };
    let flooded = flooded.await;
    assert!(flooded.contains("too many requests"), "{flooded}");
}

/// `path`, made: a directory given to a sandboxed server is granted to it when it exists (one
/// not made yet is granted through the directory it would be made in, which here also holds
/// Toolwire's state, hidden from servers).
fn made(path: std::path::PathBuf) -> std::path::PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    path
}
