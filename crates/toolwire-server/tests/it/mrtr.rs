//! Multi round-trip requests over real HTTP: rounds, capability checks, and every attack on the
//! sealed request state (tampered, expired, other request, other principal, replay) plus key
//! rotation.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;
use toolwire_server::{
    Elicited, InputRequired, ManualClock, MemoryReplayGuard, NoArgs, RequestContext,
    RequestStateKeys, Server, ServerBuilder, Tool, ToolError,
};

use crate::support::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    item: String,
}

/// Asks for a name with state `"asked:<item>"`, then greets; echoes the state it got back.
fn ask_tool() -> Tool {
    Tool::new("ask", |args: Args, ctx: RequestContext| async move {
        let state: Option<String> = ctx.request_state()?;
        match (ctx.elicited::<Name>("who")?, state) {
            (Some(Elicited::Accepted(n)), Some(state)) => {
                Ok::<_, ToolError>(format!("{} for {} ({state})", n.name, args.item))
            }
            _ => Err(InputRequired::new()
                .elicit::<Name>("who", "Who?")
                .state(format!("asked:{}", args.item))
                .into()),
        }
    })
    .description("Asks who, with sealed state")
}

fn needs_roots() -> Tool {
    Tool::new("needs_roots", |_: NoArgs, _: RequestContext| async {
        Err::<String, ToolError>(InputRequired::new().list_roots("r").into())
    })
    .description("Always asks for roots")
}

fn builder() -> ServerBuilder {
    Server::builder("mrtr", "1")
        .tool(ask_tool())
        .tool(needs_roots())
}

fn with_elicitation(mut body: Value) -> Value {
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    body
}

fn call(id: i64, item: &str, responses: Option<Value>, state: Option<&str>) -> Value {
    let mut params = json!({"name": "ask", "arguments": {"item": item}});
    if let Some(r) = responses {
        params["inputResponses"] = r;
    }
    if let Some(s) = state {
        params["requestState"] = json!(s);
    }
    with_elicitation(request(id, "tools/call", params))
}

fn answer() -> Option<Value> {
    Some(json!({"who": {"action": "accept", "content": {"name": "Ada"}}}))
}

/// Round 1: the input request and the sealed state.
async fn first_round(url: &str, item: &str) -> String {
    let reply = post(url, &call(1, item, None, None)).await;
    let result = &reply.last()["result"];
    assert_eq!(result["resultType"], "input_required", "{}", reply.body);
    assert_eq!(
        result["inputRequests"]["who"]["method"],
        "elicitation/create"
    );
    assert!(
        result.get("ttlMs").is_none(),
        "input_required results carry no cache hints (K-02)"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(!state.contains("asked"), "the state is opaque: {state}");
    state
}

#[tokio::test]
async fn rounds_complete_and_missing_answers_are_asked_again() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let state = first_round(&s.url, "book").await;
    let reply = post(&s.url, &call(2, "book", answer(), Some(&state))).await;
    assert_eq!(
        reply.last()["result"]["content"][0]["text"],
        "Ada for book (asked:book)"
    );
    // No answer under the asked key: asked again (M-10); unknown keys are ignored.
    let other = Some(json!({"other": {"action": "accept", "content": {"name": "x"}}}));
    let reply = post(&s.url, &call(3, "book", other, Some(&state))).await;
    assert_eq!(reply.last()["result"]["resultType"], "input_required");
    // A malformed answer is -32602.
    let bad = Some(json!({"who": 12345}));
    assert_eq!(
        post(&s.url, &call(4, "book", bad, Some(&state)))
            .await
            .error_code(),
        Some(-32602)
    );
    // An unrecognised key of any shape is ignored, next to a good answer (M-10: it
    // once failed the whole request with -32602).
    for junk in [
        json!(5),
        json!("x"),
        json!([1]),
        json!({"weird": true}),
        json!(null),
    ] {
        let mut with_junk = answer().unwrap();
        with_junk["junk"] = junk.clone();
        let reply = post(&s.url, &call(6, "book", Some(with_junk), Some(&state))).await;
        assert_eq!(
            reply.last()["result"]["content"][0]["text"],
            "Ada for book (asked:book)",
            "junk {junk}: {}",
            reply.body
        );
    }
    // An answer of the wrong kind is -32602 too.
    let wrong = Some(json!({"who": {"roots": []}}));
    assert_eq!(
        post(&s.url, &call(5, "book", wrong, Some(&state)))
            .await
            .error_code(),
        Some(-32602)
    );
    s.stop().await;
}

#[tokio::test]
async fn undeclared_capabilities_are_never_asked_for() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let reply = post(
        &s.url,
        &request(
            1,
            "tools/call",
            json!({"name": "ask", "arguments": {"item": "x"}}),
        ),
    )
    .await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (400, Some(-32021)),
        "M-05"
    );
    assert_eq!(
        reply.last()["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {"form": {}}})
    );
    let reply = post(
        &s.url,
        &request(2, "tools/call", json!({"name": "needs_roots"})),
    )
    .await;
    assert_eq!(
        reply.last()["error"]["data"]["requiredCapabilities"],
        json!({"roots": {}})
    );
    s.stop().await;
}

