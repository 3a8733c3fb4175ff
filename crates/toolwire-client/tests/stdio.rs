//! The stdio transport against a real child process (`tests/support/stdio_server.py`): long
//! lines on stdout and stderr, the environment a server gets, process groups on close, and
//! notification floods.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_client::{Client, ClientBuilder, StdioCommand};

#[path = "support/python.rs"]
mod python;
use python::{python, script};

fn server() -> StdioCommand {
    StdioCommand::new(python()).arg(script())
}

async fn connect(command: StdioCommand) -> Client {
    ClientBuilder::new("stdio-test", "1.0")
        .timeout(Duration::from_secs(30))
        .shutdown_grace(Duration::from_millis(500))
        .spawn_command(command)
        .await
        .unwrap()
}

async fn text(client: &Client, tool: &str, arguments: Value) -> String {
    let result = client.call_tool(tool, arguments).await.unwrap();
    assert!(!result.is_error(), "{tool}");
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_long_stderr_line_is_skipped_and_stderr_still_drained() {
    let client = connect(server()).await;
    let pid = text(&client, "pid", json!({})).await;
    // 100 KiB, then more stderr with every request: the pipe must stay open and drained, or the
    // server's next write fails with EPIPE and it dies.
    text(&client, "long_stderr", json!({})).await;
    for _ in 0..3 {
        text(&client, "long_stderr", json!({"bytes": 1 << 20})).await;
        assert_eq!(
            text(&client, "pid", json!({})).await,
            pid,
            "the server died"
        );
    }
    client.close().await;
}

#[tokio::test]
async fn a_long_stdout_line_is_skipped_not_taken_for_an_exit() {
    let client = connect(server()).await;
    let pid = text(&client, "pid", json!({})).await;
    // Over the 64 MiB message cap: skipped with a warning; the answer after it arrives.
    let answer = text(&client, "long_stdout", json!({"bytes": (64 << 20) + 1})).await;
    assert_eq!(answer, "wrote a long stdout line");
    assert_eq!(text(&client, "pid", json!({})).await, pid, "restarted");
    client.close().await;
}

/// What the official SDKs pass a stdio server from the client's environment on Unix.
const DEFAULT_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

async fn child_env(command: StdioCommand) -> serde_json::Map<String, Value> {
    let client = connect(command).await;
    let env = text(&client, "env", json!({})).await;
    client.close().await;
    serde_json::from_str(&env).unwrap()
}

#[tokio::test]
async fn a_child_gets_only_the_default_environment_and_what_is_named() {
    // Cargo runs this test with CARGO_* variables the server has no business seeing, as it has
    // none seeing TOOLWIRE_BEARER_TOKEN or a cloud key.
    let private = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let env = child_env(server().env("GIVEN", "by the configuration")).await;
    for name in env.keys() {
        // Python sets LC_CTYPE itself when it coerces a C locale (PEP 538).
        assert!(
            DEFAULT_ENV.contains(&name.as_str()) || name == "GIVEN" || name == "LC_CTYPE",
            "the server inherited {name}"
        );
    }
    assert_eq!(env["GIVEN"], "by the configuration");
    assert_eq!(env["PATH"], std::env::var("PATH").unwrap());
    // A variable named in the configuration is passed on with this process's value.
    let env = child_env(server().inherit_env("CARGO_MANIFEST_DIR")).await;
    assert_eq!(env["CARGO_MANIFEST_DIR"], private.as_str());
}

/// Whether process `pid` is gone (or dead and waiting to be reaped by whoever adopted it).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// Kills a process the test started indirectly, if the test fails before the client did.
struct Reap(i32);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

#[tokio::test]
async fn closing_a_wrapper_stops_the_server_it_started() {
    // The shape of `npx server` or `sh -c server`: the client's child is a wrapper, the real
    // server its child. This server ignores the end of its stdin (as servers with open handles
    // do), so close escalates to signals, which must reach the server too, not only the wrapper.
    let line = format!("'{}' '{}' --ignore-eof; exit $?", python(), script());
    let client = connect(StdioCommand::new("sh").args(["-c", &line])).await;
    let server: i32 = text(&client, "pid", json!({})).await.parse().unwrap();
    let _reap = Reap(server);
    let wrapper = client.server_pid().await.expect("running") as i32;
    assert_ne!(server, wrapper, "sh ran the server as its child");
    client.close().await;
    assert!(gone(wrapper));
    assert!(gone(server), "the real server {server} outlived close");
}

#[tokio::test]
async fn closing_a_server_stops_the_processes_it_started() {
    // The server exits when its stdin closes, but leaves a helper process behind.
    let client = connect(server()).await;
    let helper: i32 = text(&client, "helper", json!({})).await.parse().unwrap();
    let _reap = Reap(helper);
    assert!(!gone(helper));
    client.close().await;
    assert!(gone(helper), "the server's helper {helper} outlived close");
}

#[tokio::test]
async fn a_flood_of_notifications_waits_in_bounded_memory_for_a_slow_subscriber() {
    use toolwire_client::Notification;
    let client = connect(server()).await;
    let mut subscription = client
        .listen(toolwire_client::protocol::SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    // Nobody takes notifications while the server sends 50,000 list changes and 5,000 others.
    // Each flood's answer comes after its notifications on the same pipe, so when it is back
    // they have all been read.
    let (changes, others) = (50_000, 5_000);
    let flood = |method: &str, count: usize| json!({"method": method, "count": count, "subscription": true, "params": {"n": 1}});
    text(
        &client,
        "flood",
        flood("notifications/tools/list_changed", changes),
    )
    .await;
    text(&client, "flood", flood("notifications/custom", others)).await;
    let (mut seen_changes, mut seen_others, mut missed) = (0, 0, 0);
    while seen_others + missed < others as u64 {
        match subscription.next().await.expect("open").unwrap() {
            Notification::ToolsListChanged => seen_changes += 1,
            Notification::Other { method, .. } if method == "notifications/custom" => {
                seen_others += 1;
            }
            Notification::Missed { count } => missed += count,
            other => panic!("unexpected {other:?}"),
        }
    }
    // What waited is bounded by the subscription's capacity and the transport's route (256).
    assert!(
        (1..=3).contains(&seen_changes),
        "{seen_changes} list changes"
    );
    assert!(seen_others <= 512, "{seen_others} others waited");
    assert!(missed > 0);
    drop(subscription);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_for_a_stalled_caller_is_bounded_and_the_answer_still_arrives() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, mpsc};
    let client = connect(server()).await;
    text(&client, "pid", json!({})).await;
    // The first progress callback says so, then blocks until released: the call's consumer
    // stalls while the server writes 100,000 progress notifications and the answer.
    let (entered, first) = tokio::sync::oneshot::channel::<()>();
    let entered = Mutex::new(Some(entered));
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let options = toolwire_client::CallOptions::default().on_progress(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = entered.lock().unwrap().take().unwrap().send(());
            tokio::task::block_in_place(|| wait.lock().unwrap().recv().unwrap());
        }
    });
    let caller = client.clone();
    let call = tokio::spawn(async move {
        caller
            .call_tool_with("progress", json!({"count": 100_000}), options)
            .await
    });
    first.await.unwrap();
    // The server answers requests in order and is already flooding, so this answer comes after
    // all of that progress.
    text(&client, "pid", json!({})).await;
    release.send(()).unwrap();
    let result = call.await.unwrap().unwrap();
    assert!(!result.is_error());
    let calls = calls.load(Ordering::SeqCst);
    assert!(calls <= 256, "{calls} progress notifications were kept");
    client.close().await;
}
