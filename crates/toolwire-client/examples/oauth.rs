//! The guides' protected-server example: a client that signs in when the server asks, keeps
//! its tokens in a private file, and lists the server's tools.
//!
//! `cargo run -p toolwire-client --example oauth -- https://crm.example.com/mcp`

#![allow(clippy::print_stdout)] // an example program prints its results

use std::sync::Arc;

use toolwire_client::ClientBuilder;
use toolwire_client::auth::{FileStore, LoopbackAuthorizer, OAuth};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args().nth(1).ok_or("usage: oauth URL")?;
    let home = std::env::var("HOME")?;
    // Prints the sign-in page's address; a host would open it in the browser.
    let authorizer = LoopbackAuthorizer::new(|url| eprintln!("sign in at {url}"));
    let client = ClientBuilder::new("my-host", "1.0")
        .oauth(
            OAuth::new()
                .store(Arc::new(FileStore::new(format!(
                    "{home}/.local/state/my-host/credentials.json"
                ))))
                .authorizer(Arc::new(authorizer)),
        )
        .http(url)?;
    let tools = client.list_tools().await?; // a 401 here runs the flow, then the request again
    for tool in tools {
        println!("{}", tool.name);
    }
    if let Some(authorized) = client.authorized() {
        eprintln!("signed in: {authorized:?}");
    }
    client.close().await;
    Ok(())
}
