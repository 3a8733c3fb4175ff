//! A legacy (2025-11-25) upstream that asks mid-call, through the gateway: the upstream's
//! request on the open call (elicitation, sampling, roots) reaches a 2026-07-28 caller as an
//! `input_required` round while the call is held, and the caller's answer goes back upstream;
//! over two rounds; declined; unanswered past the hold's time; past the cap; a replayed or
//! tampered state; a retry that reaches another instance; and a legacy caller, asked with a
//! plain request. The upstream is `legacy_asking.py`, a legacy server on stdio.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use toolwire_client::protocol::{
    CallToolResult, CreateMessageResult, ElicitAction, ElicitResult, ElicitValue,
    InputRequiredResult, InputResponse, ListRootsResult, Root,
};
use toolwire_client::{CallOptions, CallRound, Client, ClientBuilder, Error, RoundAnswers};
use toolwire_gateway::{Gateway, GatewayOptions};
use toolwire_server::RequestStateKeys;

use crate::support::{DEADLINE, Served, text};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/legacy_asking.py");

/// A gateway over the legacy upstreams `names` (each the script, its prefix its name), with
/// `options`, its server sealing states with `key`.
async fn legacy_gateway(
    names: &[&str],
    options: GatewayOptions,
    key: [u8; 32],
) -> (Gateway, Served) {
    let servers: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|name| {
            let server = json!({"command": "python3", "args": [SCRIPT], "prefix": name});
            (name.to_string(), server)
        })
        .collect();
    gateway_over(servers, options, key).await
}

/// A gateway over the upstreams of `servers` (an `mcpServers` object), with `options`, its
/// server sealing states with `key`.
async fn gateway_over(
    servers: serde_json::Map<String, serde_json::Value>,
    options: GatewayOptions,
    key: [u8; 32],
) -> (Gateway, Served) {
    let config = toolwire_host::HostConfig::parse(
        &json!({ "mcpServers": servers }).to_string(),
        "/nonexistent/gateway.json",
        &toolwire_host::Variables::new::<&str, &str>([]),
    )
    .expect("a configuration");
    let downstream = toolwire_server::Server::builder("gateway", "1")
        .request_state_keys(RequestStateKeys::new(key));
    let gateway = Gateway::start(
        &config,
        toolwire_host::HostOptions::new(toolwire_gateway::NoPerson),
        downstream,
        options,
    )
    .await
    .expect("a gateway");
    let served = Served::start(gateway.server().clone(), None).await;
    (gateway, served)
}

/// A client that answers every form with a name ("Ada", or "Lovelace" for a family name), or
/// declines when `decline`; counting the questions. It speaks `version`.
fn caller(url: &str, version: &str, decline: bool, asked: Arc<AtomicUsize>) -> Client {
    ClientBuilder::new("hold-test", "1")
        .protocol_versions([version])
        .on_elicit(move |params| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                let message = serde_json::to_value(&params).unwrap()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let name = if message.contains("family") {
                    "Lovelace"
                } else {
                    "Ada"
                };
                Ok(match decline {
                    true => toolwire_client::declined(),
                    false => accepted(name),
                })
            }
        })
        .on_sample(|params| async move {
            let asked =
                serde_json::to_value(&params).unwrap()["messages"][0]["content"]["text"].clone();
            Ok(serde_json::from_value::<CreateMessageResult>(json!({
                "role": "assistant",
                "content": {"type": "text", "text": format!("hi, to {asked}")},
                "model": "test-model",
            }))
            .unwrap())
        })
        .on_roots(|| async {
            Ok(ListRootsResult {
                roots: vec![Root {
                    uri: "file:///srv/project".into(),
                    name: None,
                    meta: None,
                }],
                meta: None,
            })
        })
        .http(url)
        .expect("a client")
}

/// A 2026-07-28 caller answering with names.
fn modern(url: &str, asked: Arc<AtomicUsize>) -> Client {
    caller(url, "2026-07-28", false, asked)
}

