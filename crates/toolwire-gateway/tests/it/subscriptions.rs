//! Resource subscriptions through a gateway: a caller that follows a served resource gets the
//! updates its upstream sends, under the served URI; one that does not follow it gets none;
//! the same URI of two upstreams is kept apart; and when no caller follows a resource any
//! more, the gateway stops following it upstream. What an upstream follows for the gateway is
//! read from the upstream itself ([`Server::followed_resources`]).

use std::collections::BTreeSet;

use toolwire_client::Notification;
use toolwire_client::protocol::{ResourceContents, SubscriptionFilter};
use toolwire_gateway::{Gateway, GatewayOptions};
use toolwire_host::HostOptions;
use toolwire_server::{FollowedResources, RequestContext, Resource, Server};

use crate::support::{DEADLINE, Served, client};

/// An upstream offering `file:///README.md` (the same URI on every upstream) and
/// `file:///CHANGES.md`.
fn upstream(name: &'static str) -> Server {
    let resource = |uri: &'static str| {
        Resource::new(
            uri,
            "doc",
            move |uri: String, _: RequestContext| async move {
                Ok(ResourceContents::text(uri, "text/plain", name))
            },
        )
    };
    Server::builder(name, "1")
        .resource(resource("file:///README.md"))
        .resource(resource("file:///CHANGES.md"))
        .build()
        .expect("an upstream")
}

async fn gateway(upstreams: &[(&str, &str, &str)]) -> (Gateway, Served) {
    let downstream = Server::builder("gateway", "1").offer_resources();
    let host = HostOptions::new(toolwire_gateway::NoPerson);
    crate::gateway::gateway_on(upstreams, downstream, host, GatewayOptions::new()).await
}

/// A listen stream of `caller` following `uris`.
async fn follow(caller: &toolwire_client::Client, uris: &[&str]) -> toolwire_client::Subscription {
    let listen = caller
        .listen(SubscriptionFilter {
            resources_list_changed: Some(true),
            resource_subscriptions: Some(uris.iter().map(|u| (*u).to_owned()).collect()),
            ..Default::default()
        })
        .await
        .expect("a listen stream");
    let acknowledged = listen.acknowledged().resource_subscriptions.clone();
    assert_eq!(
        acknowledged.unwrap_or_default(),
        uris.iter().map(|u| (*u).to_owned()).collect::<Vec<_>>(),
        "the gateway honours the subscription"
    );
    listen
}

