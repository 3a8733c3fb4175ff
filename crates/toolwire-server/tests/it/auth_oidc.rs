//! The resource server against a real authorization server: the npm package `oidc-provider`
//! (pinned by `interop/oidc/package-lock.json`, installed by `scripts/oidc`), started on
//! 127.0.0.1 for each test. Tokens come from its token endpoint (client credentials with a
//! resource indicator) or, for the claims no honest provider issues, from its test-only mint,
//! signed with its own current key.

use std::time::Duration;

use serde_json::{Value, json};
use toolwire_server::http::{HttpConfig, OAuth};

use crate::support::*;

#[path = "../../../../interop/oidc/launch.rs"]
mod launch;

/// A running oidc-provider (see `interop/oidc/provider.mjs`).
struct Provider {
    launched: launch::Launched,
}

impl Provider {
    fn start() -> Provider {
        Provider {
            launched: launch::launch(&[]),
        }
    }

    fn issuer(&self) -> String {
        self.launched.issuer()
    }

    /// A client-credentials token for `resource` with `scope`.
    async fn token(&self, client: &str, secret: &str, resource: &str, scope: &str) -> String {
        let form = format!(
            "grant_type=client_credentials&resource={}&scope={}",
            encode(resource),
            encode(scope)
        );
        let reply: Value = client_http()
            .post(self.launched.ready["token_endpoint"].as_str().unwrap())
            .basic_auth(client, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        reply["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_owned()
    }

    async fn test_endpoint(&self, path: &str, body: Value) -> Value {
        client_http()
            .post(format!("{}/__test/{path}", self.issuer()))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A JWT signed with the provider's current key, with these claims over its defaults.
    async fn mint(&self, body: Value) -> String {
        let reply = self.test_endpoint("mint", body).await;
        reply["token"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_owned()
    }
}

fn client_http() -> &'static reqwest::Client {
    client()
}

/// Percent-encodes a form value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Guarded {
    server: TestServer,
    resource: String,
}

async fn guarded(provider: &Provider) -> Guarded {
    guarded_with(provider, |oauth| oauth).await
}

/// A guarded server whose OAuth settings `configure` adds to.
async fn guarded_with(provider: &Provider, configure: impl FnOnce(OAuth) -> OAuth) -> Guarded {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let resource = format!("http://{addr}/mcp");
    let oauth = configure(
        OAuth::new(provider.issuer(), resource.clone())
            .scopes_supported(["tools:read", "math"])
            .min_refresh_interval(Duration::from_secs(1)),
    );
    let server = crate::auth::server();
    let task = tokio::spawn(toolwire_server::http::serve(
        server.clone(),
        listener,
        HttpConfig::default().oauth(oauth),
    ));
    Guarded {
        server: TestServer::from_parts(server, addr, task),
        resource,
    }
}

async fn call(url: &str, token: Option<&str>, body: &Value) -> Reply {
    let token = token.map(str::to_owned);
    post_with(url, body, move |h| {
        if let Some(token) = token {
            h.push(("authorization".into(), format!("Bearer {token}")));
        }
    })
    .await
}

fn whoami(id: i64) -> Value {
    request(id, "tools/call", json!({"name": "whoami", "arguments": {}}))
}

#[tokio::test]
async fn tokens_from_a_real_authorization_server() {
    let provider = Provider::start();
    let g = guarded(&provider).await;
    let url = g.server.url.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();

    // A valid token: the principal is the issuer and the client's subject.
    let token = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read")
        .await;
    let who = call(&url, Some(&token), &whoami(1)).await;
    assert_eq!(who.status, 200, "{}", who.body);
    let text = who.last()["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        format!("{} rs-test with [\"tools:read\"]", provider.issuer())
    );

    // Refused, each with 401 and invalid_token (or none without a token).
    let elsewhere = provider
        .token(
            "rs-test",
            "rs-secret",
            "http://127.0.0.1:9/other",
            "tools:read",
        )
        .await;
    let mint = |claims: Value| provider.mint(json!({"claims": claims}));
    let cases = vec![
        ("no token", None),
        ("a token for another resource", Some(elsewhere)),
        (
            "expired",
            Some(mint(json!({"aud": g.resource, "exp": now - 600, "iat": now - 900})).await),
        ),
        (
            "not yet valid",
            Some(mint(json!({"aud": g.resource, "nbf": now + 600})).await),
        ),
        (
            "a wrong issuer",
            Some(mint(json!({"aud": g.resource, "iss": "http://127.0.0.1:1"})).await),
        ),
        (
            "a forged signature",
            Some(
                provider
                    .mint(json!({"claims": {"aud": g.resource}, "foreign_key": true}))
                    .await,
            ),
        ),
        (
            "alg none",
            Some(
                provider
                    .mint(json!({"claims": {"aud": g.resource}, "header": {"alg": "none"}}))
                    .await,
            ),
        ),
        (
            "HMAC keyed with the public key",
            Some(
                provider
                    .mint(json!({"claims": {"aud": g.resource}, "header": {"alg": "HS256"}}))
                    .await,
            ),
        ),
        (
            "no exp",
            Some(mint(json!({"aud": g.resource, "exp": null})).await),
        ),
    ];
    for (what, token) in cases {
        let reply = call(&url, token.as_deref(), &whoami(2)).await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.body);
        let challenge = reply.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.contains("resource_metadata="),
            "{what}: {challenge}"
        );
        assert_eq!(
            challenge.contains("invalid_token"),
            token.is_some(),
            "{what}: {challenge}"
        );
    }

