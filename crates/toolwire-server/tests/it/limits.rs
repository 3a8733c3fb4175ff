//! Rate limits end to end: a caller that uses up a tool's quota gets an `isError` result that
//! says when to retry (also in `_meta`), other callers keep theirs, a costly tool takes more of
//! it, the quota is advertised in the definition, the audit event says `limited`; an HTTP
//! client that floods gets 429 with `Retry-After`. Over HTTP (by principal and by address)
//! and stdio.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolwire_server::http::{HttpConfig, TOO_MANY_REQUESTS};
use toolwire_server::{
    AuditEvent, AuditOutcome, AuditSink, NoArgs, RateLimit, RequestContext, Server, Tool,
};

use crate::support::*;

#[derive(Default)]
struct Collect(Mutex<Vec<AuditEvent>>);

impl AuditSink for Collect {
    fn record(&self, event: &AuditEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

fn ping(name: &str) -> Tool {
    Tool::new(name, |_: NoArgs, _: RequestContext| async { "pong" }).description("Answers pong")
}

fn server(sink: Option<Arc<dyn AuditSink>>) -> Server {
    let mut builder = Server::builder("limited", "1")
        // Two calls per minute each; a refill takes 30 s, far longer than the test.
        .tool(ping("scarce").rate_limit(RateLimit::per_minute(2)))
        .tool(ping("costly").rate_limit(RateLimit::per_minute(10)).cost(4))
        .tool(ping("free").no_rate_limit("a cheap, idempotent read"))
        .tool(ping("default"))
        .rate_limit(RateLimit::per_hour(3));
    if let Some(sink) = sink {
        builder = builder.audit_sink(sink);
    }
    builder.build().unwrap()
}

fn call(id: i64, name: &str) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}}))
}

fn assert_ok(reply: &Value) {
    assert_eq!(reply["result"]["content"][0]["text"], "pong", "{reply}");
}

/// The result a spent quota gives: words for the model, numbers for a program.
fn assert_limited(reply: &Value, name: &str, calls: u64, period_ms: u64) {
    let result = &reply["result"];
    assert_eq!(result["isError"], true, "{reply}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("The tool {name} was called too often"))
            && text.contains("Try again in"),
        "{text}"
    );
    let meta = &result["_meta"]["dev.toolwire/rateLimited"];
    assert_eq!(meta["calls"], calls, "{reply}");
    assert_eq!(meta["periodMs"], period_ms, "{reply}");
    let retry = meta["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 0 && retry <= period_ms, "{reply}");
}

#[tokio::test]
async fn a_spent_quota_gives_the_model_an_error_that_says_when_to_retry_over_http() {
    let sink = Arc::new(Collect::default());
    let s = TestServer::start_with(
        server(Some(sink.clone())),
        HttpConfig::default().principal(|h| {
            h.get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        }),
    )
    .await;
    let as_user = |user: &'static str| {
        move |h: &mut Vec<(String, String)>| set_header(h, "x-user", Some(user))
    };

    // The quota is advertised with the definition.
    let listed = post(&s.url, &request(1, "tools/list", json!({}))).await;
    let advertised: Vec<Value> = listed.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["_meta"]["dev.toolwire/rateLimit"].clone())
        .collect();
    assert_eq!(
        advertised,
        [
            json!({"calls": 2, "periodMs": 60_000, "burst": 2, "cost": 1}),
            json!({"calls": 10, "periodMs": 60_000, "burst": 10, "cost": 4}),
            Value::Null,
            json!({"calls": 3, "periodMs": 3_600_000, "burst": 3, "cost": 1}),
        ]
    );

    for id in 0..2 {
        assert_ok(
            post_with(&s.url, &call(id, "scarce"), as_user("alice"))
                .await
                .last(),
        );
    }
    let spent = post_with(&s.url, &call(3, "scarce"), as_user("alice")).await;
    assert_eq!(spent.status, 200);
    assert_limited(spent.last(), "scarce", 2, 60_000);
    // Bob has his own bucket; Alice's other tools are untouched.
    assert_ok(
        post_with(&s.url, &call(4, "scarce"), as_user("bob"))
            .await
            .last(),
    );
    assert_ok(
        post_with(&s.url, &call(5, "default"), as_user("alice"))
            .await
            .last(),
    );
    // A call costing 4 of 10: two fit, the third does not.
    for id in 6..8 {
        assert_ok(
            post_with(&s.url, &call(id, "costly"), as_user("alice"))
                .await
                .last(),
        );
    }
    assert_limited(
        post_with(&s.url, &call(8, "costly"), as_user("alice"))
            .await
            .last(),
        "costly",
        10,
        60_000,
    );
    // The server's default applies to tools that set none; an exempt tool has no limit.
    for id in 9..11 {
        assert_ok(
            post_with(&s.url, &call(id, "default"), as_user("alice"))
                .await
                .last(),
        );
    }
    assert_limited(
        post_with(&s.url, &call(11, "default"), as_user("alice"))
            .await
            .last(),
        "default",
        3,
        3_600_000,
    );
    for id in 12..30 {
        assert_ok(
            post_with(&s.url, &call(id, "free"), as_user("alice"))
                .await
                .last(),
        );
    }

    let limited: Vec<String> = sink
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.outcome == AuditOutcome::Limited)
        .map(|e| e.tool.clone())
        .collect();
    assert_eq!(limited, ["scarce", "costly", "default"]);
    s.stop().await;
}

