//! `Introspector` against an issuer served on 127.0.0.1 whose RFC 7662 endpoint checks the
//! resource server's credentials, counts calls and can be slowed down: discovery, caching (and
//! its limit, which bounds how long a revoked token works), the bound on calls in flight, and
//! how a misconfigured resource server is told apart from a bad token. The same against the real
//! oidc-provider is in toolwire-server's `auth_oidc` tests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};
use toolwire_auth::{
    IntrospectionConfig, Introspector, JwtConfig, JwtVerifier, TokenError, TokenVerifier, Verifiers,
};

const RESOURCE: &str = "http://127.0.0.1:9/mcp";
const NOW: u64 = 1_900_000_000;

#[derive(Clone)]
struct Issuer {
    url: String,
    /// token -> introspection answer; unknown tokens are `{"active": false}`.
    answers: Arc<Mutex<HashMap<String, Value>>>,
    calls: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
    delay: Duration,
}

async fn introspect(
    State(i): State<Issuer>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> axum::response::Response {
    i.calls.fetch_add(1, Ordering::SeqCst);
    // RFC 6749 §2.3.1: id and secret form-encoded, then Basic.
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("rs%3Aone:s+e%2Fcret")
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return (StatusCode::UNAUTHORIZED, r#"{"error":"invalid_client"}"#).into_response();
    }
    let now = i.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    i.most_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(i.delay).await;
    i.in_flight.fetch_sub(1, Ordering::SeqCst);
    assert_eq!(
        form.get("token_type_hint").map(String::as_str),
        Some("access_token")
    );
    let token = form.get("token").cloned().unwrap_or_default();
    let answer = i.answers.lock().unwrap().get(&token).cloned();
    axum::Json(answer.unwrap_or(json!({"active": false}))).into_response()
}

async fn start_issuer(delay: Duration) -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let issuer = Issuer {
        url: url.clone(),
        answers: Arc::default(),
        calls: Arc::default(),
        in_flight: Arc::default(),
        most_in_flight: Arc::default(),
        delay,
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(|State(i): State<Issuer>| async move {
                axum::Json(json!({"issuer": i.url, "introspection_endpoint": format!("{}/introspect", i.url)}))
            }),
        )
        .route("/introspect", post(introspect))
        .with_state(issuer.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    issuer
}

impl Issuer {
    fn issue(&self, token: &str, answer: Value) {
        self.answers.lock().unwrap().insert(token.into(), answer);
    }

    fn revoke(&self, token: &str) {
        self.answers.lock().unwrap().remove(token);
    }

    fn active(&self, extra: Value) -> Value {
        let mut answer = json!({"active": true, "iss": self.url, "aud": RESOURCE,
            "client_id": "app", "scope": "math", "exp": NOW + 300, "token_type": "Bearer"});
        answer
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        answer
    }
}

fn config(issuer: &Issuer, clock: &Arc<AtomicU64>) -> IntrospectionConfig {
    let clock = clock.clone();
    IntrospectionConfig::new(issuer.url.clone(), RESOURCE, "rs:one", "s e/cret")
        .clock(Arc::new(move || clock.load(Ordering::SeqCst)))
}

#[tokio::test]
async fn an_active_token_is_cached_for_a_bounded_time_so_revocation_takes_hold() {
    let issuer = start_issuer(Duration::ZERO).await;
    issuer.issue(
        "opaque-1",
        issuer.active(json!({"sub": "alice", "tenant": "acme"})),
    );
    let clock = Arc::new(AtomicU64::new(NOW));
    let introspector =
        Introspector::new(config(&issuer, &clock).cache_for(Duration::from_secs(30)));

    let verified = introspector.verify("opaque-1").await.unwrap();
    assert_eq!(verified.principal(), format!("{} alice", issuer.url));
    assert_eq!(verified.claims["tenant"], "acme", "every claim is kept");
    assert_eq!(&*verified.scopes, ["math"]);
    assert_eq!(verified.expires_at, Some(NOW + 300));
    introspector.verify("opaque-1").await.unwrap();
    assert_eq!(
        issuer.calls.load(Ordering::SeqCst),
        1,
        "the second came from the cache"
    );

    issuer.revoke("opaque-1");
    clock.store(NOW + 29, Ordering::SeqCst);
    introspector.verify("opaque-1").await.unwrap();
    clock.store(NOW + 31, Ordering::SeqCst);
    let refused = introspector.verify("opaque-1").await.unwrap_err();
    assert!(
        matches!(&refused, TokenError::Invalid(why) if why.contains("not active")),
        "{refused:?}"
    );
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 2);

    // Refusals are not cached: a token that becomes active is accepted at once.
    issuer.issue("opaque-1", issuer.active(json!({})));
    assert_eq!(
        introspector.verify("opaque-1").await.unwrap().subject,
        "app"
    );
}

