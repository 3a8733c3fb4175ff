//! A small issuer for the "auth on" benchmark: RFC 8414 metadata and a JWKS with one ES256 key
//! made at start, served on 127.0.0.1, and a token it signs for the bench server's resource.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

/// Starts the issuer; its URL and a valid access token (an hour) for `resource`.
pub(crate) async fn start_issuer(resource: &str) -> anyhow::Result<(String, String)> {
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let raw = pair.public_key_raw().to_vec();
    let (x, y) = raw[1..].split_at(32);
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "x": b64(x), "y": b64(y), "kid": "bench", "alg": "ES256", "use": "sig"}]}).to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let issuer = format!("http://{}", listener.local_addr()?);
    let metadata = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")}).to_string();
    let json = |body: String| {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { json(metadata) }),
        )
        .route("/jwks", get(move || async move { json(jwks) }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some("at+jwt".into());
    header.kid = Some("bench".into());
    let claims = json!({
        "iss": issuer, "sub": "bench", "aud": resource, "scope": "bench",
        "client_id": "mcp-load", "iat": now, "exp": now + 3600
    });
    let key = EncodingKey::from_ec_der(&pair.serialize_der());
    Ok((issuer, jsonwebtoken::encode(&header, &claims, &key)?))
}
