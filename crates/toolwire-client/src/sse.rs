//! An incremental Server-Sent Events parser: bytes in, `data` payloads out; comments and other
//! fields are ignored (H-28).

/// Parses a byte stream into the `data` of each event.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buffer: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    /// Feeds bytes; returns the data of every event they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                self.data
                    .push(value.strip_prefix(' ').unwrap_or(value).to_owned());
            }
            // `:` comments (keep-alives), `event:`, `id:` and `retry:` carry nothing we need.
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_across_chunks_and_skips_comments() {
        let mut p = SseParser::default();
        assert_eq!(
            p.feed(b":\n\nevent: message\ndata: {\"a\""),
            Vec::<String>::new()
        );
        assert_eq!(
            p.feed(b":1}\n\ndata:x\r\ndata: y\r\n\r\n: keep-alive\n\n"),
            vec!["{\"a\":1}".to_owned(), "x\ny".to_owned()]
        );
        assert_eq!(p.feed(b"id: 5\nretry: 10\n\n"), Vec::<String>::new());
    }
}
