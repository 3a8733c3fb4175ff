//! The client's own rules against scripted servers: the era of a slow stdio server (V-08, V-09),
//! output schemas it cannot use (J-03, J-07) and definitions fetched when the cache is empty
//! (C-04), URL-mode elicitation declared only with a handler that shows it (M-15, M-16), the
//! call's timeout and cancellation while a handler answers an input round, and the budget of a
//! paginated list.
//!
//! stdio servers are `tests/support/scripted_stdio.py` run with a script of replies; HTTP ones
//! are a small axum app answering from a closure, or a real Toolwire server.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolwire_client::protocol::SubscriptionFilter;
use toolwire_client::{
    CallOptions, CancellationToken, ClientBuilder, Error, ListLimit, Notification, ServerEra,
    StdioCommand,
};

/// A scripted stdio server and the file where it logs what it received.
struct Scripted {
    command: StdioCommand,
    log: PathBuf,
    /// Holds the log; removed on drop.
    _dir: tempfile::TempDir,
}

impl Scripted {
    fn new(script: &Value) -> Scripted {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("received.jsonl");
        let command = StdioCommand::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/support/scripted_stdio.py"
            ))
            .arg(script.to_string())
            .arg(log.display().to_string());
        Scripted {
            command,
            log,
            _dir: dir,
        }
    }

    /// The requests the server received with this method, in order.
    fn received(&self, method: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|m| m["method"] == method)
            .collect()
    }
}

fn tools_page(tools: Value) -> Value {
    json!({"resultType": "complete", "ttlMs": 60_000, "cacheScope": "private", "tools": tools})
}

#[tokio::test]
async fn a_slow_modern_stdio_server_refusing_initialize_is_not_taken_for_legacy() {
    // The server is still starting when the probe gives up (it never answers server/discover
    // here); the legacy `initialize` that follows is refused the 2026-07-28 way (V-08), which
    // proves a modern server (Q-05) as a discover result would.
    let refusals = [
        json!({"code": -32022, "message": "Unsupported protocol version",
               "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}),
        json!({"code": -32021, "message": "Missing required client capability",
               "data": {"requiredCapabilities": {}}}),
        json!({"code": -32020, "message": "Header mismatch"}),
    ];
    for refusal in refusals {
        let server = Scripted::new(&json!({
            "server/discover": [],
            "initialize": [{"error": refusal}],
            "tools/list": [{"result": tools_page(json!([
                {"name": "a", "inputSchema": {"type": "object"}}
            ]))}],
        }));
        let client = ClientBuilder::new("calls-test", "1.0")
            .probe_timeout(Duration::from_millis(100))
            .spawn_command(server.command.clone())
            .await
            .unwrap();
        let tools = client.list_tools().await.unwrap_or_else(|e| {
            panic!("after {refusal}: {e}");
        });
        assert_eq!(tools[0].name, "a");
        assert_eq!(
            client.era(),
            Some(ServerEra::Modern {
                version: "2026-07-28".into()
            }),
            "after {refusal}"
        );
        client.close().await;
        // The list was asked for the 2026-07-28 way, with `_meta` (B-15).
        let listed = server.received("tools/list");
        assert_eq!(listed.len(), 1, "after {refusal}");
        assert_eq!(
            listed[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }
}

#[tokio::test]
async fn a_refusal_of_initialize_without_a_common_version_is_surfaced() {
    let server = Scripted::new(&json!({
        "server/discover": [],
        "initialize": [{"error": {"code": -32022, "message": "Unsupported protocol version",
                                  "data": {"supported": ["2099-01-01"], "requested": "2025-11-25"}}}],
    }));
    let client = ClientBuilder::new("calls-test", "1.0")
        .probe_timeout(Duration::from_millis(100))
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let error = client.list_tools().await.unwrap_err();
    assert_eq!(error.rpc().map(|e| e.code), Some(-32022), "{error}");
    client.close().await;
    assert!(server.received("tools/list").is_empty());
}

/// A server whose tool `ask` asks for a form elicitation, then answers "thanks".
fn asking_server() -> Scripted {
    Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": tools_page(json!([
            {"name": "ask", "inputSchema": {"type": "object"}}
        ]))}],
        "tools/call:ask": [{"result": {
            "resultType": "input_required",
            "inputRequests": {"name": {"method": "elicitation/create", "params": {
                "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
            }}},
            "requestState": "round-1"
        }}],
        "tools/call:ask#retry": [{"result": {
            "resultType": "complete", "content": [{"type": "text", "text": "{INPUT_RESPONSES}"}]
        }}],
    }))
}

