//! Tool registration: any JSON as an input schema (and as an output schema), compiled or
//! refused with an error, then a call's arguments checked against it.
#![no_main]

use serde_json::{Value, json};
use toolwire_server::{Server, Tool};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let tool = Tool::raw("t", schema.clone(), |_, _| async { "ok" })
        .output_schema(schema.clone())
        .description("fuzzed");
    let Ok(server) = Server::builder("fuzz", "1")
        .no_rate_limit("fuzzing")
        .tool(tool)
        .build()
    else {
        return;
    };
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "t", "arguments": schema,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let replies =
        toolwire_fuzz::runtime().block_on(server.handle_message(call.to_string().as_bytes()));
    assert_eq!(replies.len(), 1);
});
