//! The client a trusted proxy names in a forwarding header: RFC 7239 `Forwarded` (elements
//! separated by commas, parameters by semicolons, names in any case, quoted strings with
//! escapes, IPv6 in brackets, ports, `unknown` and obfuscated identifiers), or a plain list of
//! addresses such as `X-Forwarded-For`. Pure functions; `flood.rs` decides what a request
//! whose header cannot be read gets.
//!
//! Which entry is trusted: each proxy appends one entry for the hop it received the request
//! from, so with `n` trusted proxies in front of the server the client is the entry the
//! outermost of them added, the `n`-th from the right across every line of the header.
//! Entries further left are whatever the client sent and are never read, so a client's own
//! garbage there cannot make its request fail either, unless it shares a line with the
//! trusted entries.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::{HeaderMap, HeaderName};

use crate::safety::limits::ClientId;

/// How much of a value an error message quotes.
const QUOTED_BYTES: usize = 64;

/// Where a router takes the client from: a header, read as RFC 7239 when it is `Forwarded`
/// and as a list of addresses otherwise, and how many proxies in front of the server add to it.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    header: HeaderName,
    rfc7239: bool,
    trusted: usize,
}

/// Why the configured header names no client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unreadable {
    /// No line of the header at all.
    #[error("the request has no `{header}` header")]
    Missing {
        /// The configured header.
        header: HeaderName,
    },
    /// A line with the trusted entries does not follow the header's syntax.
    #[error("the `{header}` header is malformed: {problem}")]
    Syntax {
        /// The configured header.
        header: HeaderName,
        /// What is wrong, and where.
        problem: Syntax,
    },
    /// Fewer entries than trusted proxies: one of them did not add its entry.
    #[error(
        "the `{header}` header has {found} entries, but each of the {trusted} trusted proxies in front of this server adds one"
    )]
    TooFew {
        /// The configured header.
        header: HeaderName,
        /// Entries on all its lines.
        found: usize,
        /// Trusted proxies.
        trusted: usize,
    },
    /// The trusted `Forwarded` element has no `for=` parameter.
    #[error("the element of the `{header}` header added by the trusted proxy has no `for=`")]
    NoFor {
        /// The configured header.
        header: HeaderName,
    },
    /// The trusted entry is not a node RFC 7239 §6 allows.
    #[error(
        "the `{header}` header names the client {value:?}: not an IP address (with or without a port), `unknown` or an obfuscated identifier such as `_hidden`"
    )]
    Node {
        /// The configured header.
        header: HeaderName,
        /// The entry, cut to 64 bytes.
        value: String,
    },
}

/// What is wrong with a `Forwarded` line; byte offsets count from the line's start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Syntax {
    /// Something other than a parameter name where one must start.
    #[error("a parameter name was expected at byte {0}")]
    Name(usize),
    /// A name without `=`.
    #[error("`=` was expected at byte {0}")]
    Equals(usize),
    /// `name=` with no token or quoted string after it.
    #[error("a value was expected at byte {0}")]
    Value(usize),
    /// A quoted string that never closes.
    #[error("the quoted string at byte {0} is not closed")]
    Unclosed(usize),
    /// A pair not followed by `;`, `,` or the end.
    #[error("`;` or `,` was expected at byte {0}")]
    Separator(usize),
    /// RFC 7239 §4: a parameter occurs at most once per element.
    #[error("the parameter `{0}` occurs twice in one element")]
    Repeated(String),
}

impl Source {
    /// The client from `header`, behind `trusted` proxies (at least one).
    pub(crate) fn new(header: HeaderName, trusted: usize) -> Source {
        Source {
            rfc7239: header == http::header::FORWARDED,
            header,
            trusted: trusted.max(1),
        }
    }

