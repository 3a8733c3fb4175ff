//! What every request meets first (T-15): who the client is, and a token bucket per client
//! answered with 429 and `Retry-After` once it runs dry, before anything else is read.
//!
//! The client is the TCP peer's address, or, when [`HttpConfig::forwarded_header`] is set, the
//! one the trusted proxy names in that header (`forwarded.rs`). A request whose header is
//! missing or names no client is refused with 400 and never counted as the peer's: behind a
//! proxy the peer is the proxy, and all its clients would share one bucket. Such refusals are
//! logged as a warning at most once a minute, with how many were held back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use axum::extract::ConnectInfo;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use toolwire_protocol::ErrorObject;

use super::HttpConfig;
use super::forwarded::{Source, Unreadable};
use crate::clock::Clock;
use crate::request::outcome::Final;
use crate::safety::limits::{CallerBucket, ClientId, Limiter, RateLimit};

/// Requests each client address may send unless [`HttpConfig::flood_limit`] says otherwise:
/// 200 per second, 400 at once.
pub const DEFAULT_FLOOD_LIMIT: RateLimit = RateLimit::per_second(200).burst(400);

/// The JSON-RPC code of a request refused by the flood limit: Toolwire's own, outside the
/// range JSON-RPC and MCP reserve (E-06), with `data.retryAfterMs`.
pub const TOO_MANY_REQUESTS: i64 = -31429;

/// Changes the flood limit of a server while it serves (a reload of its configuration): the
/// handle of one [`HttpConfig`] and of the routers made from it, from
/// [`HttpConfig::flood_control`].
#[derive(Debug, Clone, Default)]
pub struct FloodControl {
    /// The limiter every request of those routers meets; none: no flood limit.
    limiter: Arc<ArcSwapOption<Limiter>>,
}

impl FloodControl {
    /// Whether [`FloodControl::set`] would take `limit`: refused when it cannot work.
    pub fn check(limit: Option<RateLimit>) -> crate::Result<()> {
        limit
            .map(|limit| Limiter::new(limit, 1))
            .transpose()
            .map(|_| ())
            .map_err(crate::Error::InvalidRateLimit)
    }

    /// The flood limit from now on (`None`: none). A limit as it was keeps each client's
    /// bucket; under another every client starts with a full one. Refused, changing nothing,
    /// when the limit cannot work (no requests, no burst).
    pub fn set(&self, limit: Option<RateLimit>) -> crate::Result<()> {
        let limiter = limit
            .map(|limit| Limiter::new(limit, 1))
            .transpose()
            .map_err(crate::Error::InvalidRateLimit)?;
        let current = self.limiter.load();
        if let (Some(new), Some(current)) = (&limiter, current.as_deref()) {
            if new.limit() == current.limit() {
                return Ok(());
            }
        }
        self.limiter.store(limiter.map(Arc::new));
        Ok(())
    }
}

/// The client and the flood limit of one router.
#[derive(Debug)]
pub(super) struct Admission {
    limiter: FloodControl,
    source: Option<Source>,
    unreadable: Throttle,
}

impl Admission {
    /// With `limiter` (none: no flood limit) and the configured forwarding header.
    pub(super) fn new(config: &HttpConfig, limiter: Option<Limiter>) -> Admission {
        config.flood_control.limiter.store(limiter.map(Arc::new));
        Admission {
            limiter: config.flood_control.clone(),
            source: config
                .forwarded_header
                .clone()
                .map(|header| Source::new(header, config.trusted_proxies)),
            unreadable: Throttle::default(),
        }
    }

    /// The client, once its request has passed the flood limit; else the answer: 400 when the
    /// forwarding header names no client, 429 when the client's bucket is empty.
    pub(super) fn admit(
        &self,
        parts: &http::request::Parts,
        clock: &dyn Clock,
    ) -> Result<Option<ClientId>, Turned> {
        let client = self.client(parts).map_err(|why| {
            self.log_unreadable(&why, parts, clock);
            Turned::Unreadable(why)
        })?;
        let limiter = self.limiter.limiter.load();
        match flooded(limiter.as_deref(), client.as_ref()) {
            Some(turned) => Err(turned),
            None => Ok(client),
        }
    }

