//! What the client adds to a call: `tools/call` echo through `toolwire-client` against a Toolwire
//! server on 127.0.0.1 in the same process, next to the same request sent with bare `reqwest`
//! (the floor: HTTP and the server), plus an MRTR round (two exchanges) and the tool-list cache.
//!
//! `cargo bench -p toolwire-client --bench client`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolwire_client::ClientBuilder;
use toolwire_server::{Elicited, InputRequired, NoArgs, RequestContext, Server, Tool, ToolError};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    message: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Name {
    name: String,
}

fn server() -> Server {
    Server::builder("bench", "1")
        .list_ttl(std::time::Duration::from_secs(60))
        .tool(
            Tool::new(
                "echo",
                |a: Echo, _: RequestContext| async move { a.message },
            )
            .description("Echoes"),
        )
        .tool(
            Tool::new("greet", |_: NoArgs, ctx: RequestContext| async move {
                match ctx.elicited::<Name>("name")? {
                    Some(Elicited::Accepted(n)) => Ok::<_, ToolError>(n.name),
                    Some(_) => Ok("nobody".to_owned()),
                    None => Err(InputRequired::new().elicit::<Name>("name", "Name?").into()),
                }
            })
            .description("Asks a name"),
        )
        .build()
        .expect("valid")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(toolwire_server::http::serve(
            server(),
            listener,
            Default::default(),
        ));
        url
    });
    let client = ClientBuilder::new("bench", "1")
        .on_elicit(|_| async { toolwire_client::accepted(&json!({"name": "Ada"})) })
        .http(&url)
        .unwrap();
    rt.block_on(client.list_tools()).unwrap();

    let mut group = c.benchmark_group("client");
    group.bench_function("http tools/call echo via toolwire-client", |b| {
        b.iter(|| {
            rt.block_on(client.call_tool("echo", black_box(json!({"message": "hi"}))))
                .unwrap()
        })
    });

    let raw = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "hi"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    group.bench_function("http tools/call echo via bare reqwest", |b| {
        b.iter(|| {
            rt.block_on(async {
                raw.post(&url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call")
                    .header("mcp-name", "echo")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
            })
        })
    });

    group.bench_function("http MRTR round (two exchanges)", |b| {
        b.iter(|| rt.block_on(client.call_tool("greet", json!({}))).unwrap())
    });

    group.bench_function("tools/list from the cache", |b| {
        b.iter(|| rt.block_on(client.list_tools()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
