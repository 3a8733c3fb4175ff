//! OAuth 2.1 resource-server pieces for MCP servers (2026-07-28 authorization, A-01…A-07):
//! RFC 9728 Protected Resource Metadata, Bearer credentials and `WWW-Authenticate` challenges,
//! [`JwtVerifier`], which verifies RFC 9068 JWT access tokens against the issuer's JWKS, and
//! [`Introspector`], which asks the issuer about opaque tokens (RFC 7662). Both implement
//! [`TokenVerifier`], as can a verifier of your own; [`Verifiers`] puts the two together.
//!
//! The transports use these to refuse a request before any of the server's code sees it; a
//! verified token becomes the caller's principal (issuer and subject) and scopes.
//!
//! ```
//! use toolwire_auth::{Challenge, ProtectedResourceMetadata, metadata_paths};
//!
//! let prm = ProtectedResourceMetadata::new("https://mcp.example.com/mcp", "https://id.example.com", vec!["math".into()]);
//! assert_eq!(metadata_paths("/mcp")[0], "/.well-known/oauth-protected-resource/mcp");
//! let challenge = Challenge {
//!     resource_metadata: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp".into(),
//!     scope: Some("math".into()),
//!     error: None,
//!     description: None,
//! };
//! assert!(challenge.header_value().starts_with("Bearer resource_metadata=\""));
//! # let _ = prm;
//! ```

#![warn(missing_docs)]

mod cache;
mod challenge;
mod discovery;
mod introspect;
mod jwt;

/// Entry points for the fuzz targets in `fuzz/`; built only with the `fuzzing` feature, not a
/// stable API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    /// JWT headers and claims, as verification reads them.
    pub fn jwt(data: &[u8]) {
        crate::jwt::fuzz_jwt(data)
    }
}

use std::sync::Arc;

use futures::future::BoxFuture;

pub use challenge::{Challenge, ProtectedResourceMetadata, bearer_token, metadata_paths};
pub use discovery::split_origin;
pub use introspect::{IntrospectionConfig, Introspector};
pub use jsonwebtoken::Algorithm;
pub use jwt::{Clock, DEFAULT_ALGORITHMS, JwtConfig, JwtVerifier};

/// What a verified access token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifiedToken {
    /// The issuer (`iss`), as configured.
    pub issuer: String,
    /// The subject (`sub`): the user, or the client for a client-credentials token.
    pub subject: String,
    /// The caller's principal: issuer and subject (`"{issuer} {subject}"`), so that subjects of
    /// two issuers never meet. Shared, so that handing it to a request allocates nothing.
    pub principal: Arc<str>,
    /// The client the token was issued to (`client_id`).
    pub client_id: Option<String>,
    /// The granted scopes (`scope`, space-separated).
    pub scopes: Arc<[String]>,
    /// The audiences (`aud`).
    pub audiences: Vec<String>,
    /// When it expires (`exp`), in Unix seconds; `None` when the issuer did not say
    /// (introspection may omit it).
    pub expires_at: Option<u64>,
    /// Its id (`jti`).
    pub token_id: Option<String>,
    /// Every claim the token carries (a JWT's payload, or the introspection answer), for
    /// rules over claims this type does not name (`tenant`, `groups`). Empty unless the
    /// verifier filled it.
    pub claims: Arc<serde_json::Map<String, serde_json::Value>>,
}

impl VerifiedToken {
    /// A token of `issuer` for `subject` with `scopes`; the other fields are empty.
    pub fn new(
        issuer: impl Into<String>,
        subject: impl Into<String>,
        scopes: impl Into<Arc<[String]>>,
    ) -> Self {
        let issuer = issuer.into();
        let subject = subject.into();
        VerifiedToken {
            principal: format!("{issuer} {subject}").into(),
            issuer,
            subject,
            client_id: None,
            scopes: scopes.into(),
            audiences: Vec::new(),
            expires_at: None,
            token_id: None,
            claims: Arc::default(),
        }
    }

    /// The caller's principal: issuer and subject.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// Whether every scope in `needed` was granted.
    pub fn has_scopes<'a>(&self, needed: impl IntoIterator<Item = &'a str>) -> bool {
        needed
            .into_iter()
            .all(|scope| self.scopes.iter().any(|s| s == scope))
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The credential is not a well-formed Bearer token (401, `invalid_token`).
    #[error("malformed token: {0}")]
    Malformed(String),
    /// The token is not valid here: signature, issuer, audience, time, algorithm, key, or the
    /// issuer says it is not active (401, `invalid_token`).
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The issuer's keys, metadata or introspection endpoint cannot be had right now: the token
    /// may be fine (503).
    #[error("cannot verify tokens now: {0}")]
    Unavailable(String),
}

/// Something that turns an access token into its bearer's identity and scopes: the resource
/// server's one question. Implemented by [`JwtVerifier`], [`Introspector`] and [`Verifiers`];
/// implement it to verify tokens another way (a shared cache, another token format).
pub trait TokenVerifier: Send + Sync + 'static {
    /// The token's bearer, or why the token is refused.
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>>;
}

/// JWTs verified locally and opaque tokens introspected: a token that parses as a JWT goes to
/// the [`JwtVerifier`], any other to the [`Introspector`]. With
/// [`Verifiers::introspect_everything`], every token is introspected, so that a revoked JWT is
/// refused as soon as the issuer says so (at the price of one call per token and cache period).
pub struct Verifiers {
    jwt: Option<JwtVerifier>,
    introspector: Option<Introspector>,
}

impl Verifiers {
    /// JWTs through `jwt`, opaque tokens through `introspector`.
    pub fn new(jwt: JwtVerifier, introspector: Introspector) -> Self {
        Verifiers {
            jwt: Some(jwt),
            introspector: Some(introspector),
        }
    }

    /// Every token through `introspector`.
    pub fn introspect_everything(introspector: Introspector) -> Self {
        Verifiers {
            jwt: None,
            introspector: Some(introspector),
        }
    }
}

/// Whether a token is shaped like a JWT: three dot-separated parts and a header that parses.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && jsonwebtoken::decode_header(token).is_ok()
}

impl TokenVerifier for Verifiers {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Arc<VerifiedToken>, TokenError>> {
        match (&self.jwt, &self.introspector) {
            (Some(jwt), _) if looks_like_jwt(token) => Box::pin(jwt.verify(token)),
            (_, Some(introspector)) => Box::pin(introspector.verify(token)),
            (Some(jwt), None) => Box::pin(jwt.verify(token)),
            (None, None) => Box::pin(async {
                Err(TokenError::Unavailable(
                    "no token verifier configured".into(),
                ))
            }),
        }
    }
}
