//! The HTTP client under the HTTP transport: hyper's pooled keep-alive client over rustls, with
//! redirects followed here and only within the endpoint's origin. An endpoint that the
//! environment's proxy settings (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, as reqwest reads them)
//! send through a proxy goes through reqwest, which speaks to proxies; the same redirect rule
//! holds there.
//!
//! A request through reqwest costs a call about three times what it costs through hyper's client
//! alone (its redirect layer and its response both parse the URL again, and a tower stack sits
//! between), which is why the common case does not take it.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as Pooled;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::error::{Error, Result};

/// Redirects followed within the endpoint's origin before giving up.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// How long an idle pooled connection is kept (reqwest's default).
const POOL_IDLE: Duration = Duration::from_secs(90);

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// How requests reach the endpoint.
#[derive(Debug, Clone)]
pub(crate) enum Wire {
    /// Straight to the endpoint, over pooled keep-alive connections.
    Direct(Pooled<Connector, Full<Bytes>>),
    /// Through the proxy the environment names for the endpoint.
    Proxied(reqwest::Client),
}

/// A response body, read a chunk at a time.
#[derive(Debug)]
pub(crate) enum Body {
    Direct(hyper::body::Incoming),
    Proxied(reqwest::Body),
}

impl Body {
    /// The next chunk of data; `None` at the end. Trailers are skipped.
    pub(crate) async fn chunk(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            let frame = match self {
                Body::Direct(body) => body.frame().await?.map_err(|e| describe(&e)),
                Body::Proxied(body) => body.frame().await?.map_err(|e| describe(&e)),
            };
            match frame.map(|frame| frame.into_data()) {
                Ok(Ok(data)) => return Some(Ok(data)),
                Ok(Err(_trailers)) => continue,
                Err(why) => return Some(Err(why)),
            }
        }
    }
}

impl Wire {
    /// A client for `url` with `tls`: direct unless the environment's proxy settings name a
    /// proxy for `url`.
    pub(crate) fn new(uri: &Uri, tls: rustls::ClientConfig) -> Result<Self> {
        let proxied = hyper_util::client::proxy::matcher::Matcher::from_system()
            .intercept(uri)
            .is_some();
        if proxied {
            let client = reqwest::Client::builder()
                .redirect(redirect_policy())
                .tls_backend_preconfigured(tls)
                .build()
                .map_err(|e| Error::Transport(format!("cannot build the HTTP client: {e}")))?;
            return Ok(Wire::Proxied(client));
        }
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Pooled::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Ok(Wire::Direct(client))
    }

    /// Sends the request `build` makes for a URI, starting at `endpoint` (parsed as `url`) and
    /// following redirects within its origin: a 307 or 308 sends the same request to the new
    /// location, a 301, 302 or 303 a GET without a body (as browsers and reqwest do).
    pub(crate) async fn send(
        &self,
        endpoint: &Uri,
        url: &url::Url,
        build: &(dyn Fn(&Uri) -> Result<Request<Bytes>> + Sync),
    ) -> Result<Response<Body>> {
        let client = match self {
            Wire::Direct(client) => client,
            Wire::Proxied(client) => return proxied(client, build(endpoint)?).await,
        };
        let mut request = build(endpoint)?;
        let mut at = url.clone();
        for hop in 0..=MAX_REDIRECTS {
            let method = request.method().clone();
            let response = client
                .request(request.map(Full::new))
                .await
                .map_err(|e| Error::Transport(describe(&e)))?;
            let status = response.status();
            let Some(next) = redirected(status, &response) else {
                return Ok(response.map(Body::Direct));
            };
            let next = at.join(next).map_err(|e| {
                Error::Transport(format!(
                    "the server at {} redirected to a location that is not a URL: {e}",
                    at.origin().ascii_serialization()
                ))
            })?;
            if next.origin() != url.origin() {
                return Err(Error::Transport(cross_origin(url, &next)));
            }
            if hop == MAX_REDIRECTS {
                break;
            }
            let uri: Uri = next
                .as_str()
                .parse()
                .map_err(|e| Error::Transport(format!("cannot follow a redirect: {e}")))?;
            request = build(&uri)?;
            if status != StatusCode::TEMPORARY_REDIRECT && status != StatusCode::PERMANENT_REDIRECT
            {
                as_get(&mut request, &method);
            }
            at = next;
        }
        Err(Error::Transport(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }
}

/// The `Location` of a redirect, if `response` is one.
fn redirected<B>(status: StatusCode, response: &Response<B>) -> Option<&str> {
    if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    response.headers().get(LOCATION)?.to_str().ok()
}

/// A 301/302/303 turns anything but a HEAD into a GET without a body.
fn as_get(request: &mut Request<Bytes>, method: &Method) {
    if *method == Method::HEAD {
        return;
    }
    *request.method_mut() = Method::GET;
    *request.body_mut() = Bytes::new();
    request.headers_mut().remove(CONTENT_TYPE);
    request.headers_mut().remove(CONTENT_LENGTH);
}

/// Why a redirect to another origin is not followed.
fn cross_origin(from: &url::Url, to: &url::Url) -> String {
    format!(
        "the server at {} redirected to another origin, {}, where the request's headers and \
         body must not go; configure that URL instead if it is trusted",
        from.origin().ascii_serialization(),
        to.origin().ascii_serialization()
    )
}

/// A request through reqwest (and the proxy it was built with).
async fn proxied(client: &reqwest::Client, request: Request<Bytes>) -> Result<Response<Body>> {
    let request = reqwest::Request::try_from(request)
        .map_err(|e| Error::Transport(format!("cannot build the request: {e}")))?;
    let response = client
        .execute(request)
        .await
        .map_err(|e| Error::Transport(describe(&e)))?;
    Ok(http::Response::from(response).map(Body::Proxied))
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
        if first.origin() != attempt.url().origin() {
            let message = cross_origin(first, attempt.url());
            return attempt.error(message);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        attempt.follow()
    })
}

/// An HTTP error with its causes (the clients' own messages are often just "error sending
/// request" or "client error (Connect)"), and what to do when the server's certificate is not
/// trusted.
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = match error.downcast_ref::<reqwest::Error>() {
        Some(error) => crate::shown::shown_error(error),
        None => error.to_string(),
    };
    let mut untrusted = false;
    let mut source = error.source();
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
