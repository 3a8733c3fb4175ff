//! The HTTP transport as an OAuth 2.1 resource server (A-01…A-07), off unless
//! [`super::HttpConfig::oauth`] turns it on: Protected Resource Metadata at its well-known URIs
//! a 401 challenge for every MCP request without a usable token, JWT access
//! tokens verified by [`toolwire_auth::JwtVerifier`] and opaque ones, optionally, by RFC 7662
//! introspection ([`toolwire_auth::Introspector`]), and the token's principal and scopes
//! handed to the request. Tokens are read, never forwarded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use toolwire_auth::{
    Algorithm, Challenge, IntrospectionConfig, Introspector, JwtConfig, JwtVerifier,
    ProtectedResourceMetadata, TokenError, TokenVerifier, Verifiers, bearer_token, metadata_paths,
    split_origin,
};
use toolwire_protocol::{ErrorObject, RequestId};

use super::Refusal;

/// Settings of the resource server: the issuer whose tokens are accepted and the canonical URI
/// of this MCP endpoint (the `resource` clients ask tokens for, RFC 8707).
#[derive(Clone)]
pub struct OAuth {
    jwt: JwtConfig,
    introspection: Option<Introspection>,
    custom: Option<Arc<dyn TokenVerifier>>,
    leeway: Duration,
    scopes_supported: Vec<String>,
    required_scopes: Vec<String>,
    implied: HashMap<String, Vec<String>>,
    resource_name: Option<String>,
    token_to_handlers: bool,
}