#[tokio::test]
async fn without_a_principal_the_quota_is_the_client_addresss() {
    // Behind a proxy that names the client in x-forwarded-for.
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default().forwarded_header(http::HeaderName::from_static("x-forwarded-for")),
    )
    .await;
    let from = |address: &'static str| {
        move |h: &mut Vec<(String, String)>| set_header(h, "x-forwarded-for", Some(address))
    };
    for id in 0..2 {
        assert_ok(
            post_with(&s.url, &call(id, "scarce"), from("192.0.2.1"))
                .await
                .last(),
        );
    }
    assert_limited(
        post_with(&s.url, &call(2, "scarce"), from("192.0.2.1"))
            .await
            .last(),
        "scarce",
        2,
        60_000,
    );
    assert_ok(
        post_with(&s.url, &call(3, "scarce"), from("198.51.100.7"))
            .await
            .last(),
    );
    // Without the header the request did not come through the proxy: refused, not counted
    // as the TCP peer's (which behind a proxy is the proxy, shared by every client).
    let direct = post(&s.url, &call(4, "scarce")).await;
    assert_eq!(direct.status, 400, "{}", direct.body);
    s.stop().await;
}

#[tokio::test]
async fn a_flooding_client_gets_429_with_retry_after_before_anything_is_read() {
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default().flood_limit(RateLimit::per_minute(3)),
    )
    .await;
    for id in 0..3 {
        assert_ok(post(&s.url, &call(id, "free")).await.last());
    }
    // Even a malformed request is counted and refused before it is parsed.
    let flooded = post_raw(&s.url, "not json", &standard_headers(&call(9, "free"))).await;
    assert_eq!(flooded.status, 429, "{}", flooded.body);
    let retry: u64 = flooded.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(flooded.error_code(), Some(TOO_MANY_REQUESTS));
    assert!(
        flooded.last()["error"]["data"]["retryAfterMs"]
            .as_u64()
            .unwrap()
            > 0
    );
    s.stop().await;

    // With the limit off, the same client goes on.
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default().no_flood_limit("a proxy in front limits requests"),
    )
    .await;
    for id in 0..10 {
        assert_ok(post(&s.url, &call(id, "free")).await.last());
    }
    s.stop().await;
}

#[tokio::test]
async fn a_spent_quota_over_stdio_and_none_when_the_layer_is_off() {
    let mut session = StdioSession::start(server(None));
    for id in 0..2 {
        session.send(&call(id, "scarce")).await;
        assert_ok(&session.recv().await);
    }
    session.send(&call(2, "scarce")).await;
    assert_limited(&session.recv().await, "scarce", 2, 60_000);

    let open = Server::builder("open", "1")
        .tool(ping("scarce"))
        .no_rate_limit("trusted single user")
        .build()
        .unwrap();
    let mut session = StdioSession::start(open);
    for id in 0..400 {
        session.send(&call(id, "scarce")).await;
        assert_ok(&session.recv().await);
    }
}

