//! The stdio transport over an in-memory pipe: framing, concurrency, cancellation, listen, EOF.
//! (Real child processes are exercised in the conformance crate's tests.)

use std::time::Duration;

use serde_json::json;
use toolwire_server::{NoArgs, RequestContext, Tool};

use crate::support::*;

#[tokio::test]
async fn answers_requests_as_they_finish() {
    let mut s = StdioSession::start(builder().build().unwrap());
    s.send(&request(
        1,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 300}}),
    ))
    .await;
    s.send(&request(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    ))
    .await;
    s.send(&request(3, "server/discover", json!({}))).await;
    let order: Vec<i64> = [s.recv().await, s.recv().await, s.recv().await]
        .iter()
        .map(|m| {
            wire::check(
                if m["id"] == 1 || m["id"] == 2 {
                    "tools/call"
                } else {
                    "server/discover"
                },
                m,
            );
            m["id"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(
        order.last(),
        Some(&1),
        "the slow call finishes last: {order:?}"
    );
}

#[tokio::test]
async fn bad_lines_get_errors_and_the_server_keeps_going() {
    let mut s = StdioSession::start(builder().max_message_bytes(1024).build().unwrap());
    let cases = [
        ("{not json".to_owned(), None, -32700),
        // A lone trailing backslash once panicked the depth scan.
        ("{\"a\":\"\\".to_owned(), None, -32700),
        ("[1,2]".to_owned(), None, -32600),
        (
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string(),
            Some(4),
            -32602,
        ),
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"_meta": meta()}})
                .to_string(),
            Some(5),
            -32601,
        ),
        (
            request(6, "tools/call", json!({"name": "missing"})).to_string(),
            Some(6),
            -32602,
        ),
        (
            format!("{{\"pad\":\"{}\"}}", "x".repeat(2000)),
            None,
            -32600,
        ),
    ];
    for (line, id, code) in cases {
        s.send_line(&line).await;
        let reply = s.recv().await;
        wire::check("", &reply);
        assert_eq!(reply["error"]["code"], code, "{line:.60}");
        assert_eq!(reply.get("id").and_then(|v| v.as_i64()), id, "{line:.60}");
    }
    let mut v999 = request(7, "server/discover", json!({}));
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    s.send(&v999).await;
    let reply = s.recv().await;
    assert_eq!(
        reply["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})
    );
    // A response or an unknown notification gets no answer.
    s.send(&json!({"jsonrpc": "2.0", "id": 99, "result": {}}))
        .await;
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever"}))
        .await;
    assert!(s.silent_for(200).await);
    s.send(&request(8, "server/discover", json!({}))).await;
    assert_eq!(s.recv().await["id"], 8, "still serving");
}

/// Cancelling stops the handler (its token fires before it is dropped), and a handler that
/// ignores its token and would answer after 300 ms gets no answer out within a second (S-08).
/// Once, the handler slept 10 s and the test waited 0.5 s for silence, which it would have had
/// without any cancellation.
#[tokio::test]
async fn cancelled_requests_get_no_answer() {
    let (saw, mut saw_cancel) = tokio::sync::mpsc::unbounded_channel();
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let server = builder()
        .tool(
            Tool::new("stubborn", |_: NoArgs, _: RequestContext| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "finished anyway"
            })
            .description("Ignores cancellation and finishes after 300 ms"),
        )
        .tool(
            Tool::new("watchful", move |_: NoArgs, ctx: RequestContext| {
                let (saw, started) = (saw.clone(), started_tx.clone());
                async move {
                    let _ = started.send(());
                    // The server drops a cancelled handler; the guard reports whether its token
                    // had fired by then.
                    let token = ctx.cancellation().clone();
                    let _guard = scopeguard(move || {
                        let _ = saw.send(token.is_cancelled());
                    });
                    std::future::pending::<()>().await;
                    "unreachable"
                }
            })
            .description("Waits forever, reporting how it ended"),
        )
        .build()
        .unwrap();
    let mut s = StdioSession::start(server);
    s.send(&request(1, "tools/call", json!({"name": "stubborn"})))
        .await;
    s.send(&request(2, "tools/call", json!({"name": "watchful"})))
        .await;
    started.recv().await.expect("the handler started");
    for id in [1, 2] {
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "user"}})).await;
    }
    // Malformed or unknown cancellations are ignored (P-04).
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}})).await;
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}))
        .await;
    let ended = tokio::time::timeout(Duration::from_secs(5), saw_cancel.recv()).await;
    assert_eq!(
        ended,
        Ok(Some(true)),
        "the handler was stopped by its cancellation"
    );
    assert!(
        s.silent_for(1_000).await,
        "no answer for either cancelled request, though both handlers finished (S-08)"
    );
    // The id may be reused once the request is gone.
    s.send(&request(1, "server/discover", json!({}))).await;
    assert!(s.recv().await.get("result").is_some());
}

#[tokio::test]
async fn duplicate_ids_in_flight_are_refused() {
    let mut s = StdioSession::start(builder().build().unwrap());
    s.send(&request(
        1,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 500}}),
    ))
    .await;
    s.send(&request(1, "server/discover", json!({}))).await;
    let first = s.recv().await;
    assert_eq!(first["error"]["code"], -32600);
    assert_eq!(
        s.recv().await["result"]["content"][0]["text"],
        "slept 500 ms"
    );
}

