//! Faults of the HTTP transport: clients that send their headers or body too
//! slowly, more connections than the cap, a client that leaves while its handler runs, and
//! graceful shutdown with a call in flight. Each test ends with the server still serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toolwire_server::{RequestContext, Server, Tool, http};

use crate::support::{self, TestServer, post, request, standard_headers};

/// A raw HTTP/1.1 request for `body`, with the standard MCP headers.
fn raw_request(addr: std::net::SocketAddr, body: &Value) -> String {
    let text = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n",
        text.len()
    );
    for (name, value) in standard_headers(body) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    format!("{head}\r\n{text}")
}

/// Reads until the server closes the connection (or `within` passes); what it sent.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(within, stream.read_to_end(&mut all)).await;
    match read {
        Ok(Ok(_)) => Some(String::from_utf8_lossy(&all).into_owned()),
        // A reset after the reply still counts as closed.
        Ok(Err(_)) => Some(String::from_utf8_lossy(&all).into_owned()),
        Err(_) => None,
    }
}

/// The echo call of the fixture server answers: the server still serves.
async fn still_serves(url: &str) {
    let body = request(
        99,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
    );
    let reply = post(url, &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.last()["result"]["structuredContent"]["total"], 5);
}

#[tokio::test]
async fn headers_sent_too_slowly_close_the_connection() {
    let config = http::HttpConfig::default().header_timeout(Duration::from_millis(300));
    let s = TestServer::start_with(support::builder().build().unwrap(), config).await;
    let mut slow = TcpStream::connect(s.addr).await.unwrap();
    // Half a request line, then nothing more: a slowloris.
    slow.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127")
        .await
        .unwrap();
    let started = Instant::now();
    let sent = read_until_closed(&mut slow, Duration::from_secs(5))
        .await
        .expect("the server closes a connection whose headers do not arrive in time");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed only after the header timeout ({waited:?})"
    );
    assert!(
        sent.is_empty() || sent.starts_with("HTTP/1.1 408"),
        "nothing or a 408 before the close: {sent:?}"
    );
    // An idle keep-alive connection is closed the same way.
    let mut idle = TcpStream::connect(s.addr).await.unwrap();
    assert!(
        read_until_closed(&mut idle, Duration::from_secs(5))
            .await
            .is_some()
    );
    still_serves(&s.url).await;
    s.stop().await;
}

#[tokio::test]
async fn a_body_sent_too_slowly_gets_408_and_the_connection_closes() {
    let config = http::HttpConfig::default().body_timeout(Duration::from_millis(300));
    let s = TestServer::start_with(support::builder().build().unwrap(), config).await;
    let body = request(
        1,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    );
    let full = raw_request(s.addr, &body);
    // The headers and the first ten bytes of the body, then nothing.
    let cut = full.find("\r\n\r\n").unwrap() + 4 + 10;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    stream.write_all(&full.as_bytes()[..cut]).await.unwrap();
    let reply = read_until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("the server answers and closes");
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    let json: Value = serde_json::from_str(&reply[reply.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(json["error"]["code"], -32600, "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not arrive within 300 ms"),
        "{json}"
    );
    still_serves(&s.url).await;
    s.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_get_503_until_one_closes() {
    let config = http::HttpConfig::default().max_connections(2);
    let s = TestServer::start_with(support::builder().build().unwrap(), config).await;
    let body = request(
        1,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
    );
    // Two keep-alive connections, each known to be accepted (it has answered a call).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(s.addr).await.unwrap();
        stream
            .write_all(raw_request(s.addr, &body).as_bytes())
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(stream);
    }
    // A third: refused with a clear answer, then closed.
    let mut third = TcpStream::connect(s.addr).await.unwrap();
    third
        .write_all(raw_request(s.addr, &body).as_bytes())
        .await
        .unwrap();
    let reply = read_until_closed(&mut third, Duration::from_secs(5))
        .await
        .expect("refused and closed");
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains("retry-after: 1"), "{reply}");
    let json: Value = serde_json::from_str(&reply[reply.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(json["error"]["code"], http::TOO_MANY_REQUESTS, "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 connections open"),
        "{json}"
    );
    // One closes: its place is free again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = reqwest::Client::new()
            .post(&s.url)
            .headers(
                standard_headers(&body)
                    .iter()
                    .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                    .collect(),
            )
            .body(body.to_string())
            .send()
            .await;
        match reply {
            Ok(r) if r.status() == 200 => break,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("a freed place is not reused: {other:?}"),
        }
    }
    s.stop().await;
}

