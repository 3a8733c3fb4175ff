//! An incremental Server-Sent Events parser: bytes in, `data` payloads out; comments and other
//! fields are ignored (H-28). Lines end with LF, CRLF or a lone CR. Each byte is scanned once,
//! however the stream is chunked, and an event may not grow past a bound.

/// The largest event accepted (its `data` lines together): 64 MiB.
pub(crate) const MAX_EVENT_BYTES: usize = 64 << 20;

/// Parses a byte stream into the `data` of each event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes of the line in progress.
    line: Vec<u8>,
    /// The `data` lines of the event in progress.
    data: Vec<String>,
    data_bytes: usize,
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
        if self.line.len() + self.data_bytes > MAX_EVENT_BYTES {
            return Err(EventTooLarge);
        }
        Ok(events)
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<(), EventTooLarge> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if !self.data.is_empty() {
                events.push(self.data.join("\n"));
                self.data.clear();
                self.data_bytes = 0;
            }
        } else if let Some(value) = line.strip_prefix(b"data:").or_else(|| {
            // A field name alone has an empty value.
            (line == b"data").then_some(&b""[..])
        }) {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            self.data_bytes += value.len() + 1;
            if self.data_bytes > MAX_EVENT_BYTES {
                return Err(EventTooLarge);
            }
            self.data.push(String::from_utf8_lossy(value).into_owned());
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
