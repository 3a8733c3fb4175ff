//! Traces of the requests a server answers: one SERVER span per request, named and attributed
//! after the OpenTelemetry semantic conventions for MCP (OT-03), whose parent is the caller's
//! span: the W3C trace context of the request's own `_meta` (`traceparent`, `tracestate`,
//! `baggage`; OT-01), or on HTTP, when `_meta` has none, the request's `traceparent` header. A
//! malformed trace context is ignored: the request is served and its span starts a trace of its
//! own (OT-02).
//!
//! The spans are `tracing` spans at DEBUG level (target [`TARGET`]): a program that logs at
//! INFO pays nothing for them, as with tower-http's request spans. The library stays on the
//! OpenTelemetry API: a program that installs the `tracing-opentelemetry` layer and a
//! propagator (the CLI does, when an OTLP endpoint is configured) exports them; its log lines
//! logged inside a request carry the span's fields (the request id, the trace id). With no
//! subscriber that wants them, a span costs a callsite check and nothing is read.

use std::fmt;

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use toolwire_protocol::{META_TRACE_CONTEXT, META_TRACEPARENT, RequestId, RequestMeta};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::request::incoming::{Incoming, Transport};
use crate::request::outcome::Final;
use crate::request::route::Route;

/// The `tracing` target of the spans of requests, the server's and the client's: a subscriber
/// filters them by it (`toolwire::request=off` turns them off).
pub(crate) const TARGET: &str = "toolwire::request";

/// `error.type` of a `tools/call` whose result says `isError` (OT-03).
const TOOL_ERROR: &str = "tool_error";

/// `gen_ai.operation.name` of `tools/call` (OT-03).
const EXECUTE_TOOL: &str = "execute_tool";

/// The span of one request, not yet entered; [`Span::none`] when no subscriber wants it.
pub(crate) fn request_span(
    id: &RequestId,
    route: &Route,
    meta: &RequestMeta,
    incoming: &Incoming,
) -> Span {
    let method = route.method();
    let (tool, prompt, uri) = match route {
        Route::CallTool(call) => (Some(call.name.as_str()), None, None),
        Route::GetPrompt(get) => (None, Some(get.name.as_str()), None),
        Route::ReadResource(read) => (None, None, Some(read.uri.as_str())),
        _ => (None, None, None),
    };
    let span = tracing::debug_span!(
        target: TARGET,
        "request",
        otel.name = %SpanName { method, target: tool.or(prompt) },
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = method,
        gen_ai.tool.name = tool,
        gen_ai.prompt.name = prompt,
        gen_ai.operation.name = tool.map(|_| EXECUTE_TOOL),
        mcp.resource.uri = uri,
        jsonrpc.request.id = %IdText(id),
        mcp.protocol.version = meta.protocol_version.as_str(),
        network.transport = incoming.transport.map(Transport::as_str),
        "error.type" = tracing::field::Empty,
        rpc.response.status_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let (parent, linked) = parent_of(meta, incoming);
    // No OpenTelemetry layer (logs only): nothing to attach the parent to, and that is fine.
    let _ = span.set_parent(parent);
    if let Some(linked) = linked {
        span.add_link(linked);
    }
    if let Some(trace_id) = trace_id_of(&span, meta, incoming) {
        span.record("trace_id", trace_id.as_str());
    }
    span
}

/// Records how the request ended on its span: a JSON-RPC error sets `error.type` and
/// `rpc.response.status_code` to the code, and the status to ERROR (OT-03).
pub(crate) fn finish(span: &Span, done: Option<&Final>) {
    if let Some(code) = done.and_then(|f| f.error_code) {
        // The code as text: `error.type` is a string attribute.
        span.record("error.type", code.to_string().as_str());
        span.record("rpc.response.status_code", code.to_string().as_str());
        span.record("otel.status_code", "error");
    }
}

/// Marks the current request's span as failed by the tool itself (`isError`): `error.type`
/// `tool_error` (OT-03).
pub(crate) fn tool_error() {
    let span = Span::current();
    span.record("error.type", TOOL_ERROR);
    span.record("otel.status_code", "error");
}

/// The caller's span, from `_meta` when it has a well-formed `traceparent`, else from the HTTP
/// headers; an empty context (a new trace) when neither has one (OT-01, OT-02). With both, and
/// different, the headers' span (a proxy's, say) is the other one: linked, as the conventions
/// ask.
fn parent_of(
    meta: &RequestMeta,
    incoming: &Incoming,
) -> (opentelemetry::Context, Option<SpanContext>) {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        let from_meta = propagator.extract(&MetaCarrier(meta));
        if incoming.headers().is_empty() {
            return (from_meta, None);
        }
        let from_headers = propagator.extract(&HeaderCarrier(incoming.headers()));
        if !from_meta.span().span_context().is_valid() {
            return (from_headers, None);
        }
        let other = from_headers.span().span_context().clone();
        let linked =
            (other.is_valid() && other != *from_meta.span().span_context()).then_some(other);
        (from_meta, linked)
    })
}

/// The trace id the request's log lines carry: the span's own when it is exported, else the
/// caller's from a well-formed `traceparent` (so that logs match the caller's trace even when
/// this process exports nothing).
fn trace_id_of(span: &Span, meta: &RequestMeta, incoming: &Incoming) -> Option<String> {
    let context = span.context();
    let exported = context.span().span_context().trace_id();
    if exported != opentelemetry::trace::TraceId::INVALID {
        return Some(exported.to_string());
    }
    let header = incoming
        .headers()
        .iter()
        .find(|(key, _)| *key == META_TRACEPARENT)
        .map(|(_, value)| value.as_str());
    [meta.traceparent(), header]
        .into_iter()
        .flatten()
        .find_map(crate::safety::audit::parse_traceparent)
        .map(|(trace_id, _)| trace_id)
}

/// A request id as the conventions write it: a number's digits, a string's own text.
struct IdText<'a>(&'a RequestId);

impl fmt::Display for IdText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => f.write_str(s),
        }
    }
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

/// The trace context keys of a request's `_meta`.
struct MetaCarrier<'a>(&'a RequestMeta);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.trace_context(key)
    }

    fn keys(&self) -> Vec<&str> {
        META_TRACE_CONTEXT
            .into_iter()
            .filter(|key| self.0.trace_context(key).is_some())
            .collect()
    }
}

/// The trace context headers of an HTTP request.
struct HeaderCarrier<'a>(&'a [(&'static str, String)]);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let key = key.to_ascii_lowercase();
        self.0
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| value.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(name, _)| *name).collect()
    }
}
