//! `tools/list`: walk every page, many times, and time each page.

use std::time::Instant;

use serde_json::Value;

use crate::http::{connect, endpoint, exchange, post};
use crate::protocol::Template;
use crate::stats;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The server's URL.
    #[arg(long)]
    url: String,
    /// Full walks of the list.
    #[arg(long, default_value_t = 20)]
    walks: usize,
    /// The number of tools the server is expected to list (0: do not check).
    #[arg(long, default_value_t = 0)]
    expect: usize,
    /// Untimed walks first (a server that is still settling after its start).
    #[arg(long, default_value_t = 0)]
    warmup_walks: usize,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let ep = endpoint(&args.url)?;
    let mut sender = connect(&ep.addr).await?;
    let mut hist = stats::histogram();
    let (mut pages, mut errors, mut tools_seen, mut id) = (0u64, 0u64, 0usize, 0u64);
    let started = Instant::now();
    for walk in 0..args.warmup_walks + args.walks {
        let timed = walk >= args.warmup_walks;
        let mut cursor: Option<String> = None;
        let mut names = 0usize;
        loop {
            id += 1;
            let params = match &cursor {
                Some(c) => serde_json::json!({"cursor": c}),
                None => serde_json::json!({}),
            };
            let body = Template::new("tools/list", params).render(id);
            let t0 = Instant::now();
            let (status, message) =
                exchange(&mut sender, post(&ep, "tools/list", None, body)).await?;
            let elapsed = t0.elapsed().as_micros() as u64;
            let result = message.as_ref().map(|m| &m["result"]);
            let Some(result) =
                result.filter(|r| status == 200 && r["tools"].is_array() && r["ttlMs"].is_u64())
            else {
                errors += 1;
                break;
            };
            if timed {
                hist.record(elapsed.max(1)).ok();
                pages += 1;
            }
            names += result["tools"].as_array().map_or(0, Vec::len);
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        if args.expect > 0 && names != args.expect {
            errors += 1;
        }
        tools_seen = names;
    }
    Ok(serde_json::json!({
        "kind": "list",
        "tools": tools_seen,
        "pages": pages,
        "errors": errors,
        "seconds": started.elapsed().as_secs_f64(),
        "page_p50_us": hist.value_at_quantile(0.5),
        "page_p99_us": hist.value_at_quantile(0.99),
        "page_max_us": hist.max(),
    }))
}
