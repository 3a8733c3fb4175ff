//! Where a protected server's authorization server is, and what it can do (A-08, A-09): the
//! resource's RFC 9728 Protected Resource Metadata — from the challenge's `resource_metadata`,
//! else the path-inserted well-known URI, else the root one — whose `resource` must be the
//! server being called; then the issuer's RFC 8414 or OpenID metadata, tried in the order of
//! the path-insertion rules, whose `issuer` must be exactly the issuer it was built from.
//! Nothing is sent to an authorization server before both checks pass. Every URL is fetched
//! through [`AuthHttp`], under its rules (`https:`, plain `http:` only at the server's own
//! origin or with the development opt-in, never a link-local address), and the endpoints the
//! issuer's metadata names are held to the same rules before the metadata is used: a document
//! naming one it may not use is refused whole.

use serde::Deserialize;

use super::challenge::Challenge;
use super::http::{AuthHttp, UrlError, check_authorization_endpoint};

/// RFC 9728 Protected Resource Metadata, as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    /// The protected resource's canonical URI: sent verbatim as `resource` (A-13).
    pub resource: String,
    /// The authorization servers (issuers) whose tokens it accepts.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes a client may ask for.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 authorization server metadata (or an OpenID configuration), the fields a client
/// uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuthorizationServerMetadata {
    /// The issuer: exactly the URL the metadata was found from.
    pub issuer: String,
    /// Where a person authorizes.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where codes become tokens.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// RFC 7591 dynamic client registration.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Scopes it knows.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// PKCE methods; a client refuses a server without `S256` (A-12).
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    /// How clients authenticate at the token endpoint.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Vec<String>,
    /// Grants it offers.
    #[serde(default)]
    pub grant_types_supported: Vec<String>,
    /// RFC 9207: responses carry `iss`, and a response without it is refused (A-14).
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// Client ID Metadata Documents accepted as `client_id` (A-11).
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

impl AuthorizationServerMetadata {
    /// Whether it offers PKCE with S256 (A-12).
    pub fn supports_s256(&self) -> bool {
        self.code_challenge_methods_supported
            .iter()
            .any(|m| m == "S256")
    }
}

/// What discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// Where the resource metadata came from.
    pub metadata_url: String,
    /// The resource metadata.
    pub resource: ResourceMetadata,
    /// The authorization server's metadata.
    pub authorization_server: AuthorizationServerMetadata,
}

/// Why discovery stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No resource metadata at any URL tried.
    #[error("no protected resource metadata for {server}: {tried}")]
    NoResourceMetadata {
        /// The server called.
        server: String,
        /// Each URL tried and what it answered.
        tried: String,
    },
    /// The metadata describes another resource: nothing is sent to its authorization server.
    /// (The message does not repeat the resource it names: that is the answer's text.)
    #[error("the protected resource metadata at {url} is for another resource than {server}")]
    WrongResource {
        /// The metadata's URL.
        url: String,
        /// The resource it names.
        resource: String,
        /// The server called.
        server: String,
    },
    /// The metadata names no authorization server.
    #[error("the protected resource metadata at {0} names no authorization server")]
    NoAuthorizationServer(String),
    /// No usable metadata for the issuer.
    #[error("no authorization server metadata for {issuer}: {tried}")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// Each URL tried and what it answered (a document naming another issuer is refused).
        tried: String,
    },
    /// A URL the server or its metadata names is not one the client may use (plain http
    /// elsewhere than the server's origin, a link-local address, another scheme): nothing is
    /// sent there.
    #[error("refused {what}: {error}")]
    Refused {
        /// Which URL: the challenge's metadata URL, the authorization server, an endpoint.
        what: &'static str,
        /// Why.
        error: UrlError,
    },
}

/// Where the resource metadata is looked for, in order (A-08): the challenge's
/// `resource_metadata`, else `/.well-known/oauth-protected-resource` with the server's path
/// inserted, else at the root.
pub fn resource_metadata_urls(server: &str, challenge: Option<&Challenge>) -> Vec<String> {
    if let Some(url) = challenge.and_then(Challenge::resource_metadata) {
        return vec![url.to_owned()];
    }
    const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
    let (origin, path) = split_origin(without_query(server));
    let path = path.trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(format!("{origin}{WELL_KNOWN}{path}"));
    }
    urls.push(format!("{origin}{WELL_KNOWN}"));
    urls
}

/// Where an issuer's metadata is looked for, in order (A-09). With a path: RFC 8414 and OpenID
/// with the path inserted, then OpenID with the path appended; without: the first two.
pub fn server_metadata_urls(issuer: &str) -> Vec<String> {
    let (origin, path) = split_origin(issuer);
    let path = path.trim_end_matches('/');
    let mut urls = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    urls
}

/// Whether the resource metadata's `resource` names the server called: the same origin
/// (scheme and host case-insensitive) and a path that is the server's or one of its parents,
/// segment by segment (a trailing slash aside). Metadata found at the root well-known URI
/// names the origin (RFC 9728 §3.3), which covers every endpoint on it; another path, origin or
/// scheme is refused.
pub fn names_server(resource: &str, server: &str) -> bool {
    let (r_origin, r_path) = split_origin(without_query(resource));
    let (s_origin, s_path) = split_origin(without_query(server));
    let (r_path, s_path) = (r_path.trim_end_matches('/'), s_path.trim_end_matches('/'));
    r_origin.eq_ignore_ascii_case(s_origin)
        && (r_path == s_path
            || s_path
                .strip_prefix(r_path)
                .is_some_and(|rest| rest.starts_with('/')))
}

