//! Where the OAuth flow may send a request or a person, and the HTTP client it sends with.
//! Every URL the flow fetches comes from the server or from metadata it points to (the
//! challenge's `resource_metadata`, the resource's `authorization_servers`, the issuer's
//! endpoints), so none is trusted. The spec reaches authorization servers over HTTPS (A-08,
//! A-09), and [`AuthHttp`] keeps to it:
//!
//! - `https:` only; plain `http:` only at the MCP server's own origin (whose traffic is in the
//!   clear already), or anywhere with the development opt-in
//!   ([`OAuth::allow_insecure_http`](super::OAuth::allow_insecure_http));
//! - never a link-local address (169.254.0.0/16, fe80::/10, either written as an IPv4-mapped
//!   IPv6 address), where cloud metadata services answer, nor the two such services outside
//!   those ranges (AWS's fd00:ec2::254, Alibaba Cloud's 100.100.100.200): not when the URL
//!   names one, and not when a name resolves to one. Names are checked by the resolver the
//!   connection itself uses, so a name whose answer changes between a check and the
//!   connection gains nothing (a literal address never reaches a resolver, so URLs are checked
//!   too). Behind an HTTP proxy the proxy resolves names: literal addresses are still refused;
//! - no user name or password in the URL;
//! - no redirect followed, and no byte of an answer in an error: its status and content type
//!   only.
//!
//! The authorization endpoint is not fetched but opened in the person's browser: it must be
//! `https:`, or `http:` on this machine ([`check_authorization_endpoint`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use url::{Host, Url};

/// The largest metadata document read (a metadata document is a few KiB).
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// How much of a URL an error repeats.
const SHOWN_URL_CHARS: usize = 200;

/// Why a URL is not fetched (or opened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Not a URL.
    #[error("{:?} is not a URL", shown(url))]
    NotAUrl {
        /// What was given.
        url: String,
    },
    /// Neither `https:` nor `http:`.
    #[error("{} is not an https URL", shown(url))]
    Scheme {
        /// The URL.
        url: String,
    },
    /// Plain `http:` elsewhere than the MCP server's own origin, without the development
    /// opt-in.
    #[error(
        "{} is plain http: authorization servers and their metadata are reached over https, \
         or over plain http only at the MCP server's own origin ({origin}). For a development \
         authorization server on plain http, allow it: `--insecure-oauth-http` (toolwire), \
         `OAuth::allow_insecure_http` (library)",
        shown(url)
    )]
    PlainHttp {
        /// The URL.
        url: String,
        /// The MCP server's origin.
        origin: String,
    },
    /// A user name or password in the URL.
    #[error("{} carries a user name or password", shown(url))]
    Credentials {
        /// The URL.
        url: String,
    },
    /// A link-local address, or another where a cloud metadata service answers.
    #[error(
        "{} is at {address}, a link-local address (where cloud metadata services answer): it is \
         never asked",
        shown(url)
    )]
    LinkLocal {
        /// The URL.
        url: String,
        /// The address it names.
        address: IpAddr,
    },
    /// An authorization endpoint (a page for the person's browser) on plain `http:` on
    /// another machine.
    #[error(
        "{} is plain http on another machine: a sign-in page is opened only over https, or over \
         http on this machine",
        shown(url)
    )]
    PlainHttpPage {
        /// The URL.
        url: String,
    },
}

/// At most [`SHOWN_URL_CHARS`] characters of `url`.
fn shown(url: &str) -> String {
    match url.char_indices().nth(SHOWN_URL_CHARS) {
        Some((cut, _)) => format!("{}…", &url[..cut]),
        None => url.to_owned(),
    }
}

/// Whether `ip` is never to be asked: link-local (169.254.0.0/16, fe80::/10, also as an
/// IPv4-mapped or -compatible IPv6 address), or a cloud metadata service's address outside
/// those ranges.
pub fn forbidden_address(ip: IpAddr) -> bool {
    const AWS_IPV6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    const ALIBABA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
    let v4 = |v4: Ipv4Addr| v4.is_link_local() || v4 == ALIBABA;
    match ip {
        IpAddr::V4(ip) => v4(ip),
        IpAddr::V6(ip) => {
            ip.is_unicast_link_local() || ip == AWS_IPV6 || ip.to_ipv4().is_some_and(v4)
        }
    }
}