fn discover_result() -> Value {
    json!({
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"
    })
}

/// A client whose elicitation handler reports that it runs, then never finishes.
async fn stuck_client(
    server: &Scripted,
) -> (
    toolwire_client::Client,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    let (started, running) = tokio::sync::mpsc::unbounded_channel();
    let client = ClientBuilder::new("calls-test", "1.0")
        .on_elicit(move |_| {
            let _ = started.send(());
            std::future::pending()
        })
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    (client, running)
}

#[tokio::test]
async fn the_call_timeout_applies_while_a_handler_answers_an_input_round() {
    let server = asking_server();
    let (client, mut running) = stuck_client(&server).await;
    // Settled and listed first, so that the call's time goes to its exchange and the handler.
    client.list_tools().await.unwrap();
    let call = client.call_tool_with(
        "ask",
        json!({}),
        CallOptions::default().timeout(Duration::from_secs(2)),
    );
    let error = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call ends though its handler never does")
        .unwrap_err();
    assert!(matches!(error, Error::Timeout(_)), "{error}");
    assert!(running.try_recv().is_ok(), "the handler ran");
    client.close().await;
}

#[tokio::test]
async fn cancelling_a_call_stops_a_handler_answering_an_input_round() {
    let server = asking_server();
    let (client, mut running) = stuck_client(&server).await;
    let token = CancellationToken::new();
    let call = tokio::spawn({
        let (client, token) = (client.clone(), token.clone());
        async move {
            client
                .call_tool_with("ask", json!({}), CallOptions::default().cancel_on(token))
                .await
        }
    });
    running.recv().await.expect("the handler runs");
    token.cancel();
    let error = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call ends though its handler never does")
        .unwrap()
        .unwrap_err();
    assert!(matches!(error, Error::Cancelled), "{error}");
    assert!(
        server.received("tools/call").len() == 1,
        "no retry was sent"
    );
    client.close().await;
}

/// A server whose tool `login` asks the user to open a URL (URL-mode elicitation), then answers
/// with what it got back.
fn url_server() -> Scripted {
    Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": tools_page(json!([
            {"name": "login", "inputSchema": {"type": "object"}}
        ]))}],
        "tools/call:login": [{"result": {
            "resultType": "input_required",
            "inputRequests": {"consent": {"method": "elicitation/create", "params": {
                "mode": "url", "message": "Sign in", "url": "https://auth.example/start"
            }}},
            "requestState": "r"
        }}],
        "tools/call:login#retry": [{"result": {
            "resultType": "complete", "content": [{"type": "text", "text": "{INPUT_RESPONSES}"}]
        }}],
    }))
}

#[tokio::test]
async fn an_elicit_handler_declares_form_mode_only() {
    let server = url_server();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let client = ClientBuilder::new("calls-test", "1.0")
        .on_elicit(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { toolwire_client::accepted(&json!({})) }
        })
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let declared = client.capabilities().elicitation.expect("elicitation");
    assert!(declared.form.is_some());
    assert!(
        declared.url.is_none(),
        "URL mode needs a handler that shows it (M-16)"
    );
    // A server that asks for URL mode anyway (M-15) never reaches the form handler, and nothing
    // is accepted on the user's behalf.
    let error = client.call_tool("login", json!({})).await.unwrap_err();
    assert!(
        matches!(&error, Error::Input(m) if m.contains("URL")),
        "{error}"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    client.close().await;
    let calls = server.received("tools/call");
    assert_eq!(calls.len(), 1, "no retry carries an answer");
    let sent = &calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert_eq!(sent["elicitation"], json!({"form": {}}));
}

