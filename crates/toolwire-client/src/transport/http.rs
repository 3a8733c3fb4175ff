//! Streamable HTTP, the client side (H-20…H-28): one POST per message with both reply kinds
//! accepted (H-21), the standard headers (H-22, H-23), mirrored parameters (H-24), JSON or SSE
//! replies with comments ignored (H-28). Dropping a request closes its stream, which is how HTTP
//! cancels (H-26); a stream that breaks before the answer loses the request (H-27).

use futures::StreamExt as _;
use std::sync::Arc;

use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE,
};
use serde_json::Value;
use toolwire_protocol::headers as mcp_headers;

use super::{Failure, Outgoing, Reply};
use crate::auth::flow::Flow;
use crate::error::{Error, Result};
use crate::sse::SseParser;

/// The legacy session header.
const SESSION_ID: &str = "mcp-session-id";

/// How much of an error body is read: only its start is shown (in [`Error::Http`]), and a
/// server must not make the client read without end.
const ERROR_BODY_BYTES: usize = 8 << 10;

/// Redirects followed within the endpoint's origin before giving up.
const MAX_REDIRECTS: usize = 5;

/// How to reach an HTTP server.
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    /// Parsed once.
    url: reqwest::Url,
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
        let client = reqwest::Client::builder()
            .redirect(redirect_policy())
            .tls_backend_preconfigured(super::tls::client_config(&url, ca_files)?)
            .build()
            .map_err(|e| Error::Transport(format!("cannot build the HTTP client: {e}")))?;
        let auth = auth.map(|oauth| Arc::new(Flow::new(oauth, url.to_string())));
        Ok(HttpTransport {
            client,
            url,
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

    fn post(&self, out: &Outgoing<'_>) -> Result<reqwest::RequestBuilder> {
        let mut headers = self.headers();
        if let Some(token) = out.bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::Transport("the bearer token is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if let Some(version) = out.version {
            request = request.header(mcp_headers::PROTOCOL_VERSION, version);
        }
        if let Some(session) = out.session {
            request = request.header(SESSION_ID, header_value(session)?);
        }
        // The trace context in headers too, for proxies and servers that read only those.
        for (name, value) in out.trace.into_iter().flat_map(|t| t.pairs()) {
            request = request.header(name, header_value(value)?);
        }
        if !out.legacy && !out.method.is_empty() {
            request = request.header(mcp_headers::METHOD, out.method);
            if let Some(name) = out.name {
                request = request.header(
                    mcp_headers::NAME,
                    header_value(&mcp_headers::encode_value(name))?,
                );
            }
            for (name, value) in out.mirrored {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| Error::Transport(format!("bad header name {name}")))?;
                request = request.header(name, header_value(value)?);
            }
        }
        Ok(request.body(out.body.clone()))
    }

    /// Sends one request and returns its response; notifications and server requests on an SSE
    /// reply go to `on_message`.
    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_message: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Reply, Failure> {
        let response = self
            .post(out)?
            .send()
            .await
            .map_err(|e| Error::Transport(describe(&e)))?;
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
            let response = self
                .post(out)?
                .send()
                .await
                .map_err(|e| Error::Transport(describe(&e)))?;
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
        let mut request = self
            .client
            .get(self.url.clone())
            .headers(self.headers())
            .header(ACCEPT, "text/event-stream")
            .header(mcp_headers::PROTOCOL_VERSION, version);
        if let Some(session) = session {
            request = request.header(SESSION_ID, header_value(session)?);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Error::Transport(describe(&e)))?;
        if let Some(refusal) = unauthorized(&response) {
            return Err(refusal);
        }
        if !response.status().is_success() {
            return Err(Error::Http {
                status: response.status().as_u16(),
                body: String::new(),
            });
        }
        let mut stream = response.bytes_stream();
        let mut parser = SseParser::default();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| Error::Transport(describe(&e)))?;
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
fn unauthorized(response: &reqwest::Response) -> Option<Error> {
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

/// Redirects stay within the endpoint's origin (scheme, host and port). A request carries the
/// configured headers (API keys), `Mcp-Param-*` values and, after a 307/308, its body: none of it
/// may reach another origin because that origin answered with a `Location`. The user can point
/// the client at the new URL instead.
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        let (from, to) = (first.origin(), attempt.url().origin());
        if from != to {
            let message = format!(
                "the server at {} redirected to another origin, {}, where the request's headers \
                 and body must not go; configure that URL instead if it is trusted",
                from.ascii_serialization(),
                to.ascii_serialization()
            );
            return attempt.error(message);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        attempt.follow()
    })
}

