//! Who may use the console (O-09, O-10). It approves tool definitions, so it is guarded like a
//! door:
//!
//! - On a loopback admin address without a token, whoever can connect to it (someone on this
//!   machine) may use it; the `Host` header must name that address (`127.0.0.1:PORT`,
//!   `[::1]:PORT` or `localhost:PORT`), so that a web page whose name was rebound to 127.0.0.1
//!   reads nothing. (With a token the session cookie does that, and any name is answered:
//!   a TLS proxy in front may use its own.)
//! - On any other admin address it is refused (403, saying why) unless a token is configured.
//! - With a token (on any address), a browser signs in with a form and gets a session cookie
//!   of its own (`HttpOnly`, `SameSite=Strict`, `Path=/console`, `Max-Age` of
//!   [`SESSION_TTL`], and `Secure` when the console is reached over TLS): a random value made
//!   for that sign-in, never the token itself, forgotten when it expires or the browser signs
//!   out; at most [`MOST_SESSIONS`] at once (the oldest goes). Token and cookie are compared
//!   in constant time. Wrong tokens are throttled per address: after [`MOST_TRIES`] in
//!   [`TRIES_WINDOW`], the next tries are refused (429) until the window ends, and said once.
//! - Every POST carries a CSRF token in a hidden field (compared in constant time) and an
//!   `Origin` that is the console's own; GET never changes anything. A signed-in browser's
//!   CSRF token is its session's own; the sign-in form's (and a console without a token's) is
//!   this process's.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, Method, StatusCode, header};
use sha2::{Digest as _, Sha256};

use super::html;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "toolwire_console";

/// The shortest console token accepted: one short enough to guess is refused at start.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The least entropy a console token must show, in bits (its length times the Shannon
/// entropy of its characters): `aaaaaaaaaaaaaaaa` is refused whatever its length;
/// `openssl rand -hex 32` has about 250.
pub const MIN_TOKEN_BITS: f64 = 60.0;

/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// The most sessions at once; a new sign-in past it ends the oldest.
pub const MOST_SESSIONS: usize = 64;

/// How many wrong tokens one address may send in [`TRIES_WINDOW`].
pub const MOST_TRIES: u32 = 5;

/// The window of [`MOST_TRIES`].
pub const TRIES_WINDOW: Duration = Duration::from_secs(60);

/// The addresses whose tries are kept at most (past it, the oldest windows go first).
const MOST_TRIERS: usize = 4096;

/// The CSRF token of a request's forms: its session's, or this process's (see the module).
#[derive(Debug, Clone)]
pub(crate) struct Csrf(pub(crate) String);

impl Csrf {
    /// Whether `field` is this CSRF token.
    pub(crate) fn matches(&self, field: &str) -> bool {
        same(&digest(field), &digest(&self.0))
    }
}

/// A signed-in browser.
struct Session {
    /// The SHA-256 of its cookie's value.
    id: [u8; 32],
    /// Its forms' CSRF token.
    csrf: String,
    expires: Instant,
}

/// One address's wrong tokens in its window.
struct Tries {
    since: Instant,
    count: u32,
}

/// The console's access rules for one process.
pub(crate) struct Access {
    /// The SHA-256 of the console token, when one is configured.
    token: Option<[u8; 32]>,
    /// The signed-in browsers.
    sessions: Mutex<Vec<Session>>,
    /// The CSRF token of the sign-in form and of a console without a token: this process's.
    csrf: String,
    /// Wrong tokens by address.
    tries: Mutex<HashMap<Option<IpAddr>, Tries>>,
    /// Where the admin endpoints listen.
    admin: SocketAddr,
}

impl Access {
    pub(crate) fn new(admin: SocketAddr, token: Option<&str>) -> Access {
        Access {
            token: token.map(digest),
            sessions: Mutex::default(),
            csrf: random_hex(),
            tries: Mutex::default(),
            admin,
        }
    }

