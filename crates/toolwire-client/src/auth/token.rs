//! A client's identity at an authorization server and the token endpoint (A-10, A-11, A-13,
//! A-17): dynamic registration (RFC 7591, with `application_type`) when there is no identity
//! yet, then the authorization code (with its PKCE verifier and the same `resource`), a
//! refresh token when one was issued, or client credentials for a machine client — each
//! authenticated the way the server lists (`client_secret_basic`, `client_secret_post`,
//! `none`). Requests go through [`AuthHttp`], so only to endpoints its rules allow; an error
//! repeats nothing of an answer but its status, its content type, and a well-formed OAuth
//! error code and description (RFC 6749 §5.2).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::discovery::AuthorizationServerMetadata;
use super::http::{AuthHttp, UrlError, content_type, describe, unexpected};

/// A client's identity at one authorization server (keyed by its issuer, never used at
/// another, A-10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientIdentity {
    /// The issuer it belongs to.
    pub issuer: String,
    /// The `client_id`.
    pub client_id: String,
    /// The secret of a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// A key the client proves itself with instead of a secret (`private_key_jwt`, RFC 7523
    /// §2.2). Configuration only: never written to a credential store.
    #[serde(skip)]
    pub private_key: Option<PrivateKey>,
}

impl ClientIdentity {
    /// A public client (no secret) or a confidential one, at `issuer`.
    pub fn new(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: Option<String>,
    ) -> ClientIdentity {
        ClientIdentity {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret,
            private_key: None,
        }
    }
}

/// A private key for `private_key_jwt` client authentication: PEM (PKCS#8 for EC and Ed25519,
/// PKCS#1 or PKCS#8 for RSA) and the JWS algorithm to sign with (`ES256`, `ES384`, `RS256`,
/// `PS256`, `EdDSA`, …).
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey {
    /// The key, PEM.
    pub pem: String,
    /// The algorithm.
    pub algorithm: String,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl PrivateKey {
    /// A client assertion (RFC 7523 §3): issuer and subject the client, audience the
    /// authorization server's issuer, five minutes of life, a fresh `jti`.
    fn assertion(&self, client_id: &str, audience: &str) -> Result<String, TokenError> {
        use jsonwebtoken::{Algorithm, EncodingKey, Header};
        let bad = |why: String| TokenError::Key(why);
        let algorithm: Algorithm = self
            .algorithm
            .parse()
            .map_err(|_| bad(format!("unknown signing algorithm {:?}", self.algorithm)))?;
        let pem = self.pem.as_bytes();
        let key = match algorithm {
            Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem),
            Algorithm::EdDSA => EncodingKey::from_ed_pem(pem),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => EncodingKey::from_rsa_pem(pem),
            other => {
                return Err(bad(format!(
                    "{other:?} is not a signing algorithm for a key"
                )));
            }
        }
        .map_err(|e| bad(format!("the {} private key: {e}", self.algorithm)))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": super::request::random_token(),
        });
        jsonwebtoken::encode(&Header::new(algorithm), &claims, &key)
            .map_err(|e| bad(format!("cannot sign the client assertion: {e}")))
    }
}

/// Tokens from the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token, sent as `Authorization: Bearer` only (A-15).
    pub access_token: String,
    /// Its type (`Bearer`).
    #[serde(default)]
    pub token_type: String,
    /// Seconds it lives, if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
    /// A refresh token, when one was issued (never assumed, A-17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes granted, if the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Why the token endpoint (or registration) gave nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The server has no such endpoint.
    #[error("the authorization server {issuer} has no {endpoint}")]
    NoEndpoint {
        /// The issuer.
        issuer: String,
        /// Which endpoint.
        endpoint: &'static str,
    },
    /// The identity belongs to another authorization server (A-10).
    #[error("the client identity of {identity} is not for {issuer}")]
    OtherIssuer {
        /// The identity's issuer.
        identity: String,
        /// The server asked.
        issuer: String,
    },
    /// The endpoint is not one the client may send to (see [`AuthHttp`]).
    #[error("refused {what}: {error}")]
    RefusedEndpoint {
        /// Which endpoint.
        what: &'static str,
        /// Why.
        error: UrlError,
    },
    /// The request could not be made or read.
    #[error("{0}")]
    Transport(String),
    /// The client's private key cannot sign (`private_key_jwt`).
    #[error("{0}")]
    Key(String),
    /// The server refused: its `error` and `error_description`.
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The OAuth error code.
        error: String,
        /// Its description, if any.
        description: Option<String>,
    },
}