fn accepted(name: &str) -> ElicitResult {
    ElicitResult {
        action: ElicitAction::Accept,
        content: Some([("name".to_owned(), ElicitValue::String(name.into()))].into()),
        meta: None,
    }
}

/// The answer `name` to the upstream's elicitation, with the round's state.
fn answer(round: &InputRequiredResult, name: &str) -> RoundAnswers {
    RoundAnswers::new(
        [(
            "elicitation".to_owned(),
            InputResponse::Elicit(accepted(name)),
        )]
        .into(),
        round.request_state.clone(),
    )
}

/// Calls `tool` to its end, within the tests' deadline.
async fn call(client: &Client, tool: &str) -> CallToolResult {
    tokio::time::timeout(DEADLINE, client.call_tool(tool, json!({})))
        .await
        .expect("the call ends, it does not hang")
        .expect("a result")
}

/// One round of `tool`, within the tests' deadline.
async fn round(client: &Client, tool: &str, options: CallOptions) -> Result<CallRound, Error> {
    tokio::time::timeout(DEADLINE, client.call_tool_round(tool, json!({}), options))
        .await
        .expect("the round ends, it does not hang")
}

/// The first round of `tool`: the upstream's question.
async fn asked(client: &Client, tool: &str) -> InputRequiredResult {
    match round(client, tool, CallOptions::default()).await {
        Ok(CallRound::InputRequired(input)) => *input,
        other => panic!("the upstream's question reaches the caller, got {other:?}"),
    }
}

/// The JSON-RPC error of a refused round.
fn refused(outcome: Result<CallRound, Error>, code: i64) -> String {
    match outcome {
        Err(Error::Rpc(error)) if error.code == code => error.message,
        other => panic!("a refusal with {code}, got {other:?}"),
    }
}

