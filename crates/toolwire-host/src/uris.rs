//! Resource URIs of many servers in one list: a server's resource `URI` is offered as
//! `toolwire://PREFIX/URI`, its own URI kept verbatim after its prefix, and mapped back by
//! taking the prefix off. One rule for every URI, so that it is always reversible and never
//! collides:
//!
//! - **Reversible.** The server's URI is not encoded, only preceded, so taking off
//!   `toolwire://PREFIX/` gives it back byte for byte, whatever it holds (spaces, `..`, `%2F`,
//!   non-ASCII, a query or a fragment, or a URI that is itself `toolwire://…`).
//! - **Collision-free.** A prefix holds only `[A-Za-z0-9_-]`, so the first `/` after the
//!   scheme ends it: two servers' URIs never meet, even when both servers use the same URI, and
//!   no URI of one server can be read as another's.
//! - **A URI (RFC 3986).** The prefix is the authority (a reg-name) and the server's URI the
//!   path and what follows it (`:` and `@` are path characters, empty segments are allowed). A
//!   client that normalizes it (dot segments, percent-encoding) changes only the part after the
//!   prefix, as it would have changed the server's own URI; it can never move it to another
//!   server, since no path segment reaches the authority. The authority is case-insensitive in
//!   RFC 3986, so a lowercased prefix is still recognised when no other prefix is the same
//!   ignoring case (the configuration refuses two such prefixes).
//! - **Templates too (RFC 6570).** A template is wrapped the same way: `toolwire://PREFIX/`
//!   holds only characters an expansion copies as they are, and an expansion is its literals
//!   and expressions each expanded in turn, so the expansion of the wrapped template is
//!   `toolwire://PREFIX/` followed by the expansion of the server's template, with the same
//!   variables; taking the prefix off gives the server's own expansion.
//!
//! - **The only server, unprefixed.** A server whose prefix is empty (allowed only when it is
//!   the only server) offers its URIs and templates unchanged, as its tools keep their names:
//!   there is no other server to tell it from, and a client that reads a URI the server gave
//!   it directly reads the same resource.
//!
//! Other gateways wrap differently: agentgateway puts the target before the scheme
//! (`target+file:///…`), which needs a prefix that is a valid scheme (no `_`, a letter first)
//! and cannot wrap a URI without a scheme; this rule takes any prefix the configuration accepts
//! and any string a server calls a URI.

/// The scheme of the URIs under which a host offers its servers' resources.
pub const URI_SCHEME: &str = "toolwire";

/// What every wrapped URI starts with, before the prefix.
const HEAD: &str = "toolwire://";

/// The URI under which the resource `uri` of the server whose prefix is `prefix` is offered:
/// `toolwire://PREFIX/URI`, or `uri` itself for the only server, unprefixed.
pub fn wrap(prefix: &str, uri: &str) -> String {
    if prefix.is_empty() {
        return uri.to_owned();
    }
    let mut wrapped = String::with_capacity(HEAD.len() + prefix.len() + 1 + uri.len());
    wrapped.push_str(HEAD);
    wrapped.push_str(prefix);
    wrapped.push('/');
    wrapped.push_str(uri);
    wrapped
}

/// The URI template under which a server's template is offered: wrapped like a URI, so that
/// each of its expansions is the wrapped expansion of the server's template (see the module's
/// documentation); unchanged for the only server, unprefixed.
pub fn wrap_template(prefix: &str, template: &str) -> String {
    wrap(prefix, template)
}

/// The prefix and the server's own URI of a wrapped URI; `None` for a URI that is not one
/// (another scheme, no `/` after the prefix, or a prefix the configuration would refuse).
/// The scheme is matched ignoring ASCII case (RFC 3986 §3.1); the prefix is returned as
/// written, to be matched by [`resolve`].
pub fn unwrap(uri: &str) -> Option<(&str, &str)> {
    let head = uri.get(..HEAD.len())?;
    if !head.eq_ignore_ascii_case(HEAD) {
        return None;
    }
    let (prefix, original) = uri[HEAD.len()..].split_once('/')?;
    let valid = !prefix.is_empty()
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then_some((prefix, original))
}

