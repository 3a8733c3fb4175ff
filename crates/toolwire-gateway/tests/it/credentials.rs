//! Credentials upstream: the caller's own `Authorization` never reaches an upstream (no token
//! passthrough); the upstream gets the credential its configuration names, read from the
//! environment.

use std::sync::{Arc, Mutex};

use serde_json::json;
use toolwire_client::ClientBuilder;
use toolwire_gateway::{Gateway, GatewayOptions, NoPerson};
use toolwire_host::{HostConfig, HostOptions, Variables};
use toolwire_server::{Server, http::HttpConfig};

use crate::gateway::{shout, upstream};
use crate::support::{Served, text};

/// An upstream `words` that tells `record` the headers of every request it gets: its URL, the
/// server and the task serving it.
async fn recorded_upstream(
    record: impl Fn(&http::HeaderMap) + Send + Sync + 'static,
) -> (String, Server, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let words = upstream("words", vec![shout("Shouts.")]);
    let task = tokio::spawn(toolwire_server::http::serve(
        words.clone(),
        listener,
        HttpConfig::default().principal(move |headers| {
            record(headers);
            None
        }),
    ));
    (url, words, task)
}

/// A gateway in front of the upstreams of `servers` (an `mcpServers` object), with
/// `UPSTREAM_TOKEN` in its environment, served over HTTP.
async fn gateway(servers: serde_json::Value) -> (Gateway, Served) {
    let config = HostConfig::parse(
        &json!({ "mcpServers": servers }).to_string(),
        "/nonexistent/gateway.json",
        &Variables::new([("UPSTREAM_TOKEN", "upstream-secret")]),
    )
    .unwrap();
    let gateway = Gateway::start(
        &config,
        HostOptions::new(NoPerson),
        Server::builder("gateway", "1"),
        GatewayOptions::new(),
    )
    .await
    .unwrap();
    let served = Served::start(gateway.server().clone(), None).await;
    (gateway, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_token_never_reaches_an_upstream_and_the_configured_one_does() {
    // An upstream that records the Authorization header of every request it gets.
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let recorder = seen.clone();
    let (upstream_url, words, task) = recorded_upstream(move |headers| {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        recorder.lock().unwrap().push(authorization);
    })
    .await;
    let (gateway, served) = gateway(json!({"words": {
        "url": upstream_url,
        "prefix": "w",
        "headers": {"Authorization": "Bearer ${UPSTREAM_TOKEN}"},
    }}))
    .await;
    let caller = ClientBuilder::new("caller", "1")
        .header("Authorization", "Bearer caller-secret")
        .http(&served.url)
        .unwrap();
    let result = caller
        .call_tool("w__shout", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "HI");

    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the upstream was asked");
    for authorization in &seen {
        assert_eq!(
            authorization.as_deref(),
            Some("Bearer upstream-secret"),
            "every upstream request carries the configured credential, never the caller's: {seen:?}"
        );
    }
    gateway.close().await;
    served.stop().await;
    words.shutdown();
    let _ = task.await;
}

/// An upstream configured for token exchange, called by a caller without an access token (a
/// gateway that checks none): the call is refused with a result that says why, and never
/// made in the gateway's own name; the authorization server is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_a_token_is_refused_by_an_upstream_that_exchanges_tokens() {
    let calls: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorder = calls.clone();
    let (upstream_url, words, task) = recorded_upstream(move |headers| {
        if let Some(method) = headers.get("mcp-method").and_then(|v| v.to_str().ok()) {
            recorder.lock().unwrap().push(method.to_owned());
        }
    })
    .await;
    // The gateway lists with its own credential; calls would go with exchanged tokens, at an
    // authorization server that is not there.
    let (gateway, served) = gateway(json!({"words": {
        "url": upstream_url,
        "prefix": "w",
        "headers": {"Authorization": "Bearer ${UPSTREAM_TOKEN}"},
        "oauth": {
            "clientId": "gateway",
            "clientSecret": "${UPSTREAM_TOKEN}",
            "issuer": "http://127.0.0.1:9",
            "tokenExchange": true,
        },
    }}))
    .await;
    assert_eq!(gateway.exchanging(), vec!["words".to_owned()]);
    let caller = ClientBuilder::new("caller", "1").http(&served.url).unwrap();
    let result = caller
        .call_tool("w__shout", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let said = text(&result);
    assert!(
        said.contains("words")
            && said.contains("without one")
            && said.contains("never made in the gateway's own name"),
        "{said}"
    );
    assert!(
        !calls.lock().unwrap().iter().any(|m| m == "tools/call"),
        "no call reached the upstream: {calls:?}"
    );
    gateway.close().await;
    served.stop().await;
    words.shutdown();
    let _ = task.await;
}
