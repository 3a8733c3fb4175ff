//! The redirect of an authorization, caught on the person's own machine (RFC 8252 §7.3): a
//! listener on 127.0.0.1 on a free port, whose `http://127.0.0.1:PORT/callback` is the
//! `redirect_uri`, waiting for the browser's one request. It answers with a short page asking
//! the person to go back to the terminal, and hands the full redirect URL to
//! [`read_redirect`](super::request::read_redirect), which checks `iss` and `state`. Requests
//! to any other path are answered 404 and waited past; the wait is bounded.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// The most bytes of a request read (a redirect's URL is short; a browser adds headers).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// A listener waiting for one redirect.
#[derive(Debug)]
pub struct Loopback {
    listener: TcpListener,
    redirect_uri: String,
}

/// Why no redirect came.
#[derive(Debug, thiserror::Error)]
pub enum LoopbackError {
    /// The listener could not be set up or read.
    #[error("the loopback redirect listener: {0}")]
    Io(#[from] std::io::Error),
    /// Nothing came in time (the person did not finish in the browser).
    #[error("no redirect within {0:?}")]
    Timeout(Duration),
}

impl Loopback {
    /// Listens on 127.0.0.1 on a free port.
    pub async fn bind() -> Result<Loopback, LoopbackError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        Ok(Loopback {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// The `redirect_uri` to register and send.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits (at most `timeout`) for the browser's request to `/callback` and returns the
    /// full URL it was sent to, query included.
    pub async fn wait(self, timeout: Duration) -> Result<String, LoopbackError> {
        tokio::time::timeout(timeout, self.accept_callback())
            .await
            .map_err(|_| LoopbackError::Timeout(timeout))?
    }

    async fn accept_callback(&self) -> Result<String, LoopbackError> {
        loop {
            let (mut stream, _) = self.listener.accept().await?;
            let target = match read_target(&mut stream).await {
                Some(target) => target,
                None => {
                    let _ = respond(&mut stream, "400 Bad Request", "Not a request.").await;
                    continue;
                }
            };
            if target == "/callback" || target.starts_with("/callback?") {
                let _ = respond(
                    &mut stream,
                    "200 OK",
                    "The authorization is done. You can close this window and go back to the terminal.",
                )
                .await;
                let origin = self.redirect_uri.trim_end_matches("/callback");
                return Ok(format!("{origin}{target}"));
            }
            // A favicon or a stray request: not the redirect.
            let _ = respond(&mut stream, "404 Not Found", "Not here.").await;
        }
    }
}

/// The request target of a `GET` whose head fits in [`MAX_REQUEST_BYTES`], read with a 10 s
/// limit.
async fn read_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
                return None;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let line = head.split(|b| *b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(target), Some(version)) if version.starts_with("HTTP/1.") => {
            Some(target.to_owned())
        }
        _ => None,
    }
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    text: &str,
) -> std::io::Result<()> {
    let body = format!("<!doctype html><meta charset=utf-8><title>toolwire</title><p>{text}</p>");
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_callback_is_caught_and_other_paths_are_not() {
        let loopback = Loopback::bind().await.unwrap();
        let uri = loopback.redirect_uri().to_owned();
        assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"));
        let origin = uri.trim_end_matches("/callback").to_owned();
        let waiting = tokio::spawn(loopback.wait(Duration::from_secs(10)));
        let http = reqwest::Client::new();
        let stray = http
            .get(format!("{origin}/favicon.ico"))
            .send()
            .await
            .unwrap();
        assert_eq!(stray.status(), 404);
        let page = http
            .get(format!("{uri}?code=abc&state=xyz&iss=http%3A%2F%2Fas"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert!(
            page.text()
                .await
                .unwrap()
                .contains("go back to the terminal")
        );
        let caught = waiting.await.unwrap().unwrap();
        assert_eq!(
            caught,
            format!("{uri}?code=abc&state=xyz&iss=http%3A%2F%2Fas")
        );
    }

    #[tokio::test]
    async fn the_wait_is_bounded() {
        let loopback = Loopback::bind().await.unwrap();
        let waited = loopback.wait(Duration::from_millis(50)).await;
        assert!(
            matches!(waited, Err(LoopbackError::Timeout(_))),
            "{waited:?}"
        );
    }
}
