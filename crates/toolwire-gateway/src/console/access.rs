//! Who may use the console (O-09, O-10). It approves tool definitions, so it is guarded like a
//! door:
//!
//! - On a loopback admin address without a token, whoever can connect to it (someone on this
//!   machine) may use it; the `Host` header must name that address (`127.0.0.1:PORT`,
//!   `[::1]:PORT` or `localhost:PORT`), so that a web page whose name was rebound to 127.0.0.1
//!   reads nothing. (With a token the session cookie does that, and any name is answered:
//!   a TLS proxy in front may use its own.)
//! - On any other admin address it is refused (403, saying why) unless a token is configured.
//! - With a token (on any address), a browser signs in once with a form and gets a session
//!   cookie (`HttpOnly`, `SameSite=Strict`, `Path=/console`): a random value of this process,
//!   never the token itself. Token and cookie are compared in constant time.
//! - Every POST carries this process's CSRF token in a hidden field (compared in constant
//!   time) and an `Origin` that is the console's own; GET never changes anything.

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, Method, StatusCode, header};
use sha2::{Digest as _, Sha256};

use super::html;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "toolwire_console";

/// The shortest console token accepted: one short enough to guess is refused at start.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The console's access rules for one process.
pub(crate) struct Access {
    /// The SHA-256 of the console token, when one is configured.
    token: Option<[u8; 32]>,
    /// The session cookie's value: random, for this process.
    session: String,
    /// The CSRF token of every form: random, for this process.
    csrf: String,
    /// Where the admin endpoints listen.
    admin: SocketAddr,
}

impl Access {
    pub(crate) fn new(admin: SocketAddr, token: Option<&str>) -> Access {
        Access {
            token: token.map(digest),
            session: random_hex(),
            csrf: random_hex(),
            admin,
        }
    }

    /// The CSRF token to put in a form's hidden `csrf` field.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether `field` is this process's CSRF token.
    pub(crate) fn csrf_matches(&self, field: &str) -> bool {
        same(&digest(field), &digest(&self.csrf))
    }

    /// Whether `token` is the console token.
    pub(crate) fn token_matches(&self, token: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|expected| same(expected, &digest(token)))
    }

    /// The `Set-Cookie` value that signs a browser in.
    pub(crate) fn session_cookie(&self) -> String {
        format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/console",
            self.session
        )
    }

    /// Why a request is refused before anything else, if it is: a console that may not be
    /// served here, or a `Host` that is not the console's.
    fn refusal(&self, headers: &HeaderMap) -> Option<(StatusCode, String)> {
        if !self.admin.ip().is_loopback() && self.token.is_none() {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "The console is off on {}: this admin address is not a loopback one, and \
                     the console approves tool definitions. Configure a console token \
                     (toolwire gateway --console-token-env NAME) to serve it here, or use a loopback --admin \
                     address.",
                    self.admin
                ),
            ));
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        // With a token, the session cookie (bound to the name the browser signed in on) is
        // what keeps other sites out, and a reverse proxy may name the console as it likes.
        let unguarded = self.token.is_none();
        if unguarded && !self.loopback_hosts().iter().any(|h| h == host) {
            return Some((
                StatusCode::FORBIDDEN,
                format!(
                    "The console answers only requests addressed to {} (or localhost:{}), not \
                     to {host:?}.",
                    self.admin,
                    self.admin.port()
                ),
            ));
        }
        None
    }

    /// The `Host` values a browser sends to the loopback admin address.
    fn loopback_hosts(&self) -> Vec<String> {
        let port = self.admin.port();
        vec![
            self.admin.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]
    }

    /// Whether the request comes from a signed-in browser (always, without a token).
    fn signed_in(&self, headers: &HeaderMap) -> bool {
        if self.token.is_none() {
            return true;
        }
        let expected = digest(&self.session);
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && same(&digest(value), &expected))
    }

    /// Whether a state-changing request comes from a page of the console itself: its
    /// `Origin` is `http://HOST` of the request (a browser always sends `Origin` with a POST).
    fn same_origin(headers: &HeaderMap) -> bool {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
        let fetched = headers
            .get("sec-fetch-site")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("same-origin");
        match (host, origin) {
            // `https` when a TLS proxy stands in front of the admin address.
            (Some(host), Some(origin)) => {
                let own = origin
                    .strip_prefix("http://")
                    .or(origin.strip_prefix("https://"));
                own == Some(host) && matches!(fetched, "same-origin" | "none")
            }
            _ => false,
        }
    }
}

