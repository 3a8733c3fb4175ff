//! A running gateway reloaded (`Gateway::reload`): an upstream added is connected and its
//! tools served, a rule added hides a tool, an upstream removed takes its tools with it, and
//! listeners hear of each change; a configuration with `approval.ask` rules is refused and
//! changes nothing.

use serde_json::json;
use toolwire_client::Notification;
use toolwire_client::protocol::SubscriptionFilter;
use toolwire_gateway::{GatewayError, GatewayOptions, Rules, RulesConfig};
use toolwire_host::{HostConfig, Variables};
use toolwire_server::{RequestContext, Tool};

use crate::gateway::{Words, gateway_with, names, shout, until_listed, upstream};
use crate::support::{DEADLINE, Served, client};

/// A configuration of `upstreams` (name, prefix, url), with `extra` at its top.
fn config(upstreams: &[(&str, &str, &str)], extra: serde_json::Value) -> HostConfig {
    let servers: serde_json::Map<String, serde_json::Value> = upstreams
        .iter()
        .map(|(name, prefix, url)| (name.to_string(), json!({"url": url, "prefix": prefix})))
        .collect();
    let mut file = json!({ "mcpServers": servers });
    if let (Some(file), Some(extra)) = (file.as_object_mut(), extra.as_object()) {
        file.extend(extra.clone());
    }
    HostConfig::parse(
        &file.to_string(),
        "/nonexistent/gateway.json",
        &Variables::new::<&str, &str>([]),
    )
    .expect("a configuration")
}

fn rules(config: serde_json::Value) -> Rules {
    let config: RulesConfig = serde_json::from_value(config).expect("rules");
    Rules::compile(&config).expect("rules that compile")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_upstreams_and_rules_and_tells_listeners() {
    let words = Served::start(upstream("words", vec![shout("Shouts.")]), None).await;
    let maths = Served::start(
        upstream(
            "maths",
            vec![
                Tool::new("double", |a: Words, _: RequestContext| async move {
                    a.text.repeat(2)
                }),
                Tool::new("triple", |a: Words, _: RequestContext| async move {
                    a.text.repeat(3)
                }),
            ],
        ),
        None,
    )
    .await;
    let (gateway, served) =
        gateway_with(&[("words", "w", &words.url)], GatewayOptions::new()).await;
    let caller = client(&served.url);
    assert_eq!(names(&caller).await, ["w__shout"]);
    let mut listening = caller
        .listen(SubscriptionFilter {
            tools_list_changed: Some(true),
            ..Default::default()
        })
        .await
        .expect("a listen stream");

    let both = [
        ("words", "w", words.url.as_str()),
        ("maths", "m", maths.url.as_str()),
    ];
    let denying = GatewayOptions::new().rules(rules(json!({
        "rules": [{"deny": "tool.name == \"m__triple\"", "why": "not here"}],
    })));
    let reloaded = gateway
        .reload(&config(&both, json!({})), denying)
        .expect("a reload");
    assert_eq!(reloaded.upstreams.added, ["maths"]);
    assert!(reloaded.upstreams.removed.is_empty() && reloaded.upstreams.changed.is_empty());
    until_listed(&caller, &["m__double", "w__shout"]).await;
    let heard = tokio::time::timeout(DEADLINE, listening.next())
        .await
        .expect("the listener hears of it");
    assert!(
        matches!(heard, Some(Ok(Notification::ToolsListChanged))),
        "{heard:?}"
    );
    let refused = caller.call_tool("m__triple", json!({"text": "a"})).await;
    assert!(
        format!("{refused:?}").contains("denied by rules[0]"),
        "{refused:?}"
    );

    // `approval.ask` rules: refused, nothing changed.
    let asking = config(
        &[("words", "w", words.url.as_str())],
        json!({"approval": {"ask": ["*"]}}),
    );
    let refused = gateway.reload(&asking, GatewayOptions::new());
    assert!(
        matches!(refused, Err(GatewayError::AskRules(_))),
        "{refused:?}"
    );
    assert_eq!(names(&caller).await, ["m__double", "w__shout"]);

    // maths removed, no rules.
    let reloaded = gateway
        .reload(
            &config(&[("words", "w", words.url.as_str())], json!({})),
            GatewayOptions::new(),
        )
        .expect("a reload");
    assert_eq!(reloaded.upstreams.removed, ["maths"]);
    until_listed(&caller, &["w__shout"]).await;
    gateway.close().await;
}
