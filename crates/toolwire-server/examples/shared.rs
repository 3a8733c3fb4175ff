//! The guides' several-instances example: a server whose state (sealed request-state markers
//! and key ring, tasks, legacy sessions, tool quotas, listen fan-out) lives in Redis, so that
//! every instance started with the same URL serves every request.
//!
//! `cargo run -p toolwire-server --features redis --example shared -- redis://127.0.0.1:6379/0 127.0.0.1:8080`

use toolwire_server::{RequestContext, Server, Store, Tool, http};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Echo {
    message: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/0".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let echo = Tool::new(
        "echo",
        |e: Echo, _: RequestContext| async move { e.message },
    );
    let server = Server::builder("shared", "1.0.0")
        .tool(echo.description("Echoes the message"))
        .store(Store::redis(&url)?)
        .build()?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    http::serve(server, listener, http::HttpConfig::default()).await?;
    Ok(())
}
