//! Memory under churn, so that a long-running server does not leak: the server's resident memory
//! through listen streams opened and closed in cycles, a million `tools/call` requests, and
//! thousands of calls of unknown and oversized tool names. With `--check`, the run fails when
//! memory does not come back or keeps growing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use serde_json::Value;

use crate::http::{Endpoint, connect, endpoint, exchange, exchange_raw, post};
use crate::proc_stats;
use crate::protocol::{self, Revision, Template};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The server's URL.
    #[arg(long)]
    url: String,
    /// The server's pid, for its memory.
    #[arg(long)]
    pid: u32,
    /// Cycles of listen streams opened and closed.
    #[arg(long, default_value_t = 10)]
    cycles: usize,
    /// Listen streams per cycle.
    #[arg(long, default_value_t = 1000)]
    streams: usize,
    /// `tools/call` requests (echo), in ten batches.
    #[arg(long, default_value_t = 1_000_000)]
    calls: u64,
    /// Calls of distinct unknown tool names (every tenth a 16 KiB name).
    #[arg(long, default_value_t = 20_000)]
    unknown: u64,
    /// Connections for the calls.
    #[arg(long, default_value_t = 16)]
    connections: u64,
    /// Seconds to wait after a phase before reading the server's memory.
    #[arg(long, default_value_t = 3.0)]
    settle: f64,
    /// Fail when memory does not come back within 10 MB of the baseline after the streams
    /// close, grows by more than 2 MB from the first cycle to the last, or grows by more than
    /// 5 MB over the calls or the unknown names.
    #[arg(long)]
    check: bool,
}

/// Memory bounds of `--check`, in KiB.
const BACK_WITHIN_KB: u64 = 10 * 1024;
const CYCLE_GROWTH_KB: u64 = 2 * 1024;
const FLAT_KB: u64 = 5 * 1024;

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let ep = Arc::new(endpoint(&args.url)?);
    let started = Instant::now();

    calls(&ep, 1000, args.connections, Kind::Echo).await?;
    settle(&args).await;
    let baseline = rss(&args)?;
    eprintln!("churn: baseline {baseline} KiB");

    let cycles = stream_cycles(&ep, &args).await?;
    let after_kb = |c: &Value| c["after_kb"].as_u64().unwrap_or(0);
    let first = cycles.first().map(after_kb).unwrap_or(baseline);
    let last = cycles.last().map(after_kb).unwrap_or(baseline);

    let (batch, calls_seconds, batches) = call_batches(&ep, &args).await?;
    let calls_growth = batches
        .last()
        .copied()
        .unwrap_or(0)
        .saturating_sub(batches[0]);

    settle(&args).await;
    let before_unknown = rss(&args)?;
    calls(&ep, args.unknown, args.connections, Kind::Unknown).await?;
    settle(&args).await;
    let after_unknown = rss(&args)?;
    eprintln!(
        "churn: {} unknown names: {before_unknown} -> {after_unknown} KiB",
        args.unknown
    );

    let failures = Memory {
        baseline,
        first,
        last,
        calls_growth,
        before_unknown,
        after_unknown,
    }
    .failures();
    let report = serde_json::json!({
        "kind": "churn",
        "baseline_kb": baseline,
        "streams_per_cycle": args.streams,
        "cycles": cycles,
        "calls": batch * 10,
        "calls_seconds": calls_seconds,
        "calls_rss_kb": batches,
        "unknown_names": args.unknown,
        "unknown_rss_kb": [before_unknown, after_unknown],
        "seconds": started.elapsed().as_secs_f64(),
        "failures": failures,
    });
    if args.check && !failures.is_empty() {
        anyhow::bail!("memory under churn: {}\n{report:#}", failures.join("; "));
    }
    Ok(report)
}

/// The server's resident memory, in KiB.
fn rss(args: &Args) -> anyhow::Result<u64> {
    proc_stats::rss_kb(args.pid).context("reading the server's memory")
}

/// Waits for the server's memory to settle after a phase.
async fn settle(args: &Args) {
    tokio::time::sleep(Duration::from_secs_f64(args.settle)).await;
}

/// Each cycle opens the streams, reads the memory, closes them, and reads it again.
async fn stream_cycles(ep: &Arc<Endpoint>, args: &Args) -> anyhow::Result<Vec<Value>> {
    let mut cycles = Vec::new();
    for cycle in 1..=args.cycles {
        let open = open_streams(ep, args.streams, cycle as u64 * 1_000_000).await?;
        let with_streams = rss(args)?;
        drop(open);
        settle(args).await;
        let after = rss(args)?;
        eprintln!(
            "churn: cycle {cycle}: {with_streams} KiB with {} streams open, {after} KiB after they closed",
            args.streams
        );
        cycles.push(serde_json::json!({"open_kb": with_streams, "after_kb": after}));
    }
    Ok(cycles)
}

/// The calls in ten batches: the batch size, the seconds they took, and the memory after each.
async fn call_batches(ep: &Arc<Endpoint>, args: &Args) -> anyhow::Result<(u64, f64, Vec<u64>)> {
    let mut batches = Vec::new();
    let batch = args.calls.div_ceil(10);
    let calls_started = Instant::now();
    for _ in 0..10 {
        calls(ep, batch, args.connections, Kind::Echo).await?;
        batches.push(rss(args)?);
    }
    let calls_seconds = calls_started.elapsed().as_secs_f64();
    eprintln!(
        "churn: {} calls in {calls_seconds:.1} s; memory after each tenth (KiB): {batches:?}",
        batch * 10
    );
    Ok((batch, calls_seconds, batches))
}