    // The provider rotates its keys (dropping the old ones): a new token names a kid the server
    // has not seen and is accepted after one JWKS refresh.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let rotated = provider
        .test_endpoint("rotate", json!({"keep_old": false}))
        .await;
    assert_ne!(rotated["kid"], provider.launched.ready["kid"]);
    let fresh = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read")
        .await;
    assert_eq!(
        call(&url, Some(&fresh), &whoami(3)).await.status,
        200,
        "after the rotation"
    );
    g.server.stop().await;
}

#[tokio::test]
async fn scopes_and_principals_with_a_real_authorization_server() {
    let provider = Provider::start();
    let g = guarded(&provider).await;
    let url = g.server.url.clone();
    let reader = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read")
        .await;

    let list = call(&url, Some(&reader), &request(1, "tools/list", json!({}))).await;
    let names: Vec<&str> = list.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"add"), "{names:?}");
    assert_eq!(list.last()["result"]["cacheScope"], "private");

    let add = request(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    let refused = call(&url, Some(&reader), &add).await;
    assert_eq!(refused.status, 403);
    let challenge = refused.headers["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"math\""),
        "{challenge}"
    );
    // Stepping up: a token with the scopes held and those the challenge named (the client
    // accumulates them, A-07).
    let stepped = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read math")
        .await;
    assert_eq!(
        call(&url, Some(&stepped), &add).await.last()["result"]["structuredContent"]["total"],
        5
    );

    // Two principals (two clients): one cannot redeem the other's request state.
    let other = provider
        .token("rs-test-2", "rs-secret-2", &g.resource, "tools:read")
        .await;
    let mut ask = request(3, "tools/call", json!({"name": "ask", "arguments": {}}));
    ask["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    let asked = call(&url, Some(&reader), &ask).await;
    let mut retry = ask.clone();
    retry["id"] = json!(4);
    retry["params"]["requestState"] = asked.last()["result"]["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(
        call(&url, Some(&other), &retry).await.error_code(),
        Some(-32602)
    );
    assert_eq!(
        call(&url, Some(&reader), &retry).await.last()["result"]["content"][0]["text"],
        "hello Ada"
    );

    // Nor read, answer or cancel the other's task.
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let with_tasks = |mut body: Value| {
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = tasks.clone();
        body
    };
    let slow = with_tasks(request(
        5,
        "tools/call",
        json!({"name": "slow", "arguments": {}}),
    ));
    let created = call(&url, Some(&reader), &slow).await;
    let task_id = created.last()["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", created.body))
        .to_owned();
    for (id, method) in [(6, "tasks/get"), (7, "tasks/update"), (8, "tasks/cancel")] {
        let mut params = json!({"taskId": task_id});
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        let foreign = call(&url, Some(&other), &with_tasks(request(id, method, params))).await;
        assert_eq!(
            foreign.error_code(),
            Some(-32602),
            "{method}: {}",
            foreign.body
        );
    }
    let own = call(
        &url,
        Some(&reader),
        &with_tasks(request(9, "tasks/get", json!({"taskId": task_id}))),
    )
    .await;
    assert!(own.last()["result"]["status"].is_string(), "{}", own.body);
    g.server.stop().await;
}

