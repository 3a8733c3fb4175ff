//! `mcp-ceiling`: the fastest a Rust MCP server could answer `tools/call` — a bare hyper handler
//! that parses the JSON-RPC body with serde and returns a fixed `CallToolResult`. No headers are
//! checked, no `_meta`, no schema: it is the ceiling, not a server.
//!
//! `mcp-ceiling ADDR` serves HTTP; `mcp-ceiling --stdio` is the same on stdin/stdout: read a
//! line, parse it, write the fixed answer with its id (one write per answer, as a server that
//! answers each request as it finishes must).

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[allow(dead_code)]
    jsonrpc: &'a str,
    id: serde_json::Value,
    #[allow(dead_code)]
    method: &'a str,
    #[serde(borrow)]
    #[allow(dead_code)]
    params: &'a serde_json::value::RawValue,
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(Response::builder()
                .status(400)
                .body(Full::new(Bytes::new()))
                .unwrap());
        }
    };
    let reply = match serde_json::from_slice::<Envelope<'_>>(&body) {
        Ok(env) => answer(&env),
        Err(_) => {
            return Ok(Response::builder()
                .status(400)
                .body(Full::new(Bytes::new()))
                .unwrap());
        }
    };
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(reply)))
        .unwrap())
}

/// The fixed answer to `env`.
fn answer(env: &Envelope<'_>) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{{"resultType":"complete","content":[{{"type":"text","text":"hello"}}]}}}}"#,
        env.id
    )
}

/// The stdio ceiling: one line in, one line out, until stdin ends.
fn stdio() -> anyhow::Result<()> {
    use std::io::{BufRead as _, Write as _};
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line?;
        // Notifications (no id) and anything unreadable get no answer.
        if let Ok(env) = serde_json::from_str::<Envelope<'_>>(&line) {
            if !env.id.is_null() {
                let mut reply = answer(&env);
                reply.push('\n');
                stdout.write_all(reply.as_bytes())?;
                stdout.flush()?;
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let first = std::env::args().nth(1);
    if first.as_deref() == Some("--stdio") {
        return stdio();
    }
    let addr: SocketAddr = first.unwrap_or_else(|| "127.0.0.1:0".into()).parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "mcp-ceiling: listening on http://{}/mcp",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}
