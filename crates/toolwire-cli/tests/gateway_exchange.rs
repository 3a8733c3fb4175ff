//! `toolwire gateway` calling an upstream with RFC 8693 token exchange, against the real
//! authorization server (the npm `oidc-provider` of `interop/oidc`, whose token-exchange grant
//! `provider.mjs` adds for the client `gateway-exchanger`): callers present their own access
//! tokens for the gateway; the upstream — a real `toolwire serve --http` that is a resource
//! server of the same provider, behind a recording proxy that keeps every request's
//! `Authorization` header — gets, for each call, a token the gateway exchanged for the
//! caller's (the caller's `sub`, the upstream's audience, `act.sub` the gateway's client), and
//! never a caller's token.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

#[path = "../../../interop/oidc/launch.rs"]
mod launch;

#[path = "support/oidc_gateway.rs"]
mod oidc;
#[path = "support/gateway.rs"]
mod support;

use oidc::{Provider, Recorder, free_port, recording_proxy};
use support::{Killed, started_drained as started, toolwire};

/// The gateway's client at the provider (provider.mjs).
const EXCHANGER: (&str, &str) = ("gateway-exchanger", "gateway-exchanger-secret");

/// The claims of a JWT (unverified: the upstream verified it).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Calls `tool` through the gateway at `url` as the bearer of `token`: the result's text and
/// whether it is an error result.
async fn called(url: &str, token: &str, tool: &str, arguments: Value) -> (String, bool) {
    oidc::called(&reqwest::Client::new(), url, token, tool, arguments).await
}

/// The world: the provider, the recorded upstream (a resource server of the provider at the
/// proxy's URL), and the gateway exchanging callers' tokens for it.
struct Scene {
    provider: Provider,
    recorder: Arc<Recorder>,
    upstream_resource: String,
    gateway_resource: String,
    url: String,
    _processes: (Killed, Killed),
    _dir: tempfile::TempDir,
}

