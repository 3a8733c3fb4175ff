//! What a resource server says about itself and to a caller without a usable token, as pure
//! functions: RFC 9728 Protected Resource Metadata and its well-known paths, the
//! `Authorization: Bearer` credential (RFC 6750 §2.1, header only), and the `WWW-Authenticate`
//! challenge of a 401 or 403.

use serde::{Deserialize, Serialize};

use crate::TokenError;

/// RFC 9728 Protected Resource Metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// The canonical URI of the protected resource (the MCP endpoint).
    pub resource: String,
    /// The issuers whose tokens the resource accepts.
    pub authorization_servers: Vec<String>,
    /// Scopes a client may ask for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// How a token may be sent: only `header` (a token in the query string is refused).
    pub bearer_methods_supported: Vec<String>,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

impl ProtectedResourceMetadata {
    /// The metadata of `resource`, protected by `issuer`.
    pub fn new(
        resource: impl Into<String>,
        issuer: impl Into<String>,
        scopes: Vec<String>,
    ) -> Self {
        ProtectedResourceMetadata {
            resource: resource.into(),
            authorization_servers: vec![issuer.into()],
            scopes_supported: scopes,
            bearer_methods_supported: vec!["header".into()],
            resource_name: None,
        }
    }
}

/// The well-known paths of the metadata for a resource served at `path` (RFC 9728 §3.1): the
/// path-inserted one first (`/.well-known/oauth-protected-resource/mcp`), then the root one.
pub fn metadata_paths(path: &str) -> Vec<String> {
    const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        vec![WELL_KNOWN.to_owned()]
    } else {
        vec![format!("{WELL_KNOWN}{path}"), WELL_KNOWN.to_owned()]
    }
}

/// The token of an `Authorization` header value: `None` when there is no header; an error
/// when the header is not a single well-formed Bearer credential (RFC 6750 §2.1: the scheme is
/// case-insensitive, the token is base64url-ish `token68`).
pub fn bearer_token(authorization: Option<&str>) -> Result<Option<&str>, TokenError> {
    let Some(value) = authorization else {
        return Ok(None);
    };
    let (scheme, token) = value.trim().split_once(' ').ok_or_else(|| {
        TokenError::Malformed("the Authorization header is not `Bearer TOKEN`".into())
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(TokenError::Malformed(format!(
            "the Authorization scheme is {scheme:?}, not Bearer"
        )));
    }
    let token = token.trim();
    // Bytes, not chars: a JWT is hundreds of bytes long and this runs on every request.
    let token68 =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/');
    let body = token.trim_end_matches('=');
    if body.is_empty() || !body.bytes().all(token68) {
        return Err(TokenError::Malformed(
            "the Bearer token is not a token68 value".into(),
        ));
    }
    Ok(Some(token))
}

/// A `WWW-Authenticate: Bearer …` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The metadata URL the client should read.
    pub resource_metadata: String,
    /// The scope needed, space-separated.
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope` or `invalid_request`; `None` when no credential
    /// was sent (RFC 6750 §3.1).
    pub error: Option<&'static str>,
    /// A sentence for a developer.
    pub description: Option<String>,
}

impl Challenge {
    /// The header value.
    pub fn header_value(&self) -> String {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\"",
            quote(&self.resource_metadata)
        );
        if let Some(scope) = &self.scope {
            value.push_str(&format!(", scope=\"{}\"", quote(scope)));
        }
        if let Some(error) = self.error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        if let Some(description) = &self.description {
            value.push_str(&format!(", error_description=\"{}\"", quote(description)));
        }
        value
    }
}

/// A quoted-string's content: printable ASCII only (RFC 6750 §3 forbids others in
/// `error_description`), with `"` and `\` escaped.
fn quote(text: &str) -> String {
    text.chars()
        .filter(|c| (' '..='~').contains(c))
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_lives_at_the_path_inserted_and_the_root_well_known_uris() {
        assert_eq!(
            metadata_paths("/mcp"),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            metadata_paths("/"),
            ["/.well-known/oauth-protected-resource"]
        );
        let prm =
            ProtectedResourceMetadata::new("https://x/mcp", "https://as", vec!["math".into()]);
        assert_eq!(
            serde_json::to_value(&prm).unwrap(),
            serde_json::json!({
                "resource": "https://x/mcp",
                "authorization_servers": ["https://as"],
                "scopes_supported": ["math"],
                "bearer_methods_supported": ["header"]
            })
        );
    }

    #[test]
    fn only_a_single_bearer_credential_reads_as_a_token() {
        assert_eq!(bearer_token(None).unwrap(), None);
        assert_eq!(
            bearer_token(Some("Bearer abc.def-ghi_")).unwrap(),
            Some("abc.def-ghi_")
        );
        assert_eq!(
            bearer_token(Some("bearer  a+b/c==")).unwrap(),
            Some("a+b/c==")
        );
        for bad in [
            "Basic abc",
            "Bearer",
            "Bearer a b",
            "Bearer ä",
            "Bearer ===",
            "abc",
        ] {
            assert!(
                matches!(bearer_token(Some(bad)), Err(TokenError::Malformed(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn challenges_quote_their_values() {
        let challenge = Challenge {
            resource_metadata: "http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp".into(),
            scope: Some("math tools:read".into()),
            error: Some("insufficient_scope"),
            description: Some("needs \"math\" \\ here\n".into()),
        };
        assert_eq!(
            challenge.header_value(),
            "Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp\", \
             scope=\"math tools:read\", error=\"insufficient_scope\", \
             error_description=\"needs \\\"math\\\" \\\\ here\""
        );
    }
}
