//! Every HTTP refusal: status, JSON-RPC code, and the id echoed (B-07), in the order the checks
//! run (http module docs).

use serde_json::{Value, json};
use toolwire_server::http::HttpConfig;

use crate::support::*;

async fn server() -> TestServer {
    TestServer::start(builder().build().unwrap()).await
}

type Headers = Vec<(String, String)>;
type Edit = fn(&mut Headers);
/// (what, body, headers, status, code)
type RawCase = (&'static str, String, Headers, u16, Option<i64>);

/// (what, body, header edit, status, JSON-RPC code)
fn cases() -> Vec<(&'static str, Value, Edit, u16, i64)> {
    let discover = request(7, "server/discover", json!({}));
    let mut no_meta = discover.clone();
    no_meta["params"] = json!({});
    let mut no_version = discover.clone();
    no_version["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/protocolVersion");
    let mut no_caps = discover.clone();
    no_caps["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let mut bad_level = discover.clone();
    bad_level["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("loud");
    let mut v999 = discover.clone();
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let call = request(7, "tools/call", json!({"name": "echo", "arguments": {}}));
    let headers = request(
        7,
        "tools/call",
        json!({"name": "headers", "arguments": {"region": "Hello", "priority": 42}}),
    );
    vec![
        ("missing _meta", no_meta, |_| {}, 400, -32602),
        ("missing protocolVersion", no_version, |_| {}, 400, -32602),
        ("missing clientCapabilities", no_caps, |_| {}, 400, -32602),
        ("unknown log level (P-18)", bad_level, |_| {}, 400, -32602),
        (
            "missing version header",
            discover.clone(),
            |h| set_header(h, "mcp-protocol-version", None),
            400,
            -32020,
        ),
        (
            "version header differs",
            discover.clone(),
            |h| set_header(h, "mcp-protocol-version", Some("2025-11-25")),
            400,
            -32020,
        ),
        (
            "header and _meta both unsupported",
            v999.clone(),
            |h| set_header(h, "mcp-protocol-version", Some("v999.0.0")),
            400,
            -32022,
        ),
        (
            "supported header, unsupported _meta",
            v999,
            |_| {},
            400,
            -32020,
        ),
        (
            "missing Mcp-Method",
            discover.clone(),
            |h| set_header(h, "mcp-method", None),
            400,
            -32020,
        ),
        (
            "Mcp-Method differs",
            discover.clone(),
            |h| set_header(h, "mcp-method", Some("tools/list")),
            400,
            -32020,
        ),
        (
            "Mcp-Method is case-sensitive",
            discover.clone(),
            |h| set_header(h, "mcp-method", Some("SERVER/DISCOVER")),
            400,
            -32020,
        ),
        (
            "missing Mcp-Name",
            call.clone(),
            |h| set_header(h, "mcp-name", None),
            400,
            -32020,
        ),
        (
            "Mcp-Name differs",
            call.clone(),
            |h| set_header(h, "mcp-name", Some("wrong_tool_name")),
            400,
            -32020,
        ),
        (
            "Mcp-Name with bad base64",
            call.clone(),
            |h| set_header(h, "mcp-name", Some("=?base64?ZWNobw?=")),
            400,
            -32020,
        ),
        (
            "missing Mcp-Param",
            headers.clone(),
            |h| h.push(("mcp-param-region".into(), "Hello".into())),
            400,
            -32020,
        ),
        (
            "Mcp-Param differs",
            headers.clone(),
            |h| {
                h.push(("mcp-param-region".into(), "Goodbye".into()));
                h.push(("mcp-param-priority".into(), "42".into()));
            },
            400,
            -32020,
        ),
        (
            "Mcp-Param with bad padding",
            headers.clone(),
            |h| {
                h.push(("mcp-param-region".into(), "=?base64?SGVsbG8?=".into()));
                h.push(("mcp-param-priority".into(), "42".into()));
            },
            400,
            -32020,
        ),
        (
            "Mcp-Param with bad characters",
            headers.clone(),
            |h| {
                h.push(("mcp-param-region".into(), "=?base64?SGVs!!!bG8=?=".into()));
                h.push(("mcp-param-priority".into(), "42".into()));
            },
            400,
            -32020,
        ),
        (
            "unknown method",
            request(7, "unknown/method", json!({})),
            |_| {},
            404,
            -32601,
        ),
        (
            "initialize is removed",
            request(7, "initialize", json!({})),
            |_| {},
            404,
            -32601,
        ),
        (
            "ping is removed",
            request(7, "ping", json!({})),
            |_| {},
            404,
            -32601,
        ),
        (
            "logging/setLevel is removed",
            request(7, "logging/setLevel", json!({"level": "info"})),
            |_| {},
            404,
            -32601,
        ),
        (
            "resources/subscribe is removed",
            request(7, "resources/subscribe", json!({"uri": "x"})),
            |_| {},
            404,
            -32601,
        ),
        (
            "tools/call without a name",
            request(7, "tools/call", json!({})),
            |_| {},
            200,
            -32602,
        ),
        (
            "arguments not an object",
            request(7, "tools/call", json!({"name": "echo", "arguments": [1]})),
            |_| {},
            200,
            -32602,
        ),
        (
            "listen without a filter",
            request(7, "subscriptions/listen", json!({})),
            |_| {},
            200,
            -32602,
        ),
        (
            "params not an object",
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [meta()]}),
            |_| {},
            400,
            -32602,
        ),
        (
            "Mcp-Param for an absent argument",
            request(7, "tools/call", json!({"name": "headers", "arguments": {}})),
            |h| h.push(("mcp-param-region".into(), "x".into())),
            400,
            -32020,
        ),
    ]
}

#[tokio::test]
async fn refusals_have_the_right_status_and_code() {
    let s = server().await;
    for (what, body, edit, status, code) in cases() {
        let reply = post_with(&s.url, &body, edit).await;
        assert_eq!(
            (reply.status, reply.error_code()),
            (status, Some(code)),
            "{what}: {}",
            reply.body
        );
        assert_eq!(reply.last()["id"], 7, "{what}: the id is echoed");
        assert!(!reply.is_sse(), "{what}");
    }
    s.stop().await;
}

#[tokio::test]
async fn unsupported_version_names_supported_and_requested() {
    let s = server().await;
    let mut body = request(1, "server/discover", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let reply = post_with(&s.url, &body, |h| {
        set_header(h, "mcp-protocol-version", Some("v999.0.0"))
    })
    .await;
    assert_eq!(
        reply.last()["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "v999.0.0"})
    );
    s.stop().await;
}

#[tokio::test]
async fn tolerated_header_forms() {
    let s = server().await;
    let call = request(
        1,
        "tools/call",
        json!({"name": "headers", "arguments": {"region": "Hello", "priority": 42, "debug": null}}),
    );
    let accepted: Vec<(&str, Edit)> = vec![
        ("Mcp-Name padded with spaces", |h| {
            set_header(h, "mcp-name", Some("  headers  "))
        }),
        ("Mcp-Name in base64", |h| {
            set_header(h, "mcp-name", Some("=?base64?aGVhZGVycw==?="))
        }),
        ("an integer header written as a decimal", |h| {
            set_header(h, "mcp-param-priority", Some("42.0"))
        }),
        ("an integer header in exponent form", |h| {
            set_header(h, "mcp-param-priority", Some("4.2e1"))
        }),
        ("header names in any case", |h| {
            let method = h.iter().find(|(k, _)| k == "mcp-method").unwrap().1.clone();
            set_header(h, "mcp-method", None);
            h.push(("MCP-METHOD".into(), method));
        }),
    ];
    for (what, edit) in accepted {
        let reply = post_with(&s.url, &call, |h| {
            h.push(("Mcp-Param-Region".into(), "=?base64?SGVsbG8=?=".into()));
            h.push(("mcp-param-priority".into(), "042".into()));
            edit(h);
        })
        .await;
        assert_eq!(reply.status, 200, "{what}: {}", reply.body);
        assert!(
            reply.last().get("result").is_some(),
            "{what}: {}",
            reply.body
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn transport_level_refusals() {
    let s = server().await;
    let discover = request(1, "server/discover", json!({}));
    let std = standard_headers(&discover);
    let with = |edit: Edit| {
        let mut h = std.clone();
        edit(&mut h);
        h
    };
    let cases: Vec<RawCase> = vec![
        ("not JSON", "{nope".into(), std.clone(), 400, Some(-32700)),
        ("a batch", format!("[{discover}]"), std.clone(), 400, Some(-32600)),
        ("an array shaped like a request", json!(["2.0", 1, "server/discover", {"_meta": meta()}]).to_string(), std.clone(), 400, Some(-32600)),
        ("jsonrpc 1.0", json!({"jsonrpc": "1.0", "id": 1, "method": "server/discover"}).to_string(), std.clone(), 400, Some(-32600)),
        ("a response from the client", json!({"jsonrpc": "2.0", "id": 1, "result": {}}).to_string(), std.clone(), 400, Some(-32600)),
        ("a string ending in a lone backslash", "{\"a\":\"\\".into(), std.clone(), 400, Some(-32700)),
        ("nesting too deep", format!("{}{}", "[".repeat(100), "]".repeat(100)), std.clone(), 400, Some(-32700)),
        ("wrong content type", discover.to_string(), with(|h| set_header(h, "content-type", Some("text/plain"))), 415, Some(-32600)),
        ("unacceptable Accept", discover.to_string(), with(|h| set_header(h, "accept", Some("text/html"))), 406, Some(-32600)),
        ("foreign Host", discover.to_string(), with(|h| h.push(("host".into(), "evil.example.com".into()))), 403, Some(-32600)),
        ("foreign Origin", discover.to_string(), with(|h| h.push(("origin".into(), "http://evil.example.com".into()))), 403, Some(-32600)),
        ("too large", format!("{{\"pad\":\"{}\"}}", "x".repeat(5 * 1024 * 1024)), std.clone(), 413, Some(-32600)),
        ("a notification", json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}).to_string(), std.clone(), 202, None),
    ];
    for (what, body, headers, status, code) in cases {
        let reply = post_raw(&s.url, body, &headers).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        assert_eq!(
            reply
                .messages
                .first()
                .and_then(|m| m["error"]["code"].as_i64()),
            code,
            "{what}: {}",
            reply.body
        );
        if let Some(m) = reply.messages.first() {
            wire::check("", m);
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn get_and_delete_are_not_allowed_and_sessions_are_ignored() {
    let s = server().await;
    for method in [
        reqwest::Method::GET,
        reqwest::Method::DELETE,
        reqwest::Method::PUT,
    ] {
        let resp = client()
            .request(method.clone(), &s.url)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 405, "{method}");
    }
    let body = request(1, "server/discover", json!({}));
    let reply = post_with(&s.url, &body, |h| {
        h.push(("mcp-session-id".into(), "abc".into()));
        h.push(("last-event-id".into(), "5".into()));
    })
    .await;
    assert_eq!(reply.status, 200);
    assert!(
        reply.headers.get("mcp-session-id").is_none(),
        "never minted or echoed (H-16)"
    );
    s.stop().await;
}

#[tokio::test]
async fn allowlisted_origin_and_host_pass() {
    let s = TestServer::start_with(
        builder().build().unwrap(),
        toolwire_server::http::HttpConfig::default().allow_origin("https://app.example.com"),
    )
    .await;
    let body = request(1, "server/discover", json!({}));
    let ok = post_with(&s.url, &body, |h| {
        h.push(("origin".into(), "https://app.example.com".into()))
    })
    .await;
    assert_eq!(ok.status, 200);
    let local = post_with(&s.url, &body, |h| {
        h.push(("origin".into(), format!("http://localhost:{}", 1)))
    })
    .await;
    assert_eq!(local.status, 200);
    s.stop().await;
}

/// The principal resolver is the server author's code: a panic in it refuses the request with
/// 500 / -32603 and the server goes on.
#[tokio::test]
async fn a_panicking_principal_resolver_refuses_the_request() {
    let config = HttpConfig::default().principal(|h| {
        assert!(h.get("x-boom").is_none(), "a resolver with a bug");
        None
    });
    let s = TestServer::start_with(builder().build().unwrap(), config).await;
    let discover = request(1, "server/discover", json!({}));
    let reply = post_with(&s.url, &discover, |h| h.push(("x-boom".into(), "1".into()))).await;
    assert_eq!(
        (reply.status, reply.error_code()),
        (500, Some(-32603)),
        "{}",
        reply.body
    );
    assert!(!reply.body.contains("a resolver with a bug"));
    assert_eq!(post(&s.url, &discover).await.status, 200, "still serving");
    s.stop().await;
}