#[tokio::test]
async fn tampered_and_foreign_state_is_refused() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let state = first_round(&s.url, "book").await;
    let flipped = {
        let mut chars: Vec<char> = state.chars().collect();
        let i = chars.len() / 2;
        chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
        chars.into_iter().collect::<String>()
    };
    let cases = [
        (
            "tampered",
            call(2, "book", answer(), Some(&format!("{state}-TAMPERED"))),
            "not issued by this server or was altered",
        ),
        (
            "bit flip",
            call(2, "book", answer(), Some(&flipped)),
            "not issued by this server or was altered",
        ),
        (
            "other arguments",
            call(2, "car", answer(), Some(&state)),
            "different request",
        ),
    ];
    for (what, body, message) in cases {
        let reply = post(&s.url, &body).await;
        assert_eq!(reply.error_code(), Some(-32602), "{what}: {}", reply.body);
        assert!(
            reply.last()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(message),
            "{what}: {}",
            reply.body
        );
    }
    // State from another server (another key) is refused as well.
    let other = TestServer::start(builder().build().unwrap()).await;
    assert_eq!(
        post(&other.url, &call(2, "book", answer(), Some(&state)))
            .await
            .error_code(),
        Some(-32602)
    );
    other.stop().await;
    s.stop().await;
}

#[tokio::test]
async fn state_expires() {
    let clock = ManualClock::new(1_000_000);
    let server = builder()
        .clock(clock.clone())
        .request_state_ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let state = first_round(&s.url, "book").await;
    clock.advance(59_000);
    assert!(
        post(&s.url, &call(2, "book", answer(), Some(&state)))
            .await
            .last()
            .get("result")
            .is_some()
    );
    clock.advance(1_000);
    let reply = post(&s.url, &call(3, "book", answer(), Some(&state))).await;
    assert_eq!(reply.error_code(), Some(-32602));
    assert!(reply.body.contains("expired"));
    s.stop().await;
}

#[tokio::test]
async fn state_is_bound_to_the_principal() {
    let config = HttpConfig::default().principal(|h| {
        h.get("x-user")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    });
    let s = TestServer::start_with(builder().build().unwrap(), config).await;
    let as_user = |user: &'static str| {
        move |h: &mut Vec<(String, String)>| h.push(("x-user".into(), user.into()))
    };
    let reply = post_with(&s.url, &call(1, "book", None, None), as_user("alice")).await;
    let state = reply.last()["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let ok = post_with(
        &s.url,
        &call(2, "book", answer(), Some(&state)),
        as_user("alice"),
    )
    .await;
    assert!(ok.last().get("result").is_some(), "{}", ok.body);
    let stolen = post_with(
        &s.url,
        &call(3, "book", answer(), Some(&state)),
        as_user("mallory"),
    )
    .await;
    assert_eq!(stolen.error_code(), Some(-32602));
    assert!(stolen.body.contains("different principal"));
    let anonymous = post(&s.url, &call(4, "book", answer(), Some(&state))).await;
    assert_eq!(anonymous.error_code(), Some(-32602));
    s.stop().await;
}

#[tokio::test]
async fn single_use_mode_refuses_a_second_redemption() {
    let s = TestServer::start(
        builder()
            .single_use_request_state(MemoryReplayGuard::default())
            .build()
            .unwrap(),
    )
    .await;
    let state = first_round(&s.url, "book").await;
    assert!(
        post(&s.url, &call(2, "book", answer(), Some(&state)))
            .await
            .last()
            .get("result")
            .is_some()
    );
    let replay = post(&s.url, &call(3, "book", answer(), Some(&state))).await;
    assert_eq!(replay.error_code(), Some(-32602));
    assert!(replay.body.contains("already used"));
    s.stop().await;
    // Without single-use mode the same state may be redeemed again (integrity alone, M-08).
    let s = TestServer::start(builder().build().unwrap()).await;
    let state = first_round(&s.url, "book").await;
    for id in 2..4 {
        assert!(
            post(&s.url, &call(id, "book", answer(), Some(&state)))
                .await
                .last()
                .get("result")
                .is_some()
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn key_rotation_keeps_rounds_in_flight() {
    let old = RequestStateKeys::new([7; 32]);
    let before =
        TestServer::start(builder().request_state_keys(old.clone()).build().unwrap()).await;
    let state = first_round(&before.url, "book").await;
    before.stop().await;
    // A new deployment seals with a new key and still opens state sealed with the old one.
    let after = TestServer::start(
        builder()
            .request_state_keys(old.rotate([8; 32]))
            .build()
            .unwrap(),
    )
    .await;
    let reply = post(&after.url, &call(2, "book", answer(), Some(&state))).await;
    assert_eq!(
        reply.last()["result"]["content"][0]["text"],
        "Ada for book (asked:book)"
    );
    after.stop().await;
}
