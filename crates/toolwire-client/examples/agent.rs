//! The guides' client example: list a server's tools and call one. The server is `toolwire
//! serve` on stdio, found on PATH as any program finds it, unless a URL or another command line
//! is given.
//!
//! ```sh
//! cargo install --locked --path crates/toolwire-cli    # toolwire in ~/.cargo/bin, on PATH
//! cargo run -p toolwire-client --example agent         # toolwire serve, a stdio child
//! cargo run -p toolwire-client --example agent -- http://127.0.0.1:8080/mcp
//! ```

#![allow(clippy::print_stdout)] // an example program prints its results

use std::time::Duration;

use serde_json::json;
use toolwire_client::protocol::ElicitRequestParams;
use toolwire_client::{CallOptions, Client, ClientBuilder, StdioCommand};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args().nth(1);
    let builder = ClientBuilder::new("my-agent", "1.0")
        .timeout(Duration::from_secs(30)) // reset by progress, capped by max_timeout
        .on_elicit(|request| async move {
            // Answer the server's questions (input_required rounds, or legacy requests).
            if let ElicitRequestParams::Form(form) = &request {
                eprintln!("the server asks: {}", form.message);
            }
            toolwire_client::accepted(&json!({"name": "Ada"}))
        });
    let client: Client = match target {
        // Over HTTP: add .bearer_token("…") or .header("x-api-key", "…") for a server that
        // wants one, and .ca_file("ca.pem") for a private CA.
        Some(url) if url.starts_with("http") => builder.http(url)?,
        // A child process on stdio: its stderr becomes logs; it is restarted if it crashes. It
        // gets only HOME LOGNAME PATH SHELL TERM USER from this environment, and .env(…).
        command => {
            let line = command.unwrap_or_else(|| "toolwire serve".to_owned());
            let mut words = line.split_whitespace();
            let program = words.next().ok_or("an empty command line")?;
            builder
                .spawn_command(StdioCommand::new(program).args(words))
                .await
                .map_err(|e| {
                    format!(
                        "{e}. Is {program} installed? `cargo install --locked --path \
                         crates/toolwire-cli` puts toolwire in ~/.cargo/bin, which must be on \
                         your PATH; or give the server's command line as the argument"
                    )
                })?
        }
    };

    for tool in client.list_tools().await? {
        // All pages, cached for the server's ttlMs.
        println!("{}: {}", tool.name, tool.description.unwrap_or_default());
    }
    let result = client
        .call_tool_with(
            "count_slowly",
            json!({"to": 3, "delay_ms": 100}),
            CallOptions::default().on_progress(|p| match p.total {
                Some(total) => eprintln!("progress {} of {total}", p.progress),
                None => eprintln!("progress {}", p.progress),
            }),
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