/// Registers a public native client with `redirect_uris` (RFC 7591; A-11 asks for
/// `application_type`). `refresh_token` is among its grants, so a refresh token may be issued
/// (the conformance suite's offline-access scenario).
pub async fn register(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client_name: &str,
    redirect_uris: &[String],
) -> Result<ClientIdentity, TokenError> {
    let endpoint =
        server
            .registration_endpoint
            .as_deref()
            .ok_or_else(|| TokenError::NoEndpoint {
                issuer: server.issuer.clone(),
                endpoint: "registration endpoint",
            })?;
    let endpoint = http
        .checked(endpoint)
        .map_err(|error| TokenError::RefusedEndpoint {
            what: "the authorization server's registration endpoint",
            error,
        })?;
    let body = json!({
        "client_name": client_name,
        "redirect_uris": redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    });
    let reply = http
        .post(&endpoint)
        .map_err(TokenError::Transport)?
        .json(&body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| TokenError::Transport(describe(&e)))?;
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
        #[serde(default)]
        client_secret: Option<String>,
    }
    let registered: Registered = read("the registration endpoint", reply).await?;
    Ok(ClientIdentity::new(
        server.issuer.clone(),
        registered.client_id,
        registered.client_secret,
    ))
}

/// An authorization code and what must match its authorization request (A-13): the four
/// strings are named so that none can be passed in another's place.
#[derive(Debug, Clone, Copy)]
pub struct CodeGrant<'a> {
    /// The code the redirect carried.
    pub code: &'a str,
    /// The `redirect_uri` of the authorization request.
    pub redirect_uri: &'a str,
    /// The PKCE verifier whose challenge the authorization request sent.
    pub verifier: &'a str,
    /// The `resource` of the authorization request.
    pub resource: &'a str,
}

/// The tokens for an authorization code: with the PKCE verifier, the same `redirect_uri` and
/// the same `resource` as the authorization request (A-13).
pub async fn exchange_code(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    grant: CodeGrant<'_>,
) -> Result<Tokens, TokenError> {
    token_request(
        http,
        server,
        client,
        &[
            ("grant_type", "authorization_code"),
            ("code", grant.code),
            ("redirect_uri", grant.redirect_uri),
            ("code_verifier", grant.verifier),
            ("resource", grant.resource),
        ],
    )
    .await
}

/// New tokens from a refresh token, for the same `resource`.
pub async fn refresh(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    refresh_token: &str,
    resource: &str,
) -> Result<Tokens, TokenError> {
    token_request(
        http,
        server,
        client,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("resource", resource),
        ],
    )
    .await
}

/// Tokens for a machine client (client credentials), for `resource` with `scope`.
pub async fn client_credentials(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    resource: &str,
    scope: Option<&str>,
) -> Result<Tokens, TokenError> {
    let mut form = vec![("grant_type", "client_credentials"), ("resource", resource)];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    token_request(http, server, client, &form).await
}

/// The token type of an access token in a token exchange (RFC 8693 §3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The grant type of a token exchange (RFC 8693 §2.1).
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// What a token exchange asks for: a token for `resource` (RFC 8707) and, if set,
/// `audience` and `scope`, in exchange for `subject_token`, an access token of the person or
/// client the new token acts for.
#[derive(Clone, Copy)]
pub struct ExchangeGrant<'a> {
    /// The access token exchanged (`subject_token`, of type [`ACCESS_TOKEN_TYPE`]).
    pub subject_token: &'a str,
    /// The resource the new token is for.
    pub resource: &'a str,
    /// The logical name of the target service, when the server wants one.
    pub audience: Option<&'a str>,
    /// The scope asked for; the server's choice without one.
    pub scope: Option<&'a str>,
}

