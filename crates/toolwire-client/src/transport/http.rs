//! Streamable HTTP, the client side (H-20…H-28): one POST per message with both reply kinds
//! accepted (H-21), the standard headers (H-22, H-23), mirrored parameters (H-24), JSON or SSE
//! replies with comments ignored (H-28). Dropping a request closes its stream, which is how HTTP
//! cancels (H-26); a stream that breaks before the answer loses the request (H-27).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use http::{Method, Request, Response, Uri};
use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_protocol::headers as mcp_headers;

use super::wire::{Body, Wire};
use super::{Failure, Message, Outgoing, Reply};
use crate::auth::flow::Flow;
use crate::error::{Error, Result};
use crate::sse::SseParser;

/// The legacy session header.
const SESSION_ID: &str = "mcp-session-id";

/// How much of an error body is read: only its start is shown (in [`Error::Http`]), and a
/// server must not make the client read without end.
const ERROR_BODY_BYTES: usize = 8 << 10;

/// `Accept` on a POST: both reply kinds (H-21).
const ACCEPT_BOTH: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// How to reach an HTTP server.
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    wire: Wire,
    /// Parsed once, for origins and redirects.
    url: reqwest::Url,
    /// Parsed once, for requests.
    uri: Uri,
    /// The `Host` header, made once (hyper would format it for every request).
    host: HeaderValue,
    headers: HeaderMap,
    /// How long `send` waits (a request's own wait is the client's business).
    timeout: std::time::Duration,
    /// The OAuth flow whose current token every request carries, if any.
    auth: Option<Arc<Flow>>,
}

