//! An upstream that needs input mid-call, through the gateway: its `input_required` rounds
//! reach the caller as the gateway's own (the questions verbatim, the upstream's state sealed
//! inside the gateway's), and the caller's answers go back upstream; over several rounds; a
//! tampered or foreign state and a retry with other arguments refused; a caller that cannot
//! answer told so (-32021); and a rule's `ask` before the upstream's own question, even under
//! the same key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolwire_client::protocol::{ElicitAction, ElicitResult, ElicitValue, InputResponse};
use toolwire_client::{CallOptions, CallRound, Client, ClientBuilder, Error, RoundAnswers};
use toolwire_gateway::{GatewayOptions, Rules, RulesConfig};
use toolwire_server::{Elicited, InputRequired, RequestContext, Tool, ToolError};

use crate::gateway::{gateway_with, upstream};
use crate::support::{Served, text};

/// The upstream's question: a name.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    /// Your name.
    name: String,
}

/// A greeting tool's arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Greeting {
    greeting: String,
}

/// The key the gateway asks its approval under (a rule's `ask`).
const APPROVAL_KEY: &str = "dev.toolwire/approval";

/// Asks for a name under `key`, then greets it.
fn greet(tool: &'static str, key: &'static str) -> Tool {
    Tool::new(tool, move |a: Greeting, ctx: RequestContext| async move {
        match ctx.elicited::<Name>(key)? {
            Some(Elicited::Accepted(form)) => Ok(format!("{}, {}!", a.greeting, form.name)),
            Some(_) => Ok(format!("{}, stranger!", a.greeting)),
            None => Err(ToolError::from(
                InputRequired::new().elicit::<Name>(key, "What is your name?"),
            )),
        }
    })
}

/// Asks for a first name, then (with the first in its state) for a family name.
fn full_name() -> Tool {
    Tool::new("full_name", |_: Greeting, ctx: RequestContext| async move {
        let first: Option<String> = ctx.request_state()?;
        let answer = |key: &str| match ctx.elicited::<Name>(key) {
            Ok(Some(Elicited::Accepted(form))) => Ok(Some(form.name)),
            Ok(_) => Ok(None),
            Err(error) => Err(error),
        };
        match (first, answer("first")?, answer("family")?) {
            (Some(first), _, Some(family)) => Ok(format!("{first} {family}")),
            (_, Some(first), _) => Err(ToolError::from(
                InputRequired::new()
                    .elicit::<Name>("family", "Your family name?")
                    .state(first),
            )),
            _ => Err(ToolError::from(
                InputRequired::new().elicit::<Name>("first", "Your first name?"),
            )),
        }
    })
}

/// One upstream, "up", with the tools above, behind a gateway with `options`.
async fn relay_gateway(options: GatewayOptions) -> (toolwire_gateway::Gateway, Served, Served) {
    let tools = vec![
        greet("greet", "user_name"),
        greet("clash", APPROVAL_KEY),
        full_name(),
        Tool::new("caps", |_: Greeting, ctx: RequestContext| async move {
            serde_json::to_string(ctx.client_capabilities()).unwrap()
        }),
    ];
    let up = Served::start(upstream("up", tools), None).await;
    let (gateway, served) = gateway_with(&[("up", "up", &up.url)], options).await;
    (gateway, served, up)
}

/// A client that answers forms: the gateway's approval question with `approve: true`, any
/// other question with a name made of its message; counting the questions.
fn answering(url: &str, asked: Arc<AtomicUsize>) -> Client {
    ClientBuilder::new("relay-test", "1")
        .on_elicit(move |params| {
            asked.fetch_add(1, Ordering::SeqCst);
            async move {
                let message = serde_json::to_value(&params).unwrap()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let content = if message.starts_with("Run ") {
                    [("approve".to_owned(), ElicitValue::Bool(true))].into()
                } else if message.contains("family") {
                    [("name".to_owned(), ElicitValue::String("Lovelace".into()))].into()
                } else {
                    [("name".to_owned(), ElicitValue::String("Ada".into()))].into()
                };
                Ok(ElicitResult {
                    action: ElicitAction::Accept,
                    content: Some(content),
                    meta: None,
                })
            }
        })
        .http(url)
        .expect("a client")
}

/// The answer "Ada" to the question under `key`.
fn ada(key: &str) -> RoundAnswers {
    let answer = ElicitResult {
        action: ElicitAction::Accept,
        content: Some([("name".to_owned(), ElicitValue::String("Ada".into()))].into()),
        meta: None,
    };
    RoundAnswers::new(
        [(key.to_owned(), InputResponse::Elicit(answer))].into(),
        None,
    )
}

/// The first round of `tool`: the gateway's `input_required` result.
async fn first_round(
    client: &Client,
    tool: &str,
    arguments: serde_json::Value,
) -> toolwire_client::protocol::InputRequiredResult {
    match client
        .call_tool_round(tool, arguments, CallOptions::default())
        .await
    {
        Ok(CallRound::InputRequired(input)) => *input,
        other => panic!("the upstream's question reaches the caller, got {other:?}"),
    }
}

