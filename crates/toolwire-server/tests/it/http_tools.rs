//! Discover, tools/list and tools/call over real HTTP.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::Tool;
use toolwire_server::protocol::CacheScope;

use crate::support::*;

async fn call(s: &TestServer, name: &str, arguments: Value) -> Reply {
    post(
        &s.url,
        &request(
            1,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        ),
    )
    .await
}

fn text_of(reply: &Reply) -> String {
    reply.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn discover_reports_capabilities_cache_hints_and_server_info() {
    let s = TestServer::start(
        builder()
            .discover_ttl(Duration::from_secs(60))
            .build()
            .unwrap(),
    )
    .await;
    let reply = post(&s.url, &request(1, "server/discover", json!({}))).await;
    let result = &reply.last()["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": true}, "logging": {}})
    );
    assert_eq!(result["instructions"], "Use the tools.");
    assert_eq!(
        (result["ttlMs"].as_u64(), result["cacheScope"].as_str()),
        (Some(60_000), Some("public"))
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "test-server", "version": "1.2.3"})
    );
    // clientInfo is optional (B-17 is a SHOULD).
    let mut body = request(2, "server/discover", json!({}));
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    assert_eq!(post(&s.url, &body).await.status, 200);
    s.stop().await;
}

#[tokio::test]
async fn tools_list_pages_in_registration_order_with_cache_hints() {
    let server = builder()
        .page_size(3)
        .list_ttl(Duration::from_secs(9))
        .cache_scope(CacheScope::Private)
        .build()
        .unwrap();
    let expected = server.tool_names();
    let s = TestServer::start(server).await;
    let walk = || async {
        let (mut names, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let reply = post(&s.url, &request(1, "tools/list", params)).await;
            let result = &reply.last()["result"];
            assert_eq!(
                (result["ttlMs"].as_u64(), result["cacheScope"].as_str()),
                (Some(9000), Some("private"))
            );
            let page = result["tools"].as_array().unwrap();
            assert!(page.len() <= 3);
            names.extend(page.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
            pages += 1;
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        (names, pages)
    };
    let (first, pages) = walk().await;
    assert_eq!(first, expected);
    assert_eq!(pages, expected.len().div_ceil(3));
    assert_eq!(walk().await.0, first, "deterministic (T-04)");
    s.stop().await;
}

#[tokio::test]
async fn cursors_are_tamper_evident_and_survive_list_changes() {
    let s = TestServer::start(builder().page_size(2).build().unwrap()).await;
    let reply = post(&s.url, &request(1, "tools/list", json!({}))).await;
    let cursor = reply.last()["result"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let names: Vec<String> = s.server.tool_names();
    for bad in ["", "garbage", &format!("{cursor}x"), &cursor[1..]] {
        let reply = post(&s.url, &request(1, "tools/list", json!({"cursor": bad}))).await;
        assert_eq!(reply.error_code(), Some(-32602), "cursor {bad:?} (K-16)");
        assert_eq!(reply.status, 200);
    }
    // Removing an item of the first page must not skip anything on the next page.
    s.server.remove_tool(&names[0]).unwrap();
    let reply = post(&s.url, &request(1, "tools/list", json!({"cursor": cursor}))).await;
    let next: Vec<&str> = reply.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(next, [names[2].as_str(), names[3].as_str()]);
    // A cursor from another server (another key) is refused.
    let other = TestServer::start(builder().page_size(2).build().unwrap()).await;
    let reply = post(
        &other.url,
        &request(1, "tools/list", json!({"cursor": cursor})),
    )
    .await;
    assert_eq!(reply.error_code(), Some(-32602));
    other.stop().await;
    s.stop().await;
}

#[tokio::test]
async fn call_outcomes() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let person = json!({"name": "Ada", "age": 36, "address": {"city": "London"}});
    let reply = call(&s, "echo", person).await;
    assert_eq!(text_of(&reply), "Ada (36) from London");
    assert_eq!(
        reply.last()["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );

    // Schema violations: an isError result naming each violation's path.
    let reply = call(
        &s,
        "echo",
        json!({"age": 300, "address": {"city": 5}, "extra": true}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.last()["result"]["isError"], true);
    let text = text_of(&reply);
    for needle in [
        "Invalid arguments for tool echo",
        "(root): \"name\" is a required property",
        "/age:",
        "/address/city:",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }

    // Unknown tool: -32602 (T-14).
    let reply = call(&s, "nope", json!({})).await;
    assert_eq!((reply.status, reply.error_code()), (200, Some(-32602)));

    // Structured output: structuredContent plus the same JSON as text (T-10, T-11).
    let reply = call(&s, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(
        reply.last()["result"]["structuredContent"],
        json!({"total": 5})
    );
    assert_eq!(text_of(&reply), r#"{"total":5}"#);

    // Output that breaks the outputSchema never leaves; the client learns only that it failed.
    for tool in ["bad_output", "panics", "internal"] {
        let reply = call(&s, tool, json!({})).await;
        let result = &reply.last()["result"];
        assert_eq!(result["isError"], true, "{tool}");
        assert!(result.get("structuredContent").is_none(), "{tool}");
        let text = text_of(&reply);
        assert_eq!(
            text, "The tool failed because of an internal error.",
            "{tool}"
        );
    }

    // A tool failure reaches the model as an isError result (T-13).
    let reply = call(&s, "fails", json!({})).await;
    assert_eq!(
        (
            reply.last()["result"]["isError"].as_bool(),
            text_of(&reply).as_str()
        ),
        (Some(true), "the date must be in the future")
    );

    // A missing capability: -32021 with requiredCapabilities, HTTP 400 (B-20).
    let reply = call(&s, "needs_sampling", json!({})).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32021)));
    assert_eq!(
        reply.last()["error"]["data"],
        json!({"requiredCapabilities": {"sampling": {}}})
    );
    let mut body = request(1, "tools/call", json!({"name": "needs_sampling"}));
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    assert_eq!(text_of(&post(&s.url, &body).await), "sampling declared");

    // The server keeps serving after a panic.
    assert_eq!(
        text_of(&call(&s, "add", json!({"a": 1, "b": 1})).await),
        r#"{"total":2}"#
    );
    s.stop().await;
}

#[tokio::test]
async fn progress_streams_over_sse_and_only_increases() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let body = request(
        1,
        "tools/call",
        json!({"name": "progress", "_meta": {"progressToken": "p-1"}}),
    );
    let reply = post(&s.url, &body).await;
    assert!(reply.is_sse());
    assert_eq!(reply.headers.get("x-accel-buffering").unwrap(), "no");
    let progress: Vec<f64> = reply.messages[..reply.messages.len() - 1]
        .iter()
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "p-1");
            m["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(
        progress,
        [1.0, 2.0, 3.0],
        "the repeated 1 is dropped (P-12)"
    );
    assert_eq!(reply.last()["id"], 1);
    assert_eq!(reply.last()["result"]["content"][0]["text"], "done");

    // Without a progress token there is nothing to stream: a JSON reply.
    let reply = post(
        &s.url,
        &request(2, "tools/call", json!({"name": "progress"})),
    )
    .await;
    assert!(!reply.is_sse());
    // A client that accepts only JSON gets JSON, without notifications.
    let reply = post_with(&s.url, &body, |h| {
        set_header(h, "accept", Some("application/json"))
    })
    .await;
    assert!(!reply.is_sse());
    assert_eq!(reply.messages.len(), 1);
    // A client that accepts only SSE gets SSE, even for a quick answer.
    let reply = post_with(&s.url, &request(3, "server/discover", json!({})), |h| {
        set_header(h, "accept", Some("text/event-stream"))
    })
    .await;
    assert!(reply.is_sse());
    assert_eq!(reply.messages.len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn logs_only_when_asked_and_at_the_level_asked() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let reply = post(&s.url, &request(1, "tools/call", json!({"name": "logs"}))).await;
    assert!(!reply.is_sse(), "no logLevel, no logs (P-17)");
    let body = request(
        1,
        "tools/call",
        json!({"name": "logs", "_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
    );
    let reply = post(&s.url, &body).await;
    let levels: Vec<&str> = reply
        .messages
        .iter()
        .filter_map(|m| m["params"]["level"].as_str())
        .collect();
    assert_eq!(levels, ["info", "error"]);
    s.stop().await;
    // A server that did not declare logging never logs to clients.
    let quiet = TestServer::start(builder().logging(false).build().unwrap()).await;
    assert_eq!(post(&quiet.url, &body).await.messages.len(), 1);
    quiet.stop().await;
}

#[tokio::test]
async fn closing_the_stream_cancels_the_handler() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let before = CANCELLED.load(Ordering::SeqCst);
    let body = request(
        1,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 30_000, "progress": true}, "_meta": {"progressToken": 1}}),
    );
    let mut req = client().post(&s.url).body(body.to_string());
    for (k, v) in standard_headers(&body) {
        req = req.header(k, v);
    }
    let mut resp = req.send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    drop(resp);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while CANCELLED.load(Ordering::SeqCst) == before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the handler saw the cancellation (H-08)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.stop().await;
}

#[tokio::test]
async fn runtime_registration_is_checked() {
    let server = builder().build().unwrap();
    let err = server
        .add_tool(Tool::raw(
            "bad name!",
            json!({"type": "object"}),
            |_, _| async { "x" },
        ))
        .unwrap_err();
    assert!(
        err.to_string().contains("bad name!") && err.to_string().contains("1 to 128 characters"),
        "{err}"
    );
    let err = server
        .add_tool(Tool::raw("echo", json!({"type": "object"}), |_, _| async {
            "x"
        }))
        .unwrap_err();
    assert!(err.to_string().contains("already registered"), "{err}");
    let err = server
        .add_tool(Tool::raw(
            "remote",
            json!({"type": "object", "properties": {"p": {"$ref": "http://127.0.0.1:9/x.json"}}}),
            |_, _| async { "x" },
        ))
        .unwrap_err();
    assert!(err.to_string().contains("never fetched"), "{err}");
    let err = server
        .add_tool(Tool::raw(
            "dialect",
            json!({"$schema": "http://example.com/mine", "type": "object"}),
            |_, _| async { "x" },
        ))
        .unwrap_err();
    assert!(err.to_string().contains("unsupported dialect"), "{err}");
    let err = server
        .add_tool(Tool::raw("hdr", json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}}), |_, _| async { "x" }))
        .unwrap_err();
    assert!(
        err.to_string().contains("x-mcp-header") && err.to_string().contains("RFC 9110 token"),
        "{err}"
    );
    let built = builder()
        .tool(Tool::raw("s", json!({"type": "string"}), |_, _| async {
            "x"
        }))
        .build();
    assert!(built.unwrap_err().to_string().contains("an object schema"));
}