/// The memory readings `--check` judges, in KiB.
struct Memory {
    baseline: u64,
    /// After the first cycle's streams closed.
    first: u64,
    /// After the last cycle's streams closed.
    last: u64,
    calls_growth: u64,
    before_unknown: u64,
    after_unknown: u64,
}

impl Memory {
    /// Each bound the readings exceed, in words.
    fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        if self.last > self.baseline + BACK_WITHIN_KB {
            failures.push(format!(
                "after the streams closed, memory stayed {} KiB above its baseline (at most {BACK_WITHIN_KB})",
                self.last - self.baseline
            ));
        }
        if self.last > self.first + CYCLE_GROWTH_KB {
            failures.push(format!(
                "memory grew {} KiB from the first cycle to the last (at most {CYCLE_GROWTH_KB})",
                self.last - self.first
            ));
        }
        if self.calls_growth > FLAT_KB {
            failures.push(format!(
                "memory grew {} KiB over the calls (at most {FLAT_KB})",
                self.calls_growth
            ));
        }
        if self.after_unknown > self.before_unknown + FLAT_KB {
            failures.push(format!(
                "memory grew {} KiB over the unknown names (at most {FLAT_KB})",
                self.after_unknown - self.before_unknown
            ));
        }
        failures
    }
}

/// An open listen stream: its connection and the body still being read.
struct Open {
    _sender: SendRequest<Full<Bytes>>,
    _body: hyper::body::Incoming,
}

/// Opens `n` listen streams, each read up to its acknowledgement, at most 256 at a time.
async fn open_streams(ep: &Arc<Endpoint>, n: usize, first_id: u64) -> anyhow::Result<Vec<Open>> {
    let opening = Arc::new(tokio::sync::Semaphore::new(256));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let permit = opening.clone().acquire_owned().await?;
        let ep = ep.clone();
        tasks.push(tokio::spawn(async move {
            let open = open_stream(&ep, first_id + i).await;
            drop(permit);
            open
        }));
    }
    let mut open = Vec::with_capacity(n);
    for task in tasks {
        open.push(task.await??);
    }
    Ok(open)
}

async fn open_stream(ep: &Endpoint, id: u64) -> anyhow::Result<Open> {
    let mut sender = connect(&ep.addr).await?;
    let body = Template::new(
        "subscriptions/listen",
        serde_json::json!({"notifications": {"toolsListChanged": true}}),
    )
    .render(id);
    sender.ready().await?;
    let resp = sender
        .send_request(post(ep, "subscriptions/listen", None, body))
        .await?;
    anyhow::ensure!(resp.status() == 200, "listen answered {}", resp.status());
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    let acknowledged = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                seen.extend_from_slice(&data);
                if contains(&seen, b"notifications/subscriptions/acknowledged") {
                    return Ok(());
                }
            }
        }
        anyhow::bail!("stream {id} closed before its acknowledgement")
    })
    .await;
    acknowledged.with_context(|| format!("stream {id}: no acknowledgement within 30 s"))??;
    Ok(Open {
        _sender: sender,
        _body: body,
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[derive(Clone, Copy)]
enum Kind {
    /// The echo tool: each reply must be its echo.
    Echo,
    /// A tool name never registered (every tenth 16 KiB long): each reply must be an error.
    Unknown,
}

/// Sends `total` calls over `connections` keep-alive connections and checks every reply.
async fn calls(ep: &Arc<Endpoint>, total: u64, connections: u64, kind: Kind) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (ep, next) = (ep.clone(), next.clone());
            tokio::spawn(async move { call_worker(&ep, &next, total, kind).await })
        })
        .collect();
    for w in workers {
        w.await??;
    }
    Ok(())
}

async fn call_worker(
    ep: &Endpoint,
    next: &AtomicU64,
    total: u64,
    kind: Kind,
) -> anyhow::Result<()> {
    let mut sender = connect(&ep.addr).await?;
    let echo = Template::call(Revision::Current, "echo", protocol::arguments("echo"));
    // Names differ from one run of the harness to the next.
    let run = std::process::id();
    loop {
        let id = next.fetch_add(1, Ordering::Relaxed);
        if id >= total {
            return Ok(());
        }
        match kind {
            Kind::Echo => {
                let req = post(ep, "tools/call", Some("echo"), echo.render(id + 1));
                let (status, sse, body) = exchange_raw(&mut sender, req).await?;
                let echoed = protocol::response_json(sse, &body)
                    .is_some_and(|json| protocol::is_echo_reply(&json, id + 1, true));
                anyhow::ensure!(
                    status == 200 && echoed,
                    "call {id}: not the echo ({status})"
                );
            }
            Kind::Unknown => {
                let name = if id % 10 == 9 {
                    format!("no-such-tool-{run}-{id}-{}", "x".repeat(16 * 1024))
                } else {
                    format!("no-such-tool-{run}-{id}")
                };
                let body =
                    Template::call(Revision::Current, &name, serde_json::json!({})).render(id + 1);
                let (status, reply) =
                    exchange(&mut sender, post(ep, "tools/call", Some(&name), body)).await?;
                let code = reply.as_ref().and_then(|r| r["error"]["code"].as_i64());
                anyhow::ensure!(
                    code.is_some(),
                    "unknown tool {}…: not an error ({status}): {reply:?}",
                    &name[..name.len().min(40)]
                );
            }
        }
    }
}