/// Which of `prefixes` a wrapped URI's prefix names: the one written exactly so, else the only
/// one that is the same ignoring ASCII case (RFC 3986 §6.2.2.1: a client may lowercase the
/// authority); `None` when none is, or when several are the same ignoring case.
pub fn resolve<'p>(
    prefix: &str,
    prefixes: impl IntoIterator<Item = &'p str> + Clone,
) -> Option<&'p str> {
    if let Some(exact) = prefixes.clone().into_iter().find(|p| *p == prefix) {
        return Some(exact);
    }
    let mut same = prefixes
        .into_iter()
        .filter(|p| p.eq_ignore_ascii_case(prefix));
    let first = same.next()?;
    same.next().is_none().then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// URIs a server may list, hostile ones included.
    const URIS: &[&str] = &[
        "file:///README.md",
        "file:///my notes/to do.txt",
        "file:///a/../../etc/passwd",
        "../../../etc/passwd",
        "file:///café/日本語.txt",
        "file:///docs/a%2Fb%20c",
        "https://example.com/x?y=1&z=%2F#frag",
        "urn:isbn:0451450523",
        "memo:insights",
        "",
        "/",
        "no scheme at all",
        "toolwire://other/file:///README.md",
        "toolwire://a/file:///README.md",
        "TOOLWIRE://a/x",
        "file:///bidi\u{202e}txt.exe",
        "ui://weather/dashboard.html",
    ];
    const PREFIXES: &[&str] = &["a", "b", "fs", "Fs2", "my-server_v2", "0day"];

    #[test]
    fn every_uri_of_every_prefix_maps_back_unchanged() {
        for prefix in PREFIXES {
            for uri in URIS {
                let wrapped = wrap(prefix, uri);
                assert!(wrapped.starts_with("toolwire://"), "{wrapped}");
                assert_eq!(unwrap(&wrapped), Some((*prefix, *uri)), "{wrapped}");
            }
        }
    }

    #[test]
    fn no_two_resources_share_a_wrapped_uri() {
        let mut seen = std::collections::HashMap::new();
        for prefix in PREFIXES {
            for uri in URIS {
                let wrapped = wrap(prefix, uri);
                if let Some(other) = seen.insert(wrapped.clone(), (prefix, uri)) {
                    panic!("{wrapped} stands for {other:?} and {:?}", (prefix, uri));
                }
            }
        }
        // The same URI of two servers: two URIs.
        assert_ne!(wrap("a", "file:///x"), wrap("b", "file:///x"));
        // A prefix that starts another: still apart, since '/' ends a prefix.
        assert_ne!(wrap("fs", "2/x"), wrap("fs2", "x"));
        assert_eq!(unwrap(&wrap("fs", "2/x")), Some(("fs", "2/x")));
    }

    #[test]
    fn uris_that_are_not_wrapped_are_refused() {
        for uri in [
            "file:///README.md",
            "toolwire://",
            "toolwire://a",
            "toolwire:///file:///x",
            "toolwire:a/x",
            "toolwire://user@a/x",
            "toolwire://a:80/x",
            "toolwire://a.b/x",
            "toolwire://a b/x",
            "toolwire://é/x",
            "toolwire-x://a/x",
            "xtoolwire://a/x",
            "toolwir",
        ] {
            assert_eq!(unwrap(uri), None, "{uri}");
        }
        // The scheme is case-insensitive; the prefix is returned as written.
        assert_eq!(unwrap("ToolWire://Fs/x"), Some(("Fs", "x")));
    }

    #[test]
    fn the_only_server_unprefixed_offers_its_uris_unchanged() {
        for uri in URIS {
            assert_eq!(wrap("", uri), *uri);
            assert_eq!(wrap_template("", uri), *uri);
        }
    }

    #[test]
    fn a_prefix_is_matched_exactly_else_alone_ignoring_case() {
        let prefixes = ["fs", "Git", "db", "DB2", "db2"];
        let resolve = |p| resolve(p, prefixes.iter().copied());
        assert_eq!(resolve("fs"), Some("fs"));
        assert_eq!(resolve("FS"), Some("fs"));
        assert_eq!(resolve("git"), Some("Git"));
        assert_eq!(resolve("db2"), Some("db2"));
        assert_eq!(resolve("DB2"), Some("DB2"));
        // Two prefixes are the same ignoring case: a third spelling names neither.
        assert_eq!(resolve("Db2"), None);
        assert_eq!(resolve("nope"), None);
    }

    #[test]
    fn a_template_expands_to_the_wrapped_expansion_of_the_servers_template() {
        // Expanded by hand per RFC 6570 with the same variables: the wrapped template's
        // literal head is copied, the rest expands as the server's template does.
        let cases = [
            // (template, expansion of the server's template)
            ("file:///{+path}", "file:///a/b%20c/ü.md"),
            ("db://{table}/rows/{id}", "db://users/rows/7"),
            ("{+base}/x", "https://example.com/x"),
            ("search:{?q,lang}", "search:?q=rust&lang=en"),
        ];
        for (template, expanded) in cases {
            let wrapped = wrap_template("fs", template);
            let head = wrapped
                .strip_suffix(template)
                .expect("the template is kept whole");
            assert_eq!(head, "toolwire://fs/");
            // An expansion copies a literal made only of unreserved and reserved characters.
            assert!(
                head.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~:/".contains(&b))
            );
            let wrapped_expansion = format!("{head}{expanded}");
            assert_eq!(unwrap(&wrapped_expansion), Some(("fs", expanded)));
        }
    }

    #[test]
    fn a_normalizing_client_never_moves_a_uri_to_another_server() {
        // The WHATWG URL parser (browsers, Node, pydantic) resolves dot segments and
        // percent-encodes spaces: only the part after the prefix changes.
        for prefix in PREFIXES {
            for uri in URIS {
                let wrapped = wrap(prefix, uri);
                let Ok(parsed) = url::Url::parse(&wrapped) else {
                    continue;
                };
                let (again, _) = unwrap(parsed.as_str())
                    .unwrap_or_else(|| panic!("{wrapped} became {parsed}, which is not wrapped"));
                assert_eq!(again, *prefix, "{wrapped} became {parsed}");
            }
        }
    }
}
