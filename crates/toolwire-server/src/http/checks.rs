//! Pure checks of request headers: Host and Origin (H-02), content type, `Accept`, and the MCP
//! headers against the body (H-09, H-13…H-17). Each returns the refusal to send.

use http::{HeaderMap, HeaderName, StatusCode, Uri, header};
use serde_json::Value;
use toolwire_protocol::ErrorObject;
use toolwire_protocol::headers::{self as mcp_headers, HeaderParam};

use super::{HttpConfig, Refusal};

// The MCP headers as `HeaderName`s: a lookup by `&str` parses and lowercases the name first
// (about 400 instructions per lookup in callgrind).
/// `MCP-Protocol-Version`.
pub(super) const PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static(mcp_headers::PROTOCOL_VERSION);
/// `Mcp-Method`.
pub(super) const METHOD: HeaderName = HeaderName::from_static(mcp_headers::METHOD);
/// `Mcp-Name`.
const NAME: HeaderName = HeaderName::from_static(mcp_headers::NAME);

/// The host part of an authority (`host`, `host:port`, `[v6]`, `[v6]:port`); `None` when it is
/// malformed (e.g. `[::1].evil.com`). Compare it case-insensitively.
pub(super) fn host_name(authority: &str) -> Option<&str> {
    let (host, rest) = match authority.strip_prefix('[') {
        Some(inner) => {
            let end = inner.find(']')?;
            (&authority[..end + 2], &inner[end + 1..])
        }
        None => match authority.find(':') {
            Some(colon) => (&authority[..colon], &authority[colon..]),
            None => (authority, ""),
        },
    };
    let port_ok = rest.is_empty()
        || rest
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (port_ok && !host.is_empty()).then_some(host)
}

/// Normalizes an allowlist entry: lowercase, no port, IPv6 in brackets.
pub(super) fn normalize_host(entry: &str) -> String {
    let entry = entry.trim().to_ascii_lowercase();
    if !entry.starts_with('[') && entry.matches(':').count() > 1 {
        return format!("[{entry}]");
    }
    host_name(&entry).map(str::to_owned).unwrap_or(entry)
}

/// The only value of a header that must not repeat.
fn only(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<&str>, String> {
    let mut values = headers.get_all(&name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("{name} appears more than once"));
    }
    first
        .to_str()
        .map(Some)
        .map_err(|_| format!("{name} is not ASCII"))
}

/// Host (and an absolute-form URI's authority) and Origin against the allowlists, against DNS
/// rebinding (H-02): 403 otherwise.
pub(super) fn host_and_origin(
    config: &HttpConfig,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let forbidden = |why: String| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            None,
            ErrorObject::invalid_request(why),
        )
    };
    let allowed = |host: &str| {
        config
            .allowed_hosts
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host))
    };
    if !config.any_host {
        let host = only(headers, header::HOST)
            .map_err(forbidden)?
            .unwrap_or_default();
        if !host_name(host).is_some_and(allowed) {
            return Err(forbidden(format!("Host {host:?} is not allowed")));
        }
        if let Some(authority) = uri.authority() {
            if !host_name(authority.as_str()).is_some_and(allowed) {
                return Err(forbidden(format!(
                    "request target {authority} is not allowed"
                )));
            }
        }
    }
    if !config.any_origin {
        if let Some(origin) = only(headers, header::ORIGIN).map_err(forbidden)? {
            let authority = strip_prefix_ignore_case(origin, "http://")
                .or_else(|| strip_prefix_ignore_case(origin, "https://"));
            let ok = config
                .allowed_origins
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin))
                || authority.and_then(host_name).is_some_and(allowed);
            if !ok {
                return Err(forbidden(format!("Origin {origin:?} is not allowed")));
            }
        }
    }
    Ok(())
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Requests must be `application/json` (415 otherwise).
pub(super) fn content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let essence = value.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        let error = ErrorObject::invalid_request("Content-Type must be application/json");
        Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            error,
        ))
    }
}

/// Which reply kinds the client accepts; a missing `Accept` accepts both, `q=0` refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Accept {
    pub(super) json: bool,
    pub(super) sse: bool,
}