#[tokio::test]
async fn a_url_handler_declares_url_mode_and_sees_the_url() {
    let server = url_server();
    let shown = Arc::new(Mutex::new(Vec::new()));
    let seen = shown.clone();
    let client = ClientBuilder::new("calls-test", "1.0")
        .on_elicit_url(move |request| {
            seen.lock().unwrap().push(request.url.clone());
            async { Ok(toolwire_client::declined()) }
        })
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let declared = client.capabilities().elicitation.expect("elicitation");
    assert!(declared.url.is_some());
    assert!(declared.form.is_none(), "no form handler, no form mode");
    let result = client.call_tool("login", json!({})).await.unwrap();
    let text = serde_json::to_value(&result.content).unwrap()[0]["text"].clone();
    assert_eq!(text, r#"{"consent": {"action": "decline"}}"#);
    assert_eq!(*shown.lock().unwrap(), ["https://auth.example/start"]);
    client.close().await;
}

/// A tool `shape` with this output schema, whose calls answer `{"n": "not a number"}`.
fn shape_server(output_schema: Value, before_result: Vec<Value>) -> Scripted {
    let mut replies = before_result;
    replies.push(json!({"result": {
        "resultType": "complete",
        "content": [{"type": "text", "text": "{\"n\": \"not a number\"}"}],
        "structuredContent": {"n": "not a number"}
    }}));
    Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": tools_page(json!([
            {"name": "shape", "inputSchema": {"type": "object"}, "outputSchema": output_schema}
        ]))}],
        "tools/call:shape": replies,
    }))
}

/// An object schema nested `depth` levels deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(
        json!({"type": "integer"}),
        |inner, _| json!({"type": "object", "properties": {"n": inner}}),
    )
}

#[tokio::test]
async fn a_tool_whose_output_schema_cannot_be_used_is_not_called() {
    let unusable = [
        (
            json!({"$schema": "https://example.com/my-own-dialect", "type": "object"}),
            "unsupported dialect",
        ),
        (
            json!({"type": "object", "properties": {"n": {"$ref": "https://example.com/n.json"}}}),
            "external reference",
        ),
        (nested(40), "too complex"),
    ];
    for (schema, reason) in unusable {
        let server = shape_server(schema, vec![]);
        let client = ClientBuilder::new("calls-test", "1.0")
            .spawn_command(server.command.clone())
            .await
            .unwrap();
        // Never validated permissively (J-03, J-07): the call is refused before it is sent,
        // with the tool and the reason.
        let error = client.call_tool("shape", json!({})).await.unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(&error, Error::UnusableOutputSchema { tool, .. } if tool == "shape"),
            "{message}"
        );
        assert!(message.contains(reason), "{message}");
        client.close().await;
        assert!(
            server.received("tools/call").is_empty(),
            "{reason}: not called"
        );
    }
}

#[tokio::test]
async fn output_is_checked_on_stdio_and_legacy_servers_without_a_cached_list() {
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let modern = shape_server(schema.clone(), vec![]);
    let legacy = Scripted::new(&json!({
        "server/discover": [{"error": {"code": -32601, "message": "Method not found"}}],
        "initialize": [{"result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "old", "version": "1"}
        }}],
        "tools/list": [{"result": {"tools": [
            {"name": "shape", "inputSchema": {"type": "object"}, "outputSchema": schema}
        ]}}],
        "tools/call:shape": [{"result": {
            "content": [{"type": "text", "text": "{}"}], "structuredContent": {"n": "not a number"}
        }}],
    }));
    for server in [modern, legacy] {
        let client = ClientBuilder::new("calls-test", "1.0")
            .spawn_command(server.command.clone())
            .await
            .unwrap();
        // Nothing was listed before: the definition is fetched to check the output (C-04).
        let error = client.call_tool("shape", json!({})).await.unwrap_err();
        let Error::InvalidOutput(violations) = &error else {
            panic!("expected InvalidOutput, got {error}");
        };
        assert_eq!(violations[0].path, "/n", "{violations:?}");
        client.close().await;
    }
}

