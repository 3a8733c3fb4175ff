//! The client's request spans, read back from an in-memory OpenTelemetry exporter, and what a
//! server receives: a CLIENT span per request, child of the caller's span, whose W3C context is
//! in the request's `_meta` and in its `traceparent` header alike (OT-01, OT-03); without a
//! tracer, neither.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::response::IntoResponse;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::{Value, json};
use toolwire_client::ClientBuilder;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// Each request a server received: its method, `traceparent` header and `_meta.traceparent`.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

/// A 2026-07-28 server on 127.0.0.1 that records what it receives and answers everything with
/// an empty page of tools (and a discover result's members): its MCP URL.
async fn recording(seen: Seen) -> String {
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let seen = seen.clone();
        async move {
            let request: Value = serde_json::from_str(&body).unwrap_or_default();
            let header = headers
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_owned());
            let meta = request["params"]["_meta"]["traceparent"]
                .as_str()
                .map(str::to_owned);
            let method = request["method"].as_str().unwrap_or_default().to_owned();
            seen.lock().unwrap().push((method, header, meta));
            axum::Json(json!({
                "jsonrpc": "2.0", "id": request["id"],
                "result": {
                    "resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}}, "serverInfo": {"name": "seen", "version": "1"},
                    "tools": [], "ttlMs": 0, "cacheScope": "public"
                }
            }))
            .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn a_request_carries_its_spans_context_in_meta_and_in_its_header() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tests"));
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let seen = Seen::default();
    let client = ClientBuilder::new("trace-test", "1.0")
        .http(recording(seen.clone()).await)
        .unwrap();
    let caller = tracing::info_span!("caller");
    client
        .list_tools()
        .instrument(caller.clone())
        .await
        .unwrap();
    drop(caller);

    let spans = exporter.get_finished_spans().unwrap();
    let caller = spans.iter().find(|s| s.name == "caller").unwrap();
    let names: Vec<_> = spans.iter().map(|s| s.name.clone()).collect();
    let listed = spans
        .iter()
        .find(|s| s.name == "tools/list")
        .unwrap_or_else(|| panic!("no tools/list span among {names:?}"));
    assert_eq!(listed.span_kind, SpanKind::Client);
    assert_eq!(listed.parent_span_id, caller.span_context.span_id());
    assert_eq!(
        listed.span_context.trace_id(),
        caller.span_context.trace_id()
    );
    let want = format!(
        "00-{}-{}-01",
        listed.span_context.trace_id(),
        listed.span_context.span_id()
    );
    let seen = seen.lock().unwrap();
    let (_, header, meta) = seen
        .iter()
        .find(|(method, ..)| method == "tools/list")
        .unwrap_or_else(|| panic!("a tools/list in {seen:?}"));
    assert_eq!(meta.as_deref(), Some(want.as_str()), "_meta.traceparent");
    assert_eq!(
        header.as_deref(),
        Some(want.as_str()),
        "the traceparent header"
    );
}

#[tokio::test]
async fn without_a_tracer_a_request_carries_no_trace_context() {
    // A subscriber that records spans but has no tracer. Without any, this test's thread could
    // meet the request span's callsite while no scoped subscriber exists yet, and tracing would
    // remember it as disabled everywhere, the other test's thread included.
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry());
    let seen = Seen::default();
    let client = ClientBuilder::new("trace-test", "1.0")
        .http(recording(seen.clone()).await)
        .unwrap();
    client.list_tools().await.unwrap();
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    for (method, header, meta) in seen.iter() {
        assert_eq!((header, meta), (&None, &None), "{method}");
    }
}
