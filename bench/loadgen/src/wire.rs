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
use crate::legacy;
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
        let mut head = start_head(ep, "POST", protocol::VERSION);
        head.push_str(&format!("mcp-method: {method}\r\n"));
        if let Some(name) = name {
            head.push_str(&format!("mcp-name: {name}\r\n"));
        }
        RequestTemplate::finish(head, ep, template)
    }

    /// A POST of `template` to `ep` as a 2025-11-25 client sends it: that revision's
    /// `MCP-Protocol-Version`, the session's `Mcp-Session-Id` when the server gave one, and none
    /// of the 2026-07-28 headers (`Mcp-Method`, `Mcp-Name`).
    pub(crate) fn legacy(
        ep: &Endpoint,
        session: Option<&str>,
        template: &Template,
    ) -> RequestTemplate {
        RequestTemplate::finish(legacy_head(ep, "POST", session), ep, template)
    }

    fn finish(mut head: String, ep: &Endpoint, template: &Template) -> RequestTemplate {
        end_head(&mut head, ep);
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

/// A request head's first lines: the `verb`, its host, its content types and `version`.
fn start_head(ep: &Endpoint, verb: &str, version: &str) -> String {
    format!(
        "{verb} {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: {version}\r\n",
        ep.path, ep.host
    )
}

/// A 2025-11-25 request's head up to its `Mcp-Session-Id`.
fn legacy_head(ep: &Endpoint, verb: &str, session: Option<&str>) -> String {
    let mut head = start_head(ep, verb, legacy::VERSION);
    if let Some(session) = session {
        head.push_str(&format!("mcp-session-id: {session}\r\n"));
    }
    head
}

/// The headers every request ends with: `Authorization` when set, and the start of
/// `Content-Length` (its value is written per request).
fn end_head(head: &mut String, ep: &Endpoint) {
    if let Some(authorization) = &ep.authorization {
        head.push_str(&format!("authorization: {authorization}\r\n"));
    }
    head.push_str("content-length: ");
}

/// A whole 2025-11-25 request with `body`: a handshake's POST, or the DELETE that ends a session.
pub(crate) fn legacy_request(
    ep: &Endpoint,
    verb: &str,
    session: Option<&str>,
    body: &str,
) -> Vec<u8> {
    let mut head = legacy_head(ep, verb, session);
    end_head(&mut head, ep);
    format!("{head}{}\r\n\r\n{body}", body.len()).into_bytes()
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
    /// The `Mcp-Session-Id` of the last reply that had one.
    session: Option<String>,
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
            session: None,
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

    /// The `Mcp-Session-Id` of the last reply that carried one.
    pub(crate) fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Sends `request` and reads the whole reply.
    pub(crate) async fn exchange(&mut self, request: &[u8]) -> io::Result<Head> {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        self.stream.write_all(request).await?;
        let (head, head_len, framing) = loop {
            if let Some((head, len, framing, session)) = parse_head(&self.buf)? {
                if session.is_some() {
                    self.session = session;
                }
                break (head, len, framing);
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

/// What [`parse_head`] reads: the head, its length, the body's framing, the session id.
type Parsed = (Head, usize, Framing, Option<String>);

/// The reply head in `buf`, its length, the body's framing and its `Mcp-Session-Id`; `None`
/// until it is complete.
fn parse_head(buf: &[u8]) -> io::Result<Option<Parsed>> {
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
    let mut session = None;
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
        } else if h.name.eq_ignore_ascii_case("mcp-session-id") {
            let id = std::str::from_utf8(h.value)
                .map_err(|_| invalid("an Mcp-Session-Id that is not text"))?;
            session = Some(id.to_owned());
        }
    }
    // A reply with neither has no body (a 202, say).
    Ok(Some((
        head,
        head_len,
        framing.unwrap_or(Framing::Length(0)),
        session,
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
        let (head, len, framing, session) = parse_head(
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
        assert_eq!(session, None);
        let (head, _, framing, session) = parse_head(
            b"HTTP/1.1 429 Too Many\r\nContent-Length: 12\r\nMcp-Session-Id: s-1\r\n\r\n",
        )
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
        assert_eq!(session.as_deref(), Some("s-1"));
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\ncontent-le")
                .unwrap()
                .is_none()
        );
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
    }

    #[test]
    fn a_legacy_request_carries_its_revision_and_session_and_no_2026_headers() {
        let ep = crate::http::endpoint("http://127.0.0.1:9/mcp").unwrap();
        let template = Template::call(
            crate::protocol::Revision::Legacy,
            "echo",
            serde_json::json!({"message": "hello"}),
        );
        let mut out = Vec::new();
        RequestTemplate::legacy(&ep, Some("s-1"), &template).write(7, &mut out);
        let text = String::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("POST /mcp HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains("\r\nmcp-protocol-version: 2025-11-25\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nmcp-session-id: s-1\r\n"), "{head}");
        assert!(
            !head.contains("mcp-method") && !head.contains("mcp-name"),
            "{head}"
        );
        assert!(
            head.ends_with(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["id"], 7);
        assert_eq!(body["params"]["name"], "echo");
        assert!(body["params"].get("_meta").is_none(), "{body}");

        let post = legacy_request(&ep, "POST", None, "{}");
        let post = String::from_utf8(post).unwrap();
        assert!(!post.contains("mcp-session-id"), "{post}");
        assert!(post.ends_with("content-length: 2\r\n\r\n{}"), "{post}");
        let delete = legacy_request(&ep, "DELETE", Some("s-1"), "");
        let delete = String::from_utf8(delete).unwrap();
        assert!(delete.starts_with("DELETE /mcp HTTP/1.1\r\n"), "{delete}");
        assert!(delete.contains("\r\nmcp-session-id: s-1\r\n"), "{delete}");
    }
}
