//! The settings of the HTTP transport.

use std::sync::Arc;
use std::time::Duration;

use super::{DEFAULT_FLOOD_LIMIT, OAuth, checks};
use crate::safety::limits::RateLimit;
use crate::state::sessions::{MemorySessionStore, SessionStore};

/// The default cap on open connections: room for 16,000 listen streams and other clients.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;

/// The default bound on a request's line and headers together: 64 KiB.
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;

/// Settings of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub(super) path: String,
    pub(super) allowed_hosts: Vec<String>,
    pub(super) any_host: bool,
    pub(super) allowed_origins: Vec<String>,
    pub(super) any_origin: bool,
    pub(super) keep_alive: Duration,
    pub(super) shutdown_grace: Duration,
    pub(super) principal: Option<PrincipalFn>,
    pub(super) session_store: Option<SessionStoreHandle>,
    pub(super) max_sessions: usize,
    pub(super) session_idle: Duration,
    pub(super) oauth: Option<OAuth>,
    /// Requests per client address; `None` for no limit.
    pub(super) flood_limit: Option<RateLimit>,
    /// Where the routers made from this config keep their flood limit, to change it while
    /// they serve.
    pub(super) flood_control: super::flood::FloodControl,
    /// The header a trusted proxy puts the client's address in.
    pub(super) forwarded_header: Option<http::HeaderName>,
    /// How many proxies in front of the server add an entry to it (at least 1).
    pub(super) trusted_proxies: usize,
    /// Open connections at most; past it a new one gets 503 and is closed.
    pub(super) max_connections: usize,
    /// How long a client may take to send a request's headers (and an idle keep-alive
    /// connection may wait for its next request).
    pub(super) header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers are in.
    pub(super) body_timeout: Duration,
    /// The request line and headers together, at most.
    pub(super) max_header_bytes: usize,
    /// Whether free memory is handed back to the system after connections close (glibc).
    pub(super) release_memory: bool,
    /// Whether `/metrics`, `/healthz` and `/readyz` are served on the MCP address.
    pub(super) admin_endpoints: bool,
}

/// A session store, shared by the routers made from one config.
#[derive(Clone)]
pub(super) struct SessionStoreHandle(pub(super) Arc<dyn SessionStore>);

impl std::fmt::Debug for SessionStoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionStore")
    }
}

/// Derives the caller's principal from request headers (see [`HttpConfig::principal`]).
#[derive(Clone)]
pub(super) struct PrincipalFn(pub(super) Arc<Resolver>);

/// A principal resolver.
pub(super) type Resolver = dyn Fn(&http::HeaderMap) -> Option<String> + Send + Sync;

impl std::fmt::Debug for PrincipalFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrincipalFn")
    }
}

impl Default for HttpConfig {
    /// `/mcp`; `Host` and `Origin` must name a loopback host (H-02); keep-alive comments every
    /// 15 s (H-07); requests still running 10 s after shutdown begins are cancelled; at most
    /// [`DEFAULT_MAX_CONNECTIONS`] open connections; 30 s for a request's headers and 30 s for
    /// its body; free memory handed back after connections close.
    fn default() -> Self {
        HttpConfig {
            path: "/mcp".into(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            any_host: false,
            allowed_origins: Vec::new(),
            any_origin: false,
            keep_alive: Duration::from_secs(15),
            shutdown_grace: Duration::from_secs(10),
            principal: None,
            session_store: None,
            max_sessions: MemorySessionStore::DEFAULT_MAX_SESSIONS,
            session_idle: MemorySessionStore::DEFAULT_IDLE,
            oauth: None,
            flood_limit: Some(DEFAULT_FLOOD_LIMIT),
            flood_control: super::flood::FloodControl::default(),
            forwarded_header: None,
            trusted_proxies: 1,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            release_memory: true,
            admin_endpoints: false,
        }
    }
}

impl HttpConfig {
    /// The endpoint path (default `/mcp`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Also accepts requests whose `Host` (and `Origin`) name `host`, with any port. Needed when
    /// serving beyond loopback. Ports are ignored; IPv6 addresses may be given with or without
    /// brackets.
    pub fn allow_host(mut self, host: impl AsRef<str>) -> Self {
        self.allowed_hosts
            .push(checks::normalize_host(host.as_ref()));
        self
    }