impl HttpTransport {
    /// A transport for `url`; HTTPS trusts the platform's roots and the certificates in
    /// `ca_files`. Notifications and responses (`send`) wait at most `timeout`.
    pub(crate) fn new(
        url: String,
        headers: HeaderMap,
        bearer: Option<&str>,
        ca_files: &[std::path::PathBuf],
        timeout: std::time::Duration,
        auth: Option<crate::auth::OAuth>,
    ) -> Result<Self> {
        let url = reqwest::Url::parse(&url).map_err(|e| {
            Error::Transport(format!(
                "{:?} is not a URL: {e}",
                crate::shown::shown_text(&url)
            ))
        })?;
        let mut headers = headers;
        if let Some(token) = bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::Transport("the bearer token is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let uri: Uri = url.as_str().parse().map_err(|e| {
            Error::Transport(format!(
                "{:?} is not a URL: {e}",
                crate::shown::shown_url(&url)
            ))
        })?;
        let wire = Wire::new(&uri, super::tls::client_config(&url, ca_files)?)?;
        let host = host_header(&uri)?;
        let auth = auth.map(|oauth| Arc::new(Flow::new(oauth, url.to_string())));
        Ok(HttpTransport {
            wire,
            url,
            uri,
            host,
            headers,
            timeout,
            auth,
        })
    }

    /// The OAuth flow, if the client has one.
    pub(crate) fn auth(&self) -> Option<&Arc<Flow>> {
        self.auth.as_ref()
    }

    /// The configured headers, with the flow's current token when there is one: the token goes
    /// to this endpoint only (redirects stay within its origin), never into a URL.
    fn headers(&self) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some((_, Some(bearer))) = self.auth.as_ref().map(|flow| flow.bearer()) {
            headers.insert(AUTHORIZATION, bearer);
        }
        headers
    }

    /// The scheme, host and port of the endpoint: the key of the era cache (V-14).
    pub(crate) fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }

    /// The POST that carries `out` to `uri`.
    fn post(&self, out: &Outgoing<'_>, uri: &Uri) -> Result<Request<Bytes>> {
        let mut request = Request::new(Bytes::from(out.body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        *headers = self.headers();
        headers.insert(HOST, self.host.clone());
        if let Some(token) = out.bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::Transport("the bearer token is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(CONTENT_TYPE, JSON);
        headers.insert(ACCEPT, ACCEPT_BOTH);
        if let Some(version) = out.version {
            headers.insert(mcp_headers::PROTOCOL_VERSION, header_value(version)?);
        }
        if let Some(session) = out.session {
            headers.insert(SESSION_ID, header_value(session)?);
        }
        // The trace context in headers too, for proxies and servers that read only those.
        for (name, value) in out.trace.into_iter().flat_map(|t| t.pairs()) {
            headers.insert(name, header_value(value)?);
        }
        if !out.legacy && !out.method.is_empty() {
            headers.insert(mcp_headers::METHOD, header_value(out.method)?);
            if let Some(name) = out.name {
                headers.insert(
                    mcp_headers::NAME,
                    header_value(&mcp_headers::encode_value(name))?,
                );
            }
            for (name, value) in out.mirrored {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| Error::Transport(format!("bad header name {name}")))?;
                headers.append(name, header_value(value)?);
            }
        }
        Ok(request)
    }

    /// Sends `out`, following redirects within the endpoint's origin.
    async fn exchange(&self, out: &Outgoing<'_>) -> Result<Response<Body>> {
        self.wire
            .send(&self.uri, &self.url, &|uri| self.post(out, uri))
            .await
    }

    /// Sends one request and returns its response; notifications and server requests on an SSE
    /// reply go to `on_message`.
    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_message: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Reply, Failure> {
        let response = self.exchange(out).await?;
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if status == 404 && out.session.is_some() {
            // A legacy server forgot the session: the client must initialize again.
            return Err(Failure::SessionExpired);
        }
        if let Some(refusal) = unauthorized(&response) {
            return Err(refusal.into());
        }
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if sse {
            read_stream(response, out.id, status, session, on_message).await
        } else {
            read_body(response, status, session).await
        }
    }

    /// POSTs a notification or a response; the server answers 202 (or 200) with no body to read.
    /// Nothing waits for it otherwise, so it has its own time bound.
    pub(crate) async fn send(&self, out: &Outgoing<'_>) -> Result<()> {
        let exchange = async {
            let response = self.exchange(out).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            if let Some(refusal) = unauthorized(&response) {
                return Err(refusal);
            }
            Err(Error::Http {
                status: status.as_u16(),
                body: body_start(response).await,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Error::Timeout(self.timeout))?
    }

    /// The legacy server's standalone GET stream: unsolicited notifications and server requests
    /// go to `on_message` until the stream ends.
    pub(crate) async fn get_stream(
        &self,
        version: &str,
        session: Option<&str>,
        on_message: &mut (dyn FnMut(Value) + Send),
    ) -> Result<()> {
        let get = |uri: &Uri| -> Result<Request<Bytes>> {
            let mut request = Request::new(Bytes::new());
            *request.uri_mut() = uri.clone();
            let headers = request.headers_mut();
            *headers = self.headers();
            headers.insert(HOST, self.host.clone());
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
            headers.insert(mcp_headers::PROTOCOL_VERSION, header_value(version)?);
            if let Some(session) = session {
                headers.insert(SESSION_ID, header_value(session)?);
            }
            Ok(request)
        };
        let response = self.wire.send(&self.uri, &self.url, &get).await?;
        if let Some(refusal) = unauthorized(&response) {
            return Err(refusal);
        }
        if !response.status().is_success() {
            return Err(Error::Http {
                status: response.status().as_u16(),
                body: String::new(),
            });
        }
        let mut body = response.into_body();
        let mut parser = SseParser::default();
        while let Some(chunk) = body.chunk().await {
            let chunk = chunk.map_err(Error::Transport)?;
            for data in parser.feed(&chunk).map_err(|_| too_large())? {
                if let Ok(message) = serde_json::from_str::<Value>(&data) {
                    on_message(message);
                }
            }
        }
        Ok(())
    }
}

/// A refusal for want of authorization: any 401, or a 403 with a Bearer challenge (a 403
/// without one is an ordinary HTTP error). Carries the Bearer challenge for the OAuth flow.
fn unauthorized(response: &Response<Body>) -> Option<Error> {
    let status = response.status().as_u16();
    if status != 401 && status != 403 {
        return None;
    }
    let challenge = response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| crate::auth::challenge::bearer([*v]).is_some())
        .map(str::to_owned);
    if status == 403 && challenge.is_none() {
        return None;
    }
    Some(Error::Unauthorized { status, challenge })
}

/// The start of a body that only goes into an error message: at most [`ERROR_BODY_BYTES`] are
/// read, and dropping the response closes the connection on the rest.
async fn body_start(response: Response<Body>) -> String {
    let mut body = Vec::new();
    let mut stream = response.into_body();
    while body.len() < ERROR_BODY_BYTES {
        let Some(Ok(chunk)) = stream.chunk().await else {
            break;
        };
        let room = ERROR_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    String::from_utf8_lossy(&body).chars().take(300).collect()
}

fn too_large() -> Error {
    Error::InvalidResponse(format!(
        "an SSE event larger than {} MiB",
        crate::sse::MAX_EVENT_BYTES >> 20
    ))
}

/// The `Host` of `uri`: its host, and its port unless that is the scheme's default (as hyper
/// writes it). Redirects stay within the origin, so it holds for every request.
fn host_header(uri: &Uri) -> Result<HeaderValue> {
    let host = uri
        .host()
        .ok_or_else(|| Error::Transport("the URL has no host".into()))?;
    let default = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    match uri.port_u16().filter(|&port| port != default) {
        Some(port) => header_value(&format!("{host}:{port}")),
        None => header_value(host),
    }
}

fn header_value(value: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(value)
        .map_err(|_| Error::Transport(format!("{value:?} is not a valid header value")))
}

/// Whether `message` answers request `id` (an id-less error answers whatever was asked).
pub(crate) fn is_response_to(message: &Value, id: i64) -> bool {
    let answer = message.get("result").is_some() || message.get("error").is_some();
    answer && (message.get("id").is_none_or(Value::is_null) || message["id"].as_i64() == Some(id))
}
/// Reads an SSE reply until the response to `id`: notifications and server requests on the
/// way go to `on_message`; a stream that ends first lost the request (H-27).
async fn read_stream(
    response: Response<Body>,
    id: Option<i64>,
    status: u16,
    session: Option<String>,
    on_message: &mut (dyn FnMut(Value) + Send),
) -> Result<Reply, Failure> {
    let mut stream = response.into_body();
    let mut parser = SseParser::default();
    while let Some(chunk) = stream.chunk().await {
        let chunk = chunk.map_err(Failure::Lost)?;
        let events = parser.feed(&chunk).map_err(|_| too_large())?;
        for data in events {
            let Ok(message) = serde_json::from_str::<Value>(&data) else {
                tracing::debug!(%data, "an SSE event that is not JSON");
                continue;
            };
            if id.is_some_and(|id| is_response_to(&message, id)) {
                return Ok(Reply {
                    message: Message::Tree(message),
                    status,
                    session,
                });
            }
            if message.get("method").is_some() {
                on_message(message);
            }
        }
    }
    Err(Failure::Lost(
        "the response stream ended before the response".into(),
    ))
}

/// The members of a JSON-RPC response that decide how it is read.
#[derive(serde::Deserialize)]
struct ResponseMembers<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// Reads a JSON reply, bounded like one SSE event: a response, or the refusal it stands for.
async fn read_body(
    response: Response<Body>,
    status: u16,
    session: Option<String>,
) -> Result<Reply, Failure> {
    let mut body = Vec::new();
    let mut stream = response.into_body();
    while let Some(chunk) = stream.chunk().await {
        let chunk = chunk.map_err(Failure::Lost)?;
        if body.len() + chunk.len() > crate::sse::MAX_EVENT_BYTES {
            return Err(Error::InvalidResponse(format!(
                "a response body larger than {} MiB",
                crate::sse::MAX_EVENT_BYTES >> 20
            ))
            .into());
        }
        body.extend_from_slice(&chunk);
    }
    // A result, as nearly every reply is, kept as its text; anything else read as a tree.
    if let Ok(ResponseMembers {
        result: Some(result),
        error: None,
    }) = serde_json::from_slice::<ResponseMembers<'_>>(&body)
    {
        return Ok(Reply {
            message: Message::Result(result.to_owned()),
            status,
            session,
        });
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(message) if message.get("result").is_some() || message.get("error").is_some() => {
            Ok(Reply {
                message: Message::Tree(message),
                status,
                session,
            })
        }
        // A success status with a body that is not JSON: the server is broken, not refusing.
        Err(error) if (200..300).contains(&status) => Err(Error::InvalidResponse(format!(
            "HTTP {status} with a body that is not JSON ({error}): {}",
            String::from_utf8_lossy(&body)
                .chars()
                .take(300)
                .collect::<String>()
        ))
        .into()),
        _ => Err(Error::Http {
            status,
            body: String::from_utf8_lossy(&body).chars().take(300).collect(),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_header_names_a_port_only_when_it_is_not_the_default() {
        let host = |url: &str| host_header(&url.parse().unwrap()).unwrap();
        assert_eq!(host("http://127.0.0.1:8080/mcp"), "127.0.0.1:8080");
        assert_eq!(host("http://mcp.example/mcp"), "mcp.example");
        assert_eq!(host("http://mcp.example:80/mcp"), "mcp.example");
        assert_eq!(host("https://mcp.example:443/mcp"), "mcp.example");
        assert_eq!(host("https://mcp.example:80/mcp"), "mcp.example:80");
        assert_eq!(host("http://[::1]:9000/mcp"), "[::1]:9000");
    }
}
