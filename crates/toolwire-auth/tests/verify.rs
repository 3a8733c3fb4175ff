//! `JwtVerifier` against an issuer served on 127.0.0.1: RFC 8414 metadata and a JWKS whose
//! keys the test rotates, tokens signed with keys made at test time, and every token an
//! attacker or a misconfigured client would present.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};
use toolwire_auth::{Algorithm, JwtConfig, JwtVerifier, TokenError};

const RESOURCE: &str = "http://127.0.0.1:9/mcp";
const NOW: u64 = 1_900_000_000;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An ES256 signing key and its public JWK.
struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
    public_raw: Vec<u8>,
}

impl SigningKey {
    fn new(kid: &str) -> SigningKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let public_raw = pair.public_key_raw().to_vec();
        let (x, y) = public_raw[1..].split_at(32);
        SigningKey {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk: json!({"kty": "EC", "crv": "P-256", "x": b64(x), "y": b64(y), "kid": kid, "alg": "ES256", "use": "sig"}),
            public_raw,
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The issuer: metadata and a JWKS the test can replace, counting JWKS fetches.
#[derive(Clone)]
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

fn json_reply(value: Value) -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
}

async fn start_issuer(keys: &[&SigningKey]) -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let issuer = Issuer {
        url: url.clone(),
        jwks: Arc::new(Mutex::new(
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}),
        )),
        fetches: Arc::new(AtomicUsize::new(0)),
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(|State(i): State<Issuer>| async move {
                json_reply(json!({"issuer": i.url, "jwks_uri": format!("{}/jwks", i.url)}))
            }),
        )
        .route(
            "/jwks",
            get(|State(i): State<Issuer>| async move {
                i.fetches.fetch_add(1, Ordering::SeqCst);
                json_reply(i.jwks.lock().unwrap().clone())
            }),
        )
        .with_state(issuer.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    issuer
}

fn claims(issuer: &Issuer) -> Value {
    json!({
        "iss": issuer.url, "sub": "alice", "aud": RESOURCE, "client_id": "app",
        "scope": "math tools:read", "exp": NOW + 300, "iat": NOW, "jti": "t1"
    })
}

fn verifier(issuer: &Issuer, clock: &Arc<AtomicU64>) -> JwtVerifier {
    let clock = clock.clone();
    JwtVerifier::new(
        JwtConfig::new(issuer.url.clone(), RESOURCE)
            .clock(Arc::new(move || clock.load(Ordering::SeqCst)))
            .min_refresh_interval(Duration::from_secs(30)),
    )
}