#[tokio::test]
async fn a_list_change_announced_before_the_result_does_not_skip_the_check() {
    // The server announces a change of its tools (unsolicited, as legacy servers do) just before
    // the result; the emptied cache must not let the output through unchecked.
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let changed = json!({"method": "notifications/tools/list_changed"});
    let server = shape_server(schema, vec![changed]);
    let client = ClientBuilder::new("calls-test", "1.0")
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    client.list_tools().await.unwrap();
    let error = client.call_tool("shape", json!({})).await.unwrap_err();
    assert!(matches!(error, Error::InvalidOutput(_)), "{error}");
    client.close().await;
    // The definition was fetched again after the change (K-09).
    assert_eq!(server.received("tools/list").len(), 2);
}

/// A server whose tools/list never ends: every page has `tools` and a cursor never seen before.
fn endless_list(tools: Value) -> Scripted {
    let mut page = tools_page(tools);
    page["nextCursor"] = json!("page-{ID}");
    Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": page}],
    }))
}

/// Runs `list` with a guard, so that a walk without a bound fails the test instead of running on.
async fn bounded_walk(client: &toolwire_client::Client) -> Error {
    tokio::time::timeout(Duration::from_secs(60), client.list_tools())
        .await
        .expect("the walk stops by itself")
        .unwrap_err()
}

#[tokio::test]
async fn an_endless_list_stops_at_the_default_item_bound() {
    let tools: Vec<Value> = (0..1_000)
        .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
        .collect();
    let server = endless_list(json!(tools));
    let client = ClientBuilder::new("calls-test", "1.0")
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let error = bounded_walk(&client).await;
    assert!(
        matches!(&error, Error::ListTooLarge { method, limit: ListLimit::Items(100_000) } if method == "tools/list"),
        "{error}"
    );
    assert!(error.to_string().contains("max_list_items"), "{error}");
    client.close().await;
}

#[tokio::test]
async fn an_endless_list_stops_at_the_byte_bound() {
    let description = "x".repeat(10_000);
    let server = endless_list(json!([
        {"name": "big", "description": description, "inputSchema": {"type": "object"}}
    ]));
    let client = ClientBuilder::new("calls-test", "1.0")
        .max_list_bytes(200_000)
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let error = bounded_walk(&client).await;
    assert!(
        matches!(
            &error,
            Error::ListTooLarge {
                limit: ListLimit::Bytes(200_000),
                ..
            }
        ),
        "{error}"
    );
    client.close().await;
    let pages = server.received("tools/list").len();
    assert!(
        (20..=21).contains(&pages),
        "{pages} pages of 10 kB for 200 kB"
    );
}

#[tokio::test]
async fn a_list_that_takes_too_long_stops_at_the_time_bound() {
    // The second page never comes; each page alone is within the request timeout.
    let mut first = tools_page(json!([{"name": "a", "inputSchema": {"type": "object"}}]));
    first["nextCursor"] = json!("stuck");
    let server = Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": first}],
        "tools/list@stuck": [],
    }));
    let client = ClientBuilder::new("calls-test", "1.0")
        .list_timeout(Duration::from_millis(300))
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let error = bounded_walk(&client).await;
    assert!(
        matches!(&error, Error::ListTooLarge { limit: ListLimit::Time(t), .. } if *t == Duration::from_millis(300)),
        "{error}"
    );
    client.close().await;
}

/// A relaying client makes one round: the server's `input_required` comes back as it was
/// sent, with no handler run, and the retry carries the caller's answers and the state
/// verbatim (M-11, M-12).
#[tokio::test]
async fn a_relayed_round_comes_back_and_its_retry_carries_the_answers() {
    use toolwire_client::protocol::{ElicitAction, ElicitResult, ElicitValue, InputResponse};
    use toolwire_client::{CallRound, RoundAnswers};

    let server = asking_server();
    // A handler that must not run: the round is the caller's to answer.
    let (client, mut running) = stuck_client(&server).await;
    let first = client
        .call_tool_round("ask", json!({}), CallOptions::default())
        .await
        .unwrap();
    let CallRound::InputRequired(input) = first else {
        panic!("the server's questions come back, got {first:?}");
    };
    assert_eq!(input.request_state.as_deref(), Some("round-1"));
    assert!(input.input_requests.unwrap().contains_key("name"));
    assert!(running.try_recv().is_err(), "no handler ran");

    let answer = ElicitResult {
        action: ElicitAction::Accept,
        content: Some([("name".to_owned(), ElicitValue::String("Ada".into()))].into()),
        meta: None,
    };
    let answers = RoundAnswers::new(
        [("name".to_owned(), InputResponse::Elicit(answer))].into(),
        input.request_state,
    );
    let done = client
        .call_tool_round("ask", json!({}), CallOptions::default().answers(answers))
        .await
        .unwrap();
    let CallRound::Complete(result) = done else {
        panic!("the answered call completes, got {done:?}");
    };
    let echoed = serde_json::to_value(&result).unwrap()["content"][0]["text"].clone();
    assert_eq!(
        echoed,
        r#"{"name": {"action": "accept", "content": {"name": "Ada"}}}"#
    );
    let retry = server.received("tools/call").pop().unwrap();
    assert_eq!(retry["params"]["requestState"], "round-1");
    // Without relaying, the same call's round would be answered by the (stuck) handler.
    let error = client
        .call_tool_with("ask", json!({}), CallOptions::default().relay_input())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InputRequired(_)), "{error}");
    client.close().await;
}