/// Finds the authorization server of the server `http` is for, which answered with
/// `challenge` (if any).
pub async fn discover(
    http: &AuthHttp,
    challenge: Option<&Challenge>,
) -> Result<Discovered, DiscoveryError> {
    let server = http.server();
    let named = challenge.and_then(Challenge::resource_metadata).is_some();
    let mut tried = Vec::new();
    let mut found = None;
    for url in resource_metadata_urls(server, challenge) {
        let checked = http
            .checked(&url)
            .map_err(|error| DiscoveryError::Refused {
                what: if named {
                    "the protected resource metadata URL the server's challenge names"
                } else {
                    "the protected resource metadata URL"
                },
                error,
            })?;
        match http.get_json::<ResourceMetadata>(&checked).await {
            Ok(metadata) => {
                found = Some((url, metadata));
                break;
            }
            Err(why) => tried.push(format!("{url}: {why}")),
        }
    }
    let Some((metadata_url, resource)) = found else {
        return Err(DiscoveryError::NoResourceMetadata {
            server: server.to_owned(),
            tried: tried.join("; "),
        });
    };
    if !names_server(&resource.resource, server) {
        return Err(DiscoveryError::WrongResource {
            url: metadata_url,
            resource: resource.resource,
            server: server.to_owned(),
        });
    }
    let Some(issuer) = resource.authorization_servers.first().cloned() else {
        return Err(DiscoveryError::NoAuthorizationServer(metadata_url));
    };
    let authorization_server = server_metadata(http, &issuer).await?;
    Ok(Discovered {
        metadata_url,
        resource,
        authorization_server,
    })
}

/// The metadata of `issuer`: the first document, in [`server_metadata_urls`] order, whose
/// `issuer` is exactly `issuer` (RFC 8414 §3.3), and whose endpoints the client may use.
pub async fn server_metadata(
    http: &AuthHttp,
    issuer: &str,
) -> Result<AuthorizationServerMetadata, DiscoveryError> {
    http.check(issuer)
        .map_err(|error| DiscoveryError::Refused {
            what: "the authorization server the resource metadata names",
            error,
        })?;
    let mut tried = Vec::new();
    for url in server_metadata_urls(issuer) {
        let checked = http
            .checked(&url)
            .map_err(|error| DiscoveryError::Refused {
                what: "the authorization server's metadata URL",
                error,
            })?;
        match http.get_json::<AuthorizationServerMetadata>(&checked).await {
            Ok(metadata) if metadata.issuer == issuer => {
                check_endpoints(http, &metadata)?;
                return Ok(metadata);
            }
            Ok(_) => tried.push(format!("{url}: names another issuer (refused)")),
            Err(why) => tried.push(format!("{url}: {why}")),
        }
    }
    Err(DiscoveryError::NoServerMetadata {
        issuer: issuer.to_owned(),
        tried: tried.join("; "),
    })
}

/// Whether every endpoint `metadata` names is one the client may use: the authorization
/// endpoint one a browser may open, the others ones `http` may send to.
fn check_endpoints(
    http: &AuthHttp,
    metadata: &AuthorizationServerMetadata,
) -> Result<(), DiscoveryError> {
    if let Some(endpoint) = &metadata.authorization_endpoint {
        check_authorization_endpoint(endpoint).map_err(|error| DiscoveryError::Refused {
            what: "the authorization server's authorization endpoint",
            error,
        })?;
    }
    let fetched = [
        (
            "the authorization server's token endpoint",
            &metadata.token_endpoint,
        ),
        (
            "the authorization server's registration endpoint",
            &metadata.registration_endpoint,
        ),
    ];
    for (what, endpoint) in fetched {
        if let Some(endpoint) = endpoint {
            http.check(endpoint)
                .map_err(|error| DiscoveryError::Refused { what, error })?;
        }
    }
    Ok(())
}

/// `scheme://authority` and the rest of a URL.
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

fn without_query(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_metadata_is_looked_for_where_the_spec_says() {
        assert_eq!(
            resource_metadata_urls("https://mcp.example.com/public/mcp", None),
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls("https://mcp.example.com/", None),
            ["https://mcp.example.com/.well-known/oauth-protected-resource"]
        );
        let challenge = super::super::challenge::bearer([
            r#"Bearer resource_metadata="https://mcp.example.com/prm""#,
        ]);
        assert_eq!(
            resource_metadata_urls("https://mcp.example.com/mcp", challenge.as_ref()),
            ["https://mcp.example.com/prm"]
        );
    }

    #[test]
    fn issuer_metadata_follows_the_path_insertion_rules() {
        assert_eq!(
            server_metadata_urls("https://auth.example.com/tenant1"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            server_metadata_urls("https://auth.example.com"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn the_resource_must_be_the_server_called() {
        assert!(names_server(
            "https://MCP.example.com/mcp",
            "https://mcp.example.com/mcp"
        ));
        assert!(names_server(
            "https://mcp.example.com/mcp/",
            "https://mcp.example.com/mcp"
        ));
        assert!(!names_server(
            "https://evil.example.com/mcp",
            "https://mcp.example.com/mcp"
        ));
        assert!(!names_server(
            "https://mcp.example.com/other",
            "https://mcp.example.com/mcp"
        ));
        // The origin (metadata at the root well-known URI) covers every path on it; a
        // parent path covers its children, segment by segment.
        assert!(names_server(
            "https://mcp.example.com",
            "https://mcp.example.com/mcp"
        ));
        assert!(names_server(
            "https://mcp.example.com/tenant",
            "https://mcp.example.com/tenant/mcp"
        ));
        assert!(!names_server(
            "https://mcp.example.com/mc",
            "https://mcp.example.com/mcp"
        ));
        assert!(!names_server(
            "https://mcp.example.com/mcp/admin",
            "https://mcp.example.com/mcp"
        ));
        assert!(!names_server(
            "http://mcp.example.com/mcp",
            "https://mcp.example.com/mcp"
        ));
    }
}