/// The guard in front of every console route: the refusals, the sign-in, the origin of
/// state-changing requests, and the hardening headers on whatever is answered.
pub(crate) async fn guard(
    State(access): State<std::sync::Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = check(&access, request, next).await;
    html::harden(&mut response);
    response
}

async fn check(access: &Access, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some((status, reason)) = access.refusal(headers) {
        return html::bare(
            status,
            "Console refused",
            &format!("<p>{}</p>", html::escape(&reason)),
        );
    }
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes && !Access::same_origin(headers) {
        return html::bare(
            StatusCode::FORBIDDEN,
            "Request refused",
            "<p>This form was not sent from a page of this console (its Origin is missing or \
             another site's). Open the console and submit it from there.</p>",
        );
    }
    let login = request.uri().path() == super::LOGIN_PATH;
    if !login && !access.signed_in(headers) {
        return super::login::form(access, StatusCode::UNAUTHORIZED, None);
    }
    next.run(request).await
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Whether two digests are equal, in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex() -> String {
    toolwire_protocol::hex::encode(&rand::random::<[u8; 32]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_post_must_come_from_the_consoles_own_origin() {
        let host = ("host", "127.0.0.1:9090");
        for (pairs, allowed) in [
            (vec![host, ("origin", "http://127.0.0.1:9090")], true),
            (vec![host], false),
            (vec![host, ("origin", "http://evil.example")], false),
            (vec![host, ("origin", "null")], false),
            (vec![host, ("origin", "https://127.0.0.1:9090")], true),
            (
                vec![host, ("origin", "http://127.0.0.1:9090.evil.example")],
                false,
            ),
            (
                vec![
                    host,
                    ("origin", "http://127.0.0.1:9090"),
                    ("sec-fetch-site", "cross-site"),
                ],
                false,
            ),
        ] {
            assert_eq!(Access::same_origin(&headers(&pairs)), allowed, "{pairs:?}");
        }
    }

    #[test]
    fn only_the_sessions_cookie_signs_in() {
        let access = Access::new(
            "127.0.0.1:9090".parse().unwrap(),
            Some("a-long-enough-token"),
        );
        let cookie = format!("other=1; {COOKIE}={}", access.session);
        assert!(access.signed_in(&headers(&[("cookie", &cookie)])));
        assert!(!access.signed_in(&headers(&[("cookie", "toolwire_console=guess")])));
        assert!(!access.signed_in(&headers(&[])));
        assert!(access.token_matches("a-long-enough-token"));
        assert!(!access.token_matches("a-long-enough-tokem"));
    }

    #[test]
    fn a_loopback_console_answers_only_its_own_host_names() {
        let access = Access::new("127.0.0.1:9090".parse().unwrap(), None);
        assert!(
            access
                .refusal(&headers(&[("host", "127.0.0.1:9090")]))
                .is_none()
        );
        assert!(
            access
                .refusal(&headers(&[("host", "localhost:9090")]))
                .is_none()
        );
        assert!(
            access
                .refusal(&headers(&[("host", "rebound.example:9090")]))
                .is_some()
        );
        let open = Access::new("0.0.0.0:9090".parse().unwrap(), None);
        let (status, reason) = open
            .refusal(&headers(&[("host", "10.0.0.1:9090")]))
            .unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(reason.contains("not a loopback"), "{reason}");
    }
}
