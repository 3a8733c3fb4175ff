//! Request bodies and reply checks.

use serde_json::Value;

pub(crate) const VERSION: &str = "2026-07-28";

/// The arguments of each scenario (`realistic` matches the peers' ten-field schema); every server
/// echoes `message` back.
pub(crate) fn arguments(scenario: &str) -> Value {
    match scenario {
        "realistic" => serde_json::json!({
            "message": "hello",
            "recipient": "a@example.com",
            "send_at": "2026-12-02T12:00:00Z",
            "priority": "high",
            "channel": "email",
            "max_retries": 3,
            "ttl_seconds": 3600,
            "address": {"street": "1 Main St", "city": "Springfield", "country": "US", "postal_code": "12345"},
            "tags": ["a", "b"],
            "require_ack": true
        }),
        _ => serde_json::json!({"message": "hello"}),
    }
}

pub(crate) fn meta() -> Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-load", "version": "1"}
    })
}

/// A request body split around its id, so each request only formats an integer.
#[derive(Clone)]
pub(crate) struct Template {
    prefix: String,
    suffix: String,
}

impl Template {
    pub(crate) fn new(method: &str, mut params: Value) -> Template {
        params["_meta"] = meta();
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 424242424242u64, "method": method, "params": params}).to_string();
        let (prefix, suffix) = body.split_once("424242424242").expect("id placeholder");
        Template {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
        }
    }

    pub(crate) fn call(name: &str, arguments: Value) -> Template {
        Template::new(
            "tools/call",
            serde_json::json!({"name": name, "arguments": arguments}),
        )
    }

    pub(crate) fn render(&self, id: u64) -> String {
        let mut s = String::with_capacity(self.prefix.len() + self.suffix.len() + 20);
        s.push_str(&self.prefix);
        s.push_str(itoa(id).as_str());
        s.push_str(&self.suffix);
        s
    }
}

fn itoa(n: u64) -> String {
    n.to_string()
}

/// The JSON-RPC message of a reply body, JSON or SSE (the last `data:` payload with an id).
pub(crate) fn reply_message(content_type: &str, body: &[u8]) -> Option<Value> {
    if content_type.starts_with("text/event-stream") {
        let text = std::str::from_utf8(body).ok()?;
        text.split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                (!data.is_empty())
                    .then(|| serde_json::from_str::<Value>(&data.join("\n")).ok())
                    .flatten()
            })
            .filter(|m| m.get("id").is_some())
            .last()
    } else {
        serde_json::from_slice(body).ok()
    }
}

/// Whether `message` is the successful echo of request `id`.
pub(crate) fn is_echo_reply(message: &Value, id: u64, require_result_type: bool) -> bool {
    message["id"].as_u64() == Some(id)
        && message["result"]["content"][0]["text"] == "hello"
        && message["result"].get("isError").is_none_or(|e| e == false)
        && (!require_result_type || message["result"]["resultType"] == "complete")
}
