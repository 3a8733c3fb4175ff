//! A whole message, as the stdio transport hands it to the server: frame, `_meta`, method
//! params, tool arguments against their schemas, cursors, request state, resource URIs.
#![no_main]

use std::time::Duration;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // A listen stream runs until the server shuts down: not a hang, and not this target's.
    if let Ok(message) = serde_json::from_slice::<serde_json::Value>(data) {
        if message["method"] == "subscriptions/listen" {
            return;
        }
    }
    let server = toolwire_fuzz::server();
    let replies = toolwire_fuzz::runtime()
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(5), server.handle_message(data)).await
        })
        .expect("a message is answered within 5 s");
    for reply in replies {
        // Whatever came in, what goes out is one JSON-RPC message per line.
        let message: serde_json::Value = serde_json::from_str(&reply).expect("a reply is JSON");
        assert_eq!(message["jsonrpc"], "2.0", "{reply}");
        assert!(!reply.contains('\n'), "{reply}");
    }
});
