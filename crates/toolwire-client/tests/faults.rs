//! Servers that misbehave, since a client must survive a hostile or broken server: one that never answers, streams forever, sends a
//! gigabyte, closes in the middle of an SSE event, or answers with invalid JSON. Each time the
//! caller gets a clear error within its timeout, and the client reads a bounded amount.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt as _;
use serde_json::{Value, json};
use toolwire_client::{ClientBuilder, Error};

/// How a server answers `server/discover`.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Takes the request and never answers.
    Silent,
    /// Answers with an SSE stream of log notifications that never carries the response.
    EndlessStream,
    /// A JSON body of a gigabyte.
    GigabyteJson,
    /// An SSE event whose data never ends (a gigabyte of it).
    GigabyteEvent,
    /// Half an SSE event, then the connection closes.
    CutEvent,
    /// A JSON body that is not JSON.
    InvalidJson,
}

const GIGABYTE: usize = 1 << 30;
const CHUNK: usize = 64 << 10;

/// A stream of `chunk`s adding up to a gigabyte, counting what was produced.
fn gigabyte(
    first: &'static [u8],
    chunk: u8,
    produced: Arc<AtomicUsize>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    let chunk = Bytes::from(vec![chunk; CHUNK]);
    futures::stream::once(async move { Ok(Bytes::from_static(first)) }).chain(
        futures::stream::repeat_with(move || {
            produced.fetch_add(CHUNK, Ordering::SeqCst);
            Ok(chunk.clone())
        })
        .take(GIGABYTE / CHUNK),
    )
}

fn reply(content_type: &str, body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(body)
        .unwrap()
}

/// Serves `fault` on 127.0.0.1; its URL, and how many bytes of body it produced.
async fn hostile(fault: Fault) -> (String, Arc<AtomicUsize>) {
    let produced = Arc::new(AtomicUsize::new(0));
    let counter = produced.clone();
    let app = axum::Router::new().fallback(move |body: String| {
        let produced = counter.clone();
        async move {
            let request: Value = serde_json::from_str(&body).unwrap_or_default();
            let id = request["id"].clone();
            match fault {
                Fault::Silent => std::future::pending().await,
                Fault::EndlessStream => {
                    let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "data": "still here"}});
                    let event = Bytes::from(format!("event: message\ndata: {log}\n\n"));
                    let events =
                        futures::stream::repeat_with(move || Ok::<_, Infallible>(event.clone()))
                            .then(|event| async {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                event
                            });
                    reply("text/event-stream", Body::from_stream(events))
                }
                Fault::GigabyteJson => reply(
                    "application/json",
                    Body::from_stream(gigabyte(
                        b"{\"jsonrpc\":\"2.0\",\"result\":\"",
                        b'x',
                        produced,
                    )),
                ),
                Fault::GigabyteEvent => reply(
                    "text/event-stream",
                    Body::from_stream(gigabyte(b"event: message\ndata: ", b'x', produced)),
                ),
                Fault::CutEvent => {
                    let half =
                        format!("event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"res");
                    let cut = futures::stream::iter([
                        Ok(Bytes::from(half)),
                        Err(std::io::Error::other("the server goes away")),
                    ]);
                    reply("text/event-stream", Body::from_stream(cut))
                }
                Fault::InvalidJson => reply(
                    "application/json",
                    Body::from(format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"resultType\":"
                    )),
                ),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, produced)
}

/// A client with a 1 s timeout and no legacy fallback.
fn builder() -> ClientBuilder {
    ClientBuilder::new("faults-test", "1.0")
        .timeout(Duration::from_secs(1))
        .legacy_fallback(false)
}

/// `server/discover` through `client`: the error, and after how long.
async fn failed_discover(client: &toolwire_client::Client, what: &str) -> (Error, Duration) {
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(30), client.discover())
        .await
        .unwrap_or_else(|_| panic!("{what}: the call hung past 30 s"));
    let error = outcome.expect_err("a hostile server cannot succeed");
    (error, started.elapsed())
}

/// `server/discover` against `fault`: the error, after how long, and how many bytes the
/// server produced by then.
async fn discover(fault: Fault) -> (Error, Duration, usize) {
    let (url, produced) = hostile(fault).await;
    let client = builder().http(url).unwrap();
    let (error, took) = failed_discover(&client, &format!("{fault:?}")).await;
    (error, took, produced.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (error, took, _) = discover(Fault::Silent).await;
    assert!(matches!(error, Error::Timeout(_)), "{error}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_stream_that_never_carries_the_response_times_out() {
    let (error, took, _) = discover(Fault::EndlessStream).await;
    assert!(matches!(error, Error::Timeout(_)), "{error}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_gigabyte_body_is_refused_past_the_bound() {
    for fault in [Fault::GigabyteJson, Fault::GigabyteEvent] {
        let (error, took, produced) = discover(fault).await;
        assert!(
            matches!(&error, Error::InvalidResponse(m) if m.contains("larger than 64 MiB")),
            "{fault:?}: {error}"
        );
        assert!(took < Duration::from_secs(10), "{fault:?}: {took:?}");
        assert!(
            produced < 256 << 20,
            "{fault:?}: the client let the server send {produced} bytes"
        );
    }
}

#[tokio::test]
async fn an_event_cut_by_a_closed_connection_is_a_transport_error() {
    let (error, took, _) = discover(Fault::CutEvent).await;
    assert!(matches!(error, Error::Transport(_)), "{error}");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn invalid_json_is_an_invalid_response() {
    let (error, took, _) = discover(Fault::InvalidJson).await;
    assert!(
        matches!(&error, Error::InvalidResponse(m) if m.contains("not JSON")),
        "{error}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// `server/discover` against a stdio server made of `script` (sh): the error, and after how
/// long.
async fn discover_stdio(script: &str) -> (Error, Duration) {
    let client = builder()
        .shutdown_grace(Duration::from_millis(200))
        .spawn_command(toolwire_client::StdioCommand::new("sh").args(["-c", script]))
        .await
        .unwrap();
    let failed = failed_discover(&client, script).await;
    client.close().await;
    failed
}

#[tokio::test]
async fn a_child_that_never_answers_times_out() {
    let (error, took) = discover_stdio("cat > /dev/null").await;
    assert!(matches!(error, Error::Timeout(_)), "{error}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

/// A server that cannot start (a bad option, a directory it cannot create) says why on stderr
/// and exits: both its words and its exit status are in the error, so that a person sees why.
#[tokio::test]
async fn a_child_that_exits_says_its_status_and_last_words() {
    let (error, _) = discover_stdio("echo 'cannot create /nope' >&2; exit 3").await;
    let said = error.to_string();
    assert!(
        said.contains("the server exited before answering (exit status 3)"),
        "{said}"
    );
    assert!(
        said.contains("its last words on stderr: cannot create /nope"),
        "{said}"
    );
    let (error, _) = discover_stdio("kill -9 $$").await;
    assert!(
        error.to_string().contains("(killed by signal 9)"),
        "{error}"
    );
}

#[tokio::test]
async fn a_child_that_exits_in_the_middle_of_a_line_says_so() {
    let (error, took) = discover_stdio(r#"read line; printf '{"jsonrpc":"2.0","id":1,"res'"#).await;
    // The version probe (server/discover) is what died; without a legacy fallback, that is
    // the error, with its cause.
    assert!(
        error
            .to_string()
            .contains("the server exited before answering"),
        "{error}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
}
