//! A real stdio server (the client's `tests/support/stdio_server.py`) behind the host: what
//! reaches the model has its escape sequences removed, the audit log keeps arguments with their
//! secrets redacted, and a server whose process dies is started again and the loss recorded.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};
use toolwire_host::audit::verify;
use toolwire_host::{
    Answer, ApprovalRequest, Approver, Host, HostConfig, HostOptions, ServerState, Variables,
};

#[path = "../../toolwire-client/tests/support/python.rs"]
mod python;
mod support;

use python::{python, script};
use support::text;

/// The policy allows every call here; a question to a person is a failure.
struct NobodyAsked;

impl Approver for NobodyAsked {
    fn approve<'a>(
        &'a self,
        request: ApprovalRequest<'a>,
    ) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        panic!(
            "the policy allows {}; nobody should be asked",
            request.qualified
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_cleaned_redacted_and_restarted() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let log = dir.join("audit.jsonl");
    let config = HostConfig::parse(
        &json!({
            "mcpServers": {"py": {"command": python(), "args": [script()],
                                  "approval": {"allow": ["py__*"]}}},
            "audit": {"redactKeys": ["ssn"]},
        })
        .to_string(),
        "/test/.mcp.json",
        &Variables::default(),
    )
    .unwrap();
    let host = Host::connect(&config, HostOptions::new(NobodyAsked).audit_log(&log))
        .await
        .unwrap();
    assert!(matches!(
        host.servers()[0].state,
        ServerState::Connected { .. }
    ));

    // The server echoes escape sequences; the model gets the text without them.
    let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    let echoed = host
        .call(
            "py__echo",
            json!({"text": format!("\u{1b}[2J\u{1b}]0;owned\u{7}\u{1b}[31mred\u{1b}[0m {token}\u{8}"), "ssn": "078-05-1120"}),
        )
        .await;
    assert_eq!(text(&echoed), format!("red {token}"));

    // Killed between two calls: the next call starts it again and gets its answer.
    let first: u32 = text(&host.call("py__pid", json!({})).await)
        .parse()
        .unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let second = host.call("py__pid", json!({})).await;
    assert!(!second.is_error(), "{}", text(&second));
    let second: u32 = text(&second).parse().unwrap();
    assert_ne!(first, second);
    host.close().await;

    let records: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let echo = records
        .iter()
        .find(|r| r["event"] == "call" && r["tool"] == "py__echo")
        .expect("the echo call is recorded");
    let logged = &echo["arguments"];
    assert_eq!(logged["ssn"], "[REDACTED:key]", "{echo}");
    let logged_text = logged["text"].as_str().unwrap();
    assert!(
        logged_text.contains("[REDACTED:github-token]") && !logged_text.contains(token),
        "{logged_text}"
    );
    assert_eq!(echo["redacted"], 2);
    assert_eq!(echo["controlsRemoved"], 24, "{echo}");
    let restarted: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "server_restarted")
        .collect();
    assert_eq!(restarted.len(), 1, "{records:?}");
    assert_eq!(restarted[0]["server"], "py");
    assert_eq!(restarted[0]["starts"], 2);
    let verified = verify(&log).unwrap();
    assert_eq!(verified.records as usize, records.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_could_not_start_is_started_by_the_next_refresh() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let command = dir.join("late-server");
    let config = HostConfig::parse(
        &json!({"mcpServers": {"late": {"command": command, "approval": {"allow": ["*"]}}}})
            .to_string(),
        "/test/.mcp.json",
        &Variables::default(),
    )
    .unwrap();
    let host = Host::connect(
        &config,
        HostOptions::new(NobodyAsked).audit_log(dir.join("audit.jsonl")),
    )
    .await
    .unwrap();
    assert!(
        matches!(&host.servers()[0].state, ServerState::Failed { error } if error.contains("late-server")),
        "{:?}",
        host.servers()
    );
    assert!(host.tools().is_empty());
    let refused = host.call("late__pid", json!({})).await;
    assert!(refused.is_error());

    // The command appears (installed, mounted, fixed); the next refresh starts it.
    std::fs::write(
        &command,
        format!("#!/bin/sh\nexec '{}' '{}'\n", python(), script()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).unwrap();
    host.refresh().await.unwrap();
    assert!(
        matches!(host.servers()[0].state, ServerState::Connected { .. }),
        "{:?}",
        host.servers()
    );
    assert_eq!(host.servers().len(), 1);
    let pid = host.call("late__pid", json!({})).await;
    assert!(text(&pid).parse::<u32>().is_ok(), "{}", text(&pid));
    host.close().await;
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let events: Vec<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    // Failed at start, the call to a tool nobody listed, then started (in its sandbox, the
    // profile recorded), listed and called. (Its pins are in memory: a first listing, every
    // tool new, is no change to record.)
    assert_eq!(
        events,
        [
            "server_failed",
            "call_unknown",
            "server_started",
            "server_listed",
            "call"
        ]
    );
}

/// A server that declares tools only and never answers a method it does not offer (the CLI's
/// `hang_server.py`) is asked for nothing else: listing it takes no time limit's worth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_asked_only_for_the_lists_it_declares() {
    let scratch = tempfile::tempdir().unwrap();
    let hang = format!(
        "{}/../toolwire-cli/tests/support/hang_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let pid = scratch.path().join("pid");
    let config = HostConfig::parse(
        &json!({"mcpServers": {"hang": {"command": python(), "args": [hang, pid]}}}).to_string(),
        "/test/.mcp.json",
        &Variables::default(),
    )
    .unwrap();
    let options = HostOptions::new(NobodyAsked).call_timeout(std::time::Duration::from_secs(30));
    let host = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        Host::connect(&config, options),
    )
    .await
    .expect("connected without waiting on a list it never answers")
    .unwrap();
    assert_eq!(host.servers()[0].state, ServerState::Connected { tools: 1 });
    assert!(host.prompts().is_empty() && host.resources().is_empty());
    host.close().await;
}
