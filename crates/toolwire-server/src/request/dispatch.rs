//! Request processing shared by every transport: reading a frame, checking `_meta` and the
//! version, parsing method params, and running the method. Transports add their own checks
//! (HTTP headers) between these steps, in the order the spec and the suite expect.

use std::sync::Arc;

use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    ErrorObject, MessageKind, RawMessage, RequestId, RequestMeta, ResultMeta, ResultType,
};

use crate::observe::trace;
use crate::request::context::{Outbound, RequestContext};
use crate::request::cursor::ListKind;
pub(crate) use crate::request::outcome::Final;
use crate::request::route::SUPPORTED_VERSIONS;
use crate::request::route::{CallFrame, Route, legacy_initialize, removed_method_error};
use crate::server::Server;
use crate::tools::catalog::{Entry, Snapshot, permits};

/// A list result page, its items spliced from their pre-serialized definitions.
struct ListPage<'a, T> {
    field: &'static str,
    items: &'a [Arc<T>],
    next_cursor: Option<String>,
    ttl_ms: u64,
    cache_scope: toolwire_protocol::CacheScope,
    meta: Option<&'a ResultMeta>,
}

impl<T: Entry> Serialize for ListPage<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("resultType", &ResultType::Complete)?;
        let items: Vec<&RawValue> = self.items.iter().map(|t| t.listed()).collect();
        map.serialize_entry(self.field, &items)?;
        if let Some(cursor) = &self.next_cursor {
            map.serialize_entry("nextCursor", cursor)?;
        }
        map.serialize_entry("ttlMs", &self.ttl_ms)?;
        map.serialize_entry("cacheScope", &self.cache_scope)?;
        if let Some(meta) = self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

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

/// Reads one frame, a `tools/call` in one pass where it can; errors as [`read_frame`].
pub(crate) fn read_message(bytes: &[u8], max_depth: usize) -> Result<Message<'_>, FrameError> {
    check_text(bytes, max_depth)?;
    if let Some(call) = CallFrame::read(bytes) {
        return Ok(Message::Call(Box::new(call)));
    }
    parse_frame(bytes).map(Message::Raw)
}

/// Reads one JSON-RPC frame: -32700 for bytes that are not JSON (or not UTF-8, or nest too
/// deep), -32600 for JSON that is not a single JSON-RPC object (arrays and batches included).
pub(crate) fn read_frame(bytes: &[u8], max_depth: usize) -> Result<RawMessage<'_>, FrameError> {
    check_text(bytes, max_depth)?;
    parse_frame(bytes)
}

/// -32700 unless `bytes` are UTF-8 (RFC 8259 §8.1) nesting at most `max_depth` deep.
///
/// serde_json checks UTF-8 only in the strings it reads: a member it skips (an unknown key's
/// value) could carry any bytes, and the one-pass reading of a call skips more than the usual
/// reading, so the two disagreed on such a frame (found by the `frame` fuzz target). Checking
/// the whole frame first costs about 100 instructions for the bench's echo request.
fn check_text(bytes: &[u8], max_depth: usize) -> Result<(), FrameError> {
    let fail = |message: String| {
        Err(FrameError {
            id: None,
            error: ErrorObject::parse_error(message),
        })
    };
    if let Err(e) = std::str::from_utf8(bytes) {
        return fail(format!(
            "the message is not UTF-8 (an invalid byte at offset {})",
            e.valid_up_to()
        ));
    }
    if json_too_deep(bytes, max_depth) {
        return fail(format!("JSON nests deeper than {max_depth} levels"));
    }
    Ok(())
}

/// [`read_frame`] once the text is checked.
fn parse_frame(bytes: &[u8]) -> Result<RawMessage<'_>, FrameError> {
    let fail = |id, error| Err(FrameError { id, error });
    let not_object = || ErrorObject::invalid_request("a message must be a single JSON-RPC object");
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        // Serde would read a struct from an array: only objects are messages (B-02).
        return match serde_json::from_slice::<IgnoredAny>(bytes) {
            Ok(_) => fail(None, not_object()),
            Err(e) => fail(None, ErrorObject::parse_error(e)),
        };
    }
    match serde_json::from_slice::<RawMessage<'_>>(bytes) {
        Ok(raw) => Ok(raw),
        Err(e) if e.is_data() => {
            // Valid JSON of the wrong shape: echo the id if there is a readable one.
            #[derive(serde::Deserialize)]
            struct IdOnly {
                #[serde(default)]
                id: Option<RequestId>,
            }
            let id = serde_json::from_slice::<IdOnly>(bytes)
                .ok()
                .and_then(|i| i.id);
            fail(id, not_object())
        }
        Err(e) => fail(None, ErrorObject::parse_error(e)),
    }
}

