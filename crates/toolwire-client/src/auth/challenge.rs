//! The `WWW-Authenticate` header of a 401 or 403 (RFC 9110 §11.6.1, RFC 6750 §3): one or more
//! challenges, each a scheme and its parameters. A Bearer challenge may name the resource's
//! metadata (`resource_metadata`, RFC 9728 §5.1, A-08), the scope the request needs (`scope`,
//! authoritative, A-16) and an `error` (`invalid_token`, `insufficient_scope`).

use std::collections::BTreeMap;

/// One challenge: its scheme (lowercase) and its parameters (names lowercase, values unquoted).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Challenge {
    /// The scheme, lowercase (`bearer`).
    pub scheme: String,
    /// The parameters by lowercase name.
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    /// The URL of the resource's Protected Resource Metadata, if the server named it.
    pub fn resource_metadata(&self) -> Option<&str> {
        self.param("resource_metadata")
    }

    /// The scopes the request needs, space-separated, if the server said.
    pub fn scope(&self) -> Option<&str> {
        self.param("scope")
    }

    /// The error code (`invalid_token`, `insufficient_scope`, …), if any.
    pub fn error(&self) -> Option<&str> {
        self.param("error")
    }

    fn param(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }
}

/// The first Bearer challenge among `headers` (each a `WWW-Authenticate` value).
pub fn bearer<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<Challenge> {
    headers
        .into_iter()
        .flat_map(parse)
        .find(|c| c.scheme == "bearer")
}

/// Every challenge of one header value. What cannot be read is skipped: a malformed parameter
/// ends its challenge, never the whole header.
pub fn parse(header: &str) -> Vec<Challenge> {
    let mut lexer = Lexer {
        rest: header.as_bytes(),
    };
    let mut challenges = Vec::new();
    let mut current: Option<Challenge> = None;
    loop {
        lexer.skip(b" \t,");
        let Some(token) = lexer.token() else {
            // A quoted string or a stray character where a name belongs: skip one byte.
            if lexer.rest.is_empty() {
                break;
            }
            lexer.rest = &lexer.rest[1..];
            continue;
        };
        lexer.skip(b" \t");
        if lexer.peek() == Some(b'=') && current.is_some() {
            lexer.rest = &lexer.rest[1..];
            lexer.skip(b" \t");
            let value = if lexer.peek() == Some(b'"') {
                lexer.quoted()
            } else {
                lexer.token().unwrap_or_default()
            };
            if let Some(challenge) = current.as_mut() {
                challenge.params.insert(token.to_ascii_lowercase(), value);
            }
            continue;
        }
        if let Some(done) = current.take() {
            challenges.push(done);
        }
        current = Some(Challenge {
            scheme: token.to_ascii_lowercase(),
            params: BTreeMap::new(),
        });
    }
    challenges.extend(current);
    challenges
}

struct Lexer<'a> {
    rest: &'a [u8],
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    fn skip(&mut self, bytes: &[u8]) {
        while self.peek().is_some_and(|b| bytes.contains(&b)) {
            self.rest = &self.rest[1..];
        }
    }

    /// An RFC 9110 token (also covers token68 characters but `=`).
    fn token(&mut self) -> Option<String> {
        let is_token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~/:".contains(&b);
        let len = self.rest.iter().take_while(|b| is_token(**b)).count();
        if len == 0 {
            return None;
        }
        let (token, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(String::from_utf8_lossy(token).into_owned())
    }

    /// A quoted string, backslash escapes undone; an unterminated one runs to the end.
    fn quoted(&mut self) -> String {
        let mut out = Vec::new();
        self.rest = &self.rest[1..];
        while let Some(b) = self.peek() {
            self.rest = &self.rest[1..];
            match b {
                b'"' => break,
                b'\\' => {
                    if let Some(next) = self.peek() {
                        out.push(next);
                        self.rest = &self.rest[1..];
                    }
                }
                other => out.push(other),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parameters_are_read_quoted_or_not() {
        let found = bearer([
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write", error=insufficient_scope"#,
        ])
        .unwrap();
        assert_eq!(
            found.resource_metadata(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(found.scope(), Some("files:read files:write"));
        assert_eq!(found.error(), Some("insufficient_scope"));
    }

    #[test]
    fn several_challenges_and_other_schemes() {
        let all = parse(
            r#"Basic realm="a, b", Bearer realm="mcp", error_description="say \"hi\"", Newauth"#,
        );
        let schemes: Vec<&str> = all.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["basic", "bearer", "newauth"]);
        assert_eq!(all[0].params["realm"], "a, b");
        assert_eq!(all[1].params["error_description"], r#"say "hi""#);
        // A token68 credential challenge, then a Bearer one in a second header.
        let found = bearer(["Basic dXNlcjpwYXNz==", "BEARER Scope=\"x\""]).unwrap();
        assert_eq!(found.scope(), Some("x"));
        // A token68 credential reads as a parameter of its own challenge, never a new one.
        let negotiate = parse("Negotiate abc==");
        assert_eq!(negotiate.len(), 1);
        assert_eq!(negotiate[0].scheme, "negotiate");
    }

    #[test]
    fn garbage_never_panics() {
        for header in [
            "",
            ",,,",
            "=",
            "\"",
            "Bearer =",
            "Bearer scope=\"unterminated",
            "Bearer a=b=c,,d",
        ] {
            let _ = parse(header);
        }
        assert_eq!(bearer(["Basic realm=x"]), None);
    }
}