#[tokio::test]
async fn a_legacy_servers_request_during_a_call_tells_its_handler_the_calls_request_id() {
    // The server asks (a request of its own) before it answers the call: on stdio the request
    // names no call, and with one call in flight it is that call's.
    let legacy = Scripted::new(&json!({
        "server/discover": [{"error": {"code": -32601, "message": "Method not found"}}],
        "initialize": [{"result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "old", "version": "1"}
        }}],
        "tools/list": [{"result": {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}}],
        "tools/call:ask": [
            {"jsonrpc": "2.0", "id": "q-1", "method": "elicitation/create",
             "params": {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}},
            {"result": {"content": [{"type": "text", "text": "done"}]}}
        ],
    }));
    let (told, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let client = ClientBuilder::new("calls-test", "1.0")
        .on_elicit(move |_| {
            let asked = toolwire_client::Asked::current();
            let _ = told.send((asked.related, asked.connection));
            async { Ok(toolwire_client::declined()) }
        })
        .spawn_command(legacy.command.clone())
        .await
        .unwrap();
    // Outside a handler, nothing is related.
    assert_eq!(toolwire_client::Asked::current().related, None);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let ids = sent.clone();
    let options = CallOptions::default().on_request(move |id| ids.lock().unwrap().push(id));
    client
        .call_tool_with("ask", json!({}), options)
        .await
        .unwrap();
    let related = tokio::time::timeout(Duration::from_secs(10), heard.recv())
        .await
        .expect("the handler ran")
        .expect("it told");
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    // The request it came during, on this connection.
    assert_eq!(related, (Some(sent[0].id), sent[0].connection));
    assert_eq!(sent[0].connection, client.connection());
    client.close().await;
}

