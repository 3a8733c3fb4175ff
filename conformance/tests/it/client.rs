//! `toolwire-client` against the real `conformance-server` binary: as a stdio child process
//! (probe, concurrency, MRTR, progress, listen, crash and restart, shutdown) and over
//! Streamable HTTP.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use toolwire_client::protocol::{
    CreateMessageResult, ListRootsResult, Role, Root, SamplingContent, SamplingMessageContent,
    SubscriptionFilter, TextContent,
};
use toolwire_client::{CallOptions, Client, ClientBuilder, Error, Notification, ServerEra};

use super::BIN;

fn builder() -> ClientBuilder {
    ClientBuilder::new("client-it", "1.0")
        .timeout(Duration::from_secs(10))
        .on_elicit(|_| async { toolwire_client::accepted(&json!({"name": "Ada"})) })
        .on_sample(|_| async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingMessageContent::One(SamplingContent::Text(TextContent::new(
                    "sampled text",
                ))),
                model: "test-model".into(),
                stop_reason: None,
                meta: None,
            })
        })
        .on_roots(|| async {
            Ok(ListRootsResult {
                roots: vec![Root {
                    uri: "file:///work".into(),
                    name: Some("work".into()),
                    meta: None,
                }],
                meta: None,
            })
        })
}

fn text(result: &toolwire_client::protocol::CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// What every transport must do with the fixture server.
async fn round_trip(client: &Client) {
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "test_simple_text"));
    assert!(
        tools.len() > 20,
        "all pages were walked: {} tools",
        tools.len()
    );

    let simple = client
        .call_tool("test_simple_text", json!({}))
        .await
        .unwrap();
    assert!(!text(&simple).is_empty());

    // MRTR rounds for each kind of input (M-11…M-14).
    let greeting = client
        .call_tool("test_input_required_result_elicitation", json!({}))
        .await
        .unwrap();
    assert!(text(&greeting).contains("Ada"), "{greeting:?}");
    let sampled = client
        .call_tool("test_input_required_result_sampling", json!({}))
        .await
        .unwrap();
    assert!(text(&sampled).contains("sampled text"), "{sampled:?}");
    let roots = client
        .call_tool("test_input_required_result_list_roots", json!({}))
        .await
        .unwrap();
    assert_eq!(text(&roots), "Found 1 root(s)");

    // Progress is delivered to the caller.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    client
        .call_tool_with(
            "test_tool_with_progress",
            json!({}),
            CallOptions::default().on_progress(move |p| record.lock().unwrap().push(p.progress)),
        )
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [0.0, 50.0, 100.0]);

    // Many calls in flight at once, each answered to its caller.
    let calls = (0..16).map(|i| {
        let client = client.clone();
        async move {
            let r = client
                .call_tool("test_input_required_result_elicitation", json!({}))
                .await
                .unwrap();
            (i, text(&r))
        }
    });
    for (_, answer) in futures::future::join_all(calls).await {
        assert!(answer.contains("Ada"));
    }

    // A tool error is a result; a missing capability is a server error.
    let failed = client
        .call_tool("test_error_handling", json!({}))
        .await
        .unwrap();
    assert!(failed.is_error());
    let prompt = client
        .get_prompt("test_simple_prompt", json!({}))
        .await
        .unwrap();
    assert!(!prompt.messages.is_empty());
    let resources = client.list_resources().await.unwrap();
    let read = client.read_resource(&resources[0].uri).await.unwrap();
    assert!(!read.contents.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_round_trip() {
    let client = builder().spawn(BIN, ["--stdio"]).await.unwrap();
    round_trip(&client).await;
    // The probe settled the era (V-09).
    assert_eq!(
        client.era(),
        Some(ServerEra::Modern {
            version: "2026-07-28".into()
        })
    );
    let pid = client.server_pid().await.expect("running");
    client.close().await;
    assert_eq!(client.server_pid().await, None);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the child exited and was reaped after close (S-09)"
    );
    // A closed client does not start the server again.
    let after = client.call_tool("test_simple_text", json!({})).await;
    assert!(matches!(&after, Err(Error::Transport(_))), "{after:?}");
}

/// The next notification, within 10 s.
async fn next(subscription: &mut toolwire_client::Subscription) -> Notification {
    tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("a notification within 10 s")
        .expect("the stream is open")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_listen_survives_a_crash_and_restart() {
    let client = builder().spawn(BIN, ["--stdio"]).await.unwrap();
    let mut subscription = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    client
        .call_tool("test_trigger_tool_change", json!({}))
        .await
        .unwrap();
    assert_eq!(
        next(&mut subscription).await,
        Notification::ToolsListChanged
    );

    // The server dies; the next call starts it again and succeeds (S-11).
    let pid = client.server_pid().await.unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let simple = client
        .call_tool("test_simple_text", json!({}))
        .await
        .unwrap();
    assert!(!text(&simple).is_empty());
    assert_ne!(client.server_pid().await, Some(pid));

    // The subscription was re-opened on the new process (L-12) and says so.
    assert_eq!(next(&mut subscription).await, Notification::Reconnected);
    client
        .call_tool("test_trigger_tool_change", json!({}))
        .await
        .unwrap();
    assert_eq!(
        next(&mut subscription).await,
        Notification::ToolsListChanged
    );
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "test_dynamic_tool"));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_child_round_trip() {
    let mut child = tokio::process::Command::new(BIN)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the address within 10 s")
            .unwrap()
            .expect("stderr open");
        if let Some(url) = line.strip_prefix("conformance-server: listening on ") {
            break url.to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let client = builder().http(&url).unwrap();
    round_trip(&client).await;
    // Arguments marked x-mcp-header travel as Mcp-Param-* headers the server checks (H-24).
    let headers = client
        .call_tool(
            "test_header_params",
            json!({"region": "  Zürich ", "priority": 7, "verbose": true}),
        )
        .await
        .unwrap();
    assert!(!headers.is_error(), "{headers:?}");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rude_output_does_not_break_the_connection() {
    // Every answer comes after a line of invalid UTF-8 on stdout and 64 KiB of it on stderr:
    // the bad lines are skipped and stderr is drained (else the server would block on it).
    let client = ClientBuilder::new("client-it", "1.0")
        .timeout(Duration::from_secs(10))
        .spawn(
            env!("CARGO_BIN_EXE_misbehaving-server"),
            Vec::<String>::new(),
        )
        .await
        .unwrap();
    for i in 0..40 {
        let message = format!("call {i}");
        let result = client
            .call_tool("echo", json!({"message": message}))
            .await
            .unwrap();
        assert_eq!(text(&result), message);
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_stdin_even_with_requests_in_flight() {
    // With a subscription open, close still ends the server through its stdin (S-09), well
    // before the grace after which it would send SIGTERM.
    let client = builder()
        .shutdown_grace(Duration::from_secs(20))
        .spawn(BIN, ["--stdio"])
        .await
        .unwrap();
    let subscription = client
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), client.close())
        .await
        .expect("the server exits on the end of its stdin, not after SIGTERM");
    drop(subscription);
}
