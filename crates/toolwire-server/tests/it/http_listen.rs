//! `subscriptions/listen` over real HTTP.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use toolwire_server::{NoArgs, RequestContext, Tool, Viewer};

use crate::support::*;

/// An open listen stream, read event by event.
pub struct Listen {
    events: std::pin::Pin<Box<dyn futures::Stream<Item = Value> + Send>>,
}

impl Listen {
    pub async fn open(s: &TestServer, id: i64, filter: Value) -> Listen {
        Listen::open_with(s, id, json!({"notifications": filter})).await
    }

    /// A stream opened with these params (a `_meta` in them is merged into the standard one).
    pub async fn open_with(s: &TestServer, id: i64, params: Value) -> Listen {
        let body = request(id, "subscriptions/listen", params);
        let mut req = client().post(&s.url).body(body.to_string());
        for (k, v) in standard_headers(&body) {
            req = req.header(k, v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let bytes = resp.bytes_stream();
        let events =
            futures::stream::unfold((bytes, String::new()), |(mut bytes, mut buf)| async move {
                loop {
                    if let Some(end) = buf.find("\n\n") {
                        let event: String = buf.drain(..end + 2).collect();
                        if let Some(msg) = sse_messages(&event).pop() {
                            wire::check("subscriptions/listen", &msg);
                            return Some((msg, (bytes, buf)));
                        }
                        continue;
                    }
                    let chunk = bytes.next().await?.ok()?;
                    buf.push_str(&String::from_utf8_lossy(&chunk));
                }
            });
        Listen {
            events: Box::pin(events),
        }
    }

    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(5), self.events.next())
            .await
            .expect("an event within 5 s")
    }

    pub async fn quiet_for(&mut self, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), self.events.next())
            .await
            .is_err()
    }
}

fn extra_tool(name: &str) -> Tool {
    Tool::new(name, |_: NoArgs, _: RequestContext| async { "x" }).description("extra")
}

