//! A hostile-input suite, beyond the refusals `http_errors.rs` lists one by one:
//! every position of a request given every wrong type, request smuggling and malformed
//! headers on a raw connection, oversized headers. Each answer has a known status and
//! JSON-RPC code, never a 500 or an internal error, and the server keeps serving.
//! (Request state tampered, expired, foreign and replayed: `mrtr.rs`; stray session headers,
//! foreign Host and Origin, bodies too large or too deep: `http_errors.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolwire_server::{NoArgs, RequestContext, Tool};

use crate::support::*;

/// The JSON-RPC codes a refusal of bad input may carry: parse error, invalid request, method
/// not found, invalid params, header mismatch, missing capability, unsupported version.
const INPUT_ERRORS: [i64; 7] = [-32700, -32600, -32601, -32602, -32020, -32021, -32022];

/// A request with something at every level: id, method, params, name, typed arguments with a
/// nested object, and `_meta` with a progress token and a log level.
fn rich_call() -> Value {
    request(
        7,
        "tools/call",
        json!({
            "name": "echo",
            "arguments": {"name": "Ada", "age": 36, "address": {"city": "Paris"}},
            "_meta": {"progressToken": "p", "io.modelcontextprotocol/logLevel": "info"}
        }),
    )
}

/// The JSON pointer of every value below the root.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let p = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(v, p, out);
            }
        }
        _ => {}
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks one reply to bad input: a known status, a known code or a result, no internal
/// error, and the id echoed when the request's id was intact.
fn check_refusal(what: &str, reply: &Reply) {
    assert!(
        [200, 400, 404].contains(&reply.status),
        "{what}: HTTP {}: {}",
        reply.status,
        reply.body
    );
    let last = reply
        .messages
        .last()
        .unwrap_or_else(|| panic!("{what}: no message: {}", reply.body));
    wire::check("", last);
    match last["error"]["code"].as_i64() {
        Some(code) => assert!(
            INPUT_ERRORS.contains(&code),
            "{what}: code {code}: {}",
            reply.body
        ),
        None => assert!(last.get("result").is_some(), "{what}: {}", reply.body),
    }
    if reply.status != 200 {
        assert!(last.get("error").is_some(), "{what}: {}", reply.body);
    }
}

#[tokio::test]
async fn every_position_with_every_wrong_type_is_refused_cleanly() {
    let s = TestServer::start(builder().build().unwrap()).await;
    let original = rich_call();
    let mut paths = Vec::new();
    pointers(&original, String::new(), &mut paths);
    let wrong = [
        json!(null),
        json!(0),
        json!(-1.5),
        json!(1e300),
        json!(""),
        json!("\u{0}\u{202e}"),
        json!(true),
        json!([]),
        json!([[[]]]),
        json!({}),
        json!({"_meta": {}}),
    ];
    let mut sent = 0;
    let mut refused = 0;
    for path in &paths {
        let here = original.pointer(path).unwrap();
        for value in &wrong {
            if kind(value) == kind(here) && value != &json!({}) {
                continue;
            }
            let mut body = original.clone();
            *body.pointer_mut(path).unwrap() = value.clone();
            let what = format!("{path} = {value}");
            let reply = post_raw(&s.url, body.to_string(), &standard_headers(&body)).await;
            check_refusal(&what, &reply);
            sent += 1;
            refused += usize::from(
                reply
                    .messages
                    .last()
                    .is_some_and(|m| m.get("error").is_some() || m["result"]["isError"] == true),
            );
        }
    }
    assert!(sent > 150, "{sent} mutations");
    assert!(
        refused > sent / 2,
        "most mutations are refused: {refused} of {sent}"
    );
    let reply = post(&s.url, &original).await;
    assert_eq!(reply.status, 200, "still serving: {}", reply.body);
    assert_eq!(
        reply.last()["result"]["content"][0]["text"],
        "Ada (36) from Paris"
    );
    s.stop().await;
}