/// The -32602 a refused retry gets.
fn invalid_params(outcome: Result<CallRound, Error>) -> String {
    match outcome {
        Err(Error::Rpc(error)) if error.code == -32602 => error.message,
        other => panic!("a retry of another call is refused with -32602, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_question_reaches_the_caller_and_its_answer_goes_back() {
    let (gateway, served, up) = relay_gateway(GatewayOptions::new()).await;
    let caller = answering(&served.url, Arc::default());
    let arguments = json!({"greeting": "Hello"});

    let input = first_round(&caller, "up__greet", arguments.clone()).await;
    let requests = input.input_requests.clone().unwrap_or_default();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["user_name"]);
    let question = serde_json::to_value(&requests["user_name"]).unwrap();
    assert_eq!(question["params"]["message"], "What is your name?");
    let state = input.request_state.clone().expect("the gateway's state");

    let mut answers = ada("user_name");
    answers.state = Some(state);
    let done = caller
        .call_tool_round(
            "up__greet",
            arguments.clone(),
            CallOptions::default().answers(answers),
        )
        .await
        .unwrap();
    let CallRound::Complete(result) = done else {
        panic!("the answered call completes, got {done:?}");
    };
    assert_eq!(text(&result), "Hello, Ada!");

    // A client that answers its rounds itself sees one call.
    let result = caller.call_tool("up__greet", arguments).await.unwrap();
    assert_eq!(text(&result), "Hello, Ada!");
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_asks_over_several_rounds() {
    let (gateway, served, up) = relay_gateway(GatewayOptions::new()).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let caller = answering(&served.url, asked.clone());
    let result = caller
        .call_tool("up__full_name", json!({"greeting": "-"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "Ada Lovelace", "{result:?}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "two questions, one each round"
    );
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_or_foreign_state_and_other_arguments_are_refused() {
    let (gateway, served, up) = relay_gateway(GatewayOptions::new()).await;
    let caller = answering(&served.url, Arc::default());
    let arguments = json!({"greeting": "Hello"});
    let input = first_round(&caller, "up__greet", arguments.clone()).await;
    let state = input.request_state.expect("the gateway's state");
    let retry = |tool: &'static str, arguments: serde_json::Value, state: String| {
        let caller = caller.clone();
        async move {
            let mut answers = ada("user_name");
            answers.state = Some(state);
            caller
                .call_tool_round(tool, arguments, CallOptions::default().answers(answers))
                .await
        }
    };

    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    invalid_params(retry("up__greet", arguments.clone(), tampered).await);
    let other = retry("up__greet", json!({"greeting": "Goodbye"}), state.clone()).await;
    invalid_params(other);
    let foreign = retry("up__clash", arguments.clone(), state.clone()).await;
    invalid_params(foreign);
    // The state of the call itself still works.
    let done = retry("up__greet", arguments, state).await.unwrap();
    assert!(
        matches!(&done, CallRound::Complete(r) if text(r) == "Hello, Ada!"),
        "{done:?}"
    );
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_cannot_answer_is_told_the_capability_it_lacks() {
    let (gateway, served, up) = relay_gateway(GatewayOptions::new()).await;
    let caller = crate::support::client(&served.url);
    let refused = caller
        .call_tool("up__greet", json!({"greeting": "Hello"}))
        .await
        .expect_err("a caller without elicitation cannot be asked");
    let error = refused.rpc().expect("a JSON-RPC error");
    assert_eq!(error.code, -32021, "{error:?}");
    let data = serde_json::to_value(&error.data).unwrap();
    assert_eq!(
        data["requiredCapabilities"]["elicitation"]["form"],
        json!({})
    );
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_question_comes_first_and_an_upstream_may_use_its_key() {
    let config: RulesConfig = serde_json::from_value(json!({"rules": [
        {"ask": "tool.name == \"up__clash\"", "why": "it greets"},
    ]}))
    .unwrap();
    let options = GatewayOptions::new().rules(Rules::compile(&config).unwrap());
    let (gateway, served, up) = relay_gateway(options).await;

    // Round by round: the gateway's question alone, then the upstream's under the same key.
    let caller = answering(&served.url, Arc::default());
    let arguments = json!({"greeting": "Hi"});
    let input = first_round(&caller, "up__clash", arguments.clone()).await;
    let question = serde_json::to_value(&input.input_requests.unwrap()[APPROVAL_KEY]).unwrap();
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Run up__clash"), "{message}");

    let asked = Arc::new(AtomicUsize::new(0));
    let caller = answering(&served.url, asked.clone());
    let result = caller.call_tool("up__clash", arguments).await.unwrap();
    assert_eq!(text(&result), "Hi, Ada!", "{result:?}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "the approval, then the upstream's question; the approval is not asked again"
    );
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

/// A gateway over the upstreams of `servers` (an `mcpServers` object), its server offering
/// prompts and resources, served over HTTP.
async fn gateway_of(servers: serde_json::Value) -> (toolwire_gateway::Gateway, Served) {
    let config = toolwire_host::HostConfig::parse(
        &json!({ "mcpServers": servers }).to_string(),
        "/nonexistent/gateway.json",
        &toolwire_host::Variables::new::<&str, &str>([]),
    )
    .expect("a configuration");
    let downstream = toolwire_server::Server::builder("gateway", "1")
        .offer_prompts()
        .offer_resources();
    let gateway = toolwire_gateway::Gateway::start(
        &config,
        toolwire_host::HostOptions::new(toolwire_gateway::NoPerson),
        downstream,
        GatewayOptions::new(),
    )
    .await
    .expect("a gateway");
    let served = Served::start(gateway.server().clone(), None).await;
    (gateway, served)
}

/// The name the caller gave under `user_name`, or the question.
fn name_of(ctx: &RequestContext) -> Result<String, ToolError> {
    match ctx.elicited::<Name>("user_name")? {
        Some(Elicited::Accepted(form)) => Ok(form.name),
        Some(_) => Ok("stranger".to_owned()),
        None => Err(ToolError::from(
            InputRequired::new().elicit::<Name>("user_name", "What is your name?"),
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_prompt_or_resource_that_asks_is_relayed_too() {
    let upstream = toolwire_server::Server::builder("up", "1")
        .prompt(toolwire_server::Prompt::new(
            "welcome",
            |_: toolwire_server::PromptArgs, ctx: RequestContext| async move {
                Ok(format!("Welcome, {}!", name_of(&ctx)?))
            },
        ))
        .resource(toolwire_server::Resource::new(
            "file:///card",
            "card",
            |uri: String, ctx: RequestContext| async move {
                let name = name_of(&ctx)?;
                Ok(toolwire_client::protocol::ResourceContents::text(
                    uri,
                    "text/plain",
                    format!("card of {name}"),
                ))
            },
        ))
        .build()
        .expect("an upstream");
    let up = Served::start(upstream, None).await;
    let (gateway, served) = gateway_of(json!({"up": {"url": up.url, "prefix": "up"}})).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let caller = answering(&served.url, asked.clone());

    let prompt = caller.get_prompt("up__welcome", json!({})).await.unwrap();
    let message = serde_json::to_value(&prompt.messages[0].content).unwrap();
    assert_eq!(message["text"], "Welcome, Ada!", "{prompt:?}");
    let read = caller
        .read_resource("toolwire://up/file:///card")
        .await
        .unwrap();
    let contents = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(contents["text"], "card of Ada", "{read:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 2, "one question each");
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_stdio_upstreams_question_that_names_no_call_fails_the_call_clearly() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/legacy_asking.py");
    let (gateway, served) =
        gateway_of(json!({"old": {"command": "python3", "args": [script], "prefix": "old"}})).await;
    let caller = answering(&served.url, Arc::default());
    // One call held for its caller's answer: its question was asked while it was the only
    // call in flight. A question on stdio names no call: with two in flight, the second's
    // cannot be told from the first's, and is refused.
    let held = first_round(&caller, "old__ask", json!({})).await;
    let call = caller.call_tool("old__ask", json!({}));
    let result = tokio::time::timeout(crate::support::DEADLINE, call)
        .await
        .expect("the call ends, it does not hang")
        .unwrap();
    assert!(result.is_error(), "{result:?}");
    let words = text(&result);
    assert!(
        words.contains("the upstream server old asked for input")
            && words.contains("cannot relay")
            && words.contains("only while that call is the only one in flight")
            && words.contains("refused: "),
        "{words}"
    );
    let answers = RoundAnswers::new(ada("elicitation").responses, held.request_state.clone());
    let done = caller
        .call_tool_round(
            "old__ask",
            json!({}),
            CallOptions::default().answers(answers),
        )
        .await;
    assert!(
        matches!(&done, Ok(CallRound::Complete(r)) if text(r).contains("Ada")),
        "{done:?}"
    );
    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sees_the_callers_capabilities_and_stateless_answers() {
    let (gateway, served, up) = relay_gateway(GatewayOptions::new()).await;
    // The upstream is told what the caller can answer, not what the gateway could.
    let plain = crate::support::client(&served.url);
    let caps = plain
        .call_tool("up__caps", json!({"greeting": "-"}))
        .await
        .unwrap();
    let declared: serde_json::Value = serde_json::from_str(&text(&caps)).unwrap();
    assert!(declared.get("elicitation").is_none(), "{declared}");
    assert!(declared.get("sampling").is_none(), "{declared}");
    let answering = answering(&served.url, Arc::default());
    let caps = answering
        .call_tool("up__caps", json!({"greeting": "-"}))
        .await
        .unwrap();
    let declared: serde_json::Value = serde_json::from_str(&text(&caps)).unwrap();
    assert_eq!(declared["elicitation"]["form"], json!({}), "{declared}");

    // Answers sent without any state go upstream as they are.
    let done = answering
        .call_tool_round(
            "up__greet",
            json!({"greeting": "Hey"}),
            CallOptions::default().answers(ada("user_name")),
        )
        .await
        .unwrap();
    assert!(
        matches!(&done, CallRound::Complete(r) if text(r) == "Hey, Ada!"),
        "{done:?}"
    );
    gateway.close().await;
    served.stop().await;
    up.stop().await;
}
