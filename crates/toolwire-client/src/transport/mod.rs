//! Transports: how a request reaches a server and its answer comes back.

pub(crate) mod http;
pub(crate) mod stdio;

use serde_json::Value;

use crate::error::Result;

/// One request, serialized, with what the HTTP headers need.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    pub(crate) id: i64,
    pub(crate) method: &'a str,
    pub(crate) body: String,
    /// The value of `Mcp-Name` (tools/call, prompts/get, resources/read, tasks/*).
    pub(crate) name: Option<&'a str>,
    /// `Mcp-Param-*` headers, already encoded (H-24).
    pub(crate) mirrored: &'a [(String, String)],
    pub(crate) version: &'a str,
}

/// A connection to a server.
#[derive(Debug)]
pub(crate) enum Transport {
    Http(http::HttpTransport),
    Stdio(stdio::StdioTransport),
}

impl Transport {
    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_notification: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Value> {
        match self {
            Transport::Http(t) => t.request(out, on_notification).await,
            Transport::Stdio(t) => t.request(out, on_notification).await,
        }
    }

    pub(crate) fn is_http(&self) -> bool {
        matches!(self, Transport::Http(_))
    }
}