#[tokio::test]
async fn progress_and_listen_streams_are_tagged_and_interleave() {
    let server = builder().build().unwrap();
    let mut s = StdioSession::start(server.clone());
    s.send(&request(
        10,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ))
    .await;
    let ack = s.recv().await;
    wire::check("subscriptions/listen", &ack);
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        10
    );
    s.send(&request(
        11,
        "tools/call",
        json!({"name": "progress", "_meta": {"progressToken": "t"}}),
    ))
    .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        let m = s.recv().await;
        wire::check("tools/call", &m);
        seen.push(m);
    }
    assert!(
        seen[..3]
            .iter()
            .all(|m| m["method"] == "notifications/progress")
    );
    assert_eq!(seen[3]["id"], 11);
    server
        .add_tool(
            Tool::new("late", |_: NoArgs, _: RequestContext| async { "x" }).description("late"),
        )
        .unwrap();
    let changed = s.recv().await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        10
    );
    // Cancelling the listen ends it without a result (L-09).
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}})).await;
    server
        .add_tool(
            Tool::new("later", |_: NoArgs, _: RequestContext| async { "x" }).description("later"),
        )
        .unwrap();
    assert!(s.silent_for(300).await);
}

#[tokio::test]
async fn eof_closes_listen_streams_and_returns_promptly() {
    let mut s = StdioSession::start(builder().build().unwrap());
    s.send(&request(
        5,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    ))
    .await;
    s.recv().await;
    let StdioSession {
        mut writer,
        mut reader,
        task,
        ..
    } = s;
    tokio::io::AsyncWriteExt::shutdown(&mut writer)
        .await
        .unwrap();
    let closing = tokio::time::timeout(Duration::from_secs(5), reader.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let closing: serde_json::Value = serde_json::from_str(&closing).unwrap();
    wire::check("subscriptions/listen", &closing);
    assert_eq!(
        closing["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("returns on EOF (S-10)")
        .unwrap()
        .unwrap();
}

/// Regression: a cancelled request's task used to remove the in-flight entry of a new request
/// that reused its id, so cancelling the new one did nothing.
#[tokio::test]
async fn a_reused_id_can_be_cancelled_again() {
    let mut s = StdioSession::start(builder().build().unwrap());
    let slow = request(
        1,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 2000}}),
    );
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    s.send(&slow).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.send_line(&format!("{cancel}\n{slow}")).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.send(&cancel).await;
    assert!(s.silent_for(2500).await, "both requests were cancelled");
    s.send_line(r#"["2.0",5,"server/discover",{}]"#).await;
    assert_eq!(
        s.recv().await["error"]["code"],
        -32600,
        "an array is not a request"
    );
}

/// A request id stays taken while its request runs (B-03), also now that requests which finish
/// on their first poll are answered without a task: a quick call may reuse the id of a quick
/// call that was answered, not the id of a slow one still running.
#[tokio::test]
async fn an_id_in_use_is_refused_and_a_finished_one_is_free() {
    let mut s = StdioSession::start(builder().build().unwrap());
    let add = |id: i64| {
        request(
            id,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
        )
    };
    s.send(&add(7)).await;
    s.send(&add(7)).await;
    for _ in 0..2 {
        let reply = s.recv().await;
        assert_eq!(reply["id"], 7);
        wire::check("tools/call", &reply);
    }
    s.send(&request(
        8,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 300}}),
    ))
    .await;
    s.send(&add(8)).await;
    let refused = s.recv().await;
    assert_eq!(refused["id"], 8);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{refused}"
    );
    let slow = s.recv().await;
    assert_eq!(slow["id"], 8);
    wire::check("tools/call", &slow);
    s.send(&add(8)).await;
    wire::check("tools/call", &s.recv().await);
}

/// A handler that panics, answered at once (its first poll panics) or after waiting: the call
/// ends as a tool error that says nothing of the panic's message, and the connection keeps
/// serving.
#[tokio::test]
async fn a_panicking_handler_answers_an_internal_error_and_serving_goes_on() {
    let late = Tool::new("panics_later", |_: NoArgs, _: RequestContext| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if true {
            panic!("late secret");
        }
        "unreachable"
    })
    .description("Panics after a pause");
    let mut s = StdioSession::start(builder().tool(late).build().unwrap());
    for (id, name) in [(1, "panics"), (2, "panics_later")] {
        s.send(&request(
            id,
            "tools/call",
            json!({"name": name, "arguments": {}}),
        ))
        .await;
        let reply = s.recv().await;
        wire::check("tools/call", &reply);
        assert_eq!(reply["id"], id, "{reply}");
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        assert_eq!(
            reply["result"]["content"][0]["text"],
            "The tool failed because of an internal error."
        );
        assert!(!reply.to_string().contains("secret"), "{reply}");
    }
    s.send(&request(
        3,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 1}}),
    ))
    .await;
    assert_eq!(s.recv().await["result"]["structuredContent"]["total"], 2);
}