/// A URL that passed the policy: the only kind [`AuthHttp`] sends to.
#[derive(Debug, Clone)]
pub(crate) struct Checked(Url);

/// The rules every URL shares: a URL, `https:` or `http:`, no credentials, no forbidden
/// address.
fn parse(url: &str) -> Result<Url, UrlError> {
    let owned = || url.to_owned();
    let parsed = Url::parse(url).map_err(|_| UrlError::NotAUrl { url: owned() })?;
    if !matches!(parsed.scheme(), "https" | "http") {
        return Err(UrlError::Scheme { url: owned() });
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlError::Credentials { url: owned() });
    }
    let address = match parsed.host() {
        Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        Some(Host::Domain(_)) => None,
        None => return Err(UrlError::NotAUrl { url: owned() }),
    };
    if let Some(address) = address.filter(|a| forbidden_address(*a)) {
        return Err(UrlError::LinkLocal {
            url: owned(),
            address,
        });
    }
    Ok(parsed)
}

/// Whether `url`'s host is this machine: `localhost` or a loopback address.
fn on_this_machine(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether an authorization endpoint may be opened in the person's browser: `https:`, or
/// `http:` on this machine (`localhost`, a loopback address), with no user name or password
/// (which would let a URL read as another site) and no link-local address.
pub fn check_authorization_endpoint(url: &str) -> Result<(), UrlError> {
    let parsed = parse(url)?;
    if parsed.scheme() == "http" && !on_this_machine(&parsed) {
        return Err(UrlError::PlainHttpPage {
            url: url.to_owned(),
        });
    }
    Ok(())
}

/// The HTTP client of one MCP server's OAuth flow, which sends only where the rules above
/// allow: `https:`, plain `http:` at the server's own origin (or anywhere with
/// [`allow_insecure_http`](AuthHttp::allow_insecure_http)), never a link-local address; no
/// redirects; 10 s per request unless one says otherwise.
#[derive(Clone)]
pub struct AuthHttp {
    /// The client, or why it could not be built (then nothing is sent: a client built
    /// otherwise would lack the resolver and the redirect policy).
    client: Result<reqwest::Client, String>,
    server: String,
    origin: url::Origin,
    insecure_http: bool,
}

impl std::fmt::Debug for AuthHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthHttp")
            .field("server", &self.server)
            .field("insecure_http", &self.insecure_http)
            .finish_non_exhaustive()
    }
}

impl AuthHttp {
    /// The client for the flow of the MCP server at `server` (its URL).
    pub fn new(server: impl Into<String>) -> AuthHttp {
        AuthHttp::with_resolver(server.into(), Arc::new(Resolver(system_lookup)))
    }

    fn with_resolver(server: String, resolver: Arc<dyn reqwest::dns::Resolve>) -> AuthHttp {
        let origin = Url::parse(&server)
            .map(|u| u.origin())
            .unwrap_or_else(|_| url::Origin::new_opaque());
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(resolver)
            .build()
            .map_err(|e| format!("the OAuth HTTP client cannot be built: {}", describe(&e)));
        AuthHttp {
            client,
            server,
            origin,
            insecure_http: false,
        }
    }

    /// Development only: plain `http:` authorization servers and metadata anywhere, not only
    /// at the MCP server's own origin. Link-local addresses stay refused, and a sign-in page
    /// must still be `https:` or on this machine.
    pub fn allow_insecure_http(mut self, allow: bool) -> AuthHttp {
        self.insecure_http = allow;
        self
    }

    /// The MCP server's URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether the flow may send a request to `url`.
    pub fn check(&self, url: &str) -> Result<(), UrlError> {
        self.checked(url).map(|_| ())
    }

    pub(crate) fn checked(&self, url: &str) -> Result<Checked, UrlError> {
        let parsed = parse(url)?;
        if parsed.scheme() == "http" && !self.insecure_http && parsed.origin() != self.origin {
            return Err(UrlError::PlainHttp {
                url: url.to_owned(),
                origin: self.origin.ascii_serialization(),
            });
        }
        Ok(Checked(parsed))
    }

    /// A POST to `url`.
    pub(crate) fn post(&self, url: &Checked) -> Result<reqwest::RequestBuilder, String> {
        Ok(self.client.as_ref()?.post(url.0.clone()))
    }