#[test]
fn a_limit_that_cannot_work_is_refused_at_registration() {
    let error = Server::builder("bad", "1")
        .tool(ping("p").rate_limit(RateLimit::per_minute(3)).cost(5))
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("rate limit") && error.contains("never holds"),
        "{error}"
    );
    let error = Server::builder("bad", "1")
        .rate_limit(RateLimit::per_second(0))
        .build()
        .unwrap_err()
        .to_string();
    assert!(error.contains("at least one call"), "{error}");
}

/// Behind a proxy that names each client in an RFC 7239 `Forwarded` element (with the other
/// parameters proxies add), each client gets its own flood bucket; before, the element did
/// not parse, the proxy's own address was used, and one client used up the limit for all.
#[tokio::test]
async fn each_client_named_by_forwarded_gets_its_own_flood_bucket() {
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default()
            .forwarded_header(http::HeaderName::from_static("forwarded"))
            .flood_limit(RateLimit::per_minute(2)),
    )
    .await;
    let clients = [
        "for=10.0.0.4;proto=https",
        "For=\"10.0.0.5:50123\";Proto=https;by=\"[2001:db8::9]\"",
        // A client's own claim on the left; the proxy's element, the last one, is trusted.
        "for=192.0.2.1, for=\"[2001:db8::1]:4711\";host=\"mcp.example.com\"",
    ];
    for (n, forwarded) in clients.into_iter().enumerate() {
        let from = move |h: &mut Vec<(String, String)>| set_header(h, "forwarded", Some(forwarded));
        for id in 0..2 {
            let reply = post_with(&s.url, &call(id, "free"), from).await;
            assert_eq!(
                reply.status, 200,
                "client {n}, request {id}: {}",
                reply.body
            );
            assert_ok(reply.last());
        }
        let reply = post_with(&s.url, &call(2, "free"), from).await;
        assert_eq!(reply.status, 429, "client {n}: {}", reply.body);
    }
    s.stop().await;
}

/// A forwarding header configured as the source of the client address that is missing or
/// unreadable is refused with 400, never replaced by the TCP peer's address (the proxy's, in
/// the setting the header exists for).
#[tokio::test]
async fn a_missing_or_unreadable_forwarded_header_is_refused_not_replaced_by_the_peer() {
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default().forwarded_header(http::HeaderName::from_static("forwarded")),
    )
    .await;
    let cases: [(Option<&str>, &str); 4] = [
        (None, "has no `forwarded` header"),
        (Some("for=\"10.0.0.4"), "`forwarded` header"),
        (Some("proto=https;by=10.0.0.1"), "no `for=`"),
        (Some("for=not-an-address"), "`forwarded` header"),
    ];
    for (value, expected) in cases {
        let reply = post_with(&s.url, &call(1, "free"), |h| {
            set_header(h, "forwarded", value)
        })
        .await;
        assert_eq!(reply.status, 400, "{value:?}: {}", reply.body);
        let message = reply.last()["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{value:?}: {message}");
    }
    s.stop().await;
}

/// Tool quotas follow the same client: an obfuscated identifier (`for=_hidden`) is a client of
/// its own, and every `for=unknown` request shares one quota, apart from any address's.
#[tokio::test]
async fn a_proxy_that_hides_its_clients_still_gives_each_its_own_quota() {
    let s = TestServer::start_with(
        server(None),
        HttpConfig::default()
            .forwarded_header(http::HeaderName::from_static("forwarded"))
            .trusted_proxies(2),
    )
    .await;
    // A CDN then a load balancer: the CDN's element (the second from the right) names the client.
    let from = |client: &'static str| {
        move |h: &mut Vec<(String, String)>| {
            let value = format!("for={client};proto=https, for=10.0.0.2");
            set_header(h, "forwarded", Some(&value))
        }
    };
    for client in ["_client-a", "_client-b", "unknown"] {
        for id in 0..2 {
            assert_ok(
                post_with(&s.url, &call(id, "scarce"), from(client))
                    .await
                    .last(),
            );
        }
        assert_limited(
            post_with(&s.url, &call(2, "scarce"), from(client))
                .await
                .last(),
            "scarce",
            2,
            60_000,
        );
    }
    // The load balancer's element alone is one entry short of the two trusted proxies.
    let short = post_with(&s.url, &call(3, "scarce"), |h| {
        set_header(h, "forwarded", Some("for=10.0.0.2"))
    })
    .await;
    assert_eq!(short.status, 400, "{}", short.body);
    s.stop().await;
}
