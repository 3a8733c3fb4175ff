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

/// Which protocol revision a caller speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revision {
    /// 2026-07-28 ([`VERSION`]).
    Current,
    /// 2025-11-25 (`legacy::VERSION`): a session per connection, no `_meta`.
    Legacy,
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
        Template::bare(method, params)
    }

    /// A request with `params` as given: no `_meta` is added (a 2025-11-25 request has none).
    pub(crate) fn bare(method: &str, params: Value) -> Template {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 424242424242u64, "method": method, "params": params}).to_string();
        let (prefix, suffix) = body.split_once("424242424242").expect("id placeholder");
        Template {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
        }
    }

    /// A `tools/call` of `name` as a caller of `revision` sends it (a 2025-11-25 call has no
    /// `_meta`).
    pub(crate) fn call(revision: Revision, name: &str, arguments: Value) -> Template {
        let params = serde_json::json!({"name": name, "arguments": arguments});
        match revision {
            Revision::Current => Template::new("tools/call", params),
            Revision::Legacy => Template::bare("tools/call", params),
        }
    }

    /// The body before and after the id.
    pub(crate) fn parts(&self) -> (&str, &str) {
        (&self.prefix, &self.suffix)
    }

    /// The body with `id`, appended to `out`.
    pub(crate) fn write(&self, id: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        out.extend_from_slice(self.suffix.as_bytes());
    }

    pub(crate) fn render(&self, id: u64) -> String {
        let mut out = Vec::with_capacity(self.prefix.len() + self.suffix.len() + 20);
        self.write(id, &mut out);
        String::from_utf8(out).expect("a template and an integer are UTF-8")
    }
}

/// The parts of a reply the checks look at, read without building a JSON tree.
#[derive(serde::Deserialize)]
struct Reply<'a> {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default, borrow)]
    result: Option<ReplyResult<'a>>,
}

#[derive(serde::Deserialize)]
struct ReplyResult<'a> {
    #[serde(rename = "resultType", default, borrow)]
    result_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Vec<Block<'a>>,
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

#[derive(serde::Deserialize)]
struct Block<'a> {
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// The JSON-RPC response carried by a reply body: the body itself (JSON), or (`sse`: the reply
/// was an SSE stream) the last `data:` payload that has an id.
pub(crate) fn response_json(sse: bool, body: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let text = std::str::from_utf8(body).ok()?;
    if !sse {
        return Some(text.into());
    }
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .filter(|json| json.contains("\"id\""))
        .last()
        .map(Into::into)
}

/// Whether `json` is the successful echo (text `hello`) of request `id`.
pub(crate) fn is_echo_reply(json: &str, id: u64, require_result_type: bool) -> bool {
    let Ok(reply) = serde_json::from_str::<Reply<'_>>(json) else {
        return false;
    };
    let Some(result) = reply.result else {
        return false;
    };
    reply.id == Some(id)
        && result.content.first().and_then(|b| b.text.as_deref()) == Some("hello")
        && result.is_error != Some(true)
        && (!require_result_type || result.result_type.as_deref() == Some("complete"))
}

/// Whether a JSON reply body reads as the successful echo of request `id`, by looking for its
/// parts as bytes: `"id":ID` ending there, the text `hello`, `"resultType":"complete"` when
/// required, and no `"isError":true`. It only ever says yes: a reply it does not recognise
/// (other spacing, another member order inside strings) goes to the full check,
/// [`is_echo_reply`], which also runs on a sample of the replies it accepts.
pub(crate) fn looks_like_echo(body: &[u8], id: u64, require_result_type: bool) -> bool {
    use std::sync::LazyLock;

    use memchr::memmem::Finder;
    // Built once: building a searcher costs more than running it on a reply this short.
    static ID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"id\":"));
    static HELLO: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"text\":\"hello\""));
    static COMPLETE: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"\"resultType\":\"complete\""));
    static IS_ERROR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"isError\":true"));
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(id).as_bytes();
    let id_at = ID.find_iter(body).find(|&at| {
        let rest = &body[at + 5..];
        rest.starts_with(digits) && matches!(rest.get(digits.len()), Some(b',' | b'}'))
    });
    id_at.is_some()
        && HELLO.find(body).is_some()
        && (!require_result_type || COMPLETE.find(body).is_some())
        && IS_ERROR.find(body).is_none()
}

/// One reply in this many is parsed in full even when its bytes read as the echo.
pub(crate) const FULL_CHECK_EVERY: u64 = 16;

/// Whether a reply body (`sse`: an SSE stream) is the echo of request `id`: every reply's bytes
/// are looked at, and one in [`FULL_CHECK_EVERY`] (and every one the byte check does not
/// recognise, and every SSE reply) is parsed in full, so a server that answers fast and wrong
/// is caught either way.
pub(crate) fn is_echo(body: &[u8], sse: bool, id: u64, require_result_type: bool) -> bool {
    if !sse && id % FULL_CHECK_EVERY != 0 && looks_like_echo(body, id, require_result_type) {
        return true;
    }
    response_json(sse, body).is_some_and(|json| is_echo_reply(&json, id, require_result_type))
}

/// The JSON-RPC message of a reply body, parsed (for the checks that need more than an echo).
pub(crate) fn reply_message(sse: bool, body: &[u8]) -> Option<Value> {
    serde_json::from_str(&response_json(sse, body)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &[u8] = br#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}"#;

    #[test]
    fn the_byte_check_accepts_only_what_the_full_check_accepts() {
        assert!(looks_like_echo(ECHO, 17, true));
        assert!(is_echo_reply(std::str::from_utf8(ECHO).unwrap(), 17, true));
        for (id, body) in [
            (1, ECHO.to_vec()),
            (171, ECHO.to_vec()),
            (
                17,
                String::from_utf8_lossy(ECHO)
                    .replace("hello", "hellx")
                    .into_bytes(),
            ),
            (
                17,
                String::from_utf8_lossy(ECHO)
                    .replace("complete", "input_required")
                    .into_bytes(),
            ),
            (
                17,
                String::from_utf8_lossy(ECHO)
                    .replace(r#""resultType""#, r#""isError":true,"resultType""#)
                    .into_bytes(),
            ),
        ] {
            assert!(
                !looks_like_echo(&body, id, true),
                "{}",
                String::from_utf8_lossy(&body)
            );
            assert!(!is_echo_reply(
                std::str::from_utf8(&body).unwrap(),
                id,
                true
            ));
        }
        let spaced = String::from_utf8_lossy(ECHO).replace("\"id\":17", "\"id\": 17");
        assert!(
            !looks_like_echo(spaced.as_bytes(), 17, true),
            "unusual spacing goes to the full check"
        );
        assert!(is_echo_reply(&spaced, 17, true));
    }
}
