//! Streamable HTTP, the client side (H-20…H-28): one POST per message with both reply kinds
//! accepted, the standard headers, mirrored parameters, JSON or SSE replies. Dropping a request
//! closes its stream, which is how HTTP cancels (H-26).

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use toolwire_protocol::headers as mcp_headers;

use super::Outgoing;
use crate::error::{Error, Result};
use crate::sse::SseParser;

/// How to reach an HTTP server.
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
}

impl HttpTransport {
    pub(crate) fn new(url: String, headers: HeaderMap, bearer: Option<&str>) -> Result<Self> {
        let mut headers = headers;
        if let Some(token) = bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::Transport("the bearer token is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| Error::Transport(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpTransport {
            client,
            url,
            headers,
        })
    }

    /// Sends one request and returns its response message; notifications on an SSE reply go to
    /// `on_notification`.
    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_notification: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Value> {
        let mut request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(mcp_headers::PROTOCOL_VERSION, out.version)
            .header(mcp_headers::METHOD, out.method);
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
        let response = request
            .body(out.body.clone())
            .send()
            .await
            .map_err(|e| Error::Transport(e.to_string()))?;
        let status = response.status().as_u16();
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if sse {
            let mut stream = response.bytes_stream();
            let mut parser = SseParser::default();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| Error::Transport(e.to_string()))?;
                for data in parser.feed(&chunk) {
                    let Ok(message) = serde_json::from_str::<Value>(&data) else {
                        continue;
                    };
                    if is_response_to(&message, out.id) {
                        return Ok(message);
                    }
                    if message.get("method").is_some() {
                        on_notification(message);
                    }
                }
            }
            return Err(Error::Transport(
                "the response stream ended before the response (H-27)".into(),
            ));
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| Error::Transport(e.to_string()))?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) if message.get("result").is_some() || message.get("error").is_some() => {
                Ok(message)
            }
            _ => Err(Error::Http {
                status,
                body: String::from_utf8_lossy(&body).chars().take(300).collect(),
            }),
        }
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
