//! The authorization request and its answer, as pure functions: PKCE with S256 (A-12), the
//! authorization URL with `resource` exactly as the resource metadata gives it (A-13) and a
//! `state`, the redirect read back — `state` checked, and `iss` checked per RFC 9207 before
//! anything else in it is believed (A-14) — and the scope to ask for (A-16).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

use super::challenge::Challenge;
use super::discovery::{AuthorizationServerMetadata, ResourceMetadata};
use super::http::{UrlError, check_authorization_endpoint};

/// A PKCE pair (RFC 7636): the verifier stays with the client, the challenge goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkce {
    /// 43 characters of base64url from 32 random bytes.
    pub verifier: String,
    /// `BASE64URL(SHA-256(verifier))`, sent with `code_challenge_method=S256`.
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair.
    pub fn new() -> Pkce {
        Pkce::from_verifier(random_token())
    }

    /// The pair of a given verifier.
    pub fn from_verifier(verifier: String) -> Pkce {
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Pkce {
            verifier,
            challenge,
        }
    }
}

impl Default for Pkce {
    fn default() -> Self {
        Pkce::new()
    }
}

/// 32 random bytes as base64url: a PKCE verifier or a `state`.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Why an authorization cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorizationError {
    /// The server offers no PKCE with S256 (A-12): the flow is refused.
    #[error("the authorization server {0} does not offer PKCE with S256")]
    NoPkce(String),
    /// The server has no authorization endpoint.
    #[error("the authorization server {0} has no authorization endpoint")]
    NoEndpoint(String),
    /// The authorization endpoint is not one to open in a browser: not `https:` (nor `http:`
    /// on this machine), or a link-local address, or with a user name in it.
    #[error("refused the authorization server's authorization endpoint: {0}")]
    RefusedEndpoint(UrlError),
    /// The redirect is not a URL.
    #[error("the redirect is not a URL: {0}")]
    BadRedirect(String),
    /// The redirect's `state` is not the one sent (a forged or replayed response).
    #[error("the redirect's state does not match the request's")]
    WrongState,
    /// The redirect's `iss` is wrong, or missing though the server promises it (RFC 9207):
    /// the response may come from another server; nothing in it is used.
    #[error("the redirect's issuer {found:?} is not {expected:?} (RFC 9207)")]
    WrongIssuer {
        /// The issuer the request went to.
        expected: String,
        /// What the redirect said (`None`: nothing).
        found: Option<String>,
    },
    /// The server refused: its `error` and `error_description`.
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The OAuth error code.
        error: String,
        /// Its description, if any.
        description: Option<String>,
    },
    /// A redirect with neither a code nor an error.
    #[error("the redirect has no code")]
    NoCode,
}

/// What one authorization request asks for, besides the servers it goes to: named, so that
/// none of its strings can be passed in another's place.
#[derive(Debug, Clone, Copy)]
pub struct AuthorizationRequest<'a> {
    /// The client's id at the authorization server.
    pub client_id: &'a str,
    /// Where the browser comes back to.
    pub redirect_uri: &'a str,
    /// The scope to ask for, if any.
    pub scope: Option<&'a str>,
    /// The `state` the redirect must carry back.
    pub state: &'a str,
    /// The PKCE pair whose challenge is sent.
    pub pkce: &'a Pkce,
}

/// The authorization URL for a code with PKCE S256 (A-12), `state`, and `resource` exactly as
/// the resource metadata names it (A-13); `scope` when there is one to ask for. Only on an
/// endpoint a browser may be sent to ([`check_authorization_endpoint`]): never `file:`,
/// `javascript:` or plain `http:` to another machine.
pub fn authorization_url(
    server: &AuthorizationServerMetadata,
    resource: &ResourceMetadata,
    request: &AuthorizationRequest<'_>,
) -> Result<String, AuthorizationError> {
    let AuthorizationRequest {
        client_id,
        redirect_uri,
        scope,
        state,
        pkce,
    } = *request;
    if !server.supports_s256() {
        return Err(AuthorizationError::NoPkce(server.issuer.clone()));
    }
    let endpoint = server
        .authorization_endpoint
        .as_deref()
        .ok_or_else(|| AuthorizationError::NoEndpoint(server.issuer.clone()))?;
    check_authorization_endpoint(endpoint).map_err(AuthorizationError::RefusedEndpoint)?;
    let mut url = url::Url::parse(endpoint)
        .map_err(|e| AuthorizationError::NoEndpoint(format!("{} ({e})", server.issuer)))?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state)
            .append_pair("resource", &resource.resource);
        if let Some(scope) = scope {
            query.append_pair("scope", scope);
        }
    }
    Ok(url.into())
}