/// How opaque tokens are introspected (RFC 7662).
#[derive(Clone)]
struct Introspection {
    client_id: String,
    client_secret: String,
    endpoint: Option<String>,
    cache_for: Option<Duration>,
    everything: bool,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No secret is printed.
        f.debug_struct("OAuth")
            .field("jwt", &self.jwt)
            .field(
                "introspection",
                &self
                    .introspection
                    .as_ref()
                    .map(|i| (&i.client_id, &i.endpoint, i.everything)),
            )
            .field("custom_verifier", &self.custom.is_some())
            .field("scopes_supported", &self.scopes_supported)
            .field("required_scopes", &self.required_scopes)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// Accepts JWT access tokens of `issuer` (exactly this string) for `resource` (this
    /// endpoint's canonical URI, e.g. `https://mcp.example.com/mcp`). The issuer's keys are
    /// found through its RFC 8414 or OpenID metadata unless [`OAuth::jwks_uri`] names them.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> Self {
        OAuth {
            jwt: JwtConfig::new(issuer, resource),
            introspection: None,
            custom: None,
            leeway: Duration::from_secs(60),
            scopes_supported: Vec::new(),
            required_scopes: Vec::new(),
            implied: HashMap::new(),
            resource_name: None,
            token_to_handlers: false,
        }
    }

    /// Hands each caller's verified access token to the handlers
    /// ([`RequestContext::access_token`](crate::RequestContext::access_token)): for a relay
    /// that exchanges it for a token of its own (RFC 8693) and never sends it on. Off by
    /// default: a handler has no use for the token otherwise.
    pub fn token_to_handlers(mut self) -> Self {
        self.token_to_handlers = true;
        self
    }

    /// The issuer's JWKS URL.
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwt = self.jwt.jwks_uri(uri);
        self
    }

    /// Accepts opaque access tokens too, verified by asking the issuer (RFC 7662 introspection)
    /// with this resource server's own client credentials; JWTs are still verified locally.
    /// The endpoint is the issuer's `introspection_endpoint` unless
    /// [`OAuth::introspection_endpoint`] names it.
    pub fn introspection(
        mut self,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        self.introspection = Some(Introspection {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            endpoint: None,
            cache_for: None,
            everything: false,
        });
        self
    }

    /// The introspection endpoint (with [`OAuth::introspection`]).
    pub fn introspection_endpoint(mut self, url: impl Into<String>) -> Self {
        if let Some(introspection) = &mut self.introspection {
            introspection.endpoint = Some(url.into());
        }
        self
    }

    /// The longest an introspection answer is trusted (default 60 s), which is the longest a
    /// revoked token keeps working (with [`OAuth::introspection`]).
    pub fn introspection_cache(mut self, duration: Duration) -> Self {
        if let Some(introspection) = &mut self.introspection {
            introspection.cache_for = Some(duration);
        }
        self
    }

    /// Introspects JWTs as well (with [`OAuth::introspection`]), so that a revoked JWT is
    /// refused once the issuer says so; costs a call to the issuer per token and cache period.
    pub fn introspect_all_tokens(mut self) -> Self {
        if let Some(introspection) = &mut self.introspection {
            introspection.everything = true;
        }
        self
    }

    /// Verifies tokens with `verifier` instead (the issuer and resource still make the
    /// metadata and challenges): for a token format or a shared cache of your own.
    pub fn verifier(mut self, verifier: Arc<dyn TokenVerifier>) -> Self {
        self.custom = Some(verifier);
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

    /// A scope hierarchy: a token granted `broader` also holds each of `narrower` (and what
    /// they imply in turn), e.g. `scope_implies("files", ["files:read", "files:write"])`.
    /// Checked wherever scopes are (A-07: servers account for scope hierarchies).
    pub fn scope_implies<S: Into<String>>(
        mut self,
        broader: impl Into<String>,
        narrower: impl IntoIterator<Item = S>,
    ) -> Self {
        self.implied
            .entry(broader.into())
            .or_default()
            .extend(narrower.into_iter().map(Into::into));
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
        self.leeway = leeway;
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

/// Who is calling: the principal and, with OAuth, the granted scopes; and from where.
#[derive(Debug, Clone, Default)]
pub(super) struct Caller {
    pub(super) principal: Option<Arc<str>>,
    pub(super) scopes: Option<Arc<[String]>>,
    /// Every claim of the caller's access token, shared with the cached token.
    pub(super) claims: Option<crate::request::context::Claims>,
    /// The access token itself, when handlers are to have it.
    pub(super) token: Option<crate::request::context::AccessToken>,
    /// The client's address, for rate limits when there is no principal.
    pub(super) address: Option<crate::safety::limits::ClientId>,
}

/// The resource server of one router.
pub(super) struct Guard {
    verifier: Arc<dyn TokenVerifier>,
    /// The metadata document, serialized once.
    metadata: String,
    /// Where clients read it (absolute, for `resource_metadata`).
    metadata_url: String,
    /// The well-known paths it is served at.
    pub(super) paths: Vec<String>,
    required: Vec<String>,
    /// The scope hierarchy: what each scope implies.
    implied: HashMap<String, Vec<String>>,
    /// The `scope` of a 401: the required scopes, else every scope supported.
    challenge_scope: Option<String>,
    token_to_handlers: bool,
}

impl Guard {
    pub(super) fn new(oauth: OAuth) -> Guard {
        // Refresh tokens are not a resource requirement: `offline_access` is neither advertised
        // nor challenged for.
        let mut oauth = oauth;
        for scopes in [&mut oauth.scopes_supported, &mut oauth.required_scopes] {
            if scopes.iter().any(|s| s == OFFLINE_ACCESS) {
                tracing::warn!(
                    "offline_access is not a resource scope: left out of the metadata and challenges"
                );
                scopes.retain(|s| s != OFFLINE_ACCESS);
            }
        }
        let resource = oauth.jwt.resource().to_owned();
        let (origin, path) = split_origin(&resource);
        let paths = metadata_paths(if path.is_empty() { "/" } else { path });
        let metadata_url = format!("{origin}{}", paths[0]);
        let mut metadata = ProtectedResourceMetadata::new(
            resource.clone(),
            oauth.jwt.issuer(),
            oauth.scopes_supported.clone(),
        );
        metadata.resource_name = oauth.resource_name.clone();
        let metadata = serde_json::to_string(&metadata).unwrap_or_default();
        let scopes = if oauth.required_scopes.is_empty() {
            &oauth.scopes_supported
        } else {
            &oauth.required_scopes
        };
        let challenge_scope = (!scopes.is_empty()).then(|| scopes.join(" "));
        Guard {
            token_to_handlers: oauth.token_to_handlers,
            challenge_scope,
            verifier: verifier(&oauth),
            required: oauth.required_scopes,
            implied: oauth.implied,
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
        // Shared with the cached token: nothing is allocated per request, unless a scope
        // hierarchy adds the scopes the granted ones imply.
        let scopes = if self.implied.is_empty() {
            verified.scopes.clone()
        } else {
            expand(&verified.scopes, &self.implied)
        };
        if !self.required.iter().all(|s| scopes.contains(s)) {
            return Err(self.insufficient_scope(&[], None));
        }
        Ok(Caller {
            principal: Some(verified.principal.clone()),
            scopes: Some(scopes),
            claims: Some(verified.claims.clone()),
            token: self
                .token_to_handlers
                .then(|| crate::request::context::AccessToken(token.into())),
            address: None,
        })
    }

    /// 403 when the caller's scopes do not cover what the request addresses: a tool, prompt,
    /// resource or task (A-07, T-21).
    pub(super) fn check_scopes(
        &self,
        server: &crate::Server,
        route: &crate::request::route::Route,
        granted: &[String],
        id: &RequestId,
    ) -> Result<(), Refusal> {
        let needed = server.needed_scopes(route);
        if needed.iter().all(|s| granted.contains(s)) {
            Ok(())
        } else {
            Err(self.insufficient_scope(&needed, Some(id)))
        }
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

    /// 403 `insufficient_scope` naming every scope the operation needs: the scopes every
    /// request needs and those of what it addresses, all in one challenge. Granted
    /// scopes it does not need are not named: accumulating them is the client's part.
    pub(super) fn insufficient_scope(
        &self,
        operation: &[String],
        id: Option<&RequestId>,
    ) -> Refusal {
        let mut needed: Vec<&str> = self.required.iter().map(String::as_str).collect();
        for scope in operation {
            if !needed.contains(&scope.as_str()) {
                needed.push(scope);
            }
        }
        let needed = needed.join(" ");
        let why = format!("insufficient scope: this needs {needed}");
        let refusal = Refusal::new(
            StatusCode::FORBIDDEN,
            id,
            ErrorObject::invalid_request(&why),
        );
        refusal.with_challenge(self.challenge(Some("insufficient_scope"), Some(needed), Some(why)))
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

const OFFLINE_ACCESS: &str = "offline_access";

/// `granted` with every scope it implies, transitively.
fn expand(granted: &[String], implied: &HashMap<String, Vec<String>>) -> Arc<[String]> {
    let mut all: Vec<String> = granted.to_vec();
    let mut next = 0;
    while next < all.len() {
        if let Some(narrower) = implied.get(&all[next]) {
            for scope in narrower {
                if !all.contains(scope) {
                    all.push(scope.clone());
                }
            }
        }
        next += 1;
    }
    all.into()
}

/// The verifier `oauth` asks for: a custom one, JWTs only, JWTs and introspection, or
/// introspection only.
fn verifier(oauth: &OAuth) -> Arc<dyn TokenVerifier> {
    if let Some(custom) = &oauth.custom {
        return custom.clone();
    }
    let jwt = JwtVerifier::new(oauth.jwt.clone());
    let Some(introspection) = &oauth.introspection else {
        return Arc::new(jwt);
    };
    let mut config = IntrospectionConfig::new(
        oauth.jwt.issuer(),
        oauth.jwt.resource(),
        introspection.client_id.clone(),
        introspection.client_secret.clone(),
    )
    .leeway(oauth.leeway);
    if let Some(endpoint) = &introspection.endpoint {
        config = config.endpoint(endpoint.clone());
    }
    if let Some(cache_for) = introspection.cache_for {
        config = config.cache_for(cache_for);
    }
    let introspector = Introspector::new(config);
    if introspection.everything {
        Arc::new(Verifiers::introspect_everything(introspector))
    } else {
        Arc::new(Verifiers::new(jwt, introspector))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_follows_the_resource() {
        let guard =
            Guard::new(
                OAuth::new("https://id.example.com", "https://mcp.example.com/mcp")
                    .scopes_supported(["math", "tools:read", "offline_access"]),
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
        assert!(!guard.metadata.contains("offline_access"), "A-04");
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
    fn insufficient_scope_names_everything_the_operation_needs() {
        let guard = Guard::new(
            OAuth::new("https://id", "https://mcp/mcp").required_scopes(["mcp", "offline_access"]),
        );
        let refusal = guard.insufficient_scope(&["math".to_owned(), "mcp".to_owned()], None);
        assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        let challenge = refusal.challenge.unwrap();
        let challenge = challenge.to_str().unwrap();
        assert!(challenge.contains("scope=\"mcp math\""), "{challenge}");
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
    }
}

#[cfg(test)]
mod hierarchy_tests {
    use super::*;

    #[test]
    fn broader_scopes_imply_narrower_ones_transitively() {
        let implied = HashMap::from([
            (
                "admin".to_owned(),
                vec!["files".to_owned(), "math".to_owned()],
            ),
            (
                "files".to_owned(),
                vec!["files:read".to_owned(), "files:write".to_owned()],
            ),
        ]);
        let all = expand(&["admin".to_owned()], &implied);
        assert_eq!(
            &*all,
            ["admin", "files", "math", "files:read", "files:write"]
        );
        let narrow = expand(&["files:read".to_owned()], &implied);
        assert_eq!(&*narrow, ["files:read"], "narrower never implies broader");
    }
}
