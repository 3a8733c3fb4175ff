//! The redirect of an authorization, caught on the person's own machine (RFC 8252 §7.3): a
//! listener on 127.0.0.1 on a free port, whose `http://127.0.0.1:PORT/callback` is the
//! `redirect_uri`, waiting for the browser's request. Any local process, or a page that guesses
//! the port, can send a request there too, so only a callback carrying the authorization's own
//! `state` ends the wait (a code or an OAuth error response alike); any other is answered 400
//! and waited past, as are requests to other paths (404), until the bound. The full redirect
//! URL goes to [`read_redirect`](super::request::read_redirect), which checks `iss` and
//! `state` again. Connections are read side by side, so one that sends nothing cannot hold up
//! the browser's.

use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The most bytes of a request read (a redirect's URL is short; a browser adds headers).
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// The most connections read at once; past it, new ones wait to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

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

/// What one connection to the listener was.
enum Visit {
    /// The redirect: its full URL.
    Redirect(String),
    /// Anything else (answered already).
    Other,
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

    /// Waits (at most `timeout`) for the browser's request to `/callback` with `state` (the
    /// authorization request's) and returns the full URL it was sent to, query included.
    /// Callbacks with another state, or none, are answered 400 and do not end the wait.
    pub async fn wait(self, state: &str, timeout: Duration) -> Result<String, LoopbackError> {
        tokio::time::timeout(timeout, self.accept_callback(state))
            .await
            .map_err(|_| LoopbackError::Timeout(timeout))?
    }

    async fn accept_callback(&self, state: &str) -> Result<String, LoopbackError> {
        let origin = self.redirect_uri.trim_end_matches("/callback");
        let mut visits = FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept(), if visits.len() < MAX_CONNECTIONS => {
                    let (stream, _) = accepted?;
                    visits.push(visit(stream, origin, state));
                }
                Some(visit) = visits.next(), if !visits.is_empty() => {
                    if let Visit::Redirect(url) = visit {
                        return Ok(url);
                    }
                }
            }
        }
    }
}

/// Reads one request and answers it: the page for the redirect, 400 for a callback that is
/// not this authorization's, 404 elsewhere.
async fn visit(mut stream: TcpStream, origin: &str, state: &str) -> Visit {
    let Some(target) = read_target(&mut stream).await else {
        let _ = respond(&mut stream, "400 Bad Request", "Not a request.").await;
        return Visit::Other;
    };
    let Some(query) = target
        .strip_prefix("/callback")
        .filter(|rest| rest.is_empty() || rest.starts_with('?'))
    else {
        // A favicon or a stray request: not the redirect.
        let _ = respond(&mut stream, "404 Not Found", "Not here.").await;
        return Visit::Other;
    };
    if !carries_state(query.trim_start_matches('?'), state) {
        let _ = respond(
            &mut stream,
            "400 Bad Request",
            "This is not the sign-in this terminal is waiting for. It goes on waiting.",
        )
        .await;
        return Visit::Other;
    }
    let _ = respond(
        &mut stream,
        "200 OK",
        "The authorization is done. You can close this window and go back to the terminal.",
    )
    .await;
    Visit::Redirect(format!("{origin}{target}"))
}

/// Whether `query` has exactly one `state`, and it is `expected` (compared in constant time:
/// a local process cannot learn it a byte at a time).
fn carries_state(query: &str, expected: &str) -> bool {
    let mut states = url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k == "state");
    match (states.next(), states.next()) {
        (Some((_, found)), None) => {
            found.len() == expected.len()
                && found
                    .bytes()
                    .zip(expected.bytes())
                    .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                    == 0
        }
        _ => false,
    }
}

/// The request target of a `GET` whose head fits in [`MAX_REQUEST_BYTES`], read within
/// [`HEAD_TIMEOUT`].
async fn read_target(stream: &mut TcpStream) -> Option<String> {
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
    tokio::time::timeout(HEAD_TIMEOUT, read).await.ok()??;
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

async fn respond(stream: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
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
        let waiting =
            tokio::spawn(async move { loopback.wait("xyz", Duration::from_secs(10)).await });
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

    /// A callback without this authorization's state is answered 400 and does not end the
    /// wait; an OAuth error response with the right state does. A connection that sends
    /// nothing does not hold up the others.
    #[tokio::test]
    async fn only_a_callback_with_the_state_ends_the_wait() {
        let loopback = Loopback::bind().await.unwrap();
        let uri = loopback.redirect_uri().to_owned();
        let waiting =
            tokio::spawn(async move { loopback.wait("st4te", Duration::from_secs(10)).await });
        let silent = TcpStream::connect(
            uri.trim_start_matches("http://")
                .trim_end_matches("/callback"),
        )
        .await
        .unwrap();
        let http = reqwest::Client::new();
        let forgeries = async {
            for forged in [
                "",
                "?code=x",
                "?code=x&state=st4t",
                "?code=x&state=st4te%00",
                "?code=x&state=ST4TE",
                "?code=x&state=guess&state=st4te",
                "?error=access_denied&state=guess",
            ] {
                let reply = http.get(format!("{uri}{forged}")).send().await.unwrap();
                assert_eq!(reply.status(), 400, "{forged}");
                assert!(!waiting.is_finished(), "{forged}");
            }
        };
        // Well within the time the silent connection is given to send its request.
        tokio::time::timeout(HEAD_TIMEOUT / 2, forgeries)
            .await
            .expect("answered while a silent connection is open");
        let refused = format!("{uri}?error=access_denied&state=st4te");
        assert_eq!(http.get(&refused).send().await.unwrap().status(), 200);
        assert_eq!(waiting.await.unwrap().unwrap(), refused);
        drop(silent);
    }

    #[test]
    fn the_state_is_matched_exactly_once() {
        for (query, matches) in [
            ("state=abc", true),
            ("code=1&state=abc&iss=x", true),
            ("state=ab%63", true),
            ("state=abc&state=abc", false),
            ("state=ab", false),
            ("state=abcd", false),
            ("state=", false),
            ("", false),
            ("State=abc", false),
        ] {
            assert_eq!(carries_state(query, "abc"), matches, "{query}");
        }
    }

    #[tokio::test]
    async fn the_wait_is_bounded() {
        let loopback = Loopback::bind().await.unwrap();
        let waited = loopback.wait("s", Duration::from_millis(50)).await;
        assert!(
            matches!(waited, Err(LoopbackError::Timeout(_))),
            "{waited:?}"
        );
    }
}
