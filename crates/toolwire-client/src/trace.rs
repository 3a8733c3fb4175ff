//! Traces of the requests a client sends: a CLIENT span per request, named and attributed after
//! the OpenTelemetry semantic conventions for MCP (OT-03), and the W3C trace context of that
//! span written into the request's `_meta` (`traceparent`, `tracestate`, `baggage`) and, on
//! HTTP, its headers of the same names (OT-01), so that the server continues the caller's
//! trace: a caller, a gateway and its upstreams make one trace.
//!
//! The spans are `tracing` spans (target [`TARGET`]) and the crate uses only the OpenTelemetry
//! API: until a program installs the `tracing-opentelemetry` layer and a propagator, nothing
//! is written and a span costs a callsite check.

use std::fmt;

use opentelemetry::propagation::Injector;
use opentelemetry::trace::TraceContextExt as _;
use serde_json::Value;
use toolwire_protocol::META_TRACE_CONTEXT;
use toolwire_protocol::methods::{CallTool, GetPrompt, Method as _};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::error::Error;

/// The `tracing` target of request spans, the same as the server's.
const TARGET: &str = "toolwire::request";

/// The W3C trace context of the current span, as the installed propagator writes it: empty
/// when no span is exported.
#[derive(Debug, Default)]
pub(crate) struct TraceContext(Vec<(&'static str, String)>);

impl TraceContext {
    /// The context of the current span (the request's own, inside [`request_span`]).
    pub(crate) fn current() -> TraceContext {
        let span = Span::current();
        let mut carrier = TraceContext::default();
        if span.is_disabled() {
            return carrier;
        }
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return carrier;
        }
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut carrier);
        });
        carrier
    }

    /// Each key (a `_meta` key and a header name alike) and its value.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(key, value)| (*key, value.as_str()))
    }

    /// Writes the context as keys of a request's `_meta`.
    pub(crate) fn write_pairs(&self, own: &mut Vec<(&'static str, Value)>) {
        for (key, value) in self.pairs() {
            own.push((key, Value::String(value.to_owned())));
        }
    }
}

impl Injector for TraceContext {
    /// Keeps the W3C keys only: those are the ones `_meta` carries (OT-01).
    fn set(&mut self, key: &str, value: String) {
        if let Some(known) = META_TRACE_CONTEXT.into_iter().find(|k| *k == key) {
            self.0.push((known, value));
        }
    }
}

/// The span of one request the client sends, not yet entered; `name` is the `Mcp-Name` value
/// (the tool or prompt, which the span's name ends with).
pub(crate) fn request_span(method: &str, name: Option<&str>) -> Span {
    let tool = name.filter(|_| method == CallTool::METHOD);
    let prompt = name.filter(|_| method == GetPrompt::METHOD);
    tracing::debug_span!(
        target: TARGET,
        "request",
        otel.name = %SpanName { method, target: tool.or(prompt) },
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = method,
        gen_ai.tool.name = tool,
        gen_ai.prompt.name = prompt,
        gen_ai.operation.name = tool.map(|_| "execute_tool"),
        jsonrpc.request.id = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        rpc.response.status_code = tracing::field::Empty,
    )
}

/// Records the id of the request as sent (each attempt sends a new one).
pub(crate) fn sent(id: i64) {
    Span::current().record("jsonrpc.request.id", id);
}

/// Whether a result is a tool's error (`isError: true`).
pub(crate) struct ToolError(pub(crate) bool);

/// Records how the request ended on `span`: a JSON-RPC error by its code, a tool's `isError`
/// as `tool_error`, anything else that failed by its kind (OT-03).
pub(crate) fn finish(span: &Span, outcome: Result<ToolError, &Error>) {
    if span.is_disabled() {
        return;
    }
    let kind = match outcome {
        Ok(ToolError(true)) => "tool_error".into(),
        Ok(ToolError(false)) => return,
        Err(Error::Rpc(error)) => {
            span.record("rpc.response.status_code", error.code.to_string().as_str());
            error.code.to_string()
        }
        Err(Error::Timeout(_)) => "timeout".into(),
        Err(Error::Cancelled) => "cancelled".into(),
        Err(Error::Http { .. }) => "http".into(),
        Err(Error::Transport(_)) => "transport".into(),
        Err(_) => "error".into(),
    };
    span.record("error.type", kind.as_str());
    span.record("otel.status_code", "error");
}

/// A span's name as the conventions make it: the method, then the tool or prompt when there
/// is one (`tools/call get_weather`).
struct SpanName<'a> {
    method: &'a str,
    target: Option<&'a str>,
}

impl fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.target {
            Some(target) => write!(f, "{} {target}", self.method),
            None => f.write_str(self.method),
        }
    }
}
