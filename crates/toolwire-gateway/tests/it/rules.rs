//! The gateway's rules, through the gateway: a tool denied to a caller whatever the
//! arguments is out of its list and refused with the rule; a call refused for its arguments
//! says which rule; an `ask` rule puts the call to the person behind the caller as an
//! elicitation (approved: made; declined: refused), and a client that cannot elicit is told
//! why it is refused.

use serde_json::json;
use toolwire_client::ClientBuilder;
use toolwire_client::protocol::{ElicitAction, ElicitResult, ElicitValue};
use toolwire_gateway::{GatewayOptions, Rules, RulesConfig};
use toolwire_server::{RequestContext, Tool};

use crate::gateway::{Words, gateway_with, names, shout, upstream};
use crate::support::{Served, text};

fn rules(config: serde_json::Value) -> GatewayOptions {
    let config: RulesConfig = serde_json::from_value(config).expect("a rules configuration");
    GatewayOptions::new().rules(Rules::compile(&config).expect("rules that compile"))
}

fn files() -> Vec<Tool> {
    vec![
        Tool::new("read", |a: Words, _: RequestContext| async move {
            format!("read {}", a.text)
        }),
        Tool::new("write", |a: Words, _: RequestContext| async move {
            format!("wrote {}", a.text)
        }),
    ]
}

/// A client named `name` (the rules below read `caller.client.name`), answering elicitations
/// with `answer` if given.
fn client_named(url: &str, name: &str, answer: Option<bool>) -> toolwire_client::Client {
    let mut builder = ClientBuilder::new(name, "1");
    if let Some(approve) = answer {
        builder = builder.on_elicit(move |params| async move {
            let message = serde_json::to_value(&params).unwrap()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                message.contains("fs__write") && message.contains("\"text\": \"/etc/passwd\""),
                "the question shows the tool and the exact arguments: {message}"
            );
            Ok(ElicitResult {
                action: ElicitAction::Accept,
                content: Some([("approve".to_owned(), ElicitValue::Bool(approve))].into()),
                meta: None,
            })
        });
    }
    builder.http(url).expect("a client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_out_of_the_callers_list_and_refused_with_the_rule() {
    let fs = Served::start(upstream("fs", files()), None).await;
    let words = Served::start(upstream("words", vec![shout("Shouts.")]), None).await;
    let options = rules(json!({"rules": [
        {"deny": "tool.name.startsWith(\"fs__write\") && caller.client.name != \"admin\"",
         "why": "only the admin client writes files"},
        {"deny": "tool.upstream == \"fs\" && args.text.startsWith(\"/etc/\")",
         "why": "nothing under /etc"},
    ]}));
    let (gateway, served) = gateway_with(
        &[("fs", "fs", &fs.url), ("words", "w", &words.url)],
        options,
    )
    .await;

    let user = client_named(&served.url, "user", None);
    assert_eq!(names(&user).await, ["fs__read", "w__shout"]);
    let refused = user
        .call_tool("fs__write", json!({"text": "/tmp/x"}))
        .await
        .expect_err("a tool out of the caller's list is refused");
    assert!(
        refused
            .to_string()
            .contains("only the admin client writes files"),
        "{refused}"
    );

    let admin = client_named(&served.url, "admin", None);
    assert_eq!(names(&admin).await, ["fs__read", "fs__write", "w__shout"]);
    let wrote = admin
        .call_tool("fs__write", json!({"text": "/tmp/x"}))
        .await
        .unwrap();
    assert_eq!(text(&wrote), "wrote /tmp/x");
    // A rule over the arguments cannot hide a tool; it refuses the call, saying which rule.
    let refused = admin
        .call_tool("fs__read", json!({"text": "/etc/shadow"}))
        .await
        .unwrap();
    assert!(refused.is_error(), "{refused:?}");
    assert!(
        text(&refused).contains("rules[1]") && text(&refused).contains("nothing under /etc"),
        "{}",
        text(&refused)
    );
    gateway.close().await;
    served.stop().await;
    fs.stop().await;
    words.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_deny_lets_through_only_what_a_rule_allows() {
    let fs = Served::start(upstream("fs", files()), None).await;
    let options = rules(json!({
        "rules": [{"allow": "args.text.startsWith(\"/srv/public/\")"}],
        "default": "deny",
    }));
    let (gateway, served) = gateway_with(&[("fs", "fs", &fs.url)], options).await;
    let user = client_named(&served.url, "user", None);
    // The allow rule reads the arguments: the tools stay listed, calls are judged one by one.
    assert_eq!(names(&user).await, ["fs__read", "fs__write"]);
    let read = user
        .call_tool("fs__read", json!({"text": "/srv/public/a"}))
        .await
        .unwrap();
    assert_eq!(text(&read), "read /srv/public/a");
    let refused = user
        .call_tool("fs__read", json!({"text": "/home/a"}))
        .await
        .unwrap();
    assert!(refused.is_error(), "{refused:?}");
    assert!(
        text(&refused).contains("denied by default"),
        "{}",
        text(&refused)
    );
    gateway.close().await;
    served.stop().await;
    fs.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_rule_puts_the_call_to_the_person_behind_the_caller() {
    let fs = Served::start(upstream("fs", files()), None).await;
    let options = rules(json!({"rules": [
        {"ask": "tool.name == \"fs__write\"", "why": "writes change files"},
    ]}));
    let (gateway, served) = gateway_with(&[("fs", "fs", &fs.url)], options).await;
    let arguments = json!({"text": "/etc/passwd"});

    let approving = client_named(&served.url, "user", Some(true));
    let wrote = approving
        .call_tool("fs__write", arguments.clone())
        .await
        .unwrap();
    assert_eq!(text(&wrote), "wrote /etc/passwd", "{wrote:?}");

    let declining = client_named(&served.url, "user", Some(false));
    let refused = declining
        .call_tool("fs__write", arguments.clone())
        .await
        .unwrap();
    assert!(refused.is_error(), "{refused:?}");
    assert!(
        text(&refused).contains("did not approve"),
        "{}",
        text(&refused)
    );

    let mute = client_named(&served.url, "user", None);
    let refused = mute.call_tool("fs__write", arguments).await.unwrap();
    assert!(refused.is_error(), "{refused:?}");
    assert!(
        text(&refused).contains("declares no elicitation capability")
            && text(&refused).contains("writes change files"),
        "{}",
        text(&refused)
    );
    // Reads need no question.
    let read = mute
        .call_tool("fs__read", json!({"text": "a"}))
        .await
        .unwrap();
    assert_eq!(text(&read), "read a");
    gateway.close().await;
    served.stop().await;
    fs.stop().await;
}