/// Waits until the upstream whose followed resources `followed` watches follows exactly
/// `want` (its own URIs).
async fn until_followed(followed: &mut FollowedResources, want: &[&str]) {
    let want: BTreeSet<String> = want.iter().map(|u| (*u).to_owned()).collect();
    let reached = tokio::time::timeout(DEADLINE, async {
        while *followed.current() != want {
            assert!(followed.changed().await, "the upstream is gone");
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "the upstream follows {:?}, not {want:?}",
        followed.current()
    );
}

/// The URI of the next resource update on `listen`.
async fn next_update(listen: &mut toolwire_client::Subscription) -> String {
    let next = tokio::time::timeout(DEADLINE, async {
        loop {
            match listen.next().await {
                Some(Ok(Notification::ResourceUpdated { uri })) => return uri,
                Some(_) => continue,
                None => panic!("the listen stream ended"),
            }
        }
    })
    .await;
    next.expect("a resource update reaches the listener")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_following_a_served_resource_gets_its_upstream_updates_under_the_served_uri() {
    let alpha = Served::start(upstream("alpha"), None).await;
    let beta = Served::start(upstream("beta"), None).await;
    let (mut alpha_follows, mut beta_follows) = (
        alpha.server.followed_resources(),
        beta.server.followed_resources(),
    );
    let (gateway, served) = gateway(&[("alpha", "a", &alpha.url), ("beta", "b", &beta.url)]).await;
    let (first, second, bystander) = (
        client(&served.url),
        client(&served.url),
        client(&served.url),
    );

    // The same upstream URI, followed on one upstream by one caller and on the other by
    // another; a third caller follows another resource of the first upstream.
    let mut follows_a = follow(&first, &["toolwire://a/file:///README.md"]).await;
    let mut follows_b = follow(&second, &["toolwire://b/file:///README.md"]).await;
    let mut follows_changes = follow(&bystander, &["toolwire://a/file:///CHANGES.md"]).await;
    until_followed(
        &mut alpha_follows,
        &["file:///CHANGES.md", "file:///README.md"],
    )
    .await;
    until_followed(&mut beta_follows, &["file:///README.md"]).await;

    alpha.server.notify_resource_updated("file:///README.md");
    assert_eq!(
        next_update(&mut follows_a).await,
        "toolwire://a/file:///README.md"
    );
    // Had the others been told of it, it would come before these, which come later on the
    // same streams.
    beta.server.notify_resource_updated("file:///README.md");
    assert_eq!(
        next_update(&mut follows_b).await,
        "toolwire://b/file:///README.md"
    );
    alpha.server.notify_resource_updated("file:///CHANGES.md");
    assert_eq!(
        next_update(&mut follows_changes).await,
        "toolwire://a/file:///CHANGES.md"
    );
    // The first caller was not told of CHANGES: its next update is README's again.
    alpha.server.notify_resource_updated("file:///README.md");
    assert_eq!(
        next_update(&mut follows_a).await,
        "toolwire://a/file:///README.md"
    );

    gateway.close().await;
    served.stop().await;
    alpha.stop().await;
    beta.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_last_stream_that_follows_a_resource_stops_following_it_upstream() {
    let alpha = Served::start(upstream("alpha"), None).await;
    let mut alpha_follows = alpha.server.followed_resources();
    let (gateway, served) = gateway(&[("alpha", "a", &alpha.url)]).await;
    let (first, second) = (client(&served.url), client(&served.url));

    let readme = follow(&first, &["toolwire://a/file:///README.md"]).await;
    let both = follow(
        &second,
        &[
            "toolwire://a/file:///CHANGES.md",
            "toolwire://a/file:///README.md",
        ],
    )
    .await;
    until_followed(
        &mut alpha_follows,
        &["file:///CHANGES.md", "file:///README.md"],
    )
    .await;

    // README is still followed by the first caller; CHANGES by nobody.
    drop(both);
    until_followed(&mut alpha_follows, &["file:///README.md"]).await;
    drop(readme);
    until_followed(&mut alpha_follows, &[]).await;

    gateway.close().await;
    served.stop().await;
    alpha.stop().await;
}

/// What the legacy upstream of `legacy_resources.py` says it is subscribed to, through the
/// gateway (its tool `old__subscribed`).
async fn subscribed_upstream(caller: &toolwire_client::Client) -> String {
    let result = caller
        .call_tool("old__subscribed", serde_json::json!({}))
        .await
        .expect("the tool answers");
    crate::support::text(&result)
}

/// Asks until the legacy upstream says it is subscribed to `want` (a JSON list).
async fn until_subscribed_upstream(caller: &toolwire_client::Client, want: &str) {
    let start = std::time::Instant::now();
    loop {
        let now = subscribed_upstream(caller).await;
        if now == want {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the upstream is subscribed to {now}, not {want}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstream_is_subscribed_while_a_caller_follows_and_its_updates_are_passed_on() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/legacy_resources.py");
    let config = toolwire_host::HostConfig::parse(
        &serde_json::json!({"mcpServers": {
            "old": {"command": "python3", "args": [script], "prefix": "old"}
        }})
        .to_string(),
        "/nonexistent/gateway.json",
        &toolwire_host::Variables::new::<&str, &str>([]),
    )
    .expect("a configuration");
    let downstream = Server::builder("gateway", "1").offer_resources();
    let host = HostOptions::new(toolwire_gateway::NoPerson);
    let gateway = Gateway::start(&config, host, downstream, GatewayOptions::new())
        .await
        .expect("a gateway");
    let served = Served::start(gateway.server().clone(), None).await;
    let caller = client(&served.url);
    assert_eq!(subscribed_upstream(&caller).await, "[]");

    // The upstream announces no list changes: it is polled, and still followed.
    let mut follows = follow(&caller, &["toolwire://old/file:///README.md"]).await;
    until_subscribed_upstream(&caller, r#"["file:///README.md"]"#).await;
    let touched = caller
        .call_tool(
            "old__touch",
            serde_json::json!({"uri": "file:///README.md"}),
        )
        .await
        .expect("the tool answers");
    assert_eq!(crate::support::text(&touched), "touched");
    assert_eq!(
        next_update(&mut follows).await,
        "toolwire://old/file:///README.md"
    );

    // No caller follows it any more: the upstream is unsubscribed.
    drop(follows);
    until_subscribed_upstream(&caller, "[]").await;

    gateway.close().await;
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_resources_than_the_cap_are_followed_on_an_upstream() {
    let alpha = Served::start(upstream("alpha"), None).await;
    let mut alpha_follows = alpha.server.followed_resources();
    let (gateway, served) = gateway(&[("alpha", "a", &alpha.url)]).await;
    let caller = client(&served.url);
    let uris: Vec<String> = (0..=toolwire_gateway::MAX_FOLLOWED)
        .map(|i| format!("toolwire://a/file:///{i:04}"))
        .collect();
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    let _follows = follow(&caller, &uris).await;
    // The first ones in order of their URIs; the last one is not followed upstream.
    let want: Vec<&str> = uris[..toolwire_gateway::MAX_FOLLOWED]
        .iter()
        .map(|u| u.trim_start_matches("toolwire://a/"))
        .collect();
    until_followed(&mut alpha_follows, &want).await;

    gateway.close().await;
    served.stop().await;
    alpha.stop().await;
}