impl Accept {
    pub(super) fn parse(headers: &HeaderMap) -> Result<Accept, Refusal> {
        // A value that is not visible ASCII is read as absent.
        let mut values = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter(|v| v.to_str().is_ok())
            .peekable();
        if values.peek().is_none() {
            return Ok(Accept {
                json: true,
                sse: true,
            });
        }
        let mut accept = Accept {
            json: false,
            sse: false,
        };
        // Split and compared as bytes (the values are ASCII): a `char` searcher per split was
        // most of this function's cost.
        for range in values.flat_map(|v| v.as_bytes().split(|&b| b == b',')) {
            let mut parts = range.split(|&b| b == b';');
            let media = parts.next().unwrap_or_default().trim_ascii();
            if parts.any(refuses) {
                continue;
            }
            let is = |m: &str| media.eq_ignore_ascii_case(m.as_bytes());
            if is("*/*") {
                accept = Accept {
                    json: true,
                    sse: true,
                };
            } else if is("application/*") || is("application/json") {
                accept.json = true;
            } else if is("text/*") || is("text/event-stream") {
                accept.sse = true;
            }
        }
        if accept.json || accept.sse {
            Ok(accept)
        } else {
            let error = ErrorObject::invalid_request(
                "Accept must include application/json or text/event-stream",
            );
            Err(Refusal::new(StatusCode::NOT_ACCEPTABLE, None, error))
        }
    }
}

/// Whether a media range's parameter is `q=0` (a quality of zero refuses the range).
fn refuses(parameter: &[u8]) -> bool {
    parameter
        .trim_ascii()
        .strip_prefix(b"q=")
        .and_then(|q| std::str::from_utf8(q).ok())
        .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
}

/// The value of an MCP header that may appear at most once; -32020 for repeats and for control
/// characters, which a client must send base64-encoded (H-23).
pub(super) fn mcp_header<N>(headers: &HeaderMap, name: N) -> Result<Option<&str>, ErrorObject>
where
    N: header::AsHeaderName + std::fmt::Display + Copy,
{
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ErrorObject::header_mismatch(format!(
            "Header {name} appears more than once"
        )));
    }
    let visible = value.as_bytes().iter().all(|&b| (0x20..0x7f).contains(&b));
    match value.to_str() {
        Ok(text) if visible => Ok(Some(text)),
        _ => Err(ErrorObject::header_mismatch(format!(
            "Header {name} has characters outside visible ASCII; send such values as =?base64?…?="
        ))),
    }
}

/// A required MCP header equal (after trimming) to `expected` (H-09, H-13).
pub(super) fn exact_header(
    headers: &HeaderMap,
    name: &HeaderName,
    label: &str,
    expected: &str,
) -> Result<(), ErrorObject> {
    match mcp_header(headers, name)? {
        None => Err(ErrorObject::header_mismatch(format!(
            "Missing {label} header"
        ))),
        Some(v) if v.trim() != expected => Err(ErrorObject::header_mismatch(format!(
            "Header mismatch: {label} header value '{}' does not match body value '{expected}'",
            v.trim()
        ))),
        Some(_) => Ok(()),
    }
}

/// `Mcp-Name` must be present and equal `params.name` / `params.uri` after decoding (H-13, H-14).
pub(super) fn name_header(headers: &HeaderMap, expected: &str) -> Result<(), ErrorObject> {
    let Some(raw) = mcp_header(headers, &NAME)? else {
        return Err(ErrorObject::header_mismatch("Missing Mcp-Name header"));
    };
    let value = mcp_headers::decode_value(raw)
        .map_err(|e| ErrorObject::header_mismatch(format!("Mcp-Name: {e}")))?;
    if value != expected {
        return Err(ErrorObject::header_mismatch(format!(
            "Header mismatch: Mcp-Name header value '{value}' does not match body value '{expected}'"
        )));
    }
    Ok(())
}

/// Every `x-mcp-header` parameter with a value in the arguments must be mirrored in its
/// `Mcp-Param-{Name}` header with an equal value; a parameter that is absent or null must have
/// no header, so intermediaries never act on a value the tool does not receive (H-15, H-31).
pub(super) fn param_headers(
    headers: &HeaderMap,
    params: &[(String, HeaderParam)],
    arguments: &Value,
) -> Result<(), ErrorObject> {
    for (header_name, param) in params {
        let sent = mcp_header(headers, header_name.as_str())?;
        match (param.value_in(arguments), sent) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(ErrorObject::header_mismatch(format!(
                    "Mcp-Param-{} was sent but the argument is absent or null",
                    param.name
                )));
            }
            (Some(_), None) => {
                return Err(ErrorObject::header_mismatch(format!(
                    "Missing Mcp-Param-{} header",
                    param.name
                )));
            }
            (Some(value), Some(raw)) => {
                let decoded = mcp_headers::decode_value(raw).map_err(|e| {
                    ErrorObject::header_mismatch(format!("Mcp-Param-{}: {e}", param.name))
                })?;
                if !param.matches(&decoded, value) {
                    return Err(ErrorObject::header_mismatch(format!(
                        "Header mismatch: Mcp-Param-{} header value '{decoded}' does not match body value {value}",
                        param.name
                    )));
                }
            }
        }
    }
    Ok(())
}
