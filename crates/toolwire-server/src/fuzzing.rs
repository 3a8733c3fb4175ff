//! Entry points for the fuzz targets in `fuzz/`, for the decoders of untrusted input
//! that are not public API: the frame reader and its one-pass `tools/call` reading, cursors,
//! request state, URI templates and forwarding headers. Built only with the `fuzzing` feature; not a stable API.
//!
//! Each function must not panic, hang or allocate without bound on any input; where two
//! readings of the same input exist, they must agree.

use serde_json::Value;
use toolwire_protocol::{MessageKind, RequestMeta};

use crate::request::cursor::{CursorCodec, ListKind, Position};
use crate::request::frame::{Message, read_frame, read_message};
use crate::request::last_meta::LastMeta;
use crate::request::route::Route;
use crate::state::request_state::{Binding, RequestStateKeys};
use crate::tools::resource::UriTemplate;

/// The frame reader with its depth bound, and the one-pass reading of a `tools/call` held to
/// the usual reading: the same id, `_meta` and route when it reads a frame, and no reading of
/// a frame the usual one refuses or reads as another method.
pub fn frame(data: &[u8]) {
    let usual = || -> Option<(toolwire_protocol::RequestId, RequestMeta, Route)> {
        let raw = read_frame(data, 64).ok()?;
        let Ok(MessageKind::Request(id)) = raw.kind() else {
            return None;
        };
        let method = raw.method.as_deref().unwrap_or_default();
        let meta = RequestMeta::from_params(raw.params).ok()?;
        let route = Route::parse(method, raw.params).ok()?;
        Some((id, meta, route))
    };
    let read = |last| match read_message(data, 64, last) {
        Ok(Message::Call(call)) => Some(*call),
        _ => None,
    };
    // Without a connection, then twice on one: its `_meta` read and kept, then shared.
    let connection = LastMeta::default();
    let fast = read(None);
    let on_connection = [read(Some(&connection)), read(Some(&connection))];
    match fast {
        Some(fast) => {
            let (id, meta, route) =
                usual().expect("read in one pass, refused by the usual reading");
            for read in
                std::iter::once(fast).chain(on_connection.into_iter().map(|read| {
                    read.expect("read in one pass without a connection, refused on one")
                }))
            {
                assert_eq!(read.id, id);
                assert_eq!(*read.meta, meta);
                assert_eq!(format!("{:?}", read.route), format!("{route:?}"));
            }
        }
        None => {
            assert!(
                on_connection.iter().all(Option::is_none),
                "refused in one pass without a connection, read on one"
            );
            assert!(
                !usual().is_some_and(|(_, _, r)| matches!(r, Route::CallTool(_))),
                "a call the usual reading accepts was refused in one pass"
            );
        }
    }
}

/// Cursors: any string decodes to nothing or a position; an encoded position decodes back,
/// for its own list only.
pub fn cursor(data: &[u8]) {
    let codec = CursorCodec::new([7; 32]);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = codec.decode(ListKind::Tools, text);
        let position = Position {
            offset: data.len(),
            last: text.to_owned(),
        };
        let encoded = codec.encode(ListKind::Tools, &position);
        assert_eq!(codec.decode(ListKind::Tools, &encoded), Some(position));
        assert_eq!(codec.decode(ListKind::Prompts, &encoded), None);
    }
}

/// Request state: any token opens to an error (it was not sealed with the key), and whatever
/// plaintext is sealed with the key opens without a panic.
pub fn request_state(data: &[u8]) {
    let keys = RequestStateKeys::new([9; 32]);
    let binding = Binding::new("tools/call", "t", &Value::Null, None);
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(keys.open(text, &binding, 0).is_err());
    }
    let _ = keys.open(&keys.seal_raw(data), &binding, 0);
}

/// URI templates: the input's first line is a template, the rest a URI to match against it.
pub fn uri_template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (template, uri) = text.split_once('\n').unwrap_or((text, ""));
    if let Ok(template) = UriTemplate::parse(template) {
        let _ = template.matches(uri);
    }
}

/// Forwarding headers: each line of the input is a line of the header. Reading the client
/// from them, as RFC 7239 `Forwarded` and as an `X-Forwarded-For` list, behind one to three
/// proxies, gives a client or a reason and never panics; and a client once read stays the same
/// whatever a client adds on a line of its own before the proxies' (it is never read).
pub fn forwarded(data: &[u8]) {
    use crate::http::forwarded::Source;
    use http::header::FORWARDED;

    let list_name = http::HeaderName::from_static("x-forwarded-for");
    let (mut forwarded, mut list) = (http::HeaderMap::new(), http::HeaderMap::new());
    for line in data.split(|&b| b == b'\n') {
        if let Ok(value) = http::HeaderValue::from_bytes(line) {
            forwarded.append(FORWARDED, value.clone());
            list.append(list_name.clone(), value);
        }
    }
    let claim = http::HeaderValue::from_static("for=\"[::1]\", for=\"unclosed");
    for trusted in 1..=3 {
        let _ = Source::new(list_name.clone(), trusted).client(&list);
        let source = Source::new(FORWARDED, trusted);
        if let Ok(client) = source.client(&forwarded) {
            let mut claimed = http::HeaderMap::new();
            claimed.append(FORWARDED, claim.clone());
            for value in forwarded.get_all(FORWARDED) {
                claimed.append(FORWARDED, value.clone());
            }
            assert_eq!(source.client(&claimed), Ok(client));
        }
    }
}
