//! Transports: how a message reaches a server and its answer comes back.

pub(crate) mod command;
mod group;
pub(crate) mod http;
pub(crate) mod lines;
mod stderr;
pub(crate) mod stdio;
mod tls;
mod wire;

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;
use toolwire_protocol::JsonObject;

use crate::error::Error;

/// The text of a JSON-RPC message as it goes on the wire: through a `Value`, so its members are
/// in the same (sorted) order as those of every other message the client writes.
pub(crate) fn body_of<T: serde::Serialize>(message: &T) -> String {
    serde_json::to_value(message)
        .unwrap_or_else(|_| Value::Object(JsonObject::new()))
        .to_string()
}

/// One outgoing message, serialized, with what the HTTP headers need.
#[derive(Debug)]
pub(crate) struct Outgoing<'a> {
    /// The request id; `None` for notifications and responses.
    pub(crate) id: Option<i64>,
    /// The method (`Mcp-Method`); empty for responses.
    pub(crate) method: &'a str,
    pub(crate) body: String,
    /// The value of `Mcp-Name` (tools/call, prompts/get, resources/read, tasks/*).
    pub(crate) name: Option<&'a str>,
    /// `Mcp-Param-*` headers, already encoded (H-24).
    pub(crate) mirrored: &'a [(String, String)],
    /// `MCP-Protocol-Version`; `None` on a legacy `initialize`.
    pub(crate) version: Option<&'a str>,
    /// The legacy session (`Mcp-Session-Id`); modern requests have none.
    pub(crate) session: Option<&'a str>,
    /// A legacy (2025-11-25) message: no `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers.
    pub(crate) legacy: bool,
    /// This request's bearer token, over the configured `Authorization` and the OAuth flow's
    /// (HTTP only).
    pub(crate) bearer: Option<&'a str>,
    /// The W3C trace context headers (HTTP only; OT-01).
    pub(crate) trace: Option<&'a crate::trace::TraceContext>,
}

/// The answer to a request.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The JSON-RPC response (with `result` or `error`).
    pub(crate) message: Message,
    /// The HTTP status (200 on stdio).
    pub(crate) status: u16,
    /// The `Mcp-Session-Id` the server set (legacy HTTP).
    pub(crate) session: Option<String>,
}

/// A response as the transport read it.
#[derive(Debug)]
pub(crate) enum Message {
    /// A response with a `result` and no `error`, as an HTTP reply's JSON body brings it: the
    /// result kept as its text, read once into the type its caller wants (a tool's result is
    /// not built as a tree of values first, then read again).
    Result(Box<RawValue>),
    /// Any other response (an error; a reply on a stream or a pipe), as a tree.
    Tree(Value),
}

impl Message {
    /// The `error` member.
    pub(crate) fn error(&self) -> Option<&Value> {
        match self {
            Message::Result(_) => None,
            Message::Tree(message) => message.get("error"),
        }
    }

    /// The `result` member as a tree, read from its text if need be.
    pub(crate) fn result(&self) -> Option<Cow<'_, Value>> {
        match self {
            Message::Result(result) => serde_json::from_str(result.get()).ok().map(Cow::Owned),
            Message::Tree(message) => message.get("result").map(Cow::Borrowed),
        }
    }

    /// The response's text, for messages (a result's members are not rewritten).
    pub(crate) fn text(&self) -> String {
        match self {
            Message::Result(result) => format!("{{\"result\":{}}}", result.get()),
            Message::Tree(message) => message.to_string(),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The request was lost with its stream or its process: it is re-issued with a new id
    /// (H-27, S-11).
    Lost(String),
    /// A legacy HTTP session the server no longer knows (404): initialize again.
    SessionExpired,
    /// Anything else.
    Error(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Error(error)
    }
}

impl Failure {
    pub(crate) fn into_error(self) -> Error {
        match self {
            Failure::Lost(why) => Error::Transport(why),
            Failure::SessionExpired => {
                Error::Transport("the server no longer knows the session".into())
            }
            Failure::Error(e) => e,
        }
    }
}

/// A connection to a server.
#[derive(Debug)]
pub(crate) enum Transport {
    Http(Box<http::HttpTransport>),
    Stdio(Box<stdio::StdioTransport>),
}

impl Transport {
    /// Sends a request; notifications and server requests that arrive for it go to `on_message`.
    pub(crate) async fn request(
        &self,
        out: &Outgoing<'_>,
        on_message: &mut (dyn FnMut(Value) + Send),
    ) -> Result<Reply, Failure> {
        match self {
            Transport::Http(t) => t.request(out, on_message).await,
            Transport::Stdio(t) => t.request(out, on_message).await,
        }
    }

    /// Sends a notification or a response; no answer is awaited.
    pub(crate) async fn send(&self, out: &Outgoing<'_>) -> Result<(), Error> {
        match self {
            Transport::Http(t) => t.send(out).await,
            Transport::Stdio(t) => t.send(out).await,
        }
    }

    /// The OAuth flow of an HTTP client that has one.
    pub(crate) fn auth(&self) -> Option<&std::sync::Arc<crate::auth::flow::Flow>> {
        match self {
            Transport::Http(t) => t.auth(),
            Transport::Stdio(_) => None,
        }
    }

    pub(crate) fn is_http(&self) -> bool {
        matches!(self, Transport::Http(_))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn message_members_are_in_one_order() {
        let body = body_of(&toolwire_protocol::Request::new(
            7,
            "m",
            json!({"b": 1, "a": 2}),
        ));
        assert_eq!(
            body,
            json!({"jsonrpc": "2.0", "id": 7, "method": "m", "params": {"a": 2, "b": 1}})
                .to_string()
        );
    }
}
