//! Entry points for the fuzz targets in `fuzz/`, since a server's bytes are untrusted input: the
//! client's readers of a server's bytes, the SSE parser and the stdio line reader. Built only
//! with the `fuzzing` feature; not a stable API.
//!
//! The input's first byte chooses where the rest is cut into chunks: however a stream is
//! chunked, what is read from it must be the same.

use bytes::BytesMut;
use tokio_util::codec::Decoder as _;

use crate::sse::SseParser;
use crate::transport::lines::{Line, Lines};

/// Splits `data` after its first byte into chunks of that byte's size (at least 1).
fn chunks(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((size, rest)) => (usize::from(*size).max(1), rest),
        None => (1, data),
    }
}

/// The SSE parser: the same events (or the same refusal) whole and in chunks.
pub fn sse(data: &[u8]) {
    let (size, stream) = chunks(data);
    let whole = SseParser::default().feed(stream);
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    let mut refused = false;
    for chunk in stream.chunks(size) {
        match parser.feed(chunk) {
            Ok(more) => events.extend(more),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    match whole {
        Ok(whole) if !refused => assert_eq!(whole, events),
        whole => assert!(whole.is_err() && refused, "refused one way only"),
    }
}

/// The stdio line reader (a 1 KiB bound here): the same lines whole and in chunks, none longer
/// than the bound.
pub fn lines(data: &[u8]) {
    let (size, stream) = chunks(data);
    let read = |pieces: &mut dyn Iterator<Item = &[u8]>| {
        let mut codec = Lines::new(1024);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in pieces {
            buf.extend_from_slice(piece);
            while let Some(line) = codec.decode(&mut buf).expect("reading never fails") {
                out.push(line);
            }
        }
        while let Some(line) = codec.decode_eof(&mut buf).expect("reading never fails") {
            out.push(line);
        }
        out.into_iter()
            .map(|line| match line {
                Line::Complete(bytes) => {
                    assert!(bytes.len() <= 1024, "a line past the bound");
                    Some(bytes.to_vec())
                }
                Line::TooLong => None,
            })
            .collect::<Vec<_>>()
    };
    let whole = read(&mut std::iter::once(stream));
    let chunked = read(&mut stream.chunks(size));
    assert_eq!(whole, chunked);
}