#[tokio::test]
async fn acknowledges_then_forwards_tagged_changes_to_streams_that_asked() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let mut tools = Listen::open(&s, 41, json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["a://b"]})).await;
    let mut prompts = Listen::open(&s, 100, json!({"promptsListChanged": true})).await;

    let ack = tools.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": 41}, "notifications": {"toolsListChanged": true}}),
        "only the honoured subset (L-04)"
    );
    let ack = prompts.next().await.unwrap();
    assert_eq!(ack["params"]["notifications"], json!({}));

    s.server.add_tool(extra_tool("extra")).unwrap();
    let changed = tools.next().await.unwrap();
    assert_eq!(
        changed,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 41}}})
    );
    s.server.remove_tool("extra").unwrap();
    assert_eq!(
        tools.next().await.unwrap()["method"],
        "notifications/tools/list_changed"
    );
    assert!(
        prompts.quiet_for(300).await,
        "a stream that did not ask hears nothing (L-02)"
    );

    // Graceful shutdown ends each stream with a tagged closing result (L-10).
    s.server.shutdown();
    let closing = tools.next().await.unwrap();
    assert_eq!(closing["id"], 41);
    assert_eq!(closing["result"]["resultType"], "complete");
    assert_eq!(
        closing["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        41
    );
    assert!(
        tools.next().await.is_none(),
        "the stream closes after the result"
    );
    assert_eq!(
        prompts.next().await.unwrap()["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        100
    );
    s.stop().await;
}

/// Waits until `followed` is `want`.
pub async fn until_followed(followed: &mut toolwire_server::FollowedResources, want: &[&str]) {
    let want: std::collections::BTreeSet<String> = want.iter().map(|u| (*u).to_owned()).collect();
    let reached = tokio::time::timeout(Duration::from_secs(5), async {
        while *followed.current() != want {
            assert!(followed.changed().await, "the server is gone");
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "followed: {:?}, not {want:?}",
        followed.current()
    );
}

#[tokio::test]
async fn the_resources_open_streams_follow_are_what_the_server_says_it_follows() {
    let s = TestServer::start(builder().offer_resources().build().unwrap()).await;
    let mut followed = s.server.followed_resources();
    assert!(followed.current().is_empty());
    let mut both = Listen::open(
        &s,
        1,
        json!({"resourceSubscriptions": ["mem://a", "mem://b"]}),
    )
    .await;
    both.next().await.expect("its acknowledgement");
    // Counted before the acknowledgement is sent.
    until_followed(&mut followed, &["mem://a", "mem://b"]).await;
    let mut b = Listen::open(&s, 2, json!({"resourceSubscriptions": ["mem://b"]})).await;
    b.next().await.expect("its acknowledgement");
    let mut lists = Listen::open(&s, 3, json!({"toolsListChanged": true})).await;
    lists.next().await.expect("its acknowledgement");
    assert_eq!(followed.current().len(), 2);

    // A URI is followed while any open stream follows it.
    drop(both);
    until_followed(&mut followed, &["mem://b"]).await;
    drop(b);
    until_followed(&mut followed, &[]).await;
    s.stop().await;
}

#[tokio::test]
async fn a_caller_is_told_of_tool_changes_only_when_its_own_list_changed() {
    // Tools named admin_* are seen only by the client named "console".
    let server = builder()
        .tool_visibility(|viewer: &Viewer<'_>, tool: &str| {
            let console = viewer.client.is_some_and(|c| c.name == "console");
            (tool.starts_with("admin_") && !console).then(|| "for the console only".to_owned())
        })
        .build()
        .unwrap();
    let s = TestServer::start(server).await;
    let as_client = |name: &str| {
        json!({"notifications": {"toolsListChanged": true},
               "_meta": {"io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"}}})
    };
    let mut console = Listen::open_with(&s, 1, as_client("console")).await;
    let mut other = Listen::open_with(&s, 2, as_client("other")).await;
    for stream in [&mut console, &mut other] {
        let ack = stream.next().await.unwrap();
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    }

    // A tool only the console sees: only the console is told.
    s.server.add_tool(extra_tool("admin_reset")).unwrap();
    let told = console.next().await.unwrap();
    assert_eq!(told["method"], "notifications/tools/list_changed");
    assert!(other.quiet_for(300).await, "told of a tool it cannot see");

    // A tool both see: both are told.
    s.server.add_tool(extra_tool("shared")).unwrap();
    for stream in [&mut console, &mut other] {
        let told = stream.next().await.unwrap();
        assert_eq!(told["method"], "notifications/tools/list_changed");
    }
    // The hidden one goes: again only the console.
    s.server.remove_tool("admin_reset").unwrap();
    let told = console.next().await.unwrap();
    assert_eq!(told["method"], "notifications/tools/list_changed");
    assert!(other.quiet_for(300).await, "told of a tool it cannot see");
    s.stop().await;
}

#[tokio::test]
async fn many_streams_each_get_the_change() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let mut streams = Vec::new();
    for id in 0..50 {
        let mut l = Listen::open(&s, id, json!({"toolsListChanged": true})).await;
        assert_eq!(
            l.next().await.unwrap()["method"],
            "notifications/subscriptions/acknowledged"
        );
        streams.push(l);
    }
    s.server.add_tool(extra_tool("fan_out")).unwrap();
    for (id, l) in streams.iter_mut().enumerate() {
        let n = l.next().await.unwrap();
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            id as i64
        );
    }
    drop(streams);
    s.stop().await;
}

#[tokio::test]
async fn listen_needs_an_event_stream() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let body = request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let reply = post_with(&s.url, &body, |h| {
        set_header(h, "accept", Some("application/json"))
    })
    .await;
    assert_eq!((reply.status, reply.error_code()), (406, Some(-32600)));
    s.stop().await;
}

#[tokio::test]
async fn idle_streams_get_keep_alive_comments() {
    let config = toolwire_server::http::HttpConfig::default().keep_alive(Duration::from_millis(50));
    let s = TestServer::start_with(builder().build().unwrap(), config).await;
    let body = request(
        1,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut req = client().post(&s.url).body(body.to_string());
    for (k, v) in standard_headers(&body) {
        req = req.header(k, v);
    }
    let mut resp = req.send().await.unwrap();
    let mut seen = String::new();
    while !seen.lines().any(|l| l.starts_with(':')) {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk())
            .await
            .expect("a keep-alive within 5 s");
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
    }
    assert!(
        sse_messages(&seen)
            .iter()
            .all(|m| m["method"] == "notifications/subscriptions/acknowledged")
    );
    drop(resp);
    s.stop().await;
}
