//! Reading an authorization server: its RFC 8414 (or OpenID) metadata and any JSON document it
//! serves, with one HTTP client that never follows redirects and gives up after 10 s. A failure
//! here is [`TokenError::Unavailable`]: the token may be fine, the issuer cannot be asked.

use std::time::Duration;

use serde::Deserialize;

use crate::TokenError;

/// `scheme://host[:port]` and the path of a URL, for RFC 8414 and RFC 9728 path insertion.
///
/// ```
/// assert_eq!(
///     toolwire_auth::split_origin("https://as.example.com/tenant1"),
///     ("https://as.example.com", "/tenant1")
/// );
/// ```
pub fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

/// Whether an audience names this resource: the same URI, except that scheme and host may
/// differ in case (the canonical form is lowercase, and uppercase SHOULD be accepted).
pub(crate) fn same_resource(audience: &str, resource: &str) -> bool {
    let (a_origin, a_path) = split_origin(audience);
    let (r_origin, r_path) = split_origin(resource);
    a_path == r_path && a_origin.eq_ignore_ascii_case(r_origin)
}

/// The client every verifier talks to its issuer with.
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// The fields of an issuer's metadata read here.
#[derive(Debug, Deserialize)]
pub(crate) struct IssuerMetadata {
    pub(crate) issuer: String,
    pub(crate) jwks_uri: Option<String>,
    pub(crate) introspection_endpoint: Option<String>,
}

/// The issuer's RFC 8414 metadata, else its OpenID configuration, provided it names the same
/// issuer (RFC 8414 §3.3) and has `field`; otherwise why not.
pub(crate) async fn issuer_metadata(
    http: &reqwest::Client,
    issuer: &str,
    field: &str,
    has: impl Fn(&IssuerMetadata) -> bool,
) -> Result<IssuerMetadata, TokenError> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = split_origin(trimmed);
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ];
    let mut last = String::new();
    for url in candidates {
        match get_json::<IssuerMetadata>(http, &url).await {
            Ok(meta) if meta.issuer == issuer => {
                if has(&meta) {
                    return Ok(meta);
                }
                last = format!("{url} names no {field}");
            }
            Ok(meta) => last = format!("{url} names another issuer ({})", meta.issuer),
            Err(e) => last = e.to_string(),
        }
    }
    Err(TokenError::Unavailable(format!(
        "cannot find the issuer's {field}: {last}"
    )))
}

/// A JSON document, or [`TokenError::Unavailable`].
pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, TokenError> {
    let unavailable = |e: String| TokenError::Unavailable(format!("{url}: {e}"));
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if !response.status().is_success() {
        return Err(unavailable(format!("HTTP {}", response.status())));
    }
    response
        .json()
        .await
        .map_err(|e| unavailable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_match_case_insensitively_in_scheme_and_host_only() {
        let r = "https://mcp.example.com/mcp";
        assert!(same_resource("https://mcp.example.com/mcp", r));
        assert!(same_resource("HTTPS://MCP.Example.COM/mcp", r));
        assert!(!same_resource("https://mcp.example.com/MCP", r));
        assert!(!same_resource("https://mcp.example.com/mcp/", r));
        assert!(!same_resource("https://mcp.example.com", r));
        assert!(!same_resource("https://mcp.example.com.evil/mcp", r));
    }

    #[test]
    fn origins_split_for_path_insertion() {
        assert_eq!(
            split_origin("https://as.example.com"),
            ("https://as.example.com", "")
        );
        assert_eq!(
            split_origin("https://as.example.com/tenant1"),
            ("https://as.example.com", "/tenant1")
        );
        assert_eq!(
            split_origin("http://127.0.0.1:4000/a/b"),
            ("http://127.0.0.1:4000", "/a/b")
        );
    }
}