/// A tool replaced under its own name is in every list taken meanwhile: readers see the
/// catalog before the replacement or after it, never between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_replaced_in_one_step_is_never_missing() {
    let server = builder().build().unwrap();
    let named = |name: &str, description: &str| {
        Tool::raw(name, json!({"type": "object"}), |_, _| async { "x" }).description(description)
    };
    server.add_tool(named("kept", "v0")).unwrap();
    // A refused replacement (a new name that is taken) changes nothing.
    let err = server
        .replace_tools(["kept"], [named("kept", "v1"), named("echo", "clash")])
        .unwrap_err();
    assert!(err.to_string().contains("already registered"), "{err}");
    assert!(server.tool_names().contains(&"kept".to_owned()));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (server, stop) = (server.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(
                    server.tool_names().iter().any(|n| n == "kept"),
                    "a list taken during a replacement missed the tool"
                );
                reads += 1;
            }
            reads
        })
    };
    for round in 0..2_000 {
        server
            .replace_tools(["kept"], [named("kept", &format!("v{round}"))])
            .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    // Removing and adding under other names in one step.
    server
        .replace_tools(["kept"], [named("other", "o")])
        .unwrap();
    let names = server.tool_names();
    assert!(!names.contains(&"kept".to_owned()) && names.contains(&"other".to_owned()));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Tags {
    #[allow(dead_code)]
    tags: Vec<String>,
}

/// Every violation was once collected and joined: a 4 MiB array of numbers against
/// `items: {type: string}` became millions of lines. Now the model gets the
/// first few, over real HTTP, in a reply of a few hundred bytes.
#[tokio::test]
async fn a_huge_invalid_argument_gets_a_short_report() {
    let server = builder()
        .tool(
            Tool::new("tag", |_: Tags, _: toolwire_server::RequestContext| async {
                Ok::<_, toolwire_server::ToolError>("tagged")
            })
            .description("Tags"),
        )
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    // 1.9 million numbers: just under the 4 MiB message limit.
    let numbers = vec![json!(1); 1_900_000];
    let reply = call(&s, "tag", json!({"tags": numbers})).await;
    assert_eq!(reply.last()["result"]["isError"], true);
    let text = text_of(&reply);
    assert!(text.len() < 2_000, "{} bytes: {:.300}", text.len(), text);
    assert!(
        text.starts_with("Invalid arguments for tool tag:\n- /tags/0:"),
        "{text}"
    );
    // A small one is counted exactly.
    let reply = call(&s, "tag", json!({"tags": vec![json!(1); 25]})).await;
    let text = text_of(&reply);
    assert_eq!(text.lines().count(), 12, "{text}");
    assert!(text.ends_with("- and 15 more"), "{text}");
    s.stop().await;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Mail {
    #[schemars(email)]
    to: String,
    #[schemars(extend("format" = "date-time"))]
    at: String,
}

/// `format` is an annotation in 2020-12, so by default `format: email` takes any string; with
/// `assert_formats(true)` the model is told which values break their formats.
#[tokio::test]
async fn formats_are_enforced_when_the_server_asks_for_it() {
    let mail = || {
        Tool::new(
            "mail",
            |m: Mail, _: toolwire_server::RequestContext| async move {
                format!("to {} at {}", m.to, m.at)
            },
        )
        .description("Sends mail")
    };
    let bad = json!({"to": "nobody", "at": "tomorrow-ish"});
    let lenient = TestServer::start(builder().tool(mail()).build().unwrap()).await;
    let reply = call(&lenient, "mail", bad.clone()).await;
    assert_eq!(
        text_of(&reply),
        "to nobody at tomorrow-ish",
        "annotations only by default"
    );
    lenient.stop().await;
    let strict =
        TestServer::start(builder().tool(mail()).assert_formats(true).build().unwrap()).await;
    let reply = call(&strict, "mail", bad).await;
    assert_eq!(reply.last()["result"]["isError"], true, "{}", reply.body);
    let text = text_of(&reply);
    assert!(text.contains("- /to:") && text.contains("- /at:"), "{text}");
    let good = json!({"to": "ada@example.com", "at": "2026-12-02T17:00:00Z"});
    let reply = call(&strict, "mail", good).await;
    assert_eq!(
        text_of(&reply),
        "to ada@example.com at 2026-12-02T17:00:00Z"
    );
    strict.stop().await;
}
