//! Request spans read back from an in-memory OpenTelemetry exporter: one SERVER span per
//! request, named and attributed after the semantic conventions for MCP, whose parent is the
//! caller's span from `_meta` (or, on HTTP, from the `traceparent` header when `_meta` has
//! none); a malformed trace context is ignored and the request served (OT-01…OT-03).

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value as OtelValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::*;

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";

fn traceparent() -> String {
    format!("00-{TRACE}-{CALLER_SPAN}-01")
}

/// Spans exported to memory while the guard lives (on this thread: the tests run on a
/// current-thread runtime, so the server's tasks are on it too).
struct Exported {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Exported {
    fn start() -> Exported {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tests"));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        Exported {
            exporter,
            _provider: provider,
            _guard: guard,
        }
    }

    /// The one span named `name`.
    fn span(&self, name: &str) -> SpanData {
        let spans = self.exporter.get_finished_spans().unwrap();
        let mut named: Vec<SpanData> = spans.into_iter().filter(|s| s.name == name).collect();
        assert_eq!(named.len(), 1, "one span named {name}");
        named.remove(0)
    }

    fn clear(&self) {
        self.exporter.reset();
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| match &kv.value {
            OtelValue::String(s) => s.as_str().to_owned(),
            other => other.to_string(),
        })
}

fn call(id: i64, tool: &str, arguments: Value, meta: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": meta}),
    )
}

fn person() -> Value {
    json!({"name": "Ada", "age": 36, "address": {"city": "London"}})
}

#[tokio::test]
async fn a_calls_span_continues_the_callers_trace_from_meta() {
    let exported = Exported::start();
    let server = builder().build().unwrap();
    let message = call(7, "echo", person(), json!({"traceparent": traceparent()}));
    let out = server.handle_message(message.to_string().as_bytes()).await;
    assert!(out[0].contains("Ada (36) from London"), "{out:?}");
    let span = exported.span("tools/call echo");
    assert_eq!(span.span_kind, SpanKind::Server);
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex(TRACE).unwrap()
    );
    assert_eq!(span.parent_span_id, SpanId::from_hex(CALLER_SPAN).unwrap());
    assert!(span.parent_span_is_remote);
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "echo"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "7"),
        ("mcp.protocol.version", VERSION),
        ("trace_id", TRACE),
    ] {
        assert_eq!(attribute(&span, key).as_deref(), Some(want), "{key}");
    }
    assert_eq!(attribute(&span, "error.type"), None);
    assert_eq!(span.status, Status::Unset);
}

/// W3C Trace Context: a traceparent that cannot be parsed is ignored, never an error; the
/// request is answered and its span starts a trace of its own.
#[tokio::test]
async fn a_malformed_traceparent_is_ignored_and_the_request_served() {
    let exported = Exported::start();
    let server = builder().build().unwrap();
    let malformed = [
        json!("garbage"),
        json!(format!("00-{TRACE}-{CALLER_SPAN}")),
        json!(format!("00-{}-{CALLER_SPAN}-01", "0".repeat(32))),
        json!(format!("00-{TRACE}-{}-01", "0".repeat(16))),
        json!(format!("ff-{TRACE}-{CALLER_SPAN}-01")),
        json!(format!("00-{}-{CALLER_SPAN}-01", TRACE.to_uppercase())),
        json!(42),
        json!({"traceparent": traceparent()}),
    ];
    for (id, bad) in (1..).zip(malformed) {
        exported.clear();
        let message = call(id, "echo", person(), json!({"traceparent": bad}));
        let out = server.handle_message(message.to_string().as_bytes()).await;
        let reply: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(reply["result"]["isError"], Value::Null, "{bad}: {reply}");
        let span = exported.span("tools/call echo");
        assert!(span.span_context.is_valid(), "{bad}");
        assert_ne!(
            span.span_context.trace_id(),
            TraceId::from_hex(TRACE).unwrap(),
            "{bad}"
        );
        assert_eq!(span.parent_span_id, SpanId::INVALID, "{bad}: a root span");
    }
}

#[tokio::test]
async fn over_http_the_traceparent_header_is_the_parent_when_meta_has_none() {
    let exported = Exported::start();
    let test = TestServer::start(builder().build().unwrap()).await;
    let header_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let header = format!("00-{header_trace}-00f067aa0ba902b7-01");
    let body = call(1, "echo", person(), json!({}));
    let reply = post_with(&test.url, &body, |h| {
        set_header(h, "traceparent", Some(&header))
    })
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let span = exported.span("tools/call echo");
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex(header_trace).unwrap()
    );
    assert_eq!(
        span.parent_span_id,
        SpanId::from_hex("00f067aa0ba902b7").unwrap()
    );
    assert_eq!(
        attribute(&span, "network.transport").as_deref(),
        Some("tcp")
    );

    // With both, `_meta` is the request's own context and wins; the header's span is linked.
    exported.clear();
    let body = call(2, "echo", person(), json!({"traceparent": traceparent()}));
    post_with(&test.url, &body, |h| {
        set_header(h, "traceparent", Some(&header))
    })
    .await;
    let span = exported.span("tools/call echo");
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex(TRACE).unwrap()
    );
    let links: Vec<TraceId> = span
        .links
        .iter()
        .map(|link| link.span_context.trace_id())
        .collect();
    assert_eq!(links, [TraceId::from_hex(header_trace).unwrap()]);

    // A malformed header is ignored like a malformed `_meta`.
    exported.clear();
    let body = call(3, "echo", person(), json!({}));
    let reply = post_with(&test.url, &body, |h| {
        set_header(h, "traceparent", Some("00-zz"))
    })
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        exported.span("tools/call echo").parent_span_id,
        SpanId::INVALID
    );
    test.stop().await;
}

#[tokio::test]
async fn a_tool_error_and_a_jsonrpc_error_mark_the_span_as_failed() {
    let exported = Exported::start();
    let server = builder().build().unwrap();
    let message = call(1, "fails", json!({}), json!({}));
    server.handle_message(message.to_string().as_bytes()).await;
    let span = exported.span("tools/call fails");
    assert_eq!(
        attribute(&span, "error.type").as_deref(),
        Some("tool_error")
    );
    assert!(
        matches!(span.status, Status::Error { .. }),
        "{:?}",
        span.status
    );

    let message = call(2, "no_such_tool", json!({}), json!({}));
    server.handle_message(message.to_string().as_bytes()).await;
    let span = exported.span("tools/call no_such_tool");
    assert_eq!(attribute(&span, "error.type").as_deref(), Some("-32602"));
    assert_eq!(
        attribute(&span, "rpc.response.status_code").as_deref(),
        Some("-32602")
    );
    assert!(
        matches!(span.status, Status::Error { .. }),
        "{:?}",
        span.status
    );

    let message = request(3, "tools/list", json!({}));
    server.handle_message(message.to_string().as_bytes()).await;
    let span = exported.span("tools/list");
    assert_eq!(attribute(&span, "gen_ai.tool.name"), None);
    assert_eq!(span.status, Status::Unset);
}

#[tokio::test]
async fn over_stdio_the_span_names_the_pipe() {
    let exported = Exported::start();
    let mut session = StdioSession::start(builder().build().unwrap());
    session
        .send(&call(
            1,
            "echo",
            person(),
            json!({"traceparent": traceparent()}),
        ))
        .await;
    session.recv().await;
    let span = exported.span("tools/call echo");
    assert_eq!(
        attribute(&span, "network.transport").as_deref(),
        Some("pipe")
    );
    assert_eq!(span.parent_span_id, SpanId::from_hex(CALLER_SPAN).unwrap());
}
