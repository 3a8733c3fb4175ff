//! A running server reconfigured (`Server::reconfigure`, a reload of its configuration): a new
//! default rate limit holds at once while a tool whose own limit is unchanged keeps its
//! callers' quotas; a tool's new scopes hide it; a call in flight ends under the output guard
//! it started with; a refused reconfiguration changes nothing.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwire_server::{NoArgs, OutputGuard, RateLimit, Reconfigure, RequestContext, Server, Tool};

use crate::support::*;

fn ping(name: &str) -> Tool {
    Tool::new(name, |_: NoArgs, _: RequestContext| async { "pong" }).description("Answers pong")
}

fn call(id: i64, name: &str) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}}))
}

/// Whether the call's result is the tool's answer (else a refusal by its quota).
async fn answered(url: &str, id: i64, name: &str) -> bool {
    let reply = post(url, &call(id, name)).await;
    let result = &reply.last()["result"];
    match result["content"][0]["text"].as_str() {
        Some("pong") => true,
        Some(text) if text.contains("was called too often") => false,
        _ => panic!("{}", reply.last()),
    }
}

#[tokio::test]
async fn a_new_default_limit_holds_at_once_and_an_unchanged_limit_keeps_its_quotas() {
    let server = Server::builder("reconfigured", "1")
        .tool(ping("own").rate_limit(RateLimit::per_hour(2)))
        .tool(ping("default"))
        .rate_limit(RateLimit::per_hour(100))
        .build()
        .unwrap();
    let s = TestServer::start(server.clone()).await;
    assert!(answered(&s.url, 1, "own").await);
    assert!(answered(&s.url, 2, "default").await);

    server
        .reconfigure(Reconfigure::new().rate_limit(RateLimit::per_hour(1)))
        .unwrap();
    // `own` kept its limit, so its quota: one call of two left.
    assert!(answered(&s.url, 3, "own").await);
    assert!(
        !answered(&s.url, 4, "own").await,
        "own's quota carried over"
    );
    // `default` has the new limit, one an hour, counted afresh.
    assert!(answered(&s.url, 5, "default").await);
    assert!(
        !answered(&s.url, 6, "default").await,
        "the new default holds"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_tool_given_scopes_by_a_reconfiguration_leaves_the_list_of_callers_without_them() {
    let server = Server::builder("reconfigured", "1")
        .tool(ping("open"))
        .tool(ping("guarded"))
        .build()
        .unwrap();
    server
        .reconfigure(Reconfigure::new().tools([ping("guarded").scopes(["admin"])]))
        .unwrap();
    // A stdio caller with the scope `user` only.
    let (client, server_end) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(server_end);
    let caller = toolwire_server::stdio::StdioConfig::default().scopes(["user"]);
    let serving = tokio::spawn(toolwire_server::stdio::serve_io_with(
        server, reader, writer, caller,
    ));
    let (client_reader, mut client_writer) = tokio::io::split(client);
    let line = format!("{}\n", request(1, "tools/list", json!({})));
    tokio::io::AsyncWriteExt::write_all(&mut client_writer, line.as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(client_reader));
    let listed: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["open"], "{listed}");
    serving.abort();
}

#[tokio::test]
async fn a_call_in_flight_ends_under_the_output_guard_it_started_with() {
    let started = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let (tool_started, tool_release) = (started.clone(), release.clone());
    let coloured = Tool::new("coloured", move |_: NoArgs, _: RequestContext| {
        let (started, release) = (tool_started.clone(), tool_release.clone());
        async move {
            started.notify_one();
            release.notified().await;
            "\u{1b}[31mred\u{1b}[0m"
        }
    })
    .description("Answers in red, when released");
    let server = Server::builder("reconfigured", "1")
        .tool(coloured)
        .build()
        .unwrap();
    let s = TestServer::start(server.clone()).await;
    let url = s.url.clone();
    let in_flight = tokio::spawn(async move { post(&url, &call(1, "coloured")).await });
    started.notified().await;
    server
        .reconfigure(Reconfigure::new().output_guard(OutputGuard::off("a test of a reload")))
        .unwrap();
    release.notify_one();
    let before = in_flight.await.unwrap();
    let text = before.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !text.contains('\u{1b}'),
        "cleaned by the guard it started with: {text:?}"
    );

    let url = s.url.clone();
    let after = tokio::spawn(async move { post(&url, &call(2, "coloured")).await });
    started.notified().await;
    release.notify_one();
    let after = after.await.unwrap();
    let text = after.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains('\u{1b}'),
        "the guard is off for calls after: {text:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_refused_reconfiguration_changes_nothing() {
    let server = Server::builder("reconfigured", "1")
        .tool(ping("own"))
        .build()
        .unwrap();
    let refused = server.reconfigure(Reconfigure::new().tools([ping("unknown")]));
    assert!(
        matches!(refused, Err(toolwire_server::Error::UnknownTool(ref name)) if name == "unknown"),
        "{refused:?}"
    );
    let refused = server.reconfigure(
        Reconfigure::new()
            .tools([ping("own").scopes(["x"])])
            .output_guard(OutputGuard::default().secret_pattern("bad", "(")),
    );
    assert!(refused.is_err(), "an invalid guard is refused");
    assert_eq!(server.tool_names(), ["own"]);
    let s = TestServer::start(server.clone()).await;
    let listed = post(&s.url, &request(1, "tools/list", json!({}))).await;
    assert_eq!(
        listed.last()["result"]["tools"][0]["name"],
        "own",
        "still listed without scopes"
    );
    s.stop().await;
}
