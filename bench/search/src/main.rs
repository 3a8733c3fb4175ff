//! `search-bench`: tool search measured. `quality` (recall against plain BM25),
//! `speed` (in-process search over 5,100 tools), `gateway` (tokens and latency of search mode
//! through a running gateway). Each prints one JSON object; `bench/search/run` runs them all.

#![allow(clippy::print_stdout)]

mod corpus;
mod gateway;
mod quality;
mod speed;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Tool search measured")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Recall@1, recall@5 and MRR over bench/search's queries, beside plain BM25.
    Quality {
        /// An OpenAI-compatible embeddings endpoint (`http://…/v1/embeddings`): adds the
        /// hybrid search's row.
        #[arg(long)]
        embeddings: Option<String>,
    },
    /// Index build time and search latency in-process.
    Speed {
        /// How many tools: the corpus repeated under new prefixes.
        #[arg(long, default_value_t = 5100)]
        tools: usize,
        /// Passes over the queries.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
    },
    /// Tokens of a gateway's tools/list and of a search_tools answer, and the latency of each
    /// over HTTP.
    Gateway {
        /// The gateway's MCP endpoint.
        #[arg(long)]
        url: String,
        /// How many timed requests of each.
        #[arg(long, default_value_t = 2000)]
        requests: usize,
        /// Also a search_tools answer and its latency (the gateway is in search mode).
        #[arg(long)]
        search: bool,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let report = match Args::parse().command {
        Command::Quality { embeddings } => quality::run(embeddings.as_deref()).await?,
        Command::Speed { tools, rounds } => speed::run(tools, rounds)?,
        Command::Gateway {
            url,
            requests,
            search,
        } => gateway::run(&url, requests, search).await?,
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