/// Reads and checks the request's `_meta` (B-15, B-16).
pub(crate) fn read_meta(params: Option<&RawValue>) -> Result<RequestMeta, ErrorObject> {
    RequestMeta::from_params(params).map_err(|e| ErrorObject::invalid_params(e.to_string()))
}

impl Server {
    /// The transport-independent request checks: `_meta`, version, method and params.
    pub(crate) fn admit(
        &self,
        method: &str,
        raw: &RawMessage<'_>,
    ) -> Result<(RequestMeta, Route), ErrorObject> {
        let meta = read_meta(raw.params)
            .map_err(|e| legacy_initialize(method, raw.params).unwrap_or(e))?;
        self.check_version(&meta)?;
        let route =
            Route::parse(method, raw.params).map_err(|e| removed_method_error(method, e))?;
        Ok((meta, route))
    }

    /// [`Server::handle_message`]: one message in memory, what would be written out.
    pub(crate) async fn handle_in_memory(&self, message: &[u8]) -> Vec<String> {
        let max_depth = self.config().max_json_depth;
        let raw = match read_frame(message, max_depth) {
            Ok(raw) => raw,
            Err(e) => return vec![Final::error(e.id.as_ref(), &e.error).json],
        };
        let id = match raw.kind() {
            Ok(MessageKind::Request(id)) => id,
            Ok(_) => return Vec::new(),
            Err(why) => {
                return vec![
                    Final::error(
                        raw.request_id().as_ref(),
                        &ErrorObject::invalid_request(why),
                    )
                    .json,
                ];
            }
        };
        let method = raw.method.as_deref().unwrap_or_default();
        let (meta, route) = match self.admit(method, &raw) {
            Ok(admitted) => admitted,
            Err(error) => return vec![Final::error(Some(&id), &error).json],
        };
        let (tx, mut rx) = mpsc::channel(64);
        let cancel = CancellationToken::new();
        let ctx = RequestContext::new(
            id.clone(),
            meta,
            cancel,
            self.shutdown_token(),
            Some(Outbound::new(tx)),
            self.config().logging,
        );
        let finisher = ctx.clone();
        let mut work = std::pin::pin!(self.run(&id, route, ctx));
        let mut out = Vec::new();
        let done = loop {
            tokio::select! {
                biased;
                Some(frame) = rx.recv() => out.push(frame.json),
                done = &mut work => break done,
            }
        };
        finisher.finish().await;
        while let Ok(frame) = rx.try_recv() {
            out.push(frame.json);
        }
        out.extend(done.map(|f| f.json));
        out
    }