/// The start of a body that only goes into an error message: at most [`ERROR_BODY_BYTES`] are
/// read, and dropping the response closes the connection on the rest.
async fn body_start(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < ERROR_BODY_BYTES {
        let Some(Ok(chunk)) = stream.next().await else {
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

fn header_value(value: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(value)
        .map_err(|_| Error::Transport(format!("{value:?} is not a valid header value")))
}

/// A reqwest error with its causes (reqwest's own message is often just "error sending
/// request"), and what to do when the server's certificate is not trusted.
fn describe(error: &reqwest::Error) -> String {
    let mut text = crate::shown::shown_error(error);
    let mut untrusted = false;
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        untrusted |= matches!(tls_error(cause), Some(rustls::Error::InvalidCertificate(_)));
        source = cause.source();
    }
    if untrusted {
        text.push_str(
            " (the server's certificate is not trusted here: add its CA with \
             `ClientBuilder::ca_file`, `--ca-file` or SSL_CERT_FILE)",
        );
    }
    text
}

/// The TLS error inside `error`: the connector wraps it in io::Errors, whose `source` skips
/// what they wrap.
fn tls_error<'a>(mut error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    loop {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        error = error.downcast_ref::<std::io::Error>()?.get_ref()?;
    }
}

/// Whether `message` answers request `id` (an id-less error answers whatever was asked).
pub(crate) fn is_response_to(message: &Value, id: i64) -> bool {
    let answer = message.get("result").is_some() || message.get("error").is_some();
    answer && (message.get("id").is_none_or(Value::is_null) || message["id"].as_i64() == Some(id))
}
/// Reads an SSE reply until the response to `id`: notifications and server requests on the
/// way go to `on_message`; a stream that ends first lost the request (H-27).
async fn read_stream(
    response: reqwest::Response,
    id: Option<i64>,
    status: u16,
    session: Option<String>,
    on_message: &mut (dyn FnMut(Value) + Send),
) -> Result<Reply, Failure> {
    let mut stream = response.bytes_stream();
    let mut parser = SseParser::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Failure::Lost(describe(&e)))?;
        let events = parser.feed(&chunk).map_err(|_| too_large())?;
        for data in events {
            let Ok(message) = serde_json::from_str::<Value>(&data) else {
                tracing::debug!(%data, "an SSE event that is not JSON");
                continue;
            };
            if id.is_some_and(|id| is_response_to(&message, id)) {
                return Ok(Reply {
                    message,
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

/// Reads a JSON reply, bounded like one SSE event: a response, or the refusal it stands for.
async fn read_body(
    response: reqwest::Response,
    status: u16,
    session: Option<String>,
) -> Result<Reply, Failure> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Failure::Lost(describe(&e)))?;
        if body.len() + chunk.len() > crate::sse::MAX_EVENT_BYTES {
            return Err(Error::InvalidResponse(format!(
                "a response body larger than {} MiB",
                crate::sse::MAX_EVENT_BYTES >> 20
            ))
            .into());
        }
        body.extend_from_slice(&chunk);
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(message) if message.get("result").is_some() || message.get("error").is_some() => {
            Ok(Reply {
                message,
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
