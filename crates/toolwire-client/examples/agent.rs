//! The README's client example: list a server's tools and call one, over Streamable HTTP or a
//! stdio child process.
//!
//! ```sh
//! cargo run --release -p toolwire-cli -- serve --http 127.0.0.1:8080 &
//! cargo run -p toolwire-client --example agent                        # http://127.0.0.1:8080/mcp
//! cargo run -p toolwire-client --example agent -- "target/release/toolwire serve"
//! ```

#![allow(clippy::print_stdout)] // an example program prints its results

use std::time::Duration;

use serde_json::json;
use toolwire_client::{CallOptions, Client, ClientBuilder, StdioCommand};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080/mcp".into());
    let builder = ClientBuilder::new("my-agent", "1.0")
        .timeout(Duration::from_secs(30)) // reset by progress, capped by max_timeout
        .on_elicit(|request| async move {
            // Answer the server's questions (input_required rounds, or legacy requests).
            eprintln!("the server asks: {request:?}");
            toolwire_client::accepted(&json!({"name": "Ada"}))
        });
    let client: Client = if target.starts_with("http") {
        builder.http(target)?
    } else {
        // A child process on stdio: its stderr becomes logs; it is restarted if it crashes.
        let mut words = target.split_whitespace();
        let program = words.next().ok_or("an empty command line")?;
        builder
            .spawn_command(StdioCommand::new(program).args(words))
            .await?
    };

    for tool in client.list_tools().await? {
        // All pages, cached for the server's ttlMs.
        println!("{}: {}", tool.name, tool.description.unwrap_or_default());
    }
    let result = client
        .call_tool_with(
            "count_slowly",
            json!({"to": 3, "delay_ms": 100}),
            CallOptions::default()
                .on_progress(|p| eprintln!("progress {}/{:?}", p.progress, p.total)),
        )
        .await?;
    if result.is_error() {
        // A tool error is for the model to read and correct (C-05).
        eprintln!("the tool failed: {:?}", result.content);
    }
    println!("{}", serde_json::to_string_pretty(&result.content)?);
    client.close().await;
    Ok(())
}