/// Sends raw bytes on a fresh connection and reads what comes back until the server closes
/// it or goes quiet for 1 s.
async fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The status of each HTTP response in `text`.
fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text[i + 9..i + 12].parse().ok())
        .collect()
}

#[tokio::test]
async fn smuggled_and_malformed_requests_never_reach_a_tool() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let count = Tool::new("count", move |_: NoArgs, _: RequestContext| {
        let counted = counted.clone();
        async move { counted.fetch_add(1, Ordering::SeqCst).to_string() }
    })
    .description("Counts its calls");
    let s = TestServer::start(builder().tool(count).build().unwrap()).await;
    let call = request(1, "tools/call", json!({"name": "count", "arguments": {}})).to_string();
    let head = |extra: &str| {
        let mut h = format!("POST /mcp HTTP/1.1\r\nhost: {}\r\n", s.addr);
        for (name, value) in standard_headers(&serde_json::from_str(&call).unwrap()) {
            h.push_str(&format!("{name}: {value}\r\n"));
        }
        h.push_str(extra);
        h
    };
    let smuggled = format!("{}\r\n\r\n{call}", head("").trim_end());
    let chunked_body = format!("{:x}\r\n{call}\r\n0\r\n\r\n", call.len());
    // Content-Length and Transfer-Encoding together, a second request hidden in the body:
    // hyper reads the body by Transfer-Encoding alone and closes the connection after the
    // answer (RFC 9112 §6.1), so the hidden request is never read.
    let reply = raw(
        s.addr,
        format!(
            "{}content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n{chunked_body}{smuggled}",
            head("")
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(statuses(&reply), [200], "{reply}");
    assert!(reply.contains("connection: close"), "{reply}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the hidden request ran");
    let cases: Vec<(&str, String, &[u16])> = vec![
        (
            "two different Content-Lengths",
            format!(
                "{}content-length: {}\r\ncontent-length: 5\r\n\r\n{call}",
                head(""),
                call.len()
            ),
            &[400],
        ),
        (
            "an obsolete folded header line",
            format!(
                "{}x-folded: a\r\n b\r\ncontent-length: {}\r\n\r\n{call}",
                head(""),
                call.len()
            ),
            &[400],
        ),
        (
            "a bare LF inside a header value",
            format!(
                "{}x-bad: a\nb\r\ncontent-length: {}\r\n\r\n{call}",
                head(""),
                call.len()
            ),
            &[400],
        ),
        (
            "a header of 100 KiB",
            format!(
                "{}x-big: {}\r\ncontent-length: {}\r\n\r\n{call}",
                head(""),
                "a".repeat(100 * 1024),
                call.len()
            ),
            &[431, 400],
        ),
        (
            "two Mcp-Method headers that disagree",
            format!(
                "{}mcp-method: tools/list\r\ncontent-length: {}\r\n\r\n{call}",
                head(""),
                call.len()
            ),
            &[400],
        ),
        (
            "a second Mcp-Name",
            format!(
                "{}mcp-name: echo\r\ncontent-length: {}\r\n\r\n{call}",
                head(""),
                call.len()
            ),
            &[400],
        ),
        (
            "a number out of range",
            {
                let body = call.replace("\"id\":1", "\"id\":1e999");
                format!("{}content-length: {}\r\n\r\n{body}", head(""), body.len())
            },
            &[400],
        ),
    ];
    for (what, bytes, expected) in cases {
        let reply = raw(s.addr, bytes.as_bytes()).await;
        let got = statuses(&reply);
        assert!(
            got.len() == 1 && expected.contains(&got[0]),
            "{what}: {got:?}\n{}",
            &reply[..reply.len().min(600)]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{what}: a tool ran");
    }
    // The same call, well formed, still runs, once.
    let reply = post_raw(
        &s.url,
        call.clone(),
        &standard_headers(&serde_json::from_str(&call).unwrap()),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    s.stop().await;
}