impl std::fmt::Debug for ExchangeGrant<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeGrant")
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// An RFC 8693 token exchange: `client` (authenticated as for any token request) trades the
/// grant's subject token for an access token for its resource.
pub async fn exchange_token(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    grant: ExchangeGrant<'_>,
) -> Result<Tokens, TokenError> {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE_GRANT),
        ("subject_token", grant.subject_token),
        ("subject_token_type", ACCESS_TOKEN_TYPE),
        ("requested_token_type", ACCESS_TOKEN_TYPE),
        ("resource", grant.resource),
    ];
    if let Some(audience) = grant.audience {
        form.push(("audience", audience));
    }
    if let Some(scope) = grant.scope {
        form.push(("scope", scope));
    }
    token_request(http, server, client, &form).await
}

/// How the client authenticates at the token endpoint: a confidential client uses
/// `client_secret_basic` unless the server lists only `client_secret_post`; a public client
/// sends its `client_id` (`none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// HTTP Basic with the client id and secret.
    Basic,
    /// `client_id` and `client_secret` in the form.
    Post,
    /// `client_id` in the form, no secret.
    None,
    /// A signed client assertion (`private_key_jwt`, RFC 7523).
    PrivateKeyJwt,
}

/// The method for `client` at `server`.
pub fn auth_method(server: &AuthorizationServerMetadata, client: &ClientIdentity) -> AuthMethod {
    let listed = &server.token_endpoint_auth_methods_supported;
    if client.private_key.is_some() {
        return AuthMethod::PrivateKeyJwt;
    }
    match &client.client_secret {
        None => AuthMethod::None,
        // RFC 8414: without a list, client_secret_basic is the default.
        Some(_) if listed.is_empty() || listed.iter().any(|m| m == "client_secret_basic") => {
            AuthMethod::Basic
        }
        Some(_) if listed.iter().any(|m| m == "client_secret_post") => AuthMethod::Post,
        Some(_) => AuthMethod::Basic,
    }
}

async fn token_request(
    http: &AuthHttp,
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    fields: &[(&str, &str)],
) -> Result<Tokens, TokenError> {
    if client.issuer != server.issuer {
        return Err(TokenError::OtherIssuer {
            identity: client.issuer.clone(),
            issuer: server.issuer.clone(),
        });
    }
    let endpoint = server
        .token_endpoint
        .as_deref()
        .ok_or_else(|| TokenError::NoEndpoint {
            issuer: server.issuer.clone(),
            endpoint: "token endpoint",
        })?;
    let endpoint = http
        .checked(endpoint)
        .map_err(|error| TokenError::RefusedEndpoint {
            what: "the authorization server's token endpoint",
            error,
        })?;
    let (body, basic) = authenticated_form(server, client, fields)?;
    let mut request = http
        .post(&endpoint)
        .map_err(TokenError::Transport)?
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .timeout(Duration::from_secs(30));
    if let Some(basic) = basic {
        request = request.header("authorization", basic);
    }
    let reply = request
        .body(body)
        .send()
        .await
        .map_err(|e| TokenError::Transport(describe(&e)))?;
    read("the token endpoint", reply).await
}

/// The token request's form with the client authenticated as the server lists, and the
/// `Authorization` value for `client_secret_basic`.
fn authenticated_form(
    server: &AuthorizationServerMetadata,
    client: &ClientIdentity,
    fields: &[(&str, &str)],
) -> Result<(String, Option<String>), TokenError> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in fields {
        form.append_pair(name, value);
    }
    let mut basic = None;
    match auth_method(server, client) {
        AuthMethod::Basic => {
            // RFC 6749 §2.3.1: each part form-encoded before Base64.
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let secret = client.client_secret.as_deref().unwrap_or_default();
            let pair = format!("{}:{}", encode(&client.client_id), encode(secret));
            basic = Some(format!("Basic {}", STANDARD.encode(pair)));
        }
        AuthMethod::Post => {
            form.append_pair("client_id", &client.client_id);
            form.append_pair(
                "client_secret",
                client.client_secret.as_deref().unwrap_or_default(),
            );
        }
        AuthMethod::None => {
            form.append_pair("client_id", &client.client_id);
        }
        AuthMethod::PrivateKeyJwt => {
            let key = client.private_key.as_ref().expect("chosen for a key");
            form.append_pair("client_id", &client.client_id);
            form.append_pair(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            );
            form.append_pair(
                "client_assertion",
                &key.assertion(&client.client_id, &server.issuer)?,
            );
        }
    }
    Ok((form.finish(), basic))
}

