//! The HTTP transport as an OAuth 2.1 resource server (A-01…A-07), off unless
//! [`super::HttpConfig::oauth`] turns it on: Protected Resource Metadata at its well-known URIs
//! a 401 challenge for every MCP request without a usable token, JWT access
//! tokens verified by [`toolwire_auth::JwtVerifier`], and the token's principal and scopes
//! handed to the request. Tokens are read, never forwarded.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use toolwire_auth::{
    Algorithm, Challenge, JwtConfig, JwtVerifier, ProtectedResourceMetadata, TokenError,
    bearer_token, metadata_paths,
};
use toolwire_protocol::{ErrorObject, RequestId};

use super::Refusal;

/// Settings of the resource server: the issuer whose tokens are accepted and the canonical URI
/// of this MCP endpoint (the `resource` clients ask tokens for, RFC 8707).
#[derive(Debug, Clone)]
pub struct OAuth {
    jwt: JwtConfig,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
    resource_name: Option<String>,
}

impl OAuth {
    /// Accepts JWT access tokens of `issuer` (exactly this string) for `resource` (this
    /// endpoint's canonical URI, e.g. `https://mcp.example.com/mcp`). The issuer's keys are
    /// found through its RFC 8414 or OpenID metadata unless [`OAuth::jwks_uri`] names them.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        OAuth {
            jwt: JwtConfig::new(issuer, resource),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            resource_name: None,
        }
    }

    /// The issuer's JWKS URL.
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwt = self.jwt.jwks_uri(uri);
        self
    }

    /// The scopes listed in the metadata (`scopes_supported`).
    pub fn scopes_supported<S: Into<String>>(
        mut self,
        scopes: impl IntoIterator<Item = S>,
    ) -> Self {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Scopes every request needs, whatever it asks for; named in the 401 challenge.
    pub fn required_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.required_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The accepted signature algorithms (default: every asymmetric one; HMAC never).
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = Algorithm>) -> Self {
        self.jwt = self.jwt.algorithms(algorithms);
        self
    }

    /// How far `exp` and `nbf` may be off (default 60 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.jwt = self.jwt.leeway(leeway);
        self
    }

    /// The least time between two JWKS fetches caused by unknown key ids (default 10 s).
    pub fn min_refresh_interval(mut self, interval: Duration) -> Self {
        self.jwt = self.jwt.min_refresh_interval(interval);
        self
    }

    /// A human-readable name in the metadata.
    pub fn resource_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = Some(name.into());
        self
    }
}

/// Who is calling: the principal and, with OAuth, the granted scopes.
#[derive(Debug, Clone, Default)]
pub(super) struct Caller {
    pub(super) principal: Option<String>,
    pub(super) scopes: Option<Arc<[String]>>,
}

/// The resource server of one router.
pub(super) struct Guard {
    verifier: JwtVerifier,
    /// The metadata document, serialized once.
    metadata: String,
    /// Where clients read it (absolute, for `resource_metadata`).
    metadata_url: String,
    /// The well-known paths it is served at.
    pub(super) paths: Vec<String>,
    required: Vec<String>,
    /// The `scope` of a 401: the required scopes, else every scope supported.
    challenge_scope: Option<String>,
}

impl Guard {
    pub(super) fn new(oauth: OAuth) -> Guard {
        let resource = oauth.jwt.resource().to_owned();
        let (origin, path) = split_origin(&resource);
        let paths = metadata_paths(if path.is_empty() { "/" } else { path });
        let metadata_url = format!("{origin}{}", paths[0]);
        let mut metadata = ProtectedResourceMetadata::new(
            resource.clone(),
            oauth.jwt.issuer(),
            oauth.scopes_supported.clone(),
        );
        metadata.resource_name = oauth.resource_name;
        let metadata = serde_json::to_string(&metadata).unwrap_or_default();
        let scopes = if oauth.required_scopes.is_empty() {
            &oauth.scopes_supported
        } else {
            &oauth.required_scopes
        };
        Guard {
            challenge_scope: (!scopes.is_empty()).then(|| scopes.join(" ")),
            required: oauth.required_scopes,
            verifier: JwtVerifier::new(oauth.jwt),
            metadata,
            metadata_url,
            paths,
        }
    }

