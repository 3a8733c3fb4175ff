//! Micro-benchmarks of request processing without a transport (`Server::handle_message`):
//! `tools/call` with a trivial and a realistic argument schema (the difference is input
//! validation), `tools/list` pages of a 10,000-tool registry with and without a cursor, and
//! `server/discover`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolwire_server::{Elicited, InputRequired, RequestContext, Server, Tool, ToolError};

fn request(method: &str, mut params: Value) -> Vec<u8> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    message: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Notice {
    #[schemars(length(min = 1, max = 4096))]
    message: String,
    #[schemars(email)]
    recipient: String,
    #[schemars(extend("format" = "date-time"))]
    send_at: String,
    priority: Level,
    channel: Level,
    #[schemars(range(min = 0, max = 10))]
    max_retries: u32,
    #[schemars(range(min = 1, max = 86400))]
    ttl_seconds: u32,
    address: Address,
    tags: Option<Vec<String>>,
    require_ack: bool,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum Level {
    High,
    Email,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Address {
    street: String,
    city: String,
    #[schemars(length(min = 2, max = 2))]
    country: String,
    postal_code: Option<String>,
}

fn server(extra_tools: usize) -> Server {
    let fillers = (0..extra_tools).map(|i| {
        Tool::new(
            format!("tool_{i:05}"),
            |e: Echo, _: RequestContext| async move { e.message },
        )
        .description("A filler tool for the listing benchmark")
    });
    let ask = Tool::new("ask", |e: Echo, ctx: RequestContext| async move {
        let state: Option<String> = ctx.request_state()?;
        match (ctx.elicited::<Echo>("who")?, state) {
            (Some(Elicited::Accepted(who)), Some(_)) => Ok(who.message),
            _ => Err(ToolError::from(
                InputRequired::new()
                    .elicit::<Echo>("who", "Who?")
                    .state(e.message),
            )),
        }
    })
    .description("Asks, with sealed state");
    Server::builder("bench", "1")
        .tool(ask)
        .tool(
            Tool::new(
                "echo",
                |e: Echo, _: RequestContext| async move { e.message },
            )
            .description("Echo"),
        )
        .tool(
            Tool::new(
                "notice",
                |n: Notice, _: RequestContext| async move { n.message },
            )
            .description("Notice"),
        )
        .tools(fillers)
        .build()
        .unwrap()
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let small = server(0);
    let call = request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hello"}}),
    );
    c.bench_function("tools/call echo", |b| {
        b.iter(|| black_box(rt.block_on(small.handle_message(black_box(&call)))))
    });
    let realistic = request(
        "tools/call",
        json!({"name": "notice", "arguments": {
        "message": "hello", "recipient": "a@example.com", "send_at": "2026-12-02T12:00:00Z",
        "priority": "high", "channel": "email", "max_retries": 3, "ttl_seconds": 3600,
        "address": {"street": "1 Main St", "city": "Springfield", "country": "US", "postal_code": "12345"},
        "tags": ["a", "b"], "require_ack": true}}),
    );
    c.bench_function("tools/call realistic schema", |b| {
        b.iter(|| black_box(rt.block_on(small.handle_message(black_box(&realistic)))))
    });
    let discover = request("server/discover", json!({}));
    c.bench_function("server/discover", |b| {
        b.iter(|| black_box(rt.block_on(small.handle_message(black_box(&discover)))))
    });

    // MRTR: the first round seals state (AES-256-GCM), the retry opens and checks it.
    let mut ask = request(
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "state"}}),
    );
    let mut ask_value: Value = serde_json::from_slice(&ask).unwrap();
    ask_value["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    ask = ask_value.to_string().into_bytes();
    c.bench_function("tools/call input_required (seals state)", |b| {
        b.iter(|| black_box(rt.block_on(small.handle_message(black_box(&ask)))))
    });
    let first: Value = serde_json::from_str(&rt.block_on(small.handle_message(&ask))[0]).unwrap();
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let mut retry = ask_value.clone();
    retry["params"]["requestState"] = first["result"]["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({"who": {"action": "accept", "content": {"message": "Ada"}}});
    let retry = retry.to_string().into_bytes();
    let answered: Value =
        serde_json::from_str(&rt.block_on(small.handle_message(&retry))[0]).unwrap();
    assert_eq!(
        answered["result"]["content"][0]["text"], "Ada",
        "{answered}"
    );
    c.bench_function("tools/call retry (opens state)", |b| {
        b.iter(|| black_box(rt.block_on(small.handle_message(black_box(&retry)))))
    });

    let big = server(10_000);
    let first = request("tools/list", json!({}));
    c.bench_function("tools/list first page of 10k", |b| {
        b.iter(|| black_box(rt.block_on(big.handle_message(black_box(&first)))))
    });
    let reply: Value = serde_json::from_str(&rt.block_on(big.handle_message(&first))[0]).unwrap();
    let cursor = reply["result"]["nextCursor"].as_str().unwrap().to_owned();
    let next = request("tools/list", json!({"cursor": cursor}));
    c.bench_function("tools/list page with cursor of 10k", |b| {
        b.iter(|| black_box(rt.block_on(big.handle_message(black_box(&next)))))
    });
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
