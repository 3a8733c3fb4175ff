//! The flood limit (T-15): a token bucket per client address over every request, answered
//! with 429 and `Retry-After` once it runs dry, before anything else is read. The client
//! address is the peer's, or the rightmost entry of a forwarding header set by a trusted proxy.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::response::{IntoResponse as _, Response};
use http::{HeaderName, HeaderValue, StatusCode, header};
use serde_json::json;
use toolwire_protocol::ErrorObject;

use super::HttpConfig;
use crate::dispatch::Final;
use crate::limits::{CallerBucket, Limiter, RateLimit};

/// Requests each client address may send unless [`HttpConfig::flood_limit`] says otherwise:
/// 200 per second, 400 at once.
pub const DEFAULT_FLOOD_LIMIT: RateLimit = RateLimit::per_second(200).burst(400);

/// The JSON-RPC code of a request refused by the flood limit: Toolwire's own, outside the
/// range JSON-RPC and MCP reserve (E-06), with `data.retryAfterMs`.
pub const TOO_MANY_REQUESTS: i64 = -31429;

/// The client's address: from the forwarding header when one is configured (its rightmost
/// entry, the one the proxy added), else the peer's (known when served through
/// [`super::serve`], or a router made into a service with connect info).
pub(super) fn client_address(
    forwarded: Option<&HeaderName>,
    parts: &http::request::Parts,
) -> Option<IpAddr> {
    let from_header = forwarded.and_then(|name| {
        let last = parts.headers.get_all(name).iter().next_back()?;
        let entry = last.to_str().ok()?.rsplit(',').next()?.trim();
        // `for=` of RFC 7239 Forwarded, bracketed IPv6, or a plain address.
        let entry = entry
            .strip_prefix("for=")
            .unwrap_or(entry)
            .trim_matches('"');
        let entry = entry.trim_start_matches('[');
        let entry = entry.split(']').next().unwrap_or(entry);
        entry
            .parse::<IpAddr>()
            .ok()
            .or_else(|| entry.parse::<SocketAddr>().ok().map(|a| a.ip()))
    });
    from_header.or_else(|| {
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|info| info.0.ip())
    })
}

/// The router's flood limiter, if any.
pub(super) fn limiter(config: &HttpConfig) -> Result<Option<Limiter>, String> {
    config
        .flood_limit
        .map(|limit| Limiter::new(limit, 1))
        .transpose()
}

/// Takes one request from the address's bucket; when it is empty, the 429 answer with
/// `Retry-After`.
pub(super) fn refusal(limiter: Option<&Limiter>, address: Option<IpAddr>) -> Option<Response> {
    if address.is_none() {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(target: "toolwire::limits", "the client address is unknown (a router served without connect info, and no forwarded_header): every anonymous caller shares one flood limit and one quota per tool");
        });
    }
    let limiter = limiter?;
    let wait = limiter.check(CallerBucket::of(None, address), 1).err()?;
    tracing::debug!(target: "toolwire::limits", address = ?address, wait_ms = wait.as_millis() as u64, "flood limit: 429");
    let limit = limiter.limit();
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
    Some(response.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_address_is_the_peer_unless_a_forwarding_header_is_trusted() {
        let peer = Some("10.0.0.5:4000");
        let p = parts(&[("x-forwarded-for", "203.0.113.9")], peer);
        assert_eq!(client_address(None, &p), Some("10.0.0.5".parse().unwrap()));
        let name = HeaderName::from_static("x-forwarded-for");
        // The rightmost entry is the one the trusted proxy added; the others are the client's.
        let p = parts(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9")], peer);
        assert_eq!(
            client_address(Some(&name), &p),
            Some("203.0.113.9".parse().unwrap())
        );
        let forwarded = HeaderName::from_static("forwarded");
        let p = parts(&[("forwarded", "for=\"[2001:db8::1]:443\"")], peer);
        assert_eq!(
            client_address(Some(&forwarded), &p),
            Some("2001:db8::1".parse().unwrap())
        );
        // A header that is missing or unreadable falls back to the peer.
        let p = parts(&[("x-forwarded-for", "not an address")], peer);
        assert_eq!(
            client_address(Some(&name), &p),
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(client_address(Some(&name), &parts(&[], None)), None);
    }

    #[test]
    fn a_flood_gets_429_with_retry_after() {
        let limiter = Limiter::new(RateLimit::per_minute(2), 1).unwrap();
        let address = Some("192.0.2.1".parse().unwrap());
        assert!(refusal(Some(&limiter), address).is_none());
        assert!(refusal(Some(&limiter), address).is_none());
        let response = refusal(Some(&limiter), address).unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = response.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=30).contains(&retry), "{retry}");
        assert!(refusal(None, address).is_none());
    }
}