/// Opaque tokens, verified by the provider's RFC 7662 introspection endpoint (found in its
/// metadata) with the resource server's own client credentials; JWTs still verified locally.
#[tokio::test]
async fn opaque_tokens_through_introspection_with_a_real_authorization_server() {
    let provider = Provider::start();
    let g = guarded_with(&provider, |oauth| {
        oauth
            .introspection("rs-introspect", "rs-introspect-secret")
            .introspection_cache(Duration::ZERO)
    })
    .await;
    let url = g.server.url.clone();
    provider
        .test_endpoint(
            "resource",
            json!({"resource": g.resource, "format": "opaque"}),
        )
        .await;
    let opaque = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read")
        .await;
    assert_eq!(opaque.split('.').count(), 1, "an opaque token: {opaque}");

    let who = call(&url, Some(&opaque), &whoami(1)).await;
    let text = who.last()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", who.body))
        .to_owned();
    assert_eq!(
        text,
        format!("{} rs-test with [\"tools:read\"]", provider.issuer()),
        "a client-credentials token's subject is its client"
    );
    let add = request(
        2,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    );
    let refused = call(&url, Some(&opaque), &add).await;
    assert_eq!(refused.status, 403, "{}", refused.body);

    // Revoked at the provider: refused on the next request (no introspection cache here).
    let revoked = client_http()
        .post(format!("{}/token/revocation", provider.issuer()))
        .basic_auth("rs-test", Some("rs-secret"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "token={}&token_type_hint=access_token",
            encode(&opaque)
        ))
        .send()
        .await
        .unwrap();
    assert!(revoked.status().is_success(), "{:?}", revoked.status());
    let after = call(&url, Some(&opaque), &whoami(3)).await;
    assert_eq!(after.status, 401, "{}", after.body);
    assert!(
        after.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );

    // An opaque token for another resource is refused.
    let elsewhere = "http://127.0.0.1:9/other";
    provider
        .test_endpoint(
            "resource",
            json!({"resource": elsewhere, "format": "opaque"}),
        )
        .await;
    let foreign = provider
        .token("rs-test", "rs-secret", elsewhere, "tools:read")
        .await;
    assert_eq!(call(&url, Some(&foreign), &whoami(4)).await.status, 401);
    assert_eq!(
        call(&url, Some(&"x".repeat(43)), &whoami(5)).await.status,
        401,
        "junk"
    );

    // JWTs still work beside introspection, verified locally.
    provider
        .test_endpoint("resource", json!({"resource": g.resource, "format": "jwt"}))
        .await;
    let jwt = provider
        .token("rs-test-2", "rs-secret-2", &g.resource, "tools:read math")
        .await;
    assert_eq!(jwt.split('.').count(), 3);
    let sum = call(&url, Some(&jwt), &add).await;
    assert_eq!(
        sum.last()["result"]["structuredContent"]["total"],
        3,
        "{}",
        sum.body
    );
    g.server.stop().await;

    // Wrong introspection credentials are the operator's problem: 503, not the caller's 401.
    let misconfigured = guarded_with(&provider, |oauth| {
        oauth.introspection("rs-introspect", "not-the-secret")
    })
    .await;
    provider
        .test_endpoint(
            "resource",
            json!({"resource": misconfigured.resource, "format": "opaque"}),
        )
        .await;
    let opaque = provider
        .token(
            "rs-test",
            "rs-secret",
            &misconfigured.resource,
            "tools:read",
        )
        .await;
    let unavailable = call(&misconfigured.server.url, Some(&opaque), &whoami(6)).await;
    assert_eq!(unavailable.status, 503, "{}", unavailable.body);
    misconfigured.server.stop().await;
}

/// oidc-provider cannot introspect its JWTs (400 `unsupported_token_type`): with every token
/// introspected, a JWT gets 503 (the operator's setting is wrong), never a 200 nor a 401 that
/// would send the client for a new token. (That a revoked JWT is refused when the issuer can
/// introspect it is tested in toolwire-auth's `introspect` tests.)
#[tokio::test]
async fn introspecting_jwts_the_provider_cannot_introspect_is_unavailable() {
    let provider = Provider::start();
    let g = guarded_with(&provider, |oauth| {
        oauth
            .introspection("rs-introspect", "rs-introspect-secret")
            .introspect_all_tokens()
    })
    .await;
    let jwt = provider
        .token("rs-test", "rs-secret", &g.resource, "tools:read")
        .await;
    let reply = call(&g.server.url, Some(&jwt), &whoami(1)).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    g.server.stop().await;
}