const KEY: [u8; 32] = [7; 32];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstreams_question_mid_call_is_answered_through_the_gateway() {
    let (gateway, served) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let questions = Arc::new(AtomicUsize::new(0));
    let accepting = modern(&served.url, questions.clone());
    let result = call(&accepting, "old__ask").await;
    assert!(!result.is_error(), "{result:?}");
    let words = text(&result);
    assert!(
        words.starts_with("answered ")
            && words.contains(r#""action": "accept""#)
            && words.contains(r#""name": "Ada""#),
        "{words}"
    );
    assert_eq!(questions.load(Ordering::SeqCst), 1);

    // Declined: the upstream hears the decline.
    let declining = caller(&served.url, "2026-07-28", true, Arc::default());
    let words = text(&call(&declining, "old__ask").await);
    assert!(words.contains(r#""action": "decline""#), "{words}");

    // The round the caller sees: the upstream's form under its own kind, and a state.
    let round = asked(&accepting, "old__ask").await;
    let requests = serde_json::to_value(&round.input_requests).unwrap();
    assert_eq!(
        requests["elicitation"]["method"], "elicitation/create",
        "{requests}"
    );
    assert_eq!(requests["elicitation"]["params"]["message"], "Your name?");
    assert!(round.request_state.is_some());
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_roots_mid_call_and_two_rounds_in_one_call() {
    let (gateway, served) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let questions = Arc::new(AtomicUsize::new(0));
    let caller = modern(&served.url, questions.clone());
    let words = text(&call(&caller, "old__sample").await);
    assert!(
        words.contains("test-model") && words.contains(r#"hi, to \"Say hi\""#),
        "{words}"
    );
    let words = text(&call(&caller, "old__roots").await);
    assert!(words.contains("file:///srv/project"), "{words}");
    let words = text(&call(&caller, "old__twice").await);
    assert!(
        words.contains(r#""name": "Ada"}} then {"#) && words.contains(r#""name": "Lovelace""#),
        "{words}"
    );
    assert_eq!(questions.load(Ordering::SeqCst), 2);
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_or_tampered_state_is_refused() {
    let (gateway, served) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let caller = modern(&served.url, Arc::default());
    let first = asked(&caller, "old__ask").await;
    let retry = |answers| CallOptions::default().answers(answers);
    let done = round(&caller, "old__ask", retry(answer(&first, "Grace"))).await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Grace")),
        "{done:?}"
    );
    // The same state again: the call it held is over.
    let again = round(&caller, "old__ask", retry(answer(&first, "Eve"))).await;
    let why = refused(again, -32602);
    assert!(why.contains("no call is held"), "{why}");

    // A state altered by the caller does not open.
    let second = asked(&caller, "old__ask").await;
    let mut forged = answer(&second, "Eve");
    let mut state = forged.state.take().unwrap().into_bytes();
    let last = state.len() - 2;
    state[last] = if state[last] == b'A' { b'B' } else { b'A' };
    forged.state = Some(String::from_utf8(state).unwrap());
    let _ = refused(round(&caller, "old__ask", retry(forged)).await, -32602);
    // The call stays held for its own state.
    let done = round(&caller, "old__ask", retry(answer(&second, "Ada"))).await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Ada")),
        "{done:?}"
    );

    // A retry without the answer is asked again.
    let third = asked(&caller, "old__ask").await;
    let bare = RoundAnswers::new(Default::default(), third.request_state.clone());
    let asked_again = round(&caller, "old__ask", retry(bare)).await;
    let Ok(CallRound::InputRequired(again)) = asked_again else {
        panic!("asked again, got {asked_again:?}");
    };
    let done = round(&caller, "old__ask", retry(answer(&again, "Ada"))).await;
    assert!(matches!(&done, Ok(CallRound::Complete(_))), "{done:?}");
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_hold_expires_and_the_upstream_is_told_no() {
    let ttl = Duration::from_millis(300);
    let (gateway, served) =
        legacy_gateway(&["old"], GatewayOptions::new().hold_ttl(ttl), KEY).await;
    let caller = modern(&served.url, Arc::default());
    let first = asked(&caller, "old__ask").await;
    // The hold's time is what is tested: nothing else to wait for.
    tokio::time::sleep(ttl * 2).await;
    let late = round(
        &caller,
        "old__ask",
        CallOptions::default().answers(answer(&first, "Ada")),
    )
    .await;
    let why = refused(late, -32602);
    assert!(
        why.contains("no call is held") && why.contains("300ms"),
        "{why}"
    );
    // The upstream was told no and is free: the next call is answered.
    let words = text(&call(&caller, "old__ask").await);
    assert!(words.contains("Ada"), "{words}");
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_a_question_is_refused_with_an_error_that_says_so() {
    let (gateway, served) =
        legacy_gateway(&["one", "two"], GatewayOptions::new().max_held(1), KEY).await;
    let caller = modern(&served.url, Arc::default());
    let first = asked(&caller, "one__ask").await;
    let full = round(&caller, "two__ask", CallOptions::default()).await;
    let why = refused(full, -32603);
    assert!(
        why.contains("upstream server two") && why.contains("cap"),
        "{why}"
    );
    // The held call is still answered.
    let done = round(
        &caller,
        "one__ask",
        CallOptions::default().answers(answer(&first, "Ada")),
    )
    .await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Ada")),
        "{done:?}"
    );
    // And with the room it left, the other upstream's question is held too.
    let words = text(&call(&caller, "two__ask").await);
    assert!(words.contains("Ada"), "{words}");
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_reaches_another_instance_is_told_to_route_to_the_holding_one() {
    // Two instances sharing the sealing key, as replicas behind one endpoint do.
    let (one, served_one) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let (two, served_two) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let first = asked(&modern(&served_one.url, Arc::default()), "old__ask").await;
    let elsewhere = modern(&served_two.url, Arc::default());
    let retry = CallOptions::default().answers(answer(&first, "Ada"));
    let why = refused(round(&elsewhere, "old__ask", retry.clone()).await, -32603);
    assert!(
        why.contains("held by another gateway instance") && why.contains("sticky"),
        "{why}"
    );
    // The instance holding it takes the answer.
    let holder = modern(&served_one.url, Arc::default());
    let done = round(&holder, "old__ask", retry).await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Ada")),
        "{done:?}"
    );
    one.close().await;
    two.close().await;
    served_one.stop().await;
    served_two.stop().await;
}

/// Runs `legacy_caller.py`, a 2025-11-25 client, calling `tool` at `url`: its response, and
/// the requests it answered.
async fn legacy_call(url: &str, tool: &str) -> (serde_json::Value, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/legacy_caller.py");
    let run = tokio::process::Command::new("python3")
        .args([script, url, tool])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the legacy caller ends")
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let response = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("a response ({e}); stderr: {stderr}"));
    (response, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_caller_is_asked_with_a_plain_request() {
    let (gateway, served) = legacy_gateway(&["old"], GatewayOptions::new(), KEY).await;
    let (response, asked) = legacy_call(&served.url, "old__twice").await;
    let words = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        words.contains(r#""name": "Ada""#) && words.contains(r#""name": "Lovelace""#),
        "{response} {asked}"
    );
    assert_eq!(
        asked.matches("answered elicitation/create").count(),
        2,
        "{asked}"
    );
    let (response, asked) = legacy_call(&served.url, "old__sample").await;
    let words = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(words.contains(r#""model": "m""#), "{response} {asked}");
    gateway.close().await;
    served.stop().await;
}

/// The legacy HTTP upstream (`legacy_asking_http.py`) on a free port, and its URL; it stops
/// when the child is dropped.
async fn legacy_http_upstream() -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt as _;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/legacy_asking_http.py"
    );
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let stdout = child.stdout.take().expect("its stdout");
    let mut url = String::new();
    let mut lines = tokio::io::BufReader::new(stdout);
    let said = lines.read_line(&mut url);
    tokio::time::timeout(DEADLINE, said)
        .await
        .expect("the upstream says where it listens")
        .expect("its URL");
    (child, url.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_http_upstreams_questions_are_held_for_each_of_several_calls_at_once() {
    let (_upstream, url) = legacy_http_upstream().await;
    let servers = [("old".to_owned(), json!({"url": url, "prefix": "old"}))]
        .into_iter()
        .collect();
    let (gateway, served) = gateway_over(servers, GatewayOptions::new(), KEY).await;
    let questions = Arc::new(AtomicUsize::new(0));
    let caller = modern(&served.url, questions.clone());
    // Over HTTP each question comes on its own call's stream: calls in flight together are
    // each held for their own answers.
    let first = asked(&caller, "old__ask").await;
    let (twice, sampled, roots) = tokio::join!(
        call(&caller, "old__twice"),
        call(&caller, "old__sample"),
        call(&caller, "old__roots"),
    );
    let words = text(&twice);
    assert!(
        words.contains(r#""name": "Ada"}} then {"#) && words.contains("Lovelace"),
        "{words}"
    );
    assert!(text(&sampled).contains("test-model"), "{sampled:?}");
    assert!(text(&roots).contains("file:///srv/project"), "{roots:?}");
    let done = round(
        &caller,
        "old__ask",
        CallOptions::default().answers(answer(&first, "Grace")),
    )
    .await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Grace")),
        "{done:?}"
    );
    assert_eq!(questions.load(Ordering::SeqCst), 2);
    gateway.close().await;
    served.stop().await;
}

/// The caller's answer to `asked` with `name`, as the retry of `tool`.
async fn answering(
    client: &Client,
    tool: &str,
    asked: &InputRequiredResult,
    name: &str,
) -> Result<CallRound, Error> {
    round(
        client,
        tool,
        CallOptions::default().answers(answer(asked, name)),
    )
    .await
}

/// A held call's second question reaches its own caller after a reload reconnected the
/// upstream: the calls made on the new connection reuse the old one's request ids, and a
/// question asked on the old connection must still find the call bound there, never the
/// other caller's call that has the same id on the new one. Alice is asked her family name;
/// Bob, whose call started after the reload, is asked only his own first question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reload_a_held_calls_question_reaches_only_its_own_caller() {
    let servers = |marker: &str| {
        let mut servers = serde_json::Map::new();
        let server = json!({
            "command": "python3", "args": [SCRIPT], "prefix": "up",
            "env": {"TOOLWIRE_TEST_MARKER": marker},
        });
        servers.insert("up".into(), server);
        servers
    };
    let (gateway, served) = gateway_over(servers("one"), GatewayOptions::new(), KEY).await;
    let alice = modern(&served.url, Arc::default());
    let bob = modern(&served.url, Arc::default());

    // Alice's call is held on the first connection, asking her first question.
    let first = asked(&alice, "up__twice").await;
    // A changed entry: the upstream is started again, on a new connection; Alice's call
    // stays on the old one.
    let config = toolwire_host::HostConfig::parse(
        &json!({ "mcpServers": servers("two") }).to_string(),
        "/nonexistent/gateway.json",
        &toolwire_host::Variables::new::<&str, &str>([]),
    )
    .unwrap();
    let reloaded = gateway.reload(&config, GatewayOptions::new()).unwrap();
    assert_eq!(reloaded.upstreams.changed, ["up"]);
    // Bob's call, on the new connection (once the upstream is served again), with the same
    // request ids the old one used.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let bobs = loop {
        match round(&bob, "up__twice", CallOptions::default()).await {
            Ok(CallRound::InputRequired(input)) => break *input,
            Err(Error::Rpc(e)) if e.message.starts_with("Unknown tool") => {
                assert!(tokio::time::Instant::now() < deadline, "not served again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("Bob's first question, got {other:?}"),
        }
    };
    let bobs_question = serde_json::to_value(&bobs.input_requests).unwrap();
    assert_eq!(
        bobs_question["elicitation"]["params"]["message"], "Your name?",
        "{bobs_question}"
    );

    // Alice answers: her second question is hers.
    let second = match answering(&alice, "up__twice", &first, "Ada").await {
        Ok(CallRound::InputRequired(input)) => *input,
        other => panic!("Alice's second question reaches Alice, got {other:?}"),
    };
    let message =
        serde_json::to_value(&second.input_requests).unwrap()["elicitation"]["params"]["message"]
            .clone();
    assert_eq!(message, "Your family name?");
    match answering(&alice, "up__twice", &second, "Lovelace").await {
        Ok(CallRound::Complete(result)) => {
            let said = text(&result);
            assert!(
                said.contains(r#""name": "Ada"}} then {"#) && said.contains("Lovelace"),
                "{said}"
            );
        }
        other => panic!("Alice's call completes with her answers, got {other:?}"),
    }

    // Bob's call was not answered by anyone else: it still waits for his answers, and
    // completes with them.
    let second = match answering(&bob, "up__twice", &bobs, "Bob").await {
        Ok(CallRound::InputRequired(input)) => *input,
        other => panic!("Bob's second question reaches Bob, got {other:?}"),
    };
    match answering(&bob, "up__twice", &second, "Builder").await {
        Ok(CallRound::Complete(result)) => {
            let said = text(&result);
            assert!(said.contains("Bob") && !said.contains("Ada"), "{said}")
        }
        other => panic!("Bob's call completes with his answers, got {other:?}"),
    }
    gateway.close().await;
    served.stop().await;
}

/// A legacy upstream that asks `roots/list` as soon as it is initialized, outside any call
/// (as server-filesystem and server-everything do), is told the gateway's own roots — none —
/// rather than refused with a warning: it keeps its own directories, and says so in peace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_asked_outside_any_call_are_none() {
    let mut servers = serde_json::Map::new();
    servers.insert(
        "up".into(),
        json!({"command": "python3", "args": [SCRIPT, "--roots-at-start"], "prefix": "up"}),
    );
    let (_gateway, served) = gateway_over(servers, GatewayOptions::new(), KEY).await;
    let client = modern(&served.url, Arc::default());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let said = match client.call_tool("up__start_roots", json!({})).await {
            Ok(result) => text(&result),
            Err(Error::Rpc(e)) if e.message.starts_with("Unknown tool") => String::new(),
            Err(other) => panic!("{other:?}"),
        };
        if said == r#"at start: {"roots": []}"# {
            break;
        }
        assert!(
            said.is_empty() || said.ends_with("no answer yet"),
            "the upstream was answered: {said}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "never asked: {said}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