    /// The client the outermost trusted proxy named.
    pub(crate) fn client(&self, headers: &HeaderMap) -> Result<ClientId, Unreadable> {
        let mut lines = headers.get_all(&self.header).iter().rev().peekable();
        if lines.peek().is_none() {
            return Err(Unreadable::Missing {
                header: self.header.clone(),
            });
        }
        // Entries still to pass over, from the right, before the trusted one.
        let mut skip = self.trusted - 1;
        let mut found = 0;
        for line in lines {
            let line = line.as_bytes();
            let entries = if self.rfc7239 {
                elements(line).map_err(|problem| Unreadable::Syntax {
                    header: self.header.clone(),
                    problem,
                })?
            } else {
                list(line)
            };
            found += entries.len();
            if skip < entries.len() {
                let entry = &entries[entries.len() - 1 - skip];
                let value = entry.as_deref().ok_or_else(|| Unreadable::NoFor {
                    header: self.header.clone(),
                })?;
                return node(value).ok_or_else(|| Unreadable::Node {
                    header: self.header.clone(),
                    value: quoted(value),
                });
            }
            skip -= entries.len();
        }
        Err(Unreadable::TooFew {
            header: self.header.clone(),
            found,
            trusted: self.trusted,
        })
    }
}

/// At most [`QUOTED_BYTES`] of `value`, for a message.
fn quoted(value: &[u8]) -> String {
    let value = String::from_utf8_lossy(value);
    let mut end = value.len().min(QUOTED_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_owned()
}

/// The entries of a plain list (`X-Forwarded-For`): comma-separated, blanks around them, empty
/// ones skipped (RFC 9110 §5.6.1).
fn list(line: &[u8]) -> Vec<Option<Cow<'_, [u8]>>> {
    line.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|entry| !entry.is_empty())
        .map(|entry| Some(Cow::Borrowed(entry)))
        .collect()
}

/// The `for=` value of each element of a `Forwarded` line (RFC 7239 §4), unquoted; `None` for
/// an element without one.
///
/// ```text
/// Forwarded         = 1#forwarded-element
/// forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
/// forwarded-pair    = token "=" value
/// value             = token / quoted-string
/// ```
///
/// Blanks are allowed around `,` (the list rule) and, as proxies write them, around `;`.
fn elements(line: &[u8]) -> Result<Vec<Option<Cow<'_, [u8]>>>, Syntax> {
    let mut cursor = Cursor { line, at: 0 };
    let mut elements = Vec::new();
    loop {
        cursor.blanks();
        match cursor.peek() {
            None => return Ok(elements),
            // An empty list entry.
            Some(b',') => cursor.at += 1,
            Some(_) => {
                elements.push(element(&mut cursor)?);
                cursor.blanks();
                match cursor.peek() {
                    None => return Ok(elements),
                    Some(b',') => cursor.at += 1,
                    Some(_) => return Err(Syntax::Separator(cursor.at)),
                }
            }
        }
    }
}

/// One element's pairs, up to the `,` or the end after it.
fn element<'a>(cursor: &mut Cursor<'a>) -> Result<Option<Cow<'a, [u8]>>, Syntax> {
    let mut names: Vec<&[u8]> = Vec::new();
    let mut client = None;
    loop {
        cursor.blanks();
        match cursor.peek() {
            None | Some(b',') => return Ok(client),
            // An empty pair.
            Some(b';') => {
                cursor.at += 1;
                continue;
            }
            Some(_) => {}
        }
        let name = cursor.token().ok_or(Syntax::Name(cursor.at))?;
        if cursor.peek() != Some(b'=') {
            return Err(Syntax::Equals(cursor.at));
        }
        cursor.at += 1;
        let value = match cursor.peek() {
            Some(b'"') => cursor.quoted()?,
            _ => Cow::Borrowed(cursor.token().ok_or(Syntax::Value(cursor.at))?),
        };
        if names.iter().any(|seen| seen.eq_ignore_ascii_case(name)) {
            return Err(Syntax::Repeated(String::from_utf8_lossy(name).into_owned()));
        }
        names.push(name);
        if name.eq_ignore_ascii_case(b"for") {
            client = Some(value);
        }
        cursor.blanks();
        match cursor.peek() {
            None | Some(b',') => return Ok(client),
            Some(b';') => cursor.at += 1,
            Some(_) => return Err(Syntax::Separator(cursor.at)),
        }
    }
}