    /// Whether a token is configured (browsers sign in).
    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `token` is the console token.
    pub(crate) fn token_matches(&self, token: &str) -> bool {
        self.token
            .as_ref()
            .is_some_and(|expected| same(expected, &digest(token)))
    }

    /// A new session (a sign-in): its `Set-Cookie` value; `secure` when the browser reached
    /// the console over TLS.
    pub(crate) fn sign_in(&self, secure: bool) -> String {
        let value = random_hex();
        let now = Instant::now();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.expires > now);
        if sessions.len() >= MOST_SESSIONS {
            sessions.remove(0);
        }
        sessions.push(Session {
            id: digest(&value),
            csrf: random_hex(),
            expires: now + SESSION_TTL,
        });
        format!(
            "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/console; Max-Age={}{}",
            SESSION_TTL.as_secs(),
            if secure { "; Secure" } else { "" }
        )
    }

    /// Ends the session of `headers`' cookie; the `Set-Cookie` value that forgets it.
    pub(crate) fn sign_out(&self, headers: &HeaderMap) -> String {
        let ids: Vec<[u8; 32]> = cookies(headers).map(|value| digest(&value)).collect();
        lock(&self.sessions).retain(|s| !ids.iter().any(|id| same(id, &s.id)));
        format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0")
    }

    /// The CSRF token of the session `headers`' cookie names, if it is one that has not
    /// expired.
    fn session_csrf(&self, headers: &HeaderMap) -> Option<String> {
        let now = Instant::now();
        let sessions = lock(&self.sessions);
        cookies(headers).find_map(|value| {
            let id = digest(&value);
            sessions
                .iter()
                .find(|s| s.expires > now && same(&s.id, &id))
                .map(|s| s.csrf.clone())
        })
    }

    /// How long `peer` must wait before another try, when it sent too many wrong tokens.
    pub(crate) fn wait_for(&self, peer: Option<IpAddr>) -> Option<Duration> {
        let tries = lock(&self.tries);
        let tried = tries.get(&peer)?;
        let elapsed = tried.since.elapsed();
        (tried.count >= MOST_TRIES && elapsed < TRIES_WINDOW).then(|| TRIES_WINDOW - elapsed)
    }

    /// Notes a wrong token from `peer`; whether to say so (the first [`MOST_TRIES`] of a
    /// window are said, the rest are only counted).
    pub(crate) fn tried_wrong(&self, peer: Option<IpAddr>) -> bool {
        let mut tries = lock(&self.tries);
        if tries.len() >= MOST_TRIERS && !tries.contains_key(&peer) {
            tries.retain(|_, t| t.since.elapsed() < TRIES_WINDOW);
            if tries.len() >= MOST_TRIERS {
                let oldest = tries.iter().min_by_key(|(_, t)| t.since).map(|(k, _)| *k);
                if let Some(oldest) = oldest {
                    tries.remove(&oldest);
                }
            }
        }
        let tried = tries.entry(peer).or_insert(Tries {
            since: Instant::now(),
            count: 0,
        });
        if tried.since.elapsed() >= TRIES_WINDOW {
            *tried = Tries {
                since: Instant::now(),
                count: 0,
            };
        }
        tried.count += 1;
        tried.count <= MOST_TRIES
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

    /// The request's CSRF token, and whether it comes from a signed-in browser (always,
    /// without a token).
    fn csrf_of(&self, headers: &HeaderMap) -> (Csrf, bool) {
        if self.token.is_none() {
            return (Csrf(self.csrf.clone()), true);
        }
        match self.session_csrf(headers) {
            Some(csrf) => (Csrf(csrf), true),
            None => (Csrf(self.csrf.clone()), false),
        }
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
    let (csrf, signed_in) = access.csrf_of(headers);
    if !login && !signed_in {
        return html::login_form(&csrf.0, super::LOGIN_PATH, StatusCode::UNAUTHORIZED, None);
    }
    let mut request = request;
    request.extensions_mut().insert(csrf);
    next.run(request).await
}

/// The address a request came from, when the server knows it (served with connect info).
pub(crate) fn peer(request: &http::Extensions) -> Option<IpAddr> {
    request
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

/// Whether a browser reached the console over TLS (a proxy in front says so, or the form's
/// `Origin` is `https`).
pub(crate) fn over_tls(headers: &HeaderMap) -> bool {
    let said = |name: &str, value: &str| {
        headers
            .get(name)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| h.to_ascii_lowercase().starts_with(value))
    };
    said("x-forwarded-proto", "https") || said("origin", "https://")
}

/// The values of the session cookies `headers` carry.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = String> + '_ {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The entropy `token` shows, in bits: its length times the Shannon entropy of its
/// characters.
pub(crate) fn token_bits(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    let mut counts: HashMap<char, usize> = HashMap::new();
    for c in &chars {
        *counts.entry(*c).or_default() += 1;
    }
    let n = chars.len() as f64;
    let per_char: f64 = counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum();
    per_char * n
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

    /// The cookie value of a `Set-Cookie` line.
    fn value_of(set_cookie: &str) -> String {
        set_cookie
            .split(';')
            .next()
            .and_then(|pair| pair.split_once('='))
            .unwrap()
            .1
            .to_owned()
    }

    #[test]
    fn each_sign_in_is_a_session_of_its_own_with_its_own_csrf_until_signed_out() {
        let access = Access::new(
            "127.0.0.1:9090".parse().unwrap(),
            Some("a-long-enough-token"),
        );
        let (anyone, signed_in) = access.csrf_of(&headers(&[]));
        assert!(!signed_in);
        let first = access.sign_in(false);
        assert!(
            first.contains("Max-Age=28800") && !first.contains("Secure"),
            "{first}"
        );
        assert!(access.sign_in(true).ends_with("; Secure"));
        let second = value_of(&access.sign_in(false));
        let first = value_of(&first);
        assert_ne!(first, second);
        let with = |value: &str| headers(&[("cookie", &format!("other=1; {COOKIE}={value}"))]);
        let (one, signed) = access.csrf_of(&with(&first));
        assert!(signed);
        let (two, _) = access.csrf_of(&with(&second));
        assert!(
            one.0 != two.0 && one.0 != anyone.0,
            "a CSRF token per session"
        );
        assert!(!one.matches(&two.0));
        assert!(!access.csrf_of(&with("guess")).1);
        access.sign_out(&with(&first));
        assert!(!access.csrf_of(&with(&first)).1, "signed out");
        assert!(access.csrf_of(&with(&second)).1, "the other session stays");
        assert!(access.token_matches("a-long-enough-token"));
        assert!(!access.token_matches("a-long-enough-tokem"));
    }

    #[test]
    fn wrong_tokens_are_throttled_per_address() {
        let access = Access::new("127.0.0.1:9090".parse().unwrap(), Some("x"));
        let (one, two) = (
            Some("10.0.0.1".parse().unwrap()),
            Some("10.0.0.2".parse().unwrap()),
        );
        for _ in 0..MOST_TRIES {
            assert!(access.wait_for(one).is_none());
            assert!(access.tried_wrong(one), "said");
        }
        assert!(!access.tried_wrong(one), "counted, not said");
        assert!(access.wait_for(one).is_some_and(|w| w <= TRIES_WINDOW));
        assert!(
            access.wait_for(two).is_none(),
            "another address is not held back"
        );
    }

    #[test]
    fn a_low_entropy_token_shows_few_bits() {
        assert_eq!(token_bits("aaaaaaaaaaaaaaaa"), 0.0);
        assert!(token_bits("abababababababab") < MIN_TOKEN_BITS);
        assert!(token_bits("0123456789abcdef-console-token") > MIN_TOKEN_BITS);
        assert!(token_bits("correct-horse-battery-staple") > MIN_TOKEN_BITS);
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
