//! OAuth 2.1 resource-server pieces for MCP servers (2026-07-28 authorization, A-01…A-07):
//! RFC 9728 Protected Resource Metadata, Bearer credentials and `WWW-Authenticate` challenges,
//! and [`JwtVerifier`], which verifies RFC 9068 JWT access tokens against the issuer's JWKS.
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

mod challenge;
mod jwt;

pub use challenge::{Challenge, ProtectedResourceMetadata, bearer_token, metadata_paths};
pub use jsonwebtoken::Algorithm;
pub use jwt::{Clock, DEFAULT_ALGORITHMS, JwtConfig, JwtVerifier};

/// What a verified access token says about its bearer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// The issuer (`iss`), as configured.
    pub issuer: String,
    /// The subject (`sub`): the user, or the client for a client-credentials token.
    pub subject: String,
    /// The client the token was issued to (`client_id`).
    pub client_id: Option<String>,
    /// The granted scopes (`scope`, space-separated).
    pub scopes: Vec<String>,
    /// The audiences (`aud`).
    pub audiences: Vec<String>,
    /// When it expires (`exp`), in Unix seconds.
    pub expires_at: u64,
    /// Its id (`jti`).
    pub token_id: Option<String>,
}

impl VerifiedToken {
    /// The caller's principal: issuer and subject, so that subjects of two issuers never meet.
    pub fn principal(&self) -> String {
        format!("{} {}", self.issuer, self.subject)
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
    /// The token is not valid here: signature, issuer, audience, time, algorithm or key (401,
    /// `invalid_token`).
    #[error("invalid token: {0}")]
    Invalid(String),
    /// The issuer's keys or metadata cannot be had right now: the token may be fine (503).
    #[error("cannot verify tokens now: {0}")]
    Unavailable(String),
}
