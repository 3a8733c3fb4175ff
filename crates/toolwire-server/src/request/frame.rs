//! Reading what a transport hands over: a frame's text checked (UTF-8, nesting depth) and
//! parsed into a message, and a request's `_meta` read. Running the method is the server's
//! (`server/dispatch.rs`); transports add their own checks (HTTP headers) between these steps,
//! in the order the spec and the suite expect.

use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use toolwire_protocol::{ErrorObject, RawMessage, RequestId, RequestMeta};

use crate::request::last_meta::LastMeta;
use crate::request::route::CallFrame;

/// Whether JSON text nests deeper than `max` arrays/objects. A linear scan that respects
/// strings, run before parsing so deep input costs nothing more (J-08). Any bytes at all are
/// safe input: a string that never ends (even on a lone trailing backslash) ends the scan.
pub(crate) fn json_too_deep(bytes: &[u8], max: usize) -> bool {
    // Each level of nesting needs an opener: with no more `{` and `[` bytes than the limit, as
    // in most messages, the depth cannot exceed it. Counted without branches in byte-sized
    // counters, so that the compiler vectorizes it: about 100 instructions for the bench's echo
    // request in callgrind, against 2,600 for the scan below (and 1,500 for a plain
    // `filter(..).count()`, which it does not vectorize).
    let openers: usize = bytes
        .chunks(u8::MAX as usize)
        .map(|chunk| {
            let count = chunk
                .iter()
                .fold(0u8, |n, &b| n + u8::from((b == b'{') | (b == b'[')));
            usize::from(count)
        })
        .sum();
    if openers <= max {
        return false;
    }
    // A plain loop over the bytes outside strings: messages are mostly short keys and values,
    // where a memchr call per token costs more than it saves.
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        at += 1;
        match byte {
            b'"' => match string_tail(&bytes[at..]) {
                Some(end) => at += end,
                None => return false,
            },
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Given the bytes after a string's opening quote, how many of them the rest of the string and
/// its closing quote take; `None` when the string does not end.
fn string_tail(s: &[u8]) -> Option<usize> {
    /// Most strings end within this many bytes; longer ones are searched with memchr.
    const SHORT: usize = 16;
    let special = |b: &u8| *b == b'"' || *b == b'\\';
    let mut at = 0;
    loop {
        let rest = s.get(at..)?;
        let head = rest.len().min(SHORT);
        at += match rest[..head].iter().position(special) {
            Some(i) => i,
            None => head + memchr::memchr2(b'"', b'\\', &rest[head..])?,
        };
        if s[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash and the byte it escapes; `get` above stops a trailing one.
        at += 2;
    }
}

/// Why a frame could not be read, with the request id when it could still be read (B-07).
#[derive(Debug)]
pub(crate) struct FrameError {
    pub(crate) id: Option<RequestId>,
    pub(crate) error: ErrorObject,
}

/// A frame as read: a well-formed `tools/call` in one pass (the common case, see [`CallFrame`]),
/// anything else the usual way.
pub(crate) enum Message<'a> {
    /// Boxed: 700 bytes, mostly the `_meta`, moved several times on the way to the handler.
    Call(Box<CallFrame>),
    Raw(RawMessage<'a>),
}

/// Reads one frame, a `tools/call` in one pass where it can; errors as [`read_frame`]. `last`
/// is the connection's last `_meta` (see [`LastMeta`]).
pub(crate) fn read_message<'a>(
    bytes: &'a [u8],
    max_depth: usize,
    last: Option<&LastMeta>,
) -> Result<Message<'a>, FrameError> {
    let text = check_text(bytes, max_depth)?;
    if let Some(call) = CallFrame::read(text, last) {
        return Ok(Message::Call(Box::new(call)));
    }
    parse_frame(text).map(Message::Raw)
}

/// Reads one JSON-RPC frame: -32700 for bytes that are not JSON (or not UTF-8, or nest too
/// deep), -32600 for JSON that is not a single JSON-RPC object (arrays and batches included).
pub(crate) fn read_frame(bytes: &[u8], max_depth: usize) -> Result<RawMessage<'_>, FrameError> {
    parse_frame(check_text(bytes, max_depth)?)
}

