//! The same HTTP `tools/call` load driven by `wrk` (one thread, N connections) with a Lua hook
//! that checks every reply: a second load generator, written in C, beside `mcp-load http`, so
//! that the two can be seen to agree on the rows where the server, not the load generator, is
//! the limit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use serde_json::Value;

use crate::http::endpoint;
use crate::http_load::{HttpLoad, Target};
use crate::proc_stats;
use crate::protocol::{self, Revision, Template};
use crate::stats::{self, Round, Summary};

/// The id every request carries: each connection has one request in flight at a time, and a
/// stateless server keeps nothing between requests.
const ID: u64 = 7;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: HttpLoad,
    /// Seconds per round per target (whole seconds: wrk's unit).
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Seconds of warm-up per target before the first round (0: none).
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// The wrk binary.
    #[arg(long, default_value = "wrk")]
    wrk: PathBuf,
}

/// What the script's `done` hook writes.
#[derive(serde::Deserialize)]
struct Counts {
    requests: u64,
    duration_us: u64,
    bad: u64,
    errors: u64,
    p50_us: u64,
    p99_us: u64,
}

/// The Lua script for one target: the request, a check of every reply, and the counts as one
/// JSON line.
fn script(target: &Target, scenario: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !target.legacy,
        "{}: wrk cannot open a 2025-11-25 session per connection; load legacy targets with `mcp-load http`",
        target.name
    );
    let mut ep = endpoint(&target.url)?;
    ep.authorization = target.bearer.as_ref().map(|t| format!("Bearer {t}"));
    let body = Template::call(Revision::Current, "echo", protocol::arguments(scenario)).render(ID);
    anyhow::ensure!(
        !body.contains("]==]") && ep.authorization.as_deref().is_none_or(|a| !a.contains('"')),
        "the request cannot be quoted in Lua"
    );
    let authorization = ep
        .authorization
        .map(|a| format!("wrk.headers[\"Authorization\"] = \"{a}\"\n"))
        .unwrap_or_default();
    let result_type = if target.require_result_type {
        "or not string.find(body, '\"resultType\":\"complete\"', 1, true)"
    } else {
        ""
    };
    Ok(format!(
        r#"-- Written by mcp-load wrk: every reply is checked (status 200, its id, the echoed text,
-- resultType, no isError) and the counts are written as one JSON line.
wrk.method = "POST"
wrk.body = [==[{body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "{version}"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
{authorization}
bad = 0
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function response(status, headers, body)
  if status ~= 200
     or not (string.find(body, '"id":{ID},', 1, true) or string.find(body, '"id":{ID}}}', 1, true))
     or not string.find(body, '"text":"hello"', 1, true)
     {result_type}
     or string.find(body, '"isError":true', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format('{{"requests":%d,"duration_us":%d,"bad":%d,"errors":%d,"p50_us":%d,"p99_us":%d}}\n',
    summary.requests, summary.duration, b, e.connect + e.read + e.write + e.timeout,
    math.floor(latency:percentile(50)), math.floor(latency:percentile(99))))
end
"#,
        version = protocol::VERSION,
    ))
}

/// Runs wrk against one target for `seconds`.
fn round(args: &Args, target: &Target, script: &Path, seconds: u64) -> anyhow::Result<Round> {
    let cpu_before = target.cpu_us();
    let own_before = proc_stats::own_cpu_us();
    let out = Command::new(&args.wrk)
        .args(["-t1", &format!("-c{}", args.load.connections)])
        .arg(format!("-d{seconds}s"))
        .args(["--timeout", "5s", "-s"])
        .arg(script)
        .arg(&target.url)
        .output()
        .with_context(|| format!("running {}", args.wrk.display()))?;
    let cpu = match (cpu_before, target.cpu_us()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "wrk failed ({}): {}{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .with_context(|| format!("wrk wrote no counts: {stdout}"))?;
    let c: Counts = serde_json::from_str(line).context("wrk's counts")?;
    let good = c.requests.saturating_sub(c.bad);
    Ok(Round::from_counts(
        good,
        c.bad + c.errors,
        c.duration_us as f64 / 1e6,
        (c.p50_us, c.p99_us),
        cpu,
        target.peak_rss_kb(),
    )
    .with_load_generator(own_before.zip(proc_stats::own_cpu_us()).map(|(a, b)| b - a)))
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let dir = std::env::temp_dir();
    let mut scripts = Vec::new();
    for (i, target) in args.load.targets.iter().enumerate() {
        let path = dir.join(format!("mcp-load-wrk-{}-{i}.lua", std::process::id()));
        std::fs::write(&path, script(target, &args.load.scenario)?)
            .with_context(|| format!("writing {}", path.display()))?;
        scripts.push(path);
    }
    let result = rounds(&args, &scripts);
    for path in &scripts {
        std::fs::remove_file(path).ok();
    }
    let rounds = result?;
    let summaries: BTreeMap<String, Summary> = rounds
        .into_iter()
        .map(|(k, v)| (k, stats::summarize(v)))
        .collect();
    Ok(serde_json::json!({
        "kind": "http",
        "generator": "wrk",
        "scenario": args.load.scenario,
        "connections": args.load.connections,
        "targets": summaries,
    }))
}

fn rounds(args: &Args, scripts: &[PathBuf]) -> anyhow::Result<BTreeMap<String, Vec<Round>>> {
    if args.warmup > 0 {
        for (target, script) in args.load.targets.iter().zip(scripts) {
            round(args, target, script, args.warmup)?;
        }
    }
    let mut rounds: BTreeMap<String, Vec<Round>> = BTreeMap::new();
    for _ in 0..args.load.rounds {
        for (target, script) in args.load.targets.iter().zip(scripts) {
            let r = round(args, target, script, args.duration)?;
            eprintln!(
                "  {:<12} {:>9.0} req/s  p50 {:>6} µs  p99 {:>6} µs  errors {}  (wrk)",
                target.name, r.rps, r.p50_us, r.p99_us, r.errors
            );
            rounds.entry(target.name.clone()).or_default().push(r);
        }
    }
    Ok(rounds)
}