/// The code of the redirect the authorization ended with: its `iss` checked first (an
/// authorization response from another server is not believed, not even its error), then its
/// `state`, then its error or code.
pub fn read_redirect(
    redirect: &str,
    server: &AuthorizationServerMetadata,
    state: &str,
) -> Result<String, AuthorizationError> {
    let url =
        url::Url::parse(redirect).map_err(|e| AuthorizationError::BadRedirect(e.to_string()))?;
    let get = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let iss = get("iss");
    let issuer_ok = match &iss {
        Some(iss) => *iss == server.issuer,
        None => !server.authorization_response_iss_parameter_supported,
    };
    if !issuer_ok {
        return Err(AuthorizationError::WrongIssuer {
            expected: server.issuer.clone(),
            found: iss,
        });
    }
    if get("state").as_deref() != Some(state) {
        return Err(AuthorizationError::WrongState);
    }
    if let Some(error) = get("error") {
        return Err(AuthorizationError::Refused {
            error,
            description: get("error_description"),
        });
    }
    get("code").ok_or(AuthorizationError::NoCode)
}

/// The scope to ask for first (A-16): the challenge's (authoritative), else every scope the
/// resource lists, else none.
pub fn initial_scope(challenge: Option<&Challenge>, resource: &ResourceMetadata) -> Option<String> {
    if let Some(scope) = challenge
        .and_then(Challenge::scope)
        .filter(|s| !s.trim().is_empty())
    {
        return Some(scope.trim().to_owned());
    }
    (!resource.scopes_supported.is_empty()).then(|| resource.scopes_supported.join(" "))
}

