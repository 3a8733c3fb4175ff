//! `subscriptions/listen` fan-out: open many streams, change the tool set once, and time how
//! long until every stream has `notifications/tools/list_changed`; report the server's memory
//! per idle stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::http::{connect, endpoint, exchange, post};
use crate::proc_stats;
use crate::protocol::{Revision, Template};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The server's URL.
    #[arg(long)]
    url: String,
    /// The server's pid, for memory.
    #[arg(long)]
    pid: Option<u32>,
    /// Streams to open.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// The tool that changes the tool set.
    #[arg(long, default_value = "touch_tools")]
    trigger: String,
}

/// Reads SSE events from a listen stream; sends `()` on `acked` after the acknowledgement and
/// the arrival time of the first `tools/list_changed` on `changed`.
async fn stream(
    url: String,
    id: u64,
    opening: OwnedSemaphorePermit,
    acked: mpsc::Sender<()>,
    changed: mpsc::Sender<Instant>,
) -> anyhow::Result<()> {
    let ep = endpoint(&url)?;
    let mut sender = connect(&ep.addr).await?;
    let body = Template::new(
        "subscriptions/listen",
        serde_json::json!({"notifications": {"toolsListChanged": true}}),
    )
    .render(id);
    let resp = sender
        .send_request(post(&ep, "subscriptions/listen", None, body))
        .await?;
    drop(opening);
    anyhow::ensure!(resp.status() == 200, "listen answered {}", resp.status());
    let mut body = resp.into_body();
    let mut buf = String::new();
    let mut acknowledged = false;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buf.push_str(&String::from_utf8_lossy(&data));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(json) = event.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let message: Value = serde_json::from_str(json.trim())?;
            let tagged = message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                .as_u64()
                == Some(id);
            match message["method"].as_str() {
                Some("notifications/subscriptions/acknowledged") if tagged => {
                    acknowledged = true;
                    acked.send(()).await?;
                }
                Some("notifications/tools/list_changed") if tagged && acknowledged => {
                    changed.send(Instant::now()).await?;
                    return Ok(());
                }
                _ => anyhow::bail!("unexpected message on stream {id}: {message}"),
            }
        }
    }
    anyhow::bail!("stream {id} closed early")
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let rss_before = args.pid.and_then(proc_stats::rss_kb);
    let (acked_tx, mut acked_rx) = mpsc::channel(args.streams);
    let (changed_tx, mut changed_rx) = mpsc::channel(args.streams);
    // Open at most 256 connections at a time.
    let opening = Arc::new(Semaphore::new(256));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.streams);
    for i in 0..args.streams {
        let permit = opening.clone().acquire_owned().await?;
        let (url, a, c) = (args.url.clone(), acked_tx.clone(), changed_tx.clone());
        tasks.push(tokio::spawn(stream(url, i as u64 + 1, permit, a, c)));
    }
    drop((acked_tx, changed_tx));
    for n in 0..args.streams {
        tokio::time::timeout(Duration::from_secs(60), acked_rx.recv())
            .await
            .with_context(|| {
                format!(
                    "only {n} of {} streams acknowledged within 60 s",
                    args.streams
                )
            })?
            .context("a stream failed before its acknowledgement")?;
    }
    let open_seconds = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_open = args.pid.and_then(proc_stats::rss_kb);

    // One change, through the server's own tool.
    let ep = endpoint(&args.url)?;
    let mut sender = connect(&ep.addr).await?;
    let body = Template::call(Revision::Current, &args.trigger, serde_json::json!({})).render(1);
    let triggered = Instant::now();
    let (status, _) = exchange(
        &mut sender,
        post(&ep, "tools/call", Some(&args.trigger), body),
    )
    .await?;
    anyhow::ensure!(status == 200, "trigger answered {status}");
    let mut last = triggered;
    for n in 0..args.streams {
        let at = tokio::time::timeout(Duration::from_secs(30), changed_rx.recv())
            .await
            .with_context(|| format!("only {n} of {} streams notified within 30 s", args.streams))?
            .context("a stream failed before its notification")?;
        last = last.max(at);
    }
    let fan_out_ms = last.duration_since(triggered).as_secs_f64() * 1000.0;
    for t in tasks {
        t.await??;
    }
    let per_stream = match (rss_before, rss_open) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 1024.0 / args.streams as f64),
        _ => None,
    };
    Ok(serde_json::json!({
        "kind": "listen",
        "streams": args.streams,
        "open_seconds": open_seconds,
        "fan_out_ms": fan_out_ms,
        "rss_before_kb": rss_before,
        "rss_open_kb": rss_open,
        "rss_bytes_per_stream": per_stream,
    }))
}