    /// GETs `url` and reads a JSON document of at most [`MAX_DOCUMENT_BYTES`]. What went wrong
    /// is said without a byte of the answer.
    pub(crate) async fn get_json<T: DeserializeOwned>(&self, url: &Checked) -> Result<T, String> {
        let mut response = self
            .client
            .as_ref()?
            .get(url.0.clone())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!(
                "HTTP {}{}",
                status.as_u16(),
                content_type(&response)
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| {
            format!(
                "HTTP {}{}: {}",
                status.as_u16(),
                content_type(&response),
                unexpected(&e)
            )
        })
    }
}

/// ` (TYPE)`: the media type of a response, if it is a short plain one, for an error.
pub(crate) fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim())
        .filter(|t| !t.is_empty() && t.len() <= 64 && t.bytes().all(|b| b.is_ascii_graphic()))
        .map(|t| format!(" ({t})"))
        .unwrap_or_default()
}

/// Why a body is not the JSON expected, by where it went wrong, never by what it holds (a
/// JSON error's message quotes the value it did not expect).
pub(crate) fn unexpected(error: &serde_json::Error) -> String {
    let what = match error.classify() {
        serde_json::error::Category::Data => "a JSON document of another shape",
        _ => "not JSON",
    };
    format!("{what} (line {}, column {})", error.line(), error.column())
}

/// A transport error with its causes (a refused address among them); none of them holds the
/// answer's bytes.
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let mut text = crate::shown::shown_error(error);
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How names become addresses: the system's resolver, or a test's.
type Lookup = fn(String) -> futures::future::BoxFuture<'static, std::io::Result<Vec<SocketAddr>>>;

fn system_lookup(
    name: String,
) -> futures::future::BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> {
    Box::pin(async move { Ok(tokio::net::lookup_host((name.as_str(), 0)).await?.collect()) })
}

/// The resolver of [`AuthHttp`]'s connections: a name that resolves to a forbidden address is
/// refused as a whole (its other addresses are not tried either).
struct Resolver(Lookup);