/// A position in a header line.
struct Cursor<'a> {
    line: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.get(self.at).copied()
    }

    /// Skips spaces and tabs.
    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    /// One or more token characters (RFC 9110 §5.6.2), or `None` when there are none.
    fn token(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        while self.peek().is_some_and(is_tchar) {
            self.at += 1;
        }
        (self.at > start).then(|| &self.line[start..self.at])
    }

    /// A quoted string (RFC 9110 §5.6.4) from its opening quote, without its quotes and with
    /// its escapes resolved; copied only when it has escapes.
    fn quoted(&mut self) -> Result<Cow<'a, [u8]>, Syntax> {
        let open = self.at;
        self.at += 1;
        let start = self.at;
        let mut unescaped: Option<Vec<u8>> = None;
        loop {
            match self.peek() {
                None => return Err(Syntax::Unclosed(open)),
                Some(b'"') => {
                    let raw = &self.line[start..self.at];
                    self.at += 1;
                    return Ok(match unescaped {
                        Some(text) => Cow::Owned(text),
                        None => Cow::Borrowed(raw),
                    });
                }
                Some(b'\\') => {
                    let escaped = self
                        .line
                        .get(self.at + 1)
                        .copied()
                        .filter(|&b| is_qdtext(b) || b == b'"' || b == b'\\')
                        .ok_or(Syntax::Unclosed(open))?;
                    unescaped
                        .get_or_insert_with(|| self.line[start..self.at].to_vec())
                        .push(escaped);
                    self.at += 2;
                }
                Some(b) if is_qdtext(b) => {
                    if let Some(text) = &mut unescaped {
                        text.push(b);
                    }
                    self.at += 1;
                }
                Some(_) => return Err(Syntax::Unclosed(open)),
            }
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A character a quoted string holds as it is: tab, space, visible ASCII but `"` and `\`, and
/// obs-text.
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..)
}

/// A node (RFC 7239 §6): an IPv4 address, an IPv6 address in brackets, `unknown` or an
/// obfuscated identifier, each with an optional port. A bare IPv6 address, which some proxies
/// write in `X-Forwarded-For`, is read too.
fn node(value: &[u8]) -> Option<ClientId> {
    let text = std::str::from_utf8(value).ok()?;
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(ClientId::Address(address));
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let address = inside.parse::<Ipv6Addr>().ok()?;
        if !after.is_empty() && !is_port(after.strip_prefix(':')?) {
            return None;
        }
        return Some(ClientId::Address(IpAddr::V6(address)));
    }
    let (name, port) = match text.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (text, None),
    };
    if port.is_some_and(|port| !is_port(port)) {
        return None;
    }
    if name.eq_ignore_ascii_case("unknown") {
        Some(ClientId::Unknown)
    } else if is_obfuscated(name) {
        Some(ClientId::Obfuscated(name.into()))
    } else {
        name.parse::<Ipv4Addr>()
            .ok()
            .map(|address| ClientId::Address(IpAddr::V4(address)))
    }
}

/// `port = 1*5DIGIT` or an obfuscated port.
fn is_port(port: &str) -> bool {
    ((1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()))
        || is_obfuscated(port)
}

/// `"_" 1*( ALPHA / DIGIT / "." / "_" / "-" )`.
fn is_obfuscated(text: &str) -> bool {
    text.strip_prefix('_').is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: &str, lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_str(line).unwrap(),
            );
        }
        headers
    }

    fn ip(text: &str) -> ClientId {
        ClientId::Address(text.parse().unwrap())
    }

    fn forwarded(lines: &[&str], trusted: usize) -> Result<ClientId, Unreadable> {
        Source::new(http::header::FORWARDED, trusted).client(&headers("forwarded", lines))
    }

    #[test]
    fn the_trusted_forwarded_element_names_the_client() {
        let cases: &[(&[&str], usize, ClientId)] = &[
            (&["for=10.0.0.4;proto=https"], 1, ip("10.0.0.4")),
            (
                &["for=192.0.2.60;proto=http;by=203.0.113.43"],
                1,
                ip("192.0.2.60"),
            ),
            // Parameter names in any case, pairs in any order, blanks around `;` and `,`.
            (
                &["Proto=https; FOR=192.0.2.7 ;by=_proxy"],
                1,
                ip("192.0.2.7"),
            ),
            (&["  for=192.0.2.7  ,  "], 1, ip("192.0.2.7")),
            // Quoted addresses with ports, IPv6 in brackets.
            (&["for=\"192.0.2.43:47011\""], 1, ip("192.0.2.43")),
            (
                &["for=\"[2001:db8:cafe::17]:4711\""],
                1,
                ip("2001:db8:cafe::17"),
            ),
            (&["for=\"[2001:db8::1]\";proto=https"], 1, ip("2001:db8::1")),
            (&["for=\"[2001:db8::1]:_port\""], 1, ip("2001:db8::1")),
            // Escapes in quoted strings, and commas and semicolons inside them.
            (
                &["for=\"\\1\\92.0.2.5\";host=\"a,b;c\\\"d\""],
                1,
                ip("192.0.2.5"),
            ),
            (
                &["host=\"x, for=203.0.113.1\";for=192.0.2.5"],
                1,
                ip("192.0.2.5"),
            ),
            // `unknown` and obfuscated identifiers, with or without ports.
            (&["for=unknown"], 1, ClientId::Unknown),
            (&["for=\"UNKNOWN:8080\""], 1, ClientId::Unknown),
            (&["for=_hidden"], 1, ClientId::Obfuscated("_hidden".into())),
            (
                &["for=\"_SEVKISEK:_port-1\""],
                1,
                ClientId::Obfuscated("_SEVKISEK".into()),
            ),
            // The rightmost element is the trusted proxy's; the client's own claims are left.
            (&["for=6.6.6.6, for=192.0.2.9"], 1, ip("192.0.2.9")),
            (
                &["for=6.6.6.6", "for=192.0.2.9;proto=https"],
                1,
                ip("192.0.2.9"),
            ),
            // Two trusted proxies: the outer one's element, across lines too.
            (
                &["for=6.6.6.6, for=192.0.2.9, for=10.0.0.2"],
                2,
                ip("192.0.2.9"),
            ),
            (
                &["for=6.6.6.6, for=192.0.2.9", "for=10.0.0.2"],
                2,
                ip("192.0.2.9"),
            ),
            // Empty elements and pairs are allowed by the grammar.
            (&[",for=192.0.2.1;;proto=http,"], 1, ip("192.0.2.1")),
            // The client's garbage on a line of its own is never read.
            (&["for=\"unclosed", "for=192.0.2.3"], 1, ip("192.0.2.3")),
        ];
        for (lines, trusted, expected) in cases {
            assert_eq!(
                forwarded(lines, *trusted).as_ref(),
                Ok(expected),
                "{lines:?} behind {trusted}"
            );
        }
    }

    #[test]
    fn a_forwarded_header_that_names_no_client_is_unreadable() {
        let header = http::header::FORWARDED;
        let syntax = |problem| Unreadable::Syntax {
            header: header.clone(),
            problem,
        };
        let node = |value: &str| Unreadable::Node {
            header: header.clone(),
            value: value.into(),
        };
        let cases: &[(&[&str], usize, Unreadable)] = &[
            (
                &[],
                1,
                Unreadable::Missing {
                    header: header.clone(),
                },
            ),
            (&["for=\"10.0.0.4"], 1, syntax(Syntax::Unclosed(4))),
            (&["for=\"10.0.0.4\\"], 1, syntax(Syntax::Unclosed(4))),
            (&["for"], 1, syntax(Syntax::Equals(3))),
            (&["for =1.2.3.4"], 1, syntax(Syntax::Equals(3))),
            (&["for="], 1, syntax(Syntax::Value(4))),
            (&["=1.2.3.4"], 1, syntax(Syntax::Name(0))),
            (
                &["for=1.2.3.4 proto=http"],
                1,
                syntax(Syntax::Separator(12)),
            ),
            (&["for=\"1.2.3.4\"x"], 1, syntax(Syntax::Separator(13))),
            (
                &["for=1.2.3.4;For=5.6.7.8"],
                1,
                syntax(Syntax::Repeated("For".into())),
            ),
            // The client's garbage on the proxy's line makes only its own request fail.
            (&["for=\"x, for=192.0.2.1"], 1, syntax(Syntax::Unclosed(4))),
            (
                &["proto=https;by=10.0.0.1"],
                1,
                Unreadable::NoFor {
                    header: header.clone(),
                },
            ),
            (
                &["for=1.2.3.4, proto=https"],
                1,
                Unreadable::NoFor {
                    header: header.clone(),
                },
            ),
            (&["for=not-an-address"], 1, node("not-an-address")),
            (&["for=\"[1.2.3.4]\""], 1, node("[1.2.3.4]")),
            (&["for=\"[2001:db8::1\""], 1, node("[2001:db8::1")),
            (&["for=\"[2001:db8::1]4711\""], 1, node("[2001:db8::1]4711")),
            (&["for=\"1.2.3.4:123456\""], 1, node("1.2.3.4:123456")),
            (&["for=\"1.2.3.4:\""], 1, node("1.2.3.4:")),
            (&["for=_"], 1, node("_")),
            (&["for=\"_a b\""], 1, node("_a b")),
            (
                &["for=1.2.3.4"],
                2,
                Unreadable::TooFew {
                    header: header.clone(),
                    found: 1,
                    trusted: 2,
                },
            ),
            (
                &[""],
                1,
                Unreadable::TooFew {
                    header: header.clone(),
                    found: 0,
                    trusted: 1,
                },
            ),
        ];
        for (lines, trusted, expected) in cases {
            assert_eq!(
                forwarded(lines, *trusted).as_ref(),
                Err(expected),
                "{lines:?} behind {trusted}"
            );
        }
    }

    #[test]
    fn a_list_header_names_the_client_by_its_rightmost_entries() {
        let xff = |lines: &[&str], trusted| {
            Source::new(HeaderName::from_static("x-forwarded-for"), trusted)
                .client(&headers("x-forwarded-for", lines))
        };
        assert_eq!(xff(&["1.2.3.4, 203.0.113.9"], 1), Ok(ip("203.0.113.9")));
        assert_eq!(xff(&["1.2.3.4", "203.0.113.9 ,"], 1), Ok(ip("203.0.113.9")));
        assert_eq!(xff(&["1.2.3.4, 203.0.113.9"], 2), Ok(ip("1.2.3.4")));
        assert_eq!(xff(&["2001:db8::7"], 1), Ok(ip("2001:db8::7")));
        assert_eq!(xff(&["[2001:db8::7]:443"], 1), Ok(ip("2001:db8::7")));
        assert_eq!(xff(&["192.0.2.1:8080"], 1), Ok(ip("192.0.2.1")));
        assert_eq!(xff(&["unknown"], 1), Ok(ClientId::Unknown));
        // `for=` means nothing outside `Forwarded`.
        assert!(matches!(
            xff(&["for=1.2.3.4"], 1),
            Err(Unreadable::Node { .. })
        ));
        assert!(matches!(
            xff(&["not an address"], 1),
            Err(Unreadable::Node { .. })
        ));
        assert!(matches!(xff(&[], 1), Err(Unreadable::Missing { .. })));
        assert!(matches!(
            xff(&["1.2.3.4"], 2),
            Err(Unreadable::TooFew { found: 1, .. })
        ));
    }

    #[test]
    fn messages_name_the_header_and_quote_little_of_it() {
        let long = format!("for=\"_{}\"", "a b".repeat(100));
        let error = forwarded(&[&long], 1).unwrap_err().to_string();
        assert!(
            error.starts_with("the `forwarded` header names the client \"_a ba"),
            "{error}"
        );
        assert!(error.len() < 250, "{error}");
        let error = forwarded(&[], 1).unwrap_err().to_string();
        assert_eq!(error, "the request has no `forwarded` header");
    }
}