/// `bytes` as text, or -32700 unless they are UTF-8 (RFC 8259 §8.1) nesting at most `max_depth`
/// deep.
///
/// serde_json checks UTF-8 only in the strings it reads: a member it skips (an unknown key's
/// value) could carry any bytes, and the one-pass reading of a call skips more than the usual
/// reading, so the two disagreed on such a frame (found by the `frame` fuzz target). Checking
/// the whole frame first costs about 250 instructions for the bench's echo request, and the
/// readings that follow read text, so no string is checked twice.
fn check_text(bytes: &[u8], max_depth: usize) -> Result<&str, FrameError> {
    let fail = |message: String| {
        Err(FrameError {
            id: None,
            error: ErrorObject::parse_error(message),
        })
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return fail(format!(
                "the message is not UTF-8 (an invalid byte at offset {})",
                e.valid_up_to()
            ));
        }
    };
    if json_too_deep(bytes, max_depth) {
        return fail(format!("JSON nests deeper than {max_depth} levels"));
    }
    Ok(text)
}

/// [`read_frame`] once the text is checked.
fn parse_frame(text: &str) -> Result<RawMessage<'_>, FrameError> {
    let fail = |id, error| Err(FrameError { id, error });
    let not_object = || ErrorObject::invalid_request("a message must be a single JSON-RPC object");
    if text.bytes().find(|b| !b.is_ascii_whitespace()) != Some(b'{') {
        // Serde would read a struct from an array: only objects are messages (B-02).
        return match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => fail(None, not_object()),
            Err(e) => fail(None, ErrorObject::parse_error(e)),
        };
    }
    match serde_json::from_str::<RawMessage<'_>>(text) {
        Ok(raw) => Ok(raw),
        Err(e) if e.is_data() => {
            // Valid JSON of the wrong shape: echo the id if there is a readable one.
            #[derive(serde::Deserialize)]
            struct IdOnly {
                #[serde(default)]
                id: Option<RequestId>,
            }
            let id = serde_json::from_str::<IdOnly>(text).ok().and_then(|i| i.id);
            fail(id, not_object())
        }
        Err(e) => fail(None, ErrorObject::parse_error(e)),
    }
}