    /// Like [`Admission::admit`], for the admin endpoints (`/healthz`, `/readyz`, `/metrics`):
    /// a request whose forwarding header names no client is counted as its TCP peer's, not
    /// refused. Probes come straight to the instance (a load balancer's or Kubernetes' health
    /// check), not through the proxy that sets the header, and they carry no caller.
    pub(super) fn admit_probe(
        &self,
        parts: &http::request::Parts,
    ) -> Result<Option<ClientId>, Turned> {
        let peer = || peer(parts).map(|peer| ClientId::Address(peer.ip()));
        let client = match self.client(parts) {
            Ok(client) => client.or_else(peer),
            Err(_) => peer(),
        };
        let limiter = self.limiter.limiter.load();
        match flooded(limiter.as_deref(), client.as_ref()) {
            Some(turned) => Err(turned),
            None => Ok(client),
        }
    }

    /// From the forwarding header when one is configured, else the peer's address (known
    /// when served through [`super::serve`], or a router made into a service with connect
    /// info).
    fn client(&self, parts: &http::request::Parts) -> Result<Option<ClientId>, Unreadable> {
        match &self.source {
            Some(source) => source.client(&parts.headers).map(Some),
            None => Ok(peer(parts).map(|peer| ClientId::Address(peer.ip()))),
        }
    }

    /// A request whose forwarding header names no client, in the log: at debug level each
    /// time, as a warning at most once a minute.
    fn log_unreadable(&self, why: &Unreadable, parts: &http::request::Parts, clock: &dyn Clock) {
        tracing::debug!(target: "toolwire::limits", peer = ?peer(parts), %why, "no client address: 400");
        if let Some(held) = self.unreadable.pass(clock.now_ms()) {
            tracing::warn!(
                target: "toolwire::limits",
                peer = ?peer(parts),
                held_back = held,
                "refused a request with no readable client address: {why}. Does it come around \
                 the proxy, or does the proxy not set the header? (At most one such warning a \
                 minute; held_back counts the others.)"
            );
        }
    }
}

/// A request turned away before anything else is read.
#[derive(Debug)]
pub(super) enum Turned {
    /// The forwarding header names no client: 400.
    Unreadable(Unreadable),
    /// The client's bucket is empty: 429 with `Retry-After`.
    Flooded {
        /// Until the bucket holds a request again.
        wait: Duration,
        /// The flood limit.
        limit: RateLimit,
    },
}

impl IntoResponse for Turned {
    fn into_response(self) -> Response {
        match self {
            Turned::Unreadable(why) => {
                let error = ErrorObject::invalid_request(format!(
                    "{why}; this server takes the client's address from it, as set by the proxy in front of it"
                ));
                super::json_response(StatusCode::BAD_REQUEST, Final::error(None, &error).json)
            }
            Turned::Flooded { wait, limit } => {
                let error = ErrorObject::new(
                    TOO_MANY_REQUESTS,
                    format!("too many requests from this address: at most {limit}; retry later"),
                )
                .with_data(json!({ "retryAfterMs": wait.as_millis().max(1) as u64 }));
                let mut response = super::json_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    Final::error(None, &error).json,
                );
                // Whole seconds, rounded up (RFC 9110 §10.2.3).
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
                response
            }
        }
    }
}

fn peer(parts: &http::request::Parts) -> Option<SocketAddr> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0)
}

/// A warning logged at most once a minute, counting the ones it held back.
#[derive(Debug, Default)]
struct Throttle {
    /// When the next warning may be logged, in ms since the epoch.
    next_ms: AtomicU64,
    held: AtomicU64,
}

impl Throttle {
    const EVERY_MS: u64 = 60_000;