    /// The metadata document.
    pub(super) fn metadata_response(&self) -> Response {
        let mut response = Response::new(Body::from(self.metadata.clone()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }

    /// The caller of a request, or the refusal: 400 for a token in the query string, 401 with
    /// a challenge without a usable token, 403 without the required scopes, 503 when the
    /// issuer's keys cannot be had.
    pub(super) async fn admit(&self, uri: &Uri, headers: &HeaderMap) -> Result<Caller, Refusal> {
        if uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p.starts_with("access_token=")))
        {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                None,
                ErrorObject::invalid_request(
                    "access tokens go in the Authorization header, never in the URL",
                ),
            );
            return Err(refusal.with_challenge(self.challenge(
                Some("invalid_request"),
                None,
                None,
            )));
        }
        let authorization = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or("\u{0}"));
        let token = match bearer_token(authorization) {
            Ok(Some(token)) => token,
            Ok(None) => return Err(self.unauthorized(None, "an access token is required")),
            Err(e) => return Err(self.unauthorized(Some("invalid_token"), &e.to_string())),
        };
        let verified = match self.verifier.verify(token).await {
            Ok(verified) => verified,
            Err(TokenError::Unavailable(why)) => {
                tracing::warn!(%why, "cannot verify access tokens");
                let error = ErrorObject::internal("cannot verify access tokens right now");
                return Err(Refusal::new(StatusCode::SERVICE_UNAVAILABLE, None, error));
            }
            Err(e) => {
                tracing::debug!(error = %e, "access token refused");
                return Err(self.unauthorized(Some("invalid_token"), &e.to_string()));
            }
        };
        if !verified.has_scopes(self.required.iter().map(String::as_str)) {
            return Err(self.insufficient_scope(&verified.scopes, &self.required, None));
        }
        Ok(Caller {
            principal: Some(verified.principal()),
            scopes: Some(verified.scopes.into()),
        })
    }

    fn unauthorized(&self, error: Option<&'static str>, why: &str) -> Refusal {
        let refusal = Refusal::new(
            StatusCode::UNAUTHORIZED,
            None,
            ErrorObject::invalid_request(format!("unauthorized: {why}")),
        );
        let description = error.map(|_| why.to_owned());
        refusal.with_challenge(self.challenge(error, self.challenge_scope.clone(), description))
    }

    /// 403 `insufficient_scope` naming every scope needed: those granted plus those missing,
    /// so that a client stepping up keeps what it had.
    pub(super) fn insufficient_scope(
        &self,
        granted: &[String],
        needed: &[String],
        id: Option<&RequestId>,
    ) -> Refusal {
        let mut all: Vec<String> = granted.to_vec();
        for scope in needed {
            if !all.contains(scope) {
                all.push(scope.clone());
            }
        }
        let missing: Vec<&str> = needed
            .iter()
            .filter(|s| !granted.contains(s))
            .map(String::as_str)
            .collect();
        let why = format!("insufficient scope: needs {}", missing.join(" "));
        let refusal = Refusal::new(
            StatusCode::FORBIDDEN,
            id,
            ErrorObject::invalid_request(&why),
        );
        refusal.with_challenge(self.challenge(
            Some("insufficient_scope"),
            Some(all.join(" ")),
            Some(why),
        ))
    }

    fn challenge(
        &self,
        error: Option<&'static str>,
        scope: Option<String>,
        description: Option<String>,
    ) -> HeaderValue {
        let challenge = Challenge {
            resource_metadata: self.metadata_url.clone(),
            scope,
            error,
            description,
        };
        HeaderValue::from_str(&challenge.header_value())
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

/// `scheme://host[:port]` and the path of a URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_follows_the_resource() {
        let guard = Guard::new(
            OAuth::new("https://id.example.com", "https://mcp.example.com/mcp")
                .scopes_supported(["math", "tools:read"]),
        );
        assert_eq!(
            guard.metadata_url,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            guard.paths,
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(guard.challenge_scope.as_deref(), Some("math tools:read"));
        let metadata: serde_json::Value = serde_json::from_str(&guard.metadata).unwrap();
        assert_eq!(metadata["resource"], "https://mcp.example.com/mcp");
        assert_eq!(
            metadata["authorization_servers"][0],
            "https://id.example.com"
        );
        assert_eq!(
            metadata["bearer_methods_supported"],
            serde_json::json!(["header"])
        );
    }

    #[test]
    fn insufficient_scope_names_everything_needed() {
        let guard = Guard::new(OAuth::new("https://id", "https://mcp/mcp"));
        let refusal = guard.insufficient_scope(
            &["tools:read".to_owned()],
            &["math".to_owned(), "tools:read".to_owned()],
            None,
        );
        assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        let challenge = refusal.challenge.unwrap();
        let challenge = challenge.to_str().unwrap();
        assert!(
            challenge.contains("scope=\"tools:read math\""),
            "{challenge}"
        );
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
    }
}