    /// Accepts any `Host`: only behind a proxy that checks it. `Origin` is still checked.
    pub fn allow_any_host(mut self) -> Self {
        self.any_host = true;
        self
    }

    /// Also accepts this exact `Origin` (e.g. `https://app.example.com`).
    pub fn allow_origin(mut self, origin: impl AsRef<str>) -> Self {
        self.allowed_origins
            .push(origin.as_ref().trim().to_ascii_lowercase());
        self
    }

    /// Accepts any `Origin`: only behind a proxy that checks it.
    pub fn allow_any_origin(mut self) -> Self {
        self.any_origin = true;
        self
    }

    /// Interval of `:` keep-alive comments on SSE replies.
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// Who is calling, from the request headers: the identity an authentication layer in front
    /// of the server established (e.g. a verified token's subject in a trusted header). It is
    /// exposed as [`crate::RequestContext::principal`] and binds sealed request state, so state
    /// issued to one principal is refused for another (M-07).
    pub fn principal(
        mut self,
        principal: impl Fn(&http::HeaderMap) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.principal = Some(PrincipalFn(Arc::new(principal)));
        self
    }

    /// Where the sessions of legacy (2025-11-25) clients live; by default in memory, bounded
    /// by [`HttpConfig::max_sessions`] and [`HttpConfig::session_idle_timeout`]. A store shared
    /// by several replicas lets any of them serve a session's requests (the GET stream and the
    /// answers to the server's requests stay with the replica that holds the connection).
    pub fn session_store(mut self, store: impl SessionStore) -> Self {
        self.session_store = Some(SessionStoreHandle(Arc::new(store)));
        self
    }