    /// Whether to log now, and if so how many warnings were held back since the last.
    fn pass(&self, now_ms: u64) -> Option<u64> {
        let next = self.next_ms.load(Ordering::Relaxed);
        let due = now_ms >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(Self::EVERY_MS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        if due {
            Some(self.held.swap(0, Ordering::Relaxed))
        } else {
            self.held.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// The router's flood limiter, if any.
pub(super) fn limiter(config: &HttpConfig) -> Result<Option<Limiter>, String> {
    config
        .flood_limit
        .map(|limit| Limiter::new(limit, 1))
        .transpose()
}

/// Takes one request from the client's bucket; when it is empty, the refusal.
fn flooded(limiter: Option<&Limiter>, client: Option<&ClientId>) -> Option<Turned> {
    if client.is_none() {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(target: "toolwire::limits", "the client address is unknown (a router served without connect info, and no forwarded_header): every anonymous caller shares one flood limit and one quota per tool");
        });
    }
    let limiter = limiter?;
    let wait = limiter.check(CallerBucket::of(None, client), 1).err()?;
    tracing::debug!(target: "toolwire::limits", client = ?client, wait_ms = wait.as_millis() as u64, "flood limit: 429");
    Some(Turned::Flooded {
        wait,
        limit: limiter.limit(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use http::HeaderName;

    fn parts(headers: &[(&str, &str)], peer: Option<&str>) -> http::request::Parts {
        let mut request = http::Request::builder().uri("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        if let Some(peer) = peer {
            parts
                .extensions
                .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        }
        parts
    }

    fn admission(config: HttpConfig) -> Admission {
        Admission::new(&config, None)
    }

    fn ip(text: &str) -> Option<ClientId> {
        Some(ClientId::Address(text.parse().unwrap()))
    }

    #[test]
    fn the_client_is_the_peer_unless_a_forwarding_header_is_trusted() {
        let peer = Some("10.0.0.5:4000");
        let clock = ManualClock::new(0);
        let direct = admission(HttpConfig::default());
        let p = parts(&[("x-forwarded-for", "203.0.113.9")], peer);
        assert_eq!(direct.admit(&p, &clock).unwrap(), ip("10.0.0.5"));
        assert_eq!(direct.admit(&parts(&[], None), &clock).unwrap(), None);

        let xff = admission(
            HttpConfig::default().forwarded_header(HeaderName::from_static("x-forwarded-for")),
        );
        // The rightmost entry is the one the trusted proxy added; the others are the client's.
        let p = parts(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")], peer);
        assert_eq!(xff.admit(&p, &clock).unwrap(), ip("203.0.113.9"));

        let forwarded = admission(
            HttpConfig::default()
                .forwarded_header(header::FORWARDED)
                .trusted_proxies(2),
        );
        let p = parts(
            &[(
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::1]:443\";proto=https, for=10.0.0.9",
            )],
            peer,
        );
        assert_eq!(forwarded.admit(&p, &clock).unwrap(), ip("2001:db8::1"));
    }

    #[test]
    fn a_trusted_header_that_names_no_client_is_refused_never_replaced_by_the_peer() {
        let clock = ManualClock::new(0);
        let xff = admission(
            HttpConfig::default().forwarded_header(HeaderName::from_static("x-forwarded-for")),
        );
        for headers in [&[][..], &[("x-forwarded-for", "not an address")][..]] {
            let response = xff
                .admit(&parts(headers, Some("10.0.0.5:4000")), &clock)
                .unwrap_err()
                .into_response();
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{headers:?}");
        }
    }

    #[test]
    fn a_probe_with_no_forwarding_header_counts_as_its_peer() {
        let xff = admission(
            HttpConfig::default().forwarded_header(HeaderName::from_static("x-forwarded-for")),
        );
        let peer = Some("10.0.0.5:4000");
        for headers in [&[][..], &[("x-forwarded-for", "not an address")][..]] {
            assert_eq!(
                xff.admit_probe(&parts(headers, peer)).unwrap(),
                ip("10.0.0.5")
            );
        }
        // Through the proxy, the client it names.
        let p = parts(&[("x-forwarded-for", "203.0.113.9")], peer);
        assert_eq!(xff.admit_probe(&p).unwrap(), ip("203.0.113.9"));
    }

    #[test]
    fn the_warning_about_unreadable_headers_comes_at_most_once_a_minute() {
        let throttle = Throttle::default();
        assert_eq!(throttle.pass(1_000), Some(0));
        assert_eq!(throttle.pass(2_000), None);
        assert_eq!(throttle.pass(60_999), None);
        assert_eq!(throttle.pass(61_000), Some(2));
        assert_eq!(throttle.pass(61_001), None);
    }

    #[test]
    fn a_flood_gets_429_with_retry_after() {
        let limiter = Limiter::new(RateLimit::per_minute(2), 1).unwrap();
        let client = ip("192.0.2.1");
        assert!(flooded(Some(&limiter), client.as_ref()).is_none());
        assert!(flooded(Some(&limiter), client.as_ref()).is_none());
        let response = flooded(Some(&limiter), client.as_ref())
            .unwrap()
            .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = response.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=30).contains(&retry), "{retry}");
        assert!(flooded(None, client.as_ref()).is_none());
    }
}
