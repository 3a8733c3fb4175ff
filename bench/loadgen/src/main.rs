//! `mcp-load`: a load generator written for MCP 2026-07-28.
//!
//! Every request is a correct stateless request (full `_meta`, `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`), and every reply is checked: a reply that is not the expected
//! result (wrong id, wrong text, missing `resultType`, an error) counts as an error, so a fast
//! wrong answer never looks good. Targets run in interleaved rounds (A B A B …) and the medians
//! are reported as JSON on stdout.

use std::time::Duration;

use clap::{Parser, Subcommand};

mod churn;
mod http;
mod http_load;
mod legacy;
mod list;
mod listen;
mod proc_stats;
mod protocol;
mod state_load;
mod stats;
mod stdio_load;
mod wire;
mod wrk;

#[derive(Parser)]
#[command(about = "Load generator for MCP 2026-07-28 servers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// `tools/call` of `echo` over Streamable HTTP, N keep-alive connections.
    Http(http_load::Args),
    /// The same HTTP load driven by `wrk` with a Lua check of every reply.
    Wrk(wrk::Args),
    /// `tools/call` of `echo` over stdio: one client pipelining to a child process.
    Stdio(stdio_load::Args),
    /// Walk every page of `tools/list`.
    List(list::Args),
    /// Open many `subscriptions/listen` streams, change the tool set, time the fan-out.
    Listen(listen::Args),
    /// The latency of calls that touch server state (MRTR round, task, handle), one at a time.
    State(state_load::Args),
    /// Memory under churn: listen streams opened and closed in cycles, a million calls, and
    /// unknown tool names; with `--check`, fails when memory does not come back.
    Churn(churn::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The throughput loads run on one thread: pinned to one core, a work-stealing pool only
    // adds cost per request to the side that must stay the cheaper one.
    let runtime = match cli.command {
        Command::Http(_) | Command::Stdio(_) | Command::Wrk(_) => {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        }
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    let report = runtime.block_on(async {
        match cli.command {
            Command::Http(args) => http_load::run(args).await,
            Command::Wrk(args) => wrk::run(args).await,
            Command::Stdio(args) => stdio_load::run(args).await,
            Command::List(args) => list::run(args).await,
            Command::Listen(args) => listen::run(args).await,
            Command::Churn(args) => churn::run(args).await,
            Command::State(args) => state_load::run(args).await,
        }
    })?;
    #[allow(clippy::print_stdout)] // The report is this tool's output.
    {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}
