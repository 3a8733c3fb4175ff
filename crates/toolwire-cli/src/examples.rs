//! The example tools `toolwire serve` offers: small, but each shows one kind of tool.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolwire_server::protocol::ToolAnnotations;
use toolwire_server::{NoArgs, RequestContext, Server, Structured, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// The text to send back.
    message: String,
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// First addend.
    a: f64,
    /// Second addend.
    b: f64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    /// a + b.
    sum: f64,
}

#[derive(Deserialize, JsonSchema)]
struct Text {
    /// The text to count.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Counts {
    /// Words (whitespace-separated).
    words: usize,
    /// Lines.
    lines: usize,
    /// Unicode scalar values.
    characters: usize,
}

#[derive(Deserialize, JsonSchema)]
struct CountSlowly {
    /// Count from 1 to this number (at most 100).
    #[schemars(range(min = 1, max = 100))]
    to: u32,
    /// Pause between numbers, in milliseconds (at most 1000).
    #[serde(default = "default_delay")]
    #[schemars(range(max = 1000))]
    delay_ms: u64,
}

fn default_delay() -> u64 {
    100
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        open_world_hint: Some(false),
        ..Default::default()
    }
}

/// The example server.
pub(crate) fn server() -> toolwire_server::Result<Server> {
    Server::builder("toolwire-examples", env!("CARGO_PKG_VERSION"))
        .title("Toolwire examples")
        .instructions("Small example tools: echo, arithmetic, text statistics, a slow counter with progress, the time.")
        .tool(
            Tool::new("echo", |args: Echo, _: RequestContext| async move { args.message })
                .description("Returns the message unchanged")
                .annotations(read_only()),
        )
        .tool(
            Tool::new("add", |args: Add, _: RequestContext| async move {
                let sum = args.a + args.b;
                if !sum.is_finite() {
                    return Err(ToolError::failed("the sum is too large to represent"));
                }
                Ok(Structured(Sum { sum }))
            })
                .description("Adds two numbers; the sum comes back as structured content")
                .annotations(read_only()),
        )
        .tool(
            Tool::new("word_count", |args: Text, _: RequestContext| async move {
                Structured(Counts {
                    words: args.text.split_whitespace().count(),
                    lines: args.text.lines().count(),
                    characters: args.text.chars().count(),
                })
            })
            .description("Counts the words, lines and characters of a text")
            .annotations(read_only()),
        )
        .tool(
            Tool::new("count_slowly", |args: CountSlowly, ctx: RequestContext| async move {
                let to = args.to.min(100);
                for i in 1..=to {
                    tokio::select! {
                        _ = ctx.cancellation().cancelled() => return Err(ToolError::failed("cancelled")),
                        _ = tokio::time::sleep(Duration::from_millis(args.delay_ms.min(1000))) => {}
                    }
                    ctx.progress(f64::from(i), Some(f64::from(to)), Some(&format!("{i} of {to}"))).await;
                }
                Ok(format!("Counted to {to}."))
            })
            .description("Counts to a number with a pause between steps, reporting progress (pass _meta.progressToken)")
            .annotations(read_only()),
        )
        .tool(
            Tool::new("current_time", |_: NoArgs, _: RequestContext| async {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).map_err(ToolError::internal)?;
                Ok::<_, ToolError>(format!("{} seconds since the Unix epoch", now.as_secs()))
            })
            .description("The server's current time, in seconds since the Unix epoch")
            .annotations(ToolAnnotations { read_only_hint: Some(true), ..Default::default() }),
        )
        .build()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_server_builds() {
        let server = super::server().unwrap();
        assert_eq!(
            server.tool_names(),
            ["echo", "add", "word_count", "count_slowly", "current_time"]
        );
    }
}
