//! Micro-benchmarks of the hot pure functions of the wire: envelope decode and encode, `_meta`
//! validation, header value decoding and `x-mcp-header` declarations.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolwire_protocol::headers;
use toolwire_protocol::{CallToolResult, RawMessage, RequestId, RequestMeta, Response};

const CALL: &str = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}"#;

fn envelope(c: &mut Criterion) {
    c.bench_function("decode envelope (tools/call)", |b| {
        b.iter(|| {
            let raw: RawMessage<'_> = serde_json::from_str(black_box(CALL)).unwrap();
            black_box(raw.kind().unwrap());
        })
    });
    let raw: RawMessage<'_> = serde_json::from_str(CALL).unwrap();
    c.bench_function("read _meta", |b| {
        b.iter(|| black_box(RequestMeta::from_params(black_box(raw.params)).unwrap()))
    });
    let response = Response::new(RequestId::Number(42), CallToolResult::text("hello"));
    c.bench_function("encode CallToolResult response", |b| {
        b.iter(|| black_box(serde_json::to_string(black_box(&response)).unwrap()))
    });
}

fn header_values(c: &mut Criterion) {
    c.bench_function("decode plain header value", |b| {
        b.iter(|| headers::decode_value(black_box(" us-west1 ")))
    });
    c.bench_function("decode base64 header value", |b| {
        b.iter(|| headers::decode_value(black_box("=?base64?SGVsbG8sIOS4lueVjA==?=")))
    });
    c.bench_function("encode header value", |b| {
        b.iter(|| headers::encode_value(black_box("Hello, 世界")))
    });
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "options": {"type": "object", "properties": {"debug": {"type": "boolean", "x-mcp-header": "Debug"}}},
        "query": {"type": "string"}
    }});
    let schema = schema.as_object().unwrap().clone();
    c.bench_function("read x-mcp-header declarations", |b| {
        b.iter(|| headers::header_params(black_box(&schema)).unwrap())
    });
}

criterion_group!(benches, envelope, header_values);
criterion_main!(benches);
