//! Search speed in-process: the corpus repeated under new prefixes up to a catalogue's size
//! (5,100 tools: 50 upstreams of 102), every query searched, each search timed.

use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use toolwire_search::{Entry, Query, ToolIndex};

use crate::corpus;

/// The index build time and the search latency over `size` tools, `rounds` passes over the
/// queries, as JSON (microseconds).
pub(crate) fn run(size: usize, rounds: usize) -> anyhow::Result<Value> {
    let tools = corpus::tools()?;
    let cases = corpus::cases()?;
    anyhow::ensure!(!tools.is_empty(), "the corpus is empty");
    let entries: Vec<Entry> = (0..size)
        .map(|i| {
            let copy = i / tools.len();
            let entry = &tools[i % tools.len()].entry;
            let server = format!("{}{copy}", entry.server);
            let name = format!("{server}__{}", entry.tool.name);
            Entry::new(name, server, Arc::clone(&entry.tool))
        })
        .collect();
    let started = Instant::now();
    let index = ToolIndex::new(entries);
    let build = started.elapsed();
    let mut latency = Histogram::<u64>::new(3)?;
    // One pass unmeasured, so that the measured ones find warm caches.
    for round in 0..=rounds {
        for case in &cases {
            let started = Instant::now();
            let found = index.search(&Query::new(&case.query), &|_| true)?;
            let took = started.elapsed();
            std::hint::black_box(found);
            if round > 0 {
                latency.record(u64::try_from(took.as_nanos())?)?;
            }
        }
    }
    let micros = |ns: u64| ns as f64 / 1000.0;
    Ok(json!({
        "tools": size,
        "searches": latency.len(),
        "build_ms": build.as_secs_f64() * 1000.0,
        "p50_us": micros(latency.value_at_quantile(0.5)),
        "p99_us": micros(latency.value_at_quantile(0.99)),
        "max_us": micros(latency.max()),
    }))
}