/// A name resolved to a forbidden address.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name} resolves to {address}, a link-local address (where cloud metadata services answer): it is never asked"
)]
struct ResolvedForbidden {
    name: String,
    address: IpAddr,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let name = name.as_str().to_owned();
        let lookup = (self.0)(name.clone());
        Box::pin(async move {
            let addrs = lookup.await?;
            if let Some(address) = addrs
                .iter()
                .map(SocketAddr::ip)
                .find(|a| forbidden_address(*a))
            {
                return Err(ResolvedForbidden { name, address }.into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_and_metadata_addresses_are_forbidden_in_every_form() {
        for (address, forbidden) in [
            ("169.254.169.254", true),
            ("169.254.0.1", true),
            ("100.100.100.200", true),
            ("fe80::1", true),
            ("febf::1", true),
            ("fd00:ec2::254", true),
            ("::ffff:169.254.169.254", true),
            ("::169.254.169.254", true),
            ("127.0.0.1", false),
            ("10.0.0.1", false),
            ("169.255.0.1", false),
            ("::1", false),
            ("fec0::1", false),
            ("::ffff:127.0.0.1", false),
            ("2001:db8::1", false),
        ] {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(forbidden_address(ip), forbidden, "{address}");
        }
    }

    #[test]
    fn urls_are_fetched_over_https_or_over_http_at_the_servers_origin() {
        let http = AuthHttp::new("http://127.0.0.1:5000/mcp");
        let insecure = AuthHttp::new("http://127.0.0.1:5000/mcp").allow_insecure_http(true);
        let https = AuthHttp::new("https://mcp.example.com/mcp");
        type Case<'a> = (&'a AuthHttp, &'a str, Option<&'a str>);
        let cases: &[Case] = &[
            (&https, "https://auth.example.com/.well-known/x", None),
            (&https, "https://auth.example.com:8443/token", None),
            (&https, "https://127.0.0.1/token", None),
            (&https, "http://auth.example.com/token", Some("plain http")),
            // The same host over plain http is another origin.
            (&https, "http://mcp.example.com/token", Some("plain http")),
            (
                &http,
                "http://127.0.0.1:5000/.well-known/oauth-protected-resource",
                None,
            ),
            (&http, "http://127.0.0.1:5001/token", Some("plain http")),
            (&http, "http://localhost:5000/token", Some("plain http")),
            (&insecure, "http://127.0.0.1:5001/token", None),
            (&insecure, "http://auth.internal/token", None),
            // The opt-in allows plain http, nothing else.
            (
                &insecure,
                "http://169.254.169.254/latest/meta-data/",
                Some("link-local"),
            ),
            (&insecure, "http://2852039166/", Some("link-local")),
            (&insecure, "http://0xa9.0xfe.0xa9.0xfe/", Some("link-local")),
            (&insecure, "http://[::ffff:a9fe:a9fe]/", Some("link-local")),
            (&insecure, "http://[fe80::1%25eth0]/", Some("not a URL")),
            (&https, "https://[fe80::1]/", Some("link-local")),
            (&https, "https://[fd00:ec2::254]/", Some("link-local")),
            (&insecure, "file:///etc/passwd", Some("not an https URL")),
            (
                &insecure,
                "gopher://auth.example.com/",
                Some("not an https URL"),
            ),
            (
                &https,
                "https://user:pw@auth.example.com/",
                Some("user name or password"),
            ),
            (
                &https,
                "https://auth.example.com@evil.example/",
                Some("user name or password"),
            ),
            (&https, "/token", Some("not a URL")),
        ];
        for (http, url, refused) in cases {
            match (http.check(url), refused) {
                (Ok(()), None) => {}
                (Err(e), Some(why)) => assert!(e.to_string().contains(why), "{url}: {e}"),
                (got, _) => panic!("{url} ({}): {got:?}", http.server()),
            }
        }
        // A server that is not a URL has no origin: plain http is nowhere allowed.
        assert!(
            AuthHttp::new("not a url")
                .check("http://127.0.0.1/")
                .is_err()
        );
    }

    #[test]
    fn a_sign_in_page_is_https_or_on_this_machine() {
        for (url, allowed) in [
            ("https://auth.example.com/authorize?x=1", true),
            ("http://127.0.0.1:8080/authorize", true),
            ("http://127.8.9.10/authorize", true),
            ("http://[::1]:8080/authorize", true),
            ("http://localhost:3000/authorize", true),
            ("http://LOCALHOST/authorize", true),
            ("http://localhost.evil.example/authorize", false),
            ("http://auth.example.com/authorize", false),
            ("http://10.0.0.1/authorize", false),
            ("https://169.254.169.254/authorize", false),
            ("file:///etc/passwd", false),
            ("javascript:alert(1)", false),
            ("data:text/html,hi", false),
            ("https://accounts.example.com@evil.example/", false),
            ("not a url", false),
        ] {
            assert_eq!(check_authorization_endpoint(url).is_ok(), allowed, "{url}");
        }
    }

    #[test]
    fn long_urls_are_cut_in_messages() {
        let url = format!("file:///{}", "a".repeat(10_000));
        let message = parse(&url).unwrap_err().to_string();
        assert!(message.len() < 400, "{message}");
    }

    fn to_link_local(
        _: String,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<SocketAddr>>> {
        Box::pin(async {
            Ok(vec![
                "203.0.113.7:0".parse().unwrap(),
                "169.254.169.254:0".parse().unwrap(),
            ])
        })
    }

    /// A name that resolves to a link-local address is refused by the connection's own
    /// resolver, whatever else it resolves to, and the error says so.
    #[tokio::test]
    async fn a_name_resolving_to_a_link_local_address_is_never_connected_to() {
        let http = AuthHttp::with_resolver(
            "https://mcp.example.com/mcp".into(),
            Arc::new(Resolver(to_link_local)),
        )
        .allow_insecure_http(true);
        let url = http
            .checked("http://metadata.example.internal/latest/")
            .unwrap();
        let error = http.get_json::<serde_json::Value>(&url).await.unwrap_err();
        assert!(
            error.contains("metadata.example.internal resolves to 169.254.169.254"),
            "{error}"
        );
        // The system's resolver is the one in use otherwise: `localhost` is not refused.
        let system = Resolver(system_lookup);
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let addrs: Vec<_> = reqwest::dns::Resolve::resolve(&system, name)
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