/// A tool that reports progress (when asked for) and waits a minute; when dropped, it records
/// whether its cancellation token had fired.
fn waiting_tool(started: Arc<AtomicBool>, cancelled: Arc<AtomicBool>) -> Tool {
    Tool::new(
        "wait",
        move |_: toolwire_server::NoArgs, ctx: RequestContext| {
            let (started, cancelled) = (started.clone(), cancelled.clone());
            async move {
                let token = ctx.cancellation().clone();
                let _guard = support::scopeguard(move || {
                    cancelled.store(token.is_cancelled(), Ordering::SeqCst);
                });
                ctx.progress(0.0, None, Some("started")).await;
                started.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(60)).await;
                "waited"
            }
        },
    )
    .description("Waits a minute")
}

async fn wait_for(flag: &AtomicBool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !flag.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The three shapes of a reply: JSON, SSE without notifications, SSE after a progress
/// notification (the work then runs in a task of its own).
#[tokio::test]
async fn a_client_that_leaves_cancels_its_handler() {
    let shapes = [
        ("application/json", false),
        ("application/json, text/event-stream", false),
        ("application/json, text/event-stream", true),
    ];
    for (accept, progress) in shapes {
        let (started, cancelled) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let server = support::builder()
            .tool(waiting_tool(started.clone(), cancelled.clone()))
            .build()
            .unwrap();
        let s = TestServer::start(server).await;
        let mut params = json!({"name": "wait", "arguments": {}});
        if progress {
            params["_meta"] = json!({"progressToken": "p"});
        }
        let body = request(1, "tools/call", params);
        let raw = raw_request(s.addr, &body).replace(
            "accept: application/json, text/event-stream",
            &format!("accept: {accept}"),
        );
        let mut stream = TcpStream::connect(s.addr).await.unwrap();
        stream.write_all(raw.as_bytes()).await.unwrap();
        wait_for(&started, "the handler starts").await;
        if progress {
            let mut buf = vec![0u8; 4096];
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                buf[..n].starts_with(b"HTTP/1.1 200"),
                "the SSE reply has begun"
            );
        }
        drop(stream);
        wait_for(
            &cancelled,
            &format!(
                "the handler is cancelled, then dropped, when its client leaves ({accept}, progress {progress})"
            ),
        )
        .await;
        still_serves(&s.url).await;
        s.stop().await;
    }
}

#[tokio::test]
async fn shutdown_lets_a_call_in_flight_finish_and_refuses_new_connections() {
    let server: Server = support::builder().build().unwrap();
    let config = http::HttpConfig::default().shutdown_grace(Duration::from_secs(5));
    let s = TestServer::start_with(server, config).await;
    let url = s.url.clone();
    let body = request(
        1,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 600}}),
    );
    let call = tokio::spawn(async move { post(&url, &body).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    s.server.shutdown();
    // New connections are refused once the listener is gone.
    let deadline = Instant::now() + Duration::from_secs(2);
    while TcpStream::connect(s.addr).await.is_ok() {
        assert!(Instant::now() < deadline, "still accepting after shutdown");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reply = call.await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.last()["result"]["content"][0]["text"], "slept 600 ms");
    s.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "serve returns once the call is done, well within the grace ({:?})",
        started.elapsed()
    );
}
