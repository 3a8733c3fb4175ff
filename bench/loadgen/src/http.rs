//! Plain HTTP requests to an MCP server with hyper: where a URL points, a keep-alive
//! connection, a POST with the MCP headers, and the reply read whole. The loads that time
//! something other than raw throughput (lists, listen streams, state, churn) use these; the
//! throughput rows write their requests with [`crate::wire`], which costs less per request.

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::protocol;

/// Where a URL points.
pub(crate) struct Endpoint {
    pub(crate) addr: String,
    pub(crate) host: String,
    pub(crate) path: String,
    /// `Authorization: Bearer …` for every request, when set.
    pub(crate) authorization: Option<String>,
}

pub(crate) fn endpoint(url: &str) -> anyhow::Result<Endpoint> {
    let rest = url.strip_prefix("http://").context("only http:// URLs")?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/"), |(a, p)| (a, p));
    let path = if path == "/" {
        "/".to_owned()
    } else {
        format!("/{path}")
    };
    Ok(Endpoint {
        addr: authority.to_owned(),
        host: authority.to_owned(),
        path,
        authorization: None,
    })
}

/// An HTTP/1.1 keep-alive connection.
pub(crate) async fn connect(
    addr: &str,
) -> anyhow::Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// A POST with the standard MCP headers.
pub(crate) fn post(
    ep: &Endpoint,
    method: &str,
    name: Option<&str>,
    body: String,
) -> Request<Full<Bytes>> {
    let mut req = Request::post(&ep.path)
        .header("host", &ep.host)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", protocol::VERSION)
        .header("mcp-method", method);
    if let Some(name) = name {
        req = req.header("mcp-name", name);
    }
    if let Some(authorization) = &ep.authorization {
        req = req.header("authorization", authorization);
    }
    req.body(Full::new(Bytes::from(body)))
        .expect("valid request")
}

/// Sends a request and reads the whole reply: status, whether it is SSE, and the body.
pub(crate) async fn exchange_raw(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> anyhow::Result<(u16, bool, Bytes)> {
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, sse, body))
}

/// Sends a request and reads the whole reply; the JSON-RPC message it carried.
pub(crate) async fn exchange(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> anyhow::Result<(u16, Option<Value>)> {
    let (status, sse, body) = exchange_raw(sender, req).await?;
    Ok((status, protocol::reply_message(sse, &body)))
}
