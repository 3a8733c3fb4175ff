//! `misbehaving-server`: a minimal stdio MCP server that is rude on purpose, for the client's
//! robustness tests. Before every answer it writes a line of invalid UTF-8 to stdout and 64 KiB
//! of invalid UTF-8 (without newlines, then one) to stderr. It answers `server/discover`,
//! `tools/list` (one tool, `echo`) and `tools/call` of `echo`; it ignores notifications.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let noise = vec![0xffu8; 64 << 10];
    for line in stdin.lock().split(b'\n') {
        let Ok(line) = line else { break };
        let Ok(request) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = request.get("id").cloned() else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("server/discover") => json!({
                "resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"
            }),
            Some("tools/list") => json!({
                "resultType": "complete", "ttlMs": 0, "cacheScope": "public",
                "tools": [{"name": "echo", "description": "Echoes",
                           "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}]
            }),
            Some("tools/call") => json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": request["params"]["arguments"]["message"]}]
            }),
            _ => Value::Null,
        };
        let reply = if result.is_null() {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        };
        let _ = stderr.write_all(&noise);
        let _ = stderr.write_all(b"\n");
        let wrote = stdout
            .write_all(b"\xff\xfe not JSON, not UTF-8\n")
            .and_then(|()| writeln!(stdout, "{reply}"))
            .and_then(|()| stdout.flush());
        if wrote.is_err() {
            break;
        }
    }
}