/// The scope for a step-up after a 403 `insufficient_scope` (A-16): what was granted and what
/// the challenge asks for, each scope once, in order.
pub fn step_up_scope(granted: Option<&str>, challenged: &str) -> String {
    let mut scopes: Vec<&str> = Vec::new();
    for scope in granted
        .unwrap_or("")
        .split_whitespace()
        .chain(challenged.split_whitespace())
    {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(iss_supported: bool) -> AuthorizationServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://auth.example.com/tenant1",
            "authorization_endpoint": "https://auth.example.com/tenant1/authorize?prompt=consent",
            "token_endpoint": "https://auth.example.com/tenant1/token",
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": iss_supported,
        }))
        .unwrap()
    }

    fn resource(scopes: &[&str]) -> ResourceMetadata {
        serde_json::from_value(serde_json::json!({
            "resource": "https://mcp.example.com/mcp",
            "authorization_servers": ["https://auth.example.com/tenant1"],
            "scopes_supported": scopes,
        }))
        .unwrap()
    }

    #[test]
    fn pkce_is_s256_of_the_verifier_in_base64url() {
        // Computed independently with Python's hashlib and base64:
        // base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").
        let pair = Pkce::from_verifier("dBjftJeZ4CVP-mJ92K1uhbDH4tR9XTtpc9c0WaMa0FU".into());
        assert_eq!(
            pair.challenge,
            "YgFj1T4znwksug5ClPXNxYE4pz5lQHeFfmNaUILYwbU"
        );
        assert!(
            !pair.challenge.contains(['=', '+', '/']),
            "base64url without padding"
        );
        let fresh = Pkce::new();
        assert_eq!(fresh.verifier.len(), 43);
        assert_ne!(fresh.verifier, Pkce::new().verifier);
    }

    #[test]
    fn the_authorization_url_carries_everything_and_the_resource_verbatim() {
        let pkce = Pkce::from_verifier("v".repeat(43));
        let request = AuthorizationRequest {
            client_id: "client-1",
            redirect_uri: "http://127.0.0.1:5000/callback",
            scope: Some("files:read files:write"),
            state: "st4te",
            pkce: &pkce,
        };
        let url = authorization_url(&server(true), &resource(&[]), &request).unwrap();
        let parsed = url::Url::parse(&url).unwrap();
        let query: std::collections::BTreeMap<String, String> =
            parsed.query_pairs().into_owned().collect();
        assert_eq!(parsed.path(), "/tenant1/authorize");
        assert_eq!(query["prompt"], "consent", "the endpoint's own query stays");
        assert_eq!(query["response_type"], "code");
        assert_eq!(query["client_id"], "client-1");
        assert_eq!(query["code_challenge"], pkce.challenge);
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["state"], "st4te");
        assert_eq!(query["resource"], "https://mcp.example.com/mcp");
        assert_eq!(query["scope"], "files:read files:write");

        let plain = AuthorizationRequest {
            client_id: "c",
            redirect_uri: "r",
            scope: None,
            state: "s",
            pkce: &pkce,
        };
        for endpoint in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http://auth.example.com/authorize",
        ] {
            let mut unsafe_endpoint = server(true);
            unsafe_endpoint.authorization_endpoint = Some(endpoint.into());
            let refused = authorization_url(&unsafe_endpoint, &resource(&[]), &plain);
            assert!(
                matches!(refused, Err(AuthorizationError::RefusedEndpoint(_))),
                "{endpoint}: {refused:?}"
            );
        }

        let mut no_pkce = server(true);
        no_pkce.code_challenge_methods_supported = vec!["plain".into()];
        let refused = authorization_url(&no_pkce, &resource(&[]), &plain);
        assert!(matches!(refused, Err(AuthorizationError::NoPkce(_))));
    }

    #[test]
    fn the_redirect_is_believed_only_from_the_right_issuer_with_the_right_state() {
        let iss = "iss=https%3A%2F%2Fauth.example.com%2Ftenant1";
        let cb = "http://127.0.0.1:5000/callback";
        let ok = read_redirect(
            &format!("{cb}?code=abc&state=s1&{iss}"),
            &server(true),
            "s1",
        );
        assert_eq!(ok.unwrap(), "abc");
        // iss missing though promised; iss with a trailing slash; another issuer.
        for redirect in [
            format!("{cb}?code=abc&state=s1"),
            format!("{cb}?code=abc&state=s1&{iss}%2F"),
            format!("{cb}?code=abc&state=s1&iss=https%3A%2F%2Fevil.example.com"),
        ] {
            let read = read_redirect(&redirect, &server(true), "s1");
            assert!(
                matches!(read, Err(AuthorizationError::WrongIssuer { .. })),
                "{redirect}: {read:?}"
            );
        }
        // Absent and not promised: accepted.
        let unpromised = read_redirect(&format!("{cb}?code=abc&state=s1"), &server(false), "s1");
        assert_eq!(unpromised.unwrap(), "abc");
        // A wrong issuer's error is not believed either.
        let forged = read_redirect(
            &format!("{cb}?error=access_denied&state=s1&iss=https%3A%2F%2Fevil.example.com"),
            &server(true),
            "s1",
        );
        assert!(matches!(
            forged,
            Err(AuthorizationError::WrongIssuer { .. })
        ));
        assert_eq!(
            read_redirect(
                &format!("{cb}?code=abc&state=other&{iss}"),
                &server(true),
                "s1"
            ),
            Err(AuthorizationError::WrongState)
        );
        assert_eq!(
            read_redirect(
                &format!("{cb}?error=access_denied&error_description=no&state=s1&{iss}"),
                &server(true),
                "s1"
            ),
            Err(AuthorizationError::Refused {
                error: "access_denied".into(),
                description: Some("no".into())
            })
        );
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_and_step_up_unites_them() {
        let challenge = super::super::challenge::bearer(["Bearer scope=\"mcp:basic\""]);
        assert_eq!(
            initial_scope(challenge.as_ref(), &resource(&["a", "b"])).as_deref(),
            Some("mcp:basic")
        );
        assert_eq!(
            initial_scope(None, &resource(&["a", "b"])).as_deref(),
            Some("a b")
        );
        assert_eq!(initial_scope(None, &resource(&[])), None);
        assert_eq!(
            step_up_scope(Some("mcp:basic"), "mcp:write"),
            "mcp:basic mcp:write"
        );
        assert_eq!(step_up_scope(Some("a b"), "b c"), "a b c");
        assert_eq!(step_up_scope(None, "x"), "x");
    }
}
