//! A keep-alive HTTP/1.1 connection for the throughput rows: it writes a request built from a
//! template (only the id and the length change) and reads the reply head in place with
//! `httparse`. The load generator must cost much less per request than the fastest server it
//! measures, the raw hyper ceiling, or that row measures the load generator; hyper's client
//! builds a header map for every request and every reply, and cost about as much CPU per
//! request as the ceiling itself.

use std::io;

use memchr::memmem;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::http::Endpoint;
use crate::protocol::{self, Template};

/// How many reply headers are read; a reply with more is an error.
const MAX_HEADERS: usize = 32;

/// A request split around the parts that change: its id, and so its `Content-Length`.
pub(crate) struct RequestTemplate {
    head: Vec<u8>,
    body: Template,
}

impl RequestTemplate {
    /// A POST of `template` to `ep`, with the MCP headers of `method` and `name`.
    pub(crate) fn new(
        ep: &Endpoint,
        method: &str,
        name: Option<&str>,
        template: &Template,
    ) -> RequestTemplate {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: {}\r\n\
             mcp-method: {method}\r\n",
            ep.path,
            ep.host,
            protocol::VERSION
        );
        if let Some(name) = name {
            head.push_str(&format!("mcp-name: {name}\r\n"));
        }
        if let Some(authorization) = &ep.authorization {
            head.push_str(&format!("authorization: {authorization}\r\n"));
        }
        head.push_str("content-length: ");
        RequestTemplate {
            head: head.into_bytes(),
            body: template.clone(),
        }
    }

    /// The request with `id`, written into `out` (cleared first).
    pub(crate) fn write(&self, id: u64, out: &mut Vec<u8>) {
        let (prefix, suffix) = self.body.parts();
        let digits = itoa::Buffer::new().format(id).len();
        let mut length = itoa::Buffer::new();
        let length = length.format(prefix.len() + digits + suffix.len());
        out.clear();
        out.extend_from_slice(&self.head);
        out.extend_from_slice(length.as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        self.body.write(id, out);
    }
}

/// What a reply was: its status and whether its body is an SSE stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) sse: bool,
}

/// How a reply's body is delimited.
enum Framing {
    Length(usize),
    Chunked,
}

/// One connection, its read buffer, and the body of the last reply.
pub(crate) struct Wire {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` that belong to replies already returned.
    consumed: usize,
    /// The last reply's body when it came in chunks; otherwise it is `buf[body]`.
    chunks: Vec<u8>,
    body: std::ops::Range<usize>,
    chunked: bool,
}

impl Wire {
    pub(crate) async fn connect(addr: &str) -> io::Result<Wire> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Wire {
            stream,
            buf: Vec::with_capacity(16 * 1024),
            consumed: 0,
            chunks: Vec::new(),
            body: 0..0,
            chunked: false,
        })
    }

    /// The last reply's body.
    pub(crate) fn body(&self) -> &[u8] {
        if self.chunked {
            &self.chunks
        } else {
            &self.buf[self.body.clone()]
        }
    }

    /// Sends `request` and reads the whole reply.
    pub(crate) async fn exchange(&mut self, request: &[u8]) -> io::Result<Head> {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        self.stream.write_all(request).await?;
        let (head, head_len, framing) = loop {
            if let Some(parsed) = parse_head(&self.buf)? {
                break parsed;
            }
            self.fill().await?;
        };
        match framing {
            Framing::Length(length) => {
                while self.buf.len() < head_len + length {
                    self.fill().await?;
                }
                self.chunked = false;
                self.body = head_len..head_len + length;
                self.consumed = head_len + length;
            }
            Framing::Chunked => {
                self.chunked = true;
                self.chunks.clear();
                self.consumed = self.read_chunks(head_len).await?;
            }
        }
        Ok(head)
    }

    /// Reads a chunked body that starts at `at`; returns where the reply ends.
    async fn read_chunks(&mut self, mut at: usize) -> io::Result<usize> {
        loop {
            let (size_len, size) = loop {
                match httparse::parse_chunk_size(&self.buf[at..]) {
                    Ok(httparse::Status::Complete((len, size))) => break (len, size as usize),
                    Ok(httparse::Status::Partial) => self.fill().await?,
                    Err(_) => return Err(invalid("a malformed chunk size")),
                }
            };
            at += size_len;
            // The chunk's data and its CRLF; the last chunk (size 0) is followed by CRLF alone
            // (no trailers are sent by the servers measured).
            while self.buf.len() < at + size + 2 {
                self.fill().await?;
            }
            self.chunks.extend_from_slice(&self.buf[at..at + size]);
            at += size + 2;
            if size == 0 {
                return Ok(at);
            }
        }
    }

    async fn fill(&mut self) -> io::Result<()> {
        self.buf.reserve(8 * 1024);
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
}

/// The reply head in `buf`, its length and the body's framing; `None` until it is complete.
fn parse_head(buf: &[u8]) -> io::Result<Option<(Head, usize, Framing)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut reply = httparse::Response::new(&mut headers);
    let head_len = match reply.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(&format!("a malformed reply head: {e}"))),
    };
    let mut head = Head {
        status: reply.code.unwrap_or(0),
        sse: false,
    };
    let mut framing = None;
    for h in reply.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let length = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| invalid("a malformed Content-Length"))?;
            framing = Some(Framing::Length(length));
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if memmem::find(h.value, b"chunked").is_some() {
                framing = Some(Framing::Chunked);
            }
        } else if h.name.eq_ignore_ascii_case("content-type") {
            head.sse = h.value.starts_with(b"text/event-stream");
        }
    }
    // A reply with neither has no body (a 202, say).
    Ok(Some((
        head,
        head_len,
        framing.unwrap_or(Framing::Length(0)),
    )))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_head_gives_its_status_framing_and_kind() {
        let (head, len, framing) = parse_head(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            head,
            Head {
                status: 200,
                sse: true
            }
        );
        assert_eq!(len, 80, "the head ends after its blank line");
        assert!(matches!(framing, Framing::Chunked));
        let (head, _, framing) = parse_head(b"HTTP/1.1 429 Too Many\r\nContent-Length: 12\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            head,
            Head {
                status: 429,
                sse: false
            }
        );
        assert!(matches!(framing, Framing::Length(12)));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
    }
}