fn invalid(result: Result<Arc<toolwire_auth::VerifiedToken>, TokenError>) -> String {
    match result {
        Err(TokenError::Invalid(why)) => why,
        other => panic!("expected an invalid token, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_token_names_its_principal_and_scopes() {
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&[&key]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let verifier = verifier(&issuer, &clock);
    let verified = verifier.verify(&key.sign(&claims(&issuer))).await.unwrap();
    assert_eq!(verified.principal(), format!("{} alice", issuer.url));
    assert_eq!(&*verified.scopes, ["math", "tools:read"]);
    assert!(verified.has_scopes(["math"]) && !verified.has_scopes(["admin"]));
    assert_eq!(verified.client_id.as_deref(), Some("app"));
    assert_eq!(verified.claims["jti"], "t1", "every claim is kept");
    let mut tenant = claims(&issuer);
    tenant["tenant"] = json!("acme");
    tenant["groups"] = json!(["ops"]);
    let verified = verifier.verify(&key.sign(&tenant)).await.unwrap();
    assert_eq!(verified.claims["tenant"], "acme");
    assert_eq!(verified.claims["groups"], json!(["ops"]));
    let mut many = claims(&issuer);
    many["aud"] = json!(["https://other", RESOURCE]);
    assert!(
        verifier.verify(&key.sign(&many)).await.is_ok(),
        "aud may be an array"
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        1,
        "the JWKS was fetched once"
    );
}

#[tokio::test]
async fn tokens_that_are_not_for_here_or_not_now_are_refused() {
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&[&key]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let verifier = verifier(&issuer, &clock);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut c = claims(&issuer);
        change(&mut c);
        key.sign(&c)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "another resource",
            with(&|c| c["aud"] = json!("https://elsewhere/mcp")),
            "not for",
        ),
        (
            "no audience",
            with(&|c| drop(c.as_object_mut().unwrap().remove("aud"))),
            "not for",
        ),
        (
            "a wrong issuer",
            with(&|c| c["iss"] = json!("https://evil.example.com")),
            "issuer",
        ),
        (
            "an issuer with a trailing slash",
            with(&|c| c["iss"] = json!(format!("{}/", issuer.url))),
            "issuer",
        ),
        (
            "expired beyond the leeway",
            with(&|c| c["exp"] = json!(NOW - 61)),
            "expired",
        ),
        (
            "not valid for minutes",
            with(&|c| c["nbf"] = json!(NOW + 600)),
            "not valid yet",
        ),
        (
            "no exp",
            with(&|c| drop(c.as_object_mut().unwrap().remove("exp"))),
            "no exp",
        ),
        (
            "no sub",
            with(&|c| drop(c.as_object_mut().unwrap().remove("sub"))),
            "no sub",
        ),
    ];
    for (what, token, why) in cases {
        let refused = invalid(verifier.verify(&token).await);
        assert!(refused.contains(why), "{what}: {refused}");
    }
    assert!(
        verifier
            .verify(&with(&|c| c["exp"] = json!(NOW - 30)))
            .await
            .is_ok(),
        "expired within the leeway"
    );
    assert!(
        verifier
            .verify(&with(&|c| c["nbf"] = json!(NOW + 30)))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn forged_tokens_are_refused() {
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&[&key]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let verifier = verifier(&issuer, &clock);
    let claims = claims(&issuer);
    let body = b64(claims.to_string().as_bytes());

    // Another key claiming the issuer's kid.
    let mut forger = SigningKey::new("k1");
    forger.kid = "k1".into();
    assert!(invalid(verifier.verify(&forger.sign(&claims)).await).contains("signature"));

    // alg none, with and without a signature.
    let none = b64(br#"{"alg":"none","typ":"at+jwt","kid":"k1"}"#);
    for token in [format!("{none}.{body}."), format!("{none}.{body}.c2ln")] {
        invalid(verifier.verify(&token).await);
    }

    // HMAC with the public key as the secret (the classic key-confusion attack), in both of the
    // forms an attacker would try.
    let base64_key = b64(&key.public_raw);
    for secret in [
        key.public_raw.clone(),
        base64_key.into_bytes(),
        key.jwk.to_string().into_bytes(),
    ] {
        let mut header = Header::new(Algorithm::HS256);
        header.typ = Some("at+jwt".into());
        header.kid = Some("k1".into());
        let token =
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(&secret)).unwrap();
        assert!(invalid(verifier.verify(&token).await).contains("not accepted"));
    }

    // A token of another type (an ID token) is not an access token (RFC 9068 §4).
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    let id_token = jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap();
    assert!(invalid(verifier.verify(&id_token).await).contains("typ"));

    // A tampered payload.
    let good = key.sign(&claims);
    let parts: Vec<&str> = good.split('.').collect();
    let mut admin = claims.clone();
    admin["scope"] = json!("admin");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64(admin.to_string().as_bytes()),
        parts[2]
    );
    assert!(invalid(verifier.verify(&tampered).await).contains("signature"));

    // Garbage.
    for junk in ["", "a.b", "a.b.c", "...."] {
        invalid(verifier.verify(junk).await);
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_unknown_keys_do_not_hammer_the_issuer() {
    let old = SigningKey::new("k1");
    let issuer = start_issuer(&[&old]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let verifier = verifier(&issuer, &clock);
    verifier.verify(&old.sign(&claims(&issuer))).await.unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);

    // The issuer rotates: the new key is found with one more fetch, 30 s after the last one.
    let new = SigningKey::new("k2");
    *issuer.jwks.lock().unwrap() = json!({"keys": [new.jwk.clone()]});
    clock.fetch_add(31, Ordering::SeqCst);
    let verified = verifier.verify(&new.sign(&claims(&issuer))).await.unwrap();
    assert_eq!(verified.subject, "alice");
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);

    // Tokens naming unknown keys: at most one fetch per interval, however many arrive.
    let stranger = SigningKey::new("k3");
    for _ in 0..20 {
        assert!(
            invalid(verifier.verify(&stranger.sign(&claims(&issuer))).await).contains("unknown")
        );
    }
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        2,
        "within the interval of the last fetch"
    );
    clock.fetch_add(31, Ordering::SeqCst);
    invalid(verifier.verify(&stranger.sign(&claims(&issuer))).await);
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn verified_tokens_are_cached_until_they_expire() {
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&[&key]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    let verifier = verifier(&issuer, &clock);
    let token = key.sign(&claims(&issuer));
    verifier.verify(&token).await.unwrap();
    // The issuer forgets the key: a cached token still passes without a signature check.
    *issuer.jwks.lock().unwrap() = json!({"keys": []});
    verifier.verify(&token).await.unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // Past exp and the leeway, the cache does not keep it alive.
    clock.fetch_add(300 + 61, Ordering::SeqCst);
    assert!(verifier.verify(&token).await.is_err());
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_or_names_another_issuer_is_unavailable_not_invalid() {
    let key = SigningKey::new("k1");
    let issuer = start_issuer(&[&key]).await;
    let clock = Arc::new(AtomicU64::new(NOW));
    // Metadata that names another issuer is not trusted.
    let liar = JwtVerifier::new(
        JwtConfig::new(format!("{}/tenant", issuer.url), RESOURCE).clock(Arc::new(move || NOW)),
    );
    let mut c = claims(&issuer);
    c["iss"] = json!(format!("{}/tenant", issuer.url));
    assert!(matches!(
        liar.verify(&key.sign(&c)).await,
        Err(TokenError::Unavailable(_))
    ));
    // Nothing listening.
    let gone = JwtVerifier::new(
        JwtConfig::new("http://127.0.0.1:9", RESOURCE).jwks_uri("http://127.0.0.1:9/jwks"),
    );
    assert!(matches!(
        gone.verify(&key.sign(&claims(&issuer))).await,
        Err(TokenError::Unavailable(_))
    ));
    // A configured JWKS URL skips discovery.
    let direct = JwtVerifier::new(
        JwtConfig::new(issuer.url.clone(), RESOURCE)
            .jwks_uri(format!("{}/jwks", issuer.url))
            .clock({
                let clock = clock.clone();
                Arc::new(move || clock.load(Ordering::SeqCst))
            }),
    );
    assert!(direct.verify(&key.sign(&claims(&issuer))).await.is_ok());
}
