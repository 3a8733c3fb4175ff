//! The stdio transport against a real child process (`tests/support/stdio_server.py`): long
//! lines on stdout and stderr, the environment a server gets, process groups on close, and
//! notification floods.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_client::{Client, ClientBuilder, StdioCommand};

/// The Python interpreter's real path (not a shim that needs the caller's environment).
fn python() -> String {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn script() -> String {
    format!(
        "{}/tests/support/stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

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