    /// The most legacy sessions the default store holds at once (default 10,000); beyond it
    /// `initialize` gets 503 with `Retry-After`.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// How long a legacy session of the default store lives without a request (default 30
    /// minutes); an open GET stream keeps it in use. Later requests naming it get 404.
    pub fn session_idle_timeout(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// Makes the endpoint an OAuth 2.1 resource server: every request needs a valid access
    /// token of the issuer for this resource, metadata is served at the well-known URIs, the
    /// token's issuer and subject become the principal (replacing [`HttpConfig::principal`])
    /// and its scopes decide which tools a caller sees and may call ([`crate::Tool::scopes`]).
    pub fn oauth(mut self, oauth: OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// How many requests each client address may send (default [`DEFAULT_FLOOD_LIMIT`], 200
    /// per second with bursts of 400); over it, 429 with `Retry-After` before anything else is
    /// read. Tool quotas per caller are the server's ([`crate::ServerBuilder::rate_limit`]).
    pub fn flood_limit(mut self, limit: RateLimit) -> Self {
        self.flood_limit = Some(limit);
        self
    }

    /// The handle that changes the flood limit of the server this config serves, while it
    /// serves ([`FloodControl::set`](super::FloodControl::set)): for a reload of the
    /// server's configuration.
    pub fn flood_control(&self) -> super::FloodControl {
        self.flood_control.clone()
    }

    /// No flood limit, for the stated reason (logged): for a server behind a proxy that
    /// limits requests itself.
    pub fn no_flood_limit(mut self, reason: impl Into<String>) -> Self {
        tracing::warn!(reason = %reason.into(), "HTTP requests have no flood limit");
        self.flood_limit = None;
        self
    }

    /// Takes the client's address from this header, as a trusted proxy sets it, instead of the
    /// TCP peer's: `forwarded` is read as RFC 7239 (`for=192.0.2.7;proto=https`, quoted
    /// `"[2001:db8::1]:4711"`, `for=unknown` and obfuscated `for=_hidden` identifiers, each of
    /// which counts as a client of its own), any other header as a comma-separated list of
    /// addresses (`x-forwarded-for`). The entry read is the one your proxy added, the rightmost
    /// (see [`HttpConfig::trusted_proxies`]); entries left of it are the client's own claims.
    ///
    /// Only behind a proxy that sets it: otherwise clients choose their own address. A request
    /// whose header is missing or names no client is refused with 400 (a warning is logged at
    /// most once a minute): it did not come through the proxy, or the proxy is misconfigured,
    /// and counting it against the peer, the proxy itself, would put every client in one bucket.
    pub fn forwarded_header(mut self, name: http::HeaderName) -> Self {
        self.forwarded_header = Some(name);
        self
    }

    /// How many proxies in front of the server each add an entry to the
    /// [`forwarded_header`](HttpConfig::forwarded_header) (default 1, at least 1): with a CDN
    /// in front of a load balancer, 2. The client is the entry the outermost of them added,
    /// the `hops`-th from the right; a request with fewer entries is refused with 400.
    pub fn trusted_proxies(mut self, hops: usize) -> Self {
        self.trusted_proxies = hops.max(1);
        self
    }

    /// How long requests may keep running after [`crate::Server::shutdown`] before they are cancelled.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// At most `max` open connections (default [`DEFAULT_MAX_CONNECTIONS`]). A connection past
    /// the cap is answered `503 Service Unavailable` with `Retry-After: 1` and a JSON-RPC error,
    /// then closed; open listen streams count as connections. Raise the process's file limit
    /// (`ulimit -n`) to match. Only [`serve`](super::serve) enforces it; a [`router`](super::router)
    /// served by your own loop is capped by that loop.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// How long a client may take to send a request's headers (default 30 s), counted from
    /// when the server starts waiting for them; on a keep-alive connection that includes the
    /// idle time before the next request. Past it the connection is closed: a client that
    /// trickles its headers byte by byte cannot hold a connection open. Only
    /// [`serve`](super::serve) enforces it.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// At most `bytes` of request line and headers together (default
    /// [`DEFAULT_MAX_HEADER_BYTES`], at least 8 KiB); past it the request is answered
    /// `431 Request Header Fields Too Large` and the connection closed. Without it, hyper's
    /// bound is its read buffer's, about 400 KiB. Only [`serve`](super::serve) enforces it.
    pub fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes.max(8 * 1024);
        self
    }

    /// How long a client may take to send a request's body once its headers have arrived
    /// (default 30 s). Past it the request is answered `408 Request Timeout` and the
    /// connection is closed.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Serves the admin endpoints on the MCP address too (off by default): `GET /metrics`
    /// (the server's [`crate::ServerBuilder::metrics`], 404 without), `GET /healthz` and
    /// `GET /readyz` (see [`crate::observe`]). They need no token and are not MCP requests
    /// (no audit, no tool quota), but pass the Host/Origin check and the flood limit. To keep
    /// them off the MCP address, serve [`crate::observe::admin_router`] on an address of
    /// its own instead.
    pub fn admin_endpoints(mut self, on: bool) -> Self {
        self.admin_endpoints = on;
        self
    }

    /// Whether [`serve`](super::serve) hands free heap memory back to the system after
    /// connections close (default on). glibc's allocator keeps the memory freed by closed
    /// connections in its per-thread arenas, so after 1,000 listen streams come and go the
    /// process would stay about 20 MB larger; with this on, `malloc_trim` runs (on a blocking
    /// thread, at most every 2 s, after at least 64 connections closed). It does nothing with
    /// another allocator or C library.
    pub fn release_memory(mut self, on: bool) -> Self {
        self.release_memory = on;
        self
    }
}