    /// -32022 unless the request's version is one this server implements (V-02).
    pub(crate) fn check_version(&self, meta: &RequestMeta) -> Result<(), ErrorObject> {
        if SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_str()) {
            Ok(())
        } else {
            Err(ErrorObject::unsupported_version(
                SUPPORTED_VERSIONS,
                &meta.protocol_version,
            ))
        }
    }

    /// Runs a call to its final message, inside the request's span (see `observe::trace`);
    /// `None` when the request ended without one (a listen stream the client cancelled). With
    /// metrics, its duration is recorded (O-01).
    pub(crate) async fn run(
        &self,
        id: &RequestId,
        call: Route,
        ctx: RequestContext,
    ) -> Option<Final> {
        use tracing::Instrument as _;
        // Labels resolved before the call, recorded after it: no future of its own around the
        // method's, which would make every request's future larger.
        let observed = self
            .metrics()
            .map(|_| crate::observe::metrics::Observation::start(self, &call, &ctx));
        let span = trace::request_span(id, &call, ctx.meta(), ctx.incoming());
        let done = if span.is_disabled() {
            self.answer(id, call, ctx).await
        } else {
            let done = self.answer(id, call, ctx).instrument(span.clone()).await;
            trace::finish(&span, done.as_ref());
            done
        };
        if let (Some(metrics), Some(observed)) = (self.metrics(), observed) {
            observed.finish(metrics, done.as_ref());
        }
        done
    }

    /// [`Server::run`] without the span and the metrics.
    async fn answer(&self, id: &RequestId, call: Route, ctx: RequestContext) -> Option<Final> {
        match call {
            Route::Discover => Some(Final::result(id, self.discover())),
            Route::ListTools { cursor } => Some(self.list_tools(id, cursor.as_deref(), &ctx)),
            Route::CallTool(call) => Some(self.audited_call(id, call, ctx).await),
            Route::Listen { filter } => self.listen(id, filter, ctx).await,
            Route::ListPrompts { cursor } => {
                Some(self.list_offered(self.prompts(), id, cursor.as_deref(), &ctx))
            }
            Route::ListResources { cursor } => {
                Some(self.list_offered(self.resources(), id, cursor.as_deref(), &ctx))
            }
            Route::ListResourceTemplates { cursor } => {
                Some(self.list_offered(self.templates(), id, cursor.as_deref(), &ctx))
            }
            Route::GetPrompt(get) => Some(self.get_prompt(id, get, ctx).await),
            Route::ReadResource(read) => Some(self.read_resource(id, read, ctx).await),
            Route::Complete(complete) => Some(self.complete(id, complete, ctx).await),
            Route::TasksGet { task_id } => Some(self.task_get(id, &task_id, &ctx).await),
            Route::TasksUpdate {
                task_id,
                input_responses,
            } => Some(self.task_update(id, &task_id, input_responses, &ctx).await),
            Route::TasksCancel { task_id } => Some(self.task_cancel(id, &task_id, &ctx).await),
        }
    }

    /// One page of a list (`tools/list`, `prompts/list`, …) in registration order, with cache
    /// hints, the same scope on every page (T-04, T-05, K-01, K-10, K-16). With OAuth
    /// (`granted` is the caller's scopes) a caller sees only what its scopes allow (T-03), and
    /// a list that depends on the caller is private (K-10).
    pub(crate) fn list_page<T: Entry>(
        &self,
        id: &RequestId,
        snapshot: &Snapshot<T>,
        cursor: Option<&str>,
        kind: ListKind,
        granted: Option<&[String]>,
    ) -> Final {
        match granted {
            Some(granted) if snapshot.items.iter().any(|t| !t.scopes().is_empty()) => {
                let visible = snapshot.filtered(|t| permits(Some(granted), t.scopes()));
                let scope = toolwire_protocol::CacheScope::Private;
                self.list_page_in(id, &visible, cursor, kind, scope)
            }
            _ => {
                let scope = self.config().cache_scope;
                self.list_page_in(id, snapshot, cursor, kind, scope)
            }
        }
    }

    /// A page of `tools/list`: with a [`ToolVisibility`](crate::ToolVisibility), only the
    /// tools it shows this caller, privately (K-10).
    fn list_tools(&self, id: &RequestId, cursor: Option<&str>, ctx: &RequestContext) -> Final {
        let snapshot = self.registry().snapshot();
        let Some(visibility) = &self.config().tool_visibility else {
            return self.list_page(id, &snapshot, cursor, ListKind::Tools, ctx.scopes());
        };
        let check = visibility.check(crate::tools::visibility::Viewer::of(ctx));
        let visible =
            snapshot.filtered(|t| permits(ctx.scopes(), t.scopes()) && check(&t.name).is_none());
        let scope = toolwire_protocol::CacheScope::Private;
        self.list_page_in(id, &visible, cursor, ListKind::Tools, scope)
    }

    /// [`Server::list_page`] with the given `cacheScope`.
    pub(crate) fn list_page_in<T: Entry>(
        &self,
        id: &RequestId,
        snapshot: &Snapshot<T>,
        cursor: Option<&str>,
        kind: ListKind,
        cache_scope: toolwire_protocol::CacheScope,
    ) -> Final {
        let config = self.config();
        match snapshot.page(cursor, kind, config.page_size, self.cursors()) {
            Err(error) => Final::error(Some(id), &error),
            Ok((items, next_cursor)) => Final::result(
                id,
                &ListPage {
                    field: kind.field(),
                    items,
                    next_cursor,
                    ttl_ms: self.list_ttl_ms(),
                    cache_scope,
                    meta: self.result_meta(),
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                read_message(&bytes, 64).map(|_| ()),
                read_frame(&bytes, 64).map(|_| ()),
            ] {
                let error = outcome.expect_err(&frame).error;
                assert_eq!(error.code, toolwire_protocol::PARSE_ERROR, "{frame}");
                assert!(error.message.contains("not UTF-8"), "{}", error.message);
            }
            // The same frame in UTF-8 is read.
            let valid = frame.replace('~', "é");
            assert!(read_message(valid.as_bytes(), 64).is_ok(), "{valid}");
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
