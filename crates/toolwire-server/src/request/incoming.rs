//! How a request reached the server: over which transport, and, on HTTP, with which trace
//! context headers. Transports make it; metrics and traces read it.

use toolwire_protocol::{META_TRACE_CONTEXT, META_TRACEPARENT};

/// The transports, as `network.transport` names them.
const TRANSPORTS: [&str; 2] = ["tcp", "pipe"];

/// The transport a request came over (`network.transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Transport {
    /// Streamable HTTP: `tcp`.
    Tcp,
    /// stdio: `pipe`.
    #[default]
    Pipe,
}

impl Transport {
    /// Its `network.transport` name.
    pub(crate) fn as_str(self) -> &'static str {
        TRANSPORTS[self as usize]
    }
}

/// How a request reached the server, for its span: the transport as `network.transport` names
/// it, and, on HTTP, the request's own trace context headers (used when `_meta` has none).
#[derive(Debug, Clone, Default)]
pub(crate) struct Incoming {
    /// `None` for a request handed over in memory.
    pub(crate) transport: Option<Transport>,
    /// `traceparent`, `tracestate` and `baggage` from HTTP headers, when `traceparent` is one.
    headers: Vec<(&'static str, String)>,
}

impl Incoming {
    /// A request read from a pipe (stdio).
    pub(crate) fn stdio() -> Incoming {
        Incoming {
            transport: Some(Transport::Pipe),
            headers: Vec::new(),
        }
    }

    /// A request posted over HTTP with `headers`. Only a request that carries a
    /// `traceparent` header costs anything more than the lookup.
    pub(crate) fn http(headers: &http::HeaderMap) -> Incoming {
        let mut incoming = Incoming {
            transport: Some(Transport::Tcp),
            headers: Vec::new(),
        };
        if headers.contains_key(META_TRACEPARENT) {
            for key in META_TRACE_CONTEXT {
                if let Some(value) = headers.get(key).and_then(|v| v.to_str().ok()) {
                    incoming.headers.push((key, value.to_owned()));
                }
            }
        }
        incoming
    }

    /// The trace context headers it came with, if any.
    pub(crate) fn headers(&self) -> &[(&'static str, String)] {
        &self.headers
    }
}