/// Reads and checks the request's `_meta` (B-15, B-16).
pub(crate) fn read_meta(params: Option<&RawValue>) -> Result<RequestMeta, ErrorObject> {
    RequestMeta::from_params(params).map_err(|e| ErrorObject::invalid_params(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::route::Route;

    /// Found by the `frame` fuzz target: invalid UTF-8 in a member serde skips
    /// (an unknown key's value) was accepted by the one-pass reading of a call and refused by
    /// the usual one. Any frame that is not UTF-8 is now a parse error, whichever way it goes.
    #[test]
    fn a_frame_that_is_not_utf8_anywhere_is_a_parse_error() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let invalid = |frame: &str| -> Vec<u8> {
            // `~` stands for a byte that cannot start a UTF-8 sequence.
            frame
                .bytes()
                .map(|b| if b == b'~' { 0xff } else { b })
                .collect()
        };
        for frame in [
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{meta},"name":"t","argzments":{{"l":"New ~ York"}}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","extra":"~","params":{{"_meta":{meta},"name":"t"}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","extra":"~","params":{{"_meta":{meta}}}}}"#
            ),
        ] {
            let bytes = invalid(&frame);
            for outcome in [
                read_message(&bytes, 64, None).map(|_| ()),
                read_frame(&bytes, 64).map(|_| ()),
            ] {
                let error = outcome.expect_err(&frame).error;
                assert_eq!(error.code, toolwire_protocol::PARSE_ERROR, "{frame}");
                assert!(error.message.contains("not UTF-8"), "{}", error.message);
            }
            // The same frame in UTF-8 is read.
            let valid = frame.replace('~', "é");
            assert!(read_message(valid.as_bytes(), 64, None).is_ok(), "{valid}");
        }
    }

    #[test]
    fn depth_scan_respects_strings() {
        let cases = [
            ("{}", 1, false),
            ("{\"a\":[[1]]}", 2, true),
            ("{\"a\":[[1]]}", 3, false),
            ("{\"a\":\"[[[[[[\"}", 1, false),
            ("{\"a\":\"\\\"[[[[\"}", 1, false),
            ("[[]],[[]]", 2, false),
            ("[[]],[[[]]]", 2, true),
            ("{\"a\\\\\":[[[\"}", 1, true),
            ("\"unterminated [[[[", 1, false),
            ("{\"k\":\"v\"}}}}[[", 2, false),
            // A backslash as the very last byte once stepped past the end (a panic).
            ("{\"a\":\"\\", 4, false),
            ("\"\\", 1, false),
            ("[\"\\\\\\", 1, false),
            ("[[\"\\", 1, true),
        ];
        for (text, max, want) in cases {
            assert_eq!(
                json_too_deep(text.as_bytes(), max),
                want,
                "{text} max {max}"
            );
        }
    }

    #[test]
    fn parses_params_per_method() {
        let raw = |v: &str| serde_json::from_str::<Box<RawValue>>(v).unwrap();
        assert!(matches!(
            Route::parse("server/discover", None),
            Ok(Route::Discover)
        ));
        let call = Route::parse("tools/call", Some(&raw(r#"{"name":"t","_meta":{}}"#))).unwrap();
        assert!(
            matches!(call, Route::CallTool(ref c) if c.name == "t" && c.arguments == serde_json::json!({}))
        );
        assert_eq!(call.name_header(), Some("t"));
        for bad in [
            r#"{"name":"t","arguments":[1]}"#,
            r#"{"name":"t","arguments":null}"#,
            r#"{"arguments":{}}"#,
            r#"{"name":5}"#,
        ] {
            assert_eq!(
                Route::parse("tools/call", Some(&raw(bad)))
                    .unwrap_err()
                    .code,
                -32602,
                "{bad}"
            );
        }
        assert_eq!(
            Route::parse("tools/list", Some(&raw(r#"{"cursor":5}"#)))
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            Route::parse("subscriptions/listen", Some(&raw("{}")))
                .unwrap_err()
                .code,
            -32602
        );
        for gone in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "nope/nope",
        ] {
            assert_eq!(
                Route::parse(gone, Some(&raw("{}"))).unwrap_err().code,
                -32601,
                "{gone}"
            );
        }
    }

    #[test]
    fn frames_classify_errors() {
        let code = |bytes: &[u8]| read_frame(bytes, 64).unwrap_err().error.code;
        assert_eq!(code(b"{not json"), -32700);
        assert_eq!(code(b"[1,2"), -32700);
        assert_eq!(code(b"[1,2]"), -32600);
        assert_eq!(
            code(br#"["2.0",1,"server/discover",{}]"#),
            -32600,
            "arrays never read as objects"
        );
        assert_eq!(code(b" 42 "), -32600);
        let e = read_frame(br#"{"jsonrpc":"2.0","id":3,"method":5}"#, 64).unwrap_err();
        assert_eq!(
            (e.error.code, e.id),
            (-32600, Some(3.into())),
            "the id is echoed when readable"
        );
        assert_eq!(
            read_frame(b"[[[[[[[[[[1]]]]]]]]]]", 4)
                .unwrap_err()
                .error
                .code,
            -32700
        );
        assert!(read_frame(br#"{"jsonrpc":"2.0","id":1,"method":"x"}"#, 64).is_ok());
    }
}

#[cfg(test)]
mod depth_props {
    use proptest::prelude::*;

    use super::json_too_deep;

    /// Long inputs: the openers are counted in chunks of 255 bytes, and many openers side by
    /// side are not deep.
    #[test]
    fn long_inputs_are_counted_and_scanned() {
        let flat = "{}".repeat(1_000);
        assert!(
            !json_too_deep(flat.as_bytes(), 64),
            "1,000 openers, depth 1"
        );
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(json_too_deep(deep.as_bytes(), 64));
        assert!(!json_too_deep(deep.as_bytes(), 300));
        let quoted = format!("\"{}\"", "[".repeat(600));
        assert!(
            !json_too_deep(quoted.as_bytes(), 64),
            "openers inside a string"
        );
    }

    /// The obvious byte-at-a-time reading of the same rule, to check the fast scan against.
    fn reference(bytes: &[u8], max: usize) -> bool {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for &b in bytes {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > max {
                        return true;
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        false
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Any bytes, built mostly from the characters the scan cares about: no panic, and the
        /// same answer as the byte-at-a-time reference (a lone trailing backslash once panicked).
        #[test]
        fn depth_scan_matches_reference_on_any_bytes(
            bytes in proptest::collection::vec(
                prop_oneof![
                    8 => proptest::sample::select(b"{}[]\"\\a,:".to_vec()),
                    1 => any::<u8>(),
                ],
                0..64,
            ),
            max in 0usize..6,
        ) {
            prop_assert_eq!(json_too_deep(&bytes, max), reference(&bytes, max));
        }
    }
}