async fn scene() -> Scene {
    let provider = Provider::start().await;
    let issuer = provider.issuer();
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let (proxy_origin, proxy) = recording_proxy(recorder.clone()).await;
    let upstream_resource = format!("{proxy_origin}/mcp");

    // The upstream: a resource server of the provider, known by the proxy's URL.
    let serve = dir.path().join("serve.toml");
    std::fs::write(
        &serve,
        format!("[auth]\nissuer = \"{issuer}\"\nresource = \"{upstream_resource}\"\n"),
    )
    .unwrap();
    let mut upstream = toolwire(&dir);
    upstream
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(&serve);
    let (upstream, upstream_url) =
        tokio::task::spawn_blocking(move || started(upstream, "serving the example tools at "))
            .await
            .unwrap();
    proxy.forward_to(upstream_url.trim_end_matches("/mcp").to_owned());

    let port = free_port();
    let gateway_resource = format!("http://127.0.0.1:{port}/mcp");
    let config = json!({
        "mcpServers": {"upstream": {
            "url": upstream_resource,
            "prefix": "up",
            "oauth": {
                "clientId": EXCHANGER.0,
                "clientSecret": "${EXCHANGER_SECRET}",
                "issuer": issuer,
                // The gateway's own requests (listing) in its own name.
                "grant": "client_credentials",
                "tokenExchange": true,
            },
        }},
        "gateway": {"auth": {"issuer": issuer, "resource": gateway_resource}},
    });
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .env("EXCHANGER_SECRET", EXCHANGER.1)
        .args(["gateway", "--insecure-oauth-http", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(&file);
    let (gateway, url) =
        tokio::task::spawn_blocking(move || started(gateway, "the gateway serves at "))
            .await
            .unwrap();
    Scene {
        provider,
        recorder,
        upstream_resource,
        gateway_resource,
        url,
        _processes: (upstream, gateway),
        _dir: dir,
    }
}

impl Scene {
    /// A caller's token of `client` for the gateway.
    async fn caller(&self, client: (&str, &str)) -> String {
        self.provider
            .token(client, &self.gateway_resource, "tools:read")
            .await
    }

    /// The bearer tokens of the upstream's tools/call requests so far.
    fn call_tokens(&self) -> Vec<String> {
        self.recorder
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(method, _)| method == "tools/call")
            .map(|(_, authorization)| {
                let value = authorization.clone().expect("a call with a credential");
                value.strip_prefix("Bearer ").expect("a bearer").to_owned()
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_is_called_upstream_with_a_token_exchanged_for_its_own() {
    let scene = scene().await;
    let a = scene.caller(("rs-test", "rs-secret")).await;
    let b = scene.caller(("rs-test-2", "rs-secret-2")).await;

    // Three calls of A, one of B: the upstream accepts each exchanged token.
    for n in 0..3 {
        let (echoed, error) = called(
            &scene.url,
            &a,
            "up__echo",
            json!({"message": format!("a{n}")}),
        )
        .await;
        assert!(!error && echoed.contains(&format!("a{n}")), "{echoed}");
    }
    let (echoed, error) = called(&scene.url, &b, "up__echo", json!({"message": "b"})).await;
    assert!(!error && echoed.contains('b'), "{echoed}");

    // One exchange per caller: A's three calls used the one token.
    assert_eq!(scene.provider.exchanges().await, (2, 0));
    let tokens = scene.call_tokens();
    assert_eq!(tokens.len(), 4, "{tokens:?}");
    assert!(tokens[0] == tokens[1] && tokens[1] == tokens[2]);
    assert_ne!(tokens[0], tokens[3], "each caller its own upstream token");
    for (token, sub) in [(&tokens[0], "rs-test"), (&tokens[3], "rs-test-2")] {
        let claims = claims(token);
        assert_eq!(claims["sub"], json!(sub), "{claims}");
        assert_eq!(claims["aud"], json!(scene.upstream_resource), "{claims}");
        assert_eq!(claims["act"]["sub"], json!(EXCHANGER.0), "{claims}");
    }

    // The gateway's own requests (initialize, listing) went in its own name: its client's
    // client-credentials token, acting for nobody.
    let seen = scene.recorder.seen.lock().unwrap().clone();
    for (method, authorization) in seen.iter().filter(|(m, _)| m != "tools/call") {
        if let Some(token) = authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
        {
            let claims = claims(token);
            assert_eq!(claims["sub"], json!(EXCHANGER.0), "{method}: {claims}");
            assert!(claims.get("act").is_none(), "{method}: {claims}");
        }
    }
    // Three calls of a new caller at once wait for one exchange.
    let c = scene
        .provider
        .token(
            ("rs-test", "rs-secret"),
            &scene.gateway_resource,
            "tools:read math",
        )
        .await;
    let one = |n: u32| {
        called(
            &scene.url,
            &c,
            "up__echo",
            json!({"message": format!("c{n}")}),
        )
    };
    let (one, two, three) = tokio::join!(one(0), one(1), one(2));
    for (text, error) in [one, two, three] {
        assert!(!error, "{text}");
    }
    assert_eq!(scene.provider.exchanges().await, (3, 0));

    // No caller's token anywhere in what the upstream got.
    let whole = scene.recorder.whole.lock().unwrap().clone();
    for token in [&a, &b, &c] {
        assert!(
            !whole.iter().any(|request| request.contains(token.as_str())),
            "a caller's token reached the upstream"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_exchange_is_the_callers_error_and_nothing_goes_upstream() {
    let scene = scene().await;
    // A token the gateway accepts (signed by the provider's key, for the gateway) that the
    // provider's token endpoint never issued: the exchange is refused.
    let minted = scene
        .provider
        .mint(json!({"aud": scene.gateway_resource, "scope": "tools:read"}))
        .await;
    for _ in 0..2 {
        let (text, error) = called(&scene.url, &minted, "up__echo", json!({"message": "x"})).await;
        assert!(error, "{text}");
        assert!(
            text.contains("upstream") && text.contains("invalid_grant"),
            "names the upstream and the server's error: {text}"
        );
    }
    // A resource this client may not have tokens for.
    scene
        .provider
        .post(
            "/__test/resource",
            json!({"resource": scene.upstream_resource, "exchange": false}),
        )
        .await;
    let a = scene.caller(("rs-test", "rs-secret")).await;
    let (text, error) = called(&scene.url, &a, "up__echo", json!({"message": "x"})).await;
    assert!(error && text.contains("invalid_target"), "{text}");
    // A refusal is not cached as a success: each was asked again.
    assert_eq!(scene.provider.exchanges().await, (0, 3));
    assert!(
        scene.call_tokens().is_empty(),
        "no call reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchanged_token_the_upstream_refuses_is_exchanged_again_once() {
    let scene = scene().await;
    let a = scene.caller(("rs-test", "rs-secret")).await;
    let (text, error) = called(&scene.url, &a, "up__echo", json!({"message": "one"})).await;
    assert!(!error, "{text}");
    let first = scene.call_tokens().remove(0);

    // The upstream revokes the token the gateway cached: the next call is refused once, the
    // gateway exchanges the caller's token again and the call goes through with the new one.
    scene
        .recorder
        .revoked
        .lock()
        .unwrap()
        .push(format!("Bearer {first}"));
    let (text, error) = called(&scene.url, &a, "up__echo", json!({"message": "two"})).await;
    assert!(!error && text.contains("two"), "{text}");
    let tokens = scene.call_tokens();
    assert_eq!(
        tokens.len(),
        3,
        "the call, the refused one, the one made again"
    );
    assert_eq!(tokens[1], first);
    assert_ne!(tokens[2], first, "a newly exchanged token");
    assert_eq!(scene.provider.exchanges().await, (2, 0));
    // Made again with a token for the caller, never in the gateway's own name.
    let claims = claims(&tokens[2]);
    assert_eq!(claims["sub"], json!("rs-test"), "{claims}");
    assert_eq!(claims["act"]["sub"], json!(EXCHANGER.0), "{claims}");

    // An upstream that refuses every token: the caller is told, after one exchange again
    // (not a loop of them), and the upstream saw two attempts.
    scene
        .recorder
        .refuse_calls
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (text, error) = called(&scene.url, &a, "up__echo", json!({"message": "three"})).await;
    assert!(error && text.contains("401"), "{text}");
    assert_eq!(scene.call_tokens().len(), 5);
    assert_eq!(scene.provider.exchanges().await, (3, 0));
}