#[tokio::test]
async fn a_zero_cache_time_asks_every_time_and_expiry_caps_the_cache() {
    let issuer = start_issuer(Duration::ZERO).await;
    issuer.issue("short", issuer.active(json!({"exp": NOW + 5})));
    let clock = Arc::new(AtomicU64::new(NOW));
    let uncached = Introspector::new(config(&issuer, &clock).cache_for(Duration::ZERO));
    uncached.verify("short").await.unwrap();
    uncached.verify("short").await.unwrap();
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 2);

    let cached = Introspector::new(config(&issuer, &clock).leeway(Duration::ZERO));
    cached.verify("short").await.unwrap();
    clock.store(NOW + 6, Ordering::SeqCst);
    let refused = cached.verify("short").await.unwrap_err();
    assert!(
        matches!(&refused, TokenError::Invalid(why) if why.contains("expired")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn tokens_for_another_resource_or_issuer_are_refused() {
    let issuer = start_issuer(Duration::ZERO).await;
    issuer.issue(
        "other-aud",
        issuer.active(json!({"aud": "http://127.0.0.1:9/other"})),
    );
    issuer.issue("other-iss", issuer.active(json!({"iss": "http://evil"})));
    issuer.issue("no-aud", issuer.active(json!({"aud": null})));
    let clock = Arc::new(AtomicU64::new(NOW));
    let introspector = Introspector::new(config(&issuer, &clock));
    for (token, why) in [
        ("other-aud", "not for"),
        ("other-iss", "issuer"),
        ("no-aud", "not for"),
    ] {
        let refused = introspector.verify(token).await.unwrap_err();
        assert!(
            matches!(&refused, TokenError::Invalid(w) if w.contains(why)),
            "{token}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn wrong_credentials_or_no_endpoint_make_the_server_unavailable_not_the_token_invalid() {
    let issuer = start_issuer(Duration::ZERO).await;
    issuer.issue("t", issuer.active(json!({})));
    let clock = Arc::new(AtomicU64::new(NOW));
    let clock2 = clock.clone();
    let wrong = Introspector::new(
        IntrospectionConfig::new(issuer.url.clone(), RESOURCE, "rs:one", "guess")
            .clock(Arc::new(move || clock2.load(Ordering::SeqCst))),
    );
    let refused = wrong.verify("t").await.unwrap_err();
    assert!(
        matches!(&refused, TokenError::Unavailable(why) if why.contains("401")),
        "{refused:?}"
    );

    let nowhere =
        Introspector::new(config(&issuer, &clock).endpoint("http://127.0.0.1:9/introspect"));
    assert!(matches!(
        nowhere.verify("t").await,
        Err(TokenError::Unavailable(_))
    ));
}

#[tokio::test]
async fn at_most_the_configured_calls_are_in_flight() {
    let issuer = start_issuer(Duration::from_millis(50)).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let introspector = Arc::new(Introspector::new(config(&issuer, &clock).max_concurrent(3)));
    let junk: Vec<_> = (0..12)
        .map(|i| {
            let introspector = introspector.clone();
            tokio::spawn(async move { introspector.verify(&format!("junk-{i}")).await })
        })
        .collect();
    for call in junk {
        assert!(matches!(call.await.unwrap(), Err(TokenError::Invalid(_))));
    }
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 12);
    assert_eq!(issuer.most_in_flight.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn jwts_go_to_the_introspector_only_when_everything_is_introspected() {
    let issuer = start_issuer(Duration::ZERO).await;
    let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let jwt = format!(
        "{}.{}.c2ln",
        b64(r#"{"alg":"ES256","typ":"at+jwt","kid":"k"}"#),
        b64(r#"{"sub":"x"}"#)
    );
    assert!(toolwire_auth::looks_like_jwt(&jwt));
    issuer.issue(&jwt, issuer.active(json!({"sub": "revocable"})));
    issuer.issue("opaque", issuer.active(json!({"sub": "plain"})));
    let clock = Arc::new(AtomicU64::new(NOW));
    let jwt_verifier = || {
        JwtVerifier::new(
            JwtConfig::new(issuer.url.clone(), RESOURCE).jwks_uri("http://127.0.0.1:9/jwks"),
        )
    };

    let split = Verifiers::new(jwt_verifier(), Introspector::new(config(&issuer, &clock)));
    let opaque = TokenVerifier::verify(&split, "opaque").await.unwrap();
    assert_eq!(opaque.subject, "plain");
    let local = TokenVerifier::verify(&split, &jwt).await.unwrap_err();
    assert!(
        matches!(local, TokenError::Unavailable(_)),
        "verified locally: {local:?}"
    );
    assert_eq!(issuer.calls.load(Ordering::SeqCst), 1);

    let everything = Verifiers::introspect_everything(Introspector::new(config(&issuer, &clock)));
    let asked = TokenVerifier::verify(&everything, &jwt).await.unwrap();
    assert_eq!(asked.subject, "revocable");
    issuer.revoke(&jwt);
    let everything = Verifiers::introspect_everything(Introspector::new(config(&issuer, &clock)));
    assert!(matches!(
        TokenVerifier::verify(&everything, &jwt).await,
        Err(TokenError::Invalid(_))
    ));
}
