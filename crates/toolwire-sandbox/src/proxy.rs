//! The filtering proxy of a server whose network is a list of hosts: in the client's
//! process, on a Unix socket the server's forwarder reaches from inside its own network
//! namespace. `CONNECT host:port` (HTTPS) and absolute-form requests (`GET http://host/…`) to a
//! listed `host:port` are carried; anything else is answered 403 and told to the [`Watch`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::watch::{Refusal, Watch};

/// The longest request head read.
const HEAD_LIMIT: usize = 16 * 1024;

/// A running proxy; stopped, and its socket removed, when dropped.
#[derive(Debug)]
pub(crate) struct Proxy {
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Listens on a Unix socket at `path`, carrying connections to `allowed` (`host:port`,
    /// host compared without case).
    pub(crate) fn start(
        path: &Path,
        allowed: Vec<String>,
        watch: Option<Watch>,
    ) -> std::io::Result<Proxy> {
        let listener = UnixListener::bind(path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let allowed: Arc<Vec<String>> =
            Arc::new(allowed.iter().map(|a| a.to_ascii_lowercase()).collect());
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("toolwire-sandbox-proxy".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let allowed = allowed.clone();
                    let watch = watch.clone();
                    let _ = std::thread::Builder::new()
                        .name("toolwire-sandbox-proxy-conn".into())
                        .spawn(move || serve(stream, &allowed, watch.as_ref()));
                }
            })?;
        Ok(Proxy {
            path: path.to_owned(),
            stop,
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which then sees the flag.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One client connection: its request head, the verdict, then bytes both ways.
fn serve(client: UnixStream, allowed: &[String], watch: Option<&Watch>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(match client.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    });
    let Some(head) = read_head(&mut reader) else {
        return;
    };
    let mut client = client;
    let Some((connect, target)) = target(&head) else {
        let _ = answer(&mut client, "400 Bad Request", "not a proxy request");
        return;
    };
    if !allowed.iter().any(|a| *a == target.to_ascii_lowercase()) {
        if let Some(watch) = watch {
            let method = head.split_whitespace().next().unwrap_or_default();
            watch.tell(&Refusal {
                target: target.clone(),
                method: method.to_ascii_uppercase(),
            });
        }
        let _ = answer(
            &mut client,
            "403 Forbidden",
            &format!("{target} is not among the hosts this server may reach"),
        );
        return;
    }
    let upstream = match TcpStream::connect(&target) {
        Ok(u) => u,
        Err(e) => {
            let _ = answer(&mut client, "502 Bad Gateway", &format!("{target}: {e}"));
            return;
        }
    };
    let _ = client.set_read_timeout(None);
    let sent = if connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
    } else {
        (&upstream).write_all(head.as_bytes())
    };
    if sent.is_err() {
        return;
    }
    // What the reader buffered past the head goes first.
    let early = reader.buffer().to_vec();
    if !early.is_empty() && (&upstream).write_all(&early).is_err() {
        return;
    }
    relay(client, upstream);
}

/// The request head, up to its blank line; `None` if the client closed or sent too much.
fn read_head(reader: &mut BufReader<UnixStream>) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader
            .by_ref()
            .take(HEAD_LIMIT as u64)
            .read_line(&mut line)
            .ok()?;
        if n == 0 || head.len() + n > HEAD_LIMIT {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" || line == "\n" {
            return Some(head);
        }
    }
}

/// Whether it is a CONNECT, and the `host:port` it asks for.
fn target(head: &str) -> Option<(bool, String)> {
    let mut words = head.lines().next()?.split_whitespace();
    let (method, uri) = (words.next()?, words.next()?);
    if method.eq_ignore_ascii_case("CONNECT") {
        return with_port(uri, 443).map(|t| (true, t));
    }
    let rest = uri.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    with_port(authority, 80).map(|t| (false, t))
}

/// `host:port`, with `default` when the authority names no port.
fn with_port(authority: &str, default: u16) -> Option<String> {
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let bracketed = authority.starts_with('[');
    match authority.rsplit_once(':') {
        Some((host, port)) if !bracketed || host.ends_with(']') => {
            let port: u16 = port.parse().ok()?;
            Some(format!("{host}:{port}"))
        }
        _ => Some(format!("{authority}:{default}")),
    }
}

fn answer(client: &mut UnixStream, status: &str, why: &str) -> std::io::Result<()> {
    write!(
        client,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
        why.len()
    )
}

/// A connected stream of either kind the proxy and the forwarder carry bytes between.
pub(crate) trait Duplex: Read + Write + Send + Sized + 'static {
    /// Another handle on the same connection.
    fn handle(&self) -> std::io::Result<Self>;
    /// Says no more bytes will be written.
    fn finish(&self);
}

impl Duplex for UnixStream {
    fn handle(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn finish(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Duplex for TcpStream {
    fn handle(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn finish(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

/// Bytes both ways until either side closes.
pub(crate) fn relay(a: impl Duplex, b: impl Duplex) {
    let (Ok(mut a_in), Ok(mut b_in)) = (a.handle(), b.handle()) else {
        return;
    };
    let (mut a_out, mut b_out) = (a, b);
    let there = std::thread::spawn(move || {
        let _ = std::io::copy(&mut a_in, &mut b_out);
        b_out.finish();
    });
    let _ = std::io::copy(&mut b_in, &mut a_out);
    a_out.finish();
    let _ = there.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_its_target() {
        for (head, want) in [
            (
                "CONNECT api.github.com:443 HTTP/1.1\r\n",
                Some((true, "api.github.com:443")),
            ),
            (
                "CONNECT example.com HTTP/1.1\r\n",
                Some((true, "example.com:443")),
            ),
            (
                "GET http://example.com/x?y HTTP/1.1\r\n",
                Some((false, "example.com:80")),
            ),
            (
                "GET http://127.0.0.1:8080/ HTTP/1.1\r\n",
                Some((false, "127.0.0.1:8080")),
            ),
            (
                "CONNECT [::1]:8443 HTTP/1.1\r\n",
                Some((true, "[::1]:8443")),
            ),
            ("GET /relative HTTP/1.1\r\n", None),
            ("CONNECT user@evil.com:443 HTTP/1.1\r\n", None),
            ("CONNECT evil.com:99999 HTTP/1.1\r\n", None),
            ("", None),
        ] {
            let got = target(head);
            assert_eq!(
                got.as_ref().map(|(c, t)| (*c, t.as_str())),
                want,
                "{head:?}"
            );
        }
    }

    #[test]
    fn a_refused_host_is_answered_403_and_told_to_the_watch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("proxy.sock");
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let watch = Watch::new(move |r: &Refusal| {
            let _ = tx.lock().unwrap().send(r.clone());
        });
        let _proxy = Proxy::start(&path, vec!["Allowed.test:443".into()], Some(watch)).unwrap();
        for (request, target, method) in [
            (
                "CONNECT evil.test:443 HTTP/1.1\r\n\r\n",
                "evil.test:443",
                "CONNECT",
            ),
            (
                "get http://evil.test/x HTTP/1.1\r\n\r\n",
                "evil.test:80",
                "GET",
            ),
        ] {
            let mut client = UnixStream::connect(&path).unwrap();
            client.write_all(request.as_bytes()).unwrap();
            let mut answer = String::new();
            client.read_to_string(&mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
            let refusal = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(refusal.target, target);
            assert_eq!(refusal.method, method);
        }
        // A malformed request is answered 400 and is no refusal of a host.
        let mut client = UnixStream::connect(&path).unwrap();
        client.write_all(b"GET /relative HTTP/1.1\r\n\r\n").unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }
}