#[tokio::test]
async fn a_legacy_resource_is_unsubscribed_when_the_last_subscription_following_it_is_dropped() {
    // Each unsubscription is answered, then witnessed by an update of `file:///witness`, which
    // a subscription kept to the end follows: the test knows when one reached the server.
    let witnessed = json!({"method": "notifications/resources/updated",
                           "params": {"uri": "file:///witness"}});
    let server = Scripted::new(&json!({
        "server/discover": [{"error": {"code": -32601, "message": "Method not found"}}],
        "initialize": [{"result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"resources": {"subscribe": true}},
            "serverInfo": {"name": "old", "version": "1"}
        }}],
        "resources/subscribe": [{"result": {}}],
        "resources/unsubscribe": [{"result": {}}, witnessed],
    }));
    let client = ClientBuilder::new("calls-test", "1.0")
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let following = |uris: &[&str]| SubscriptionFilter {
        resource_subscriptions: Some(uris.iter().map(|u| (*u).to_owned()).collect()),
        ..Default::default()
    };
    let mut witness = client
        .listen(following(&["file:///witness"]))
        .await
        .unwrap();
    let a = client.listen(following(&["file:///a"])).await.unwrap();
    let a_and_b = client
        .listen(following(&["file:///a", "file:///b"]))
        .await
        .unwrap();
    assert_eq!(
        a_and_b.acknowledged().resource_subscriptions.as_deref(),
        Some(&["file:///a".to_owned(), "file:///b".to_owned()][..])
    );
    let uris = |method: &str| -> Vec<String> {
        server
            .received(method)
            .iter()
            .map(|m| m["params"]["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    // A resource the session is subscribed to already is not asked for again.
    assert_eq!(
        uris("resources/subscribe"),
        ["file:///witness", "file:///a", "file:///b"]
    );

    // `a` is still followed by the other subscription: only `b` goes.
    drop(a_and_b);
    witnessed_unsubscription(&mut witness).await;
    assert_eq!(uris("resources/unsubscribe"), ["file:///b"]);
    drop(a);
    witnessed_unsubscription(&mut witness).await;
    assert_eq!(uris("resources/unsubscribe"), ["file:///b", "file:///a"]);
    client.close().await;
}

/// Waits for the witness of an unsubscription (see the test above).
async fn witnessed_unsubscription(witness: &mut toolwire_client::Subscription) {
    let next = tokio::time::timeout(Duration::from_secs(20), witness.next()).await;
    match next {
        Ok(Some(Ok(Notification::ResourceUpdated { uri }))) => {
            assert_eq!(uri, "file:///witness")
        }
        other => panic!("no unsubscription reached the server: {other:?}"),
    }
}

/// A server whose tool `job` becomes a task that asks for a name; its `tasks/get` answers
/// `reads` in turn (the last for the rest).
fn task_server(reads: &[&str]) -> Scripted {
    let asking = json!([{"result": {
        "resultType": "complete",
        "taskId": "t1", "status": "input_required",
        "createdAt": "2026-12-06T00:00:00Z", "lastUpdatedAt": "2026-12-06T00:00:00Z",
        "pollIntervalMs": 20,
        "inputRequests": {"name": {"method": "elicitation/create", "params": {
            "message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }}}
    }}]);
    let done = json!([{"result": {
        "resultType": "complete",
        "taskId": "t1", "status": "completed",
        "createdAt": "2026-12-06T00:00:00Z", "lastUpdatedAt": "2026-12-06T00:00:01Z",
        "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
    }}]);
    let each: Vec<Value> = reads
        .iter()
        .map(|read| {
            if *read == "asking" {
                asking.clone()
            } else {
                done.clone()
            }
        })
        .collect();
    Scripted::new(&json!({
        "server/discover": [{"result": discover_result()}],
        "tools/list": [{"result": tools_page(json!([
            {"name": "job", "inputSchema": {"type": "object"},
             "execution": {"taskSupport": "optional"}}
        ]))}],
        "tools/call:job": [{"result": {
            "resultType": "task", "taskId": "t1", "status": "working",
            "createdAt": "2026-12-06T00:00:00Z", "lastUpdatedAt": "2026-12-06T00:00:00Z",
            "pollIntervalMs": 20
        }}],
        "tasks/get": {"each": each},
        "tasks/update": [{"result": {"resultType": "complete"}}],
    }))
}

/// The `tasks/update`s a task's call made, following a server whose reads are `reads`.
async fn updates_following(reads: &[&str]) -> usize {
    let server = task_server(reads);
    let client = ClientBuilder::new("calls-test", "1.0")
        .on_elicit(|_| async { toolwire_client::accepted(&json!({"name": "Ada"})) })
        .spawn_command(server.command.clone())
        .await
        .unwrap();
    let call = client.call_tool_with("job", json!({}), CallOptions::default().tasks());
    let result = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the task is followed to its end")
        .expect("the task's result");
    let content = serde_json::to_value(&result.content).unwrap();
    assert_eq!(content[0]["text"], "done", "{content}");
    client.close().await;
    server.received("tasks/update").len()
}

/// A server whose record has not caught up with an update yet shows the question just
/// answered once more: the client reads again after the interval instead of answering it a
/// second time. The same question still open on the read after that is a new one, and is
/// answered (the client does not wait on it forever).
#[tokio::test]
async fn a_task_read_that_has_not_caught_up_with_an_update_is_read_again() {
    let lagging = updates_following(&["asking", "asking", "completed"]).await;
    assert_eq!(
        lagging, 1,
        "the question just answered is not answered again"
    );
    let asked_again = updates_following(&["asking", "asking", "asking", "completed"]).await;
    assert_eq!(asked_again, 2, "a question asked again is answered again");
}
