//! The client's error type: the server's JSON-RPC errors kept apart from local failures (E-06).

use toolwire_protocol::ErrorObject;
use toolwire_protocol::schema::{SchemaError, Violation};

/// What can go wrong calling a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with a JSON-RPC error.
    #[error("server error: {0}")]
    Rpc(ErrorObject),
    /// No answer within the timeout (P-07); the request was cancelled.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The request was cancelled by the caller; the server was told (H-26, S-07).
    #[error("cancelled")]
    Cancelled,
    /// The connection or the child process failed.
    #[error("transport: {0}")]
    Transport(String),
    /// The server wants authorization: HTTP 401, or 403 with a Bearer challenge.
    /// A client with [`ClientBuilder::oauth`](crate::ClientBuilder::oauth) answers it by
    /// authorizing; this error reaches the caller when there is no such flow or its attempts
    /// ran out.
    #[error("HTTP {status}: {}{}", if *status == 401 { "the server wants authorization" } else { "the token does not cover this request" }, challenge.as_deref().map(|c| format!(" (WWW-Authenticate: {c})")).unwrap_or_default())]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The server's `WWW-Authenticate: Bearer …` challenge, if it sent one.
        challenge: Option<String>,
    },
    /// The authorization flow could not get a token. (Its message includes the cause's, so
    /// the cause is not also its `source`.)
    #[error("authorization: {0}")]
    Authorization(crate::auth::AuthError),
    /// The server answered with an HTTP error that carried no JSON-RPC error.
    #[error("HTTP {status}: {body}")]
    Http {
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The server's answer breaks the protocol (bad JSON-RPC, unknown `resultType`, …).
    #[error("invalid response: {0}")]
    InvalidResponse(String),
    /// `structuredContent` does not match the tool's `outputSchema` (C-04).
    #[error("tool output does not match its outputSchema: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidOutput(Vec<Violation>),
    /// The tool's `outputSchema` cannot be used to check its output: an unsupported dialect, a
    /// reference outside the document, or over the nesting and size bounds (J-03, J-07, J-08).
    /// Such a schema is never validated permissively: the tool is not called (or, when the
    /// definition changed during the call, its result is refused).
    #[error("tool {tool}: its outputSchema cannot be used to check its output: {reason}")]
    UnusableOutputSchema {
        /// The tool.
        tool: String,
        /// Why the schema cannot be used.
        reason: SchemaError,
    },
    /// A paginated list went past one of the client's bounds (see [`ListLimit`]); nothing of it
    /// is kept.
    #[error("{method}: the list goes past the client's bound of {limit}")]
    ListTooLarge {
        /// The list method.
        method: String,
        /// The bound it went past.
        limit: ListLimit,
    },
    /// The server kept asking for input past the round limit.
    #[error("gave up after {0} rounds of input requests")]
    TooManyRounds(usize),
    /// The server needs input, and the call was made to relay it rather than answer it
    /// ([`CallOptions::relay_input`](crate::CallOptions::relay_input)): its `input_required`
    /// result as the server sent it, for the caller to answer and retry with
    /// [`CallOptions::answers`](crate::CallOptions::answers).
    #[error("the server needs input before it can answer ({} input requests)", .0.input_requests.as_ref().map_or(0, |r| r.len()))]
    InputRequired(Box<toolwire_protocol::InputRequiredResult>),
    /// The server asked for input this client cannot give.
    #[error("cannot answer the server's input request: {0}")]
    Input(String),
    /// The caller's arguments cannot be sent (tool arguments must be a JSON object, C-09).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// No tool with this name (after a fresh `tools/list`).
    #[error("no tool named {0}")]
    UnknownTool(String),
    /// The task the server made of a call ([`CallOptions::tasks`](crate::CallOptions::tasks))
    /// was cancelled, not by this client: it has no result.
    #[error("the server's task {0} was cancelled before it finished")]
    TaskCancelled(String),
}

/// The bounds on one paginated list (all its pages together), set on the
/// [`ClientBuilder`](crate::ClientBuilder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListLimit {
    /// Items ([`ClientBuilder::max_list_items`](crate::ClientBuilder::max_list_items)).
    Items(usize),
    /// Bytes of JSON ([`ClientBuilder::max_list_bytes`](crate::ClientBuilder::max_list_bytes)).
    Bytes(usize),
    /// Time ([`ClientBuilder::list_timeout`](crate::ClientBuilder::list_timeout)).
    Time(std::time::Duration),
    /// Pages (10,000).
    Pages(usize),
}

impl std::fmt::Display for ListLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListLimit::Items(n) => write!(f, "{n} items (ClientBuilder::max_list_items)"),
            ListLimit::Bytes(n) => write!(f, "{n} bytes (ClientBuilder::max_list_bytes)"),
            ListLimit::Time(t) => write!(f, "{t:?} (ClientBuilder::list_timeout)"),
            ListLimit::Pages(n) => write!(f, "{n} pages"),
        }
    }
}

impl From<crate::auth::AuthError> for Error {
    fn from(error: crate::auth::AuthError) -> Self {
        Error::Authorization(error)
    }
}

impl Error {
    /// The server's JSON-RPC error, if this is one.
    pub fn rpc(&self) -> Option<&ErrorObject> {
        match self {
            Error::Rpc(e) => Some(e),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
