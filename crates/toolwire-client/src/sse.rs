//! An incremental Server-Sent Events parser: bytes in, `data` payloads out; comments and other
//! fields are ignored (H-28). Lines end with LF, CRLF or a lone CR. Each byte is scanned once,
//! however the stream is chunked, and an event may not grow past a bound. The bound counts
//! memory: an event's `data` lines are kept in one buffer (each followed by LF, as the SSE spec
//! builds it), so an empty line costs one byte, not an allocation.

/// The largest event accepted (its `data` lines together): 64 MiB.
pub(crate) const MAX_EVENT_BYTES: usize = 64 << 20;

/// Parses a byte stream into the `data` of each event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes of the line in progress.
    line: Vec<u8>,
    /// The `data` lines of the event in progress, each followed by LF.
    data: Vec<u8>,
    /// Whether the event in progress has a `data` line (it may be empty).
    has_data: bool,
    /// The previous chunk ended with CR: a LF starting this one belongs to it.
    after_cr: bool,
}

/// An event larger than [`MAX_EVENT_BYTES`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct EventTooLarge;

impl SseParser {
    /// Feeds bytes; returns the data of every event they complete.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<String>, EventTooLarge> {
        let mut events = Vec::new();
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            self.line.extend_from_slice(&bytes[..end]);
            if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => bytes = &bytes[end + 2..],
                    Some(_) => bytes = &bytes[end + 1..],
                    None => {
                        self.after_cr = true;
                        bytes = &[];
                    }
                }
            } else {
                bytes = &bytes[end + 1..];
            }
            self.end_line(&mut events)?;
        }
        self.line.extend_from_slice(bytes);
        if self.line.len() + self.data.len() > MAX_EVENT_BYTES {
            return Err(EventTooLarge);
        }
        Ok(events)
    }

    /// The heap memory the parser holds between events.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.line.capacity() + self.data.capacity()
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<(), EventTooLarge> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                let mut data = std::mem::take(&mut self.data);
                data.pop();
                // Valid UTF-8 (the usual case) becomes the String without a copy.
                let data = String::from_utf8(data)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                events.push(data);
            }
        } else if let Some(value) = line.strip_prefix(b"data:").or_else(|| {
            // A field name alone has an empty value.
            (line == b"data").then_some(&b""[..])
        }) {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                return Err(EventTooLarge);
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        // `:` comments (keep-alives), `event:`, `id:` and `retry:` carry nothing we need.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parser: &mut SseParser, chunks: &[&[u8]]) -> Vec<String> {
        chunks
            .iter()
            .flat_map(|c| parser.feed(c).expect("within bounds"))
            .collect()
    }

    #[test]
    fn parses_events_across_chunks_and_skips_comments() {
        let mut p = SseParser::default();
        assert_eq!(
            p.feed(b":\n\nevent: message\ndata: {\"a\"").unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            p.feed(b":1}\n\ndata:x\r\ndata: y\r\n\r\n: keep-alive\n\n")
                .unwrap(),
            vec!["{\"a\":1}".to_owned(), "x\ny".to_owned()]
        );
        assert_eq!(
            p.feed(b"id: 5\nretry: 10\n\n").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_line_ending_and_every_split_point() {
        let stream = "data: é1\r\n\r\ndata: 2\r\rdata: 3\n\ndata: 4\r\n\r\n".as_bytes();
        let expected = ["é1", "2", "3", "4"];
        for split in 0..=stream.len() {
            let mut p = SseParser::default();
            let (a, b) = stream.split_at(split);
            assert_eq!(feed_all(&mut p, &[a, b]), expected, "split at {split}");
        }
        // Empty chunks change nothing, even between a CR and its LF.
        let mut p = SseParser::default();
        assert_eq!(
            feed_all(&mut p, &[b"data: a\r", b"", b"\ndata\n\n"]),
            ["a\n"]
        );
        // One byte at a time, through the middle of a UTF-8 character too.
        let mut p = SseParser::default();
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed_all(&mut p, &bytes), expected);
    }

    #[test]
    fn empty_data_lines_cost_what_they_count() {
        // Each `data` line counts its bytes plus one for its line feed; what the parser holds
        // must stay within a small factor of that, or a stream of empty lines grows memory far
        // past the event cap.
        let mut p = SseParser::default();
        let lines = b"data\n".repeat(1 << 20);
        for chunk in lines.chunks(16 << 10) {
            assert!(p.feed(chunk).unwrap().is_empty());
        }
        let counted = 1 << 20;
        let held = p.held_bytes();
        assert!(
            held <= 2 * counted,
            "{held} bytes held for {counted} counted"
        );
        assert_eq!(p.feed(b"\n").unwrap(), ["\n".repeat((1 << 20) - 1)]);
    }

    #[test]
    fn a_huge_event_is_refused_not_buffered() {
        let mut p = SseParser::default();
        assert!(p.feed(b"data: ").is_ok());
        let chunk = vec![b'x'; 1 << 20];
        let mut refused = false;
        for _ in 0..=64 {
            if p.feed(&chunk).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
    }
}