/// A JSON reply from the endpoint `what`, or the server's OAuth error. Nothing else of the
/// body reaches an error.
async fn read<T: serde::de::DeserializeOwned>(
    what: &str,
    reply: reqwest::Response,
) -> Result<T, TokenError> {
    let status = reply.status();
    let kind = content_type(&reply);
    let body = reply
        .bytes()
        .await
        .map_err(|e| TokenError::Transport(describe(&e)))?;
    if !status.is_success() {
        return Err(oauth_error(&body).unwrap_or_else(|| {
            TokenError::Transport(format!(
                "{what} answered HTTP {}{kind}, not an OAuth error response",
                status.as_u16()
            ))
        }));
    }
    serde_json::from_slice(&body).map_err(|e| {
        TokenError::Transport(format!(
            "{what} answered HTTP {}{kind}: {}",
            status.as_u16(),
            unexpected(&e)
        ))
    })
}

/// The OAuth error response in `body`, if it is one (RFC 6749 §5.2): an `error` code and an
/// optional `error_description`, each of the characters the RFC allows (printable ASCII but
/// `"` and `\`) and short. Anything else is not shown.
fn oauth_error(body: &[u8]) -> Option<TokenError> {
    #[derive(Deserialize)]
    struct OAuthError {
        error: String,
        #[serde(default)]
        error_description: Option<String>,
    }
    let allowed = |text: &str, max: usize| {
        !text.is_empty()
            && text.len() <= max
            && text
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\')
    };
    let parsed: OAuthError = serde_json::from_slice(body).ok()?;
    if !allowed(&parsed.error, 64) || parsed.error.contains(' ') {
        return None;
    }
    Some(TokenError::Refused {
        error: parsed.error,
        description: parsed.error_description.filter(|d| allowed(d, 300)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(methods: &[&str]) -> AuthorizationServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://auth.example.com",
            "token_endpoint_auth_methods_supported": methods,
        }))
        .unwrap()
    }

    fn client(secret: Option<&str>) -> ClientIdentity {
        ClientIdentity::new("https://auth.example.com", "c", secret.map(str::to_owned))
    }

    #[test]
    fn the_method_is_the_one_the_server_lists() {
        assert_eq!(
            auth_method(&server(&[]), &client(Some("s"))),
            AuthMethod::Basic
        );
        assert_eq!(
            auth_method(&server(&["client_secret_post"]), &client(Some("s"))),
            AuthMethod::Post
        );
        assert_eq!(
            auth_method(
                &server(&["client_secret_post", "client_secret_basic"]),
                &client(Some("s"))
            ),
            AuthMethod::Basic
        );
        assert_eq!(
            auth_method(&server(&["client_secret_basic"]), &client(None)),
            AuthMethod::None
        );
    }

    #[test]
    fn only_a_well_formed_oauth_error_is_repeated() {
        let read = |body: serde_json::Value| oauth_error(body.to_string().as_bytes());
        assert_eq!(
            read(json!({"error": "invalid_grant", "error_description": "expired"})),
            Some(TokenError::Refused {
                error: "invalid_grant".into(),
                description: Some("expired".into())
            })
        );
        // A description out of the RFC's characters is left out; a code out of them, or a
        // body that is no OAuth error, is not an OAuth error at all.
        assert_eq!(
            read(json!({"error": "invalid_grant", "error_description": "line\nbreak \"q\""})),
            Some(TokenError::Refused {
                error: "invalid_grant".into(),
                description: None
            })
        );
        for body in [
            json!({"error": "two words"}),
            json!({"error": "x".repeat(65)}),
            json!({"error": "é"}),
            json!({"error": ""}),
            json!({"error": 1}),
            json!({"message": "invalid_grant"}),
        ] {
            assert_eq!(read(body.clone()), None, "{body}");
        }
        assert_eq!(oauth_error(b"<html>"), None);
    }

    #[tokio::test]
    async fn an_identity_is_never_used_at_another_server() {
        let mut other = client(None);
        other.issuer = "https://other.example.com".into();
        let refused = refresh(
            &AuthHttp::new("https://mcp"),
            &server(&[]),
            &other,
            "r",
            "https://mcp",
        )
        .await;
        assert!(
            matches!(refused, Err(TokenError::OtherIssuer { .. })),
            "{refused:?}"
        );
    }
}
