//! `tools/call` over Streamable HTTP: N keep-alive connections, each sending requests back to
//! back for a fixed time (or a fixed count in smoke mode).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use crate::http::endpoint;
use crate::legacy;
use crate::proc_stats;
use crate::protocol::{self, Revision, Template};
use crate::stats::{self, Round, Summary};
use crate::wire::{RequestTemplate, Wire};

/// What both HTTP load generators (`http` and `wrk`) take: the servers and the load's shape.
#[derive(clap::Args)]
pub(crate) struct HttpLoad {
    /// A server to load, as `NAME=URL` with optional `,pid=PID`, `,no-result-type`,
    /// `,bearer=FILE`, `,tool=NAME` and `,legacy`; repeat for several (`help` spells it in usage syntax, which rustdoc would
    /// read as links).
    #[arg(
        long = "target",
        required = true,
        help = "NAME=URL[,pid=PID][,no-result-type][,bearer=FILE][,tool=NAME][,legacy]: a server to load; repeat for several (legacy: called as a 2025-11-25 host calls, a session per connection)"
    )]
    pub(crate) targets: Vec<Target>,
    /// `echo` (a message) or `realistic` (a ten-field booking).
    #[arg(long, default_value = "echo")]
    pub(crate) scenario: String,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub(crate) connections: usize,
    /// Rounds; targets are interleaved within each round.
    #[arg(long, default_value_t = 3)]
    pub(crate) rounds: usize,
}

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    load: HttpLoad,
    /// Seconds per round per target.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Instead of a duration: requests per round per target (smoke mode).
    #[arg(long)]
    requests: Option<u64>,
    /// Seconds of warm-up per target before the first round.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
}

/// A server to load.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) url: String,
    /// The server's processes (`pid=A+B+C` for several instances and what is in front of
    /// them): their CPU times and peak memories are added up.
    pub(crate) pids: Vec<u32>,
    pub(crate) require_result_type: bool,
    /// A Bearer access token sent with every request (`bearer=FILE`: the file holds it).
    pub(crate) bearer: Option<String>,
    /// The tool called (`tool=NAME`; default `echo`), e.g. `up__echo` through a gateway.
    pub(crate) tool: String,
    /// Called as a 2025-11-25 host calls (`legacy`): each connection opens a session first, and
    /// its calls carry no `_meta` and no `resultType` is expected back.
    pub(crate) legacy: bool,
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, rest) = s
            .split_once('=')
            .ok_or("expected NAME=URL[,pid=PID][,bearer=FILE]")?;
        let mut parts = rest.split(',');
        let url = parts.next().ok_or("missing URL")?.to_owned();
        let mut target = Target {
            name: name.to_owned(),
            url,
            pids: Vec::new(),
            require_result_type: true,
            bearer: None,
            tool: "echo".to_owned(),
            legacy: false,
        };
        for part in parts {
            match part.split_once('=') {
                Some(("pid", pids)) => {
                    for pid in pids.split('+') {
                        target
                            .pids
                            .push(pid.parse().map_err(|e| format!("pid {pid:?}: {e}"))?);
                    }
                }
                Some(("tool", tool)) => target.tool = tool.to_owned(),
                Some(("bearer", file)) => {
                    let token =
                        std::fs::read_to_string(file).map_err(|e| format!("bearer={file}: {e}"))?;
                    target.bearer = Some(token.trim().to_owned());
                }
                None if part == "no-result-type" => target.require_result_type = false,
                None if part == "legacy" => {
                    target.legacy = true;
                    target.require_result_type = false;
                }
                _ => return Err(format!("unknown option {part:?}")),
            }
        }
        Ok(target)
    }
}

impl Target {
    /// The CPU time of all its processes, in µs (`None` without pids or if one is gone).
    pub(crate) fn cpu_us(&self) -> Option<f64> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids.iter().map(|&pid| proc_stats::cpu_us(pid)).sum()
    }

    /// The peak resident memory of all its processes, in KiB.
    pub(crate) fn peak_rss_kb(&self) -> Option<u64> {
        if self.pids.is_empty() {
            return None;
        }
        self.pids
            .iter()
            .map(|&pid| proc_stats::peak_rss_kb(pid))
            .sum()
    }
}

struct Worker {
    hist: hdrhistogram::Histogram<u64>,
    errors: u64,
}

async fn worker(
    target: Arc<Target>,
    template: Arc<Template>,
    stop: Arc<AtomicBool>,
    budget: Option<u64>,
    first_id: u64,
) -> anyhow::Result<Worker> {
    let mut ep = endpoint(&target.url)?;
    ep.authorization = target.bearer.as_ref().map(|t| format!("Bearer {t}"));
    let mut wire = Wire::connect(&ep.addr)
        .await
        .with_context(|| format!("connecting to {}", ep.addr))?;
    // A 2025-11-25 session lives on the server, not on the connection: a reconnection below
    // keeps it.
    let (session, request) = if target.legacy {
        let session = legacy::open_session(&mut wire, &ep)
            .await
            .with_context(|| format!("{}: opening a 2025-11-25 session", target.name))?;
        let request = RequestTemplate::legacy(&ep, session.as_deref(), &template);
        (session, request)
    } else {
        let request = RequestTemplate::new(&ep, "tools/call", Some(&target.tool), &template);
        (None, request)
    };
    let mut bytes = Vec::with_capacity(1024);
    let mut w = Worker {
        hist: stats::histogram(),
        errors: 0,
    };
    let mut id = first_id;
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) && budget.is_none_or(|b| sent < b) {
        id += 1;
        sent += 1;
        request.write(id, &mut bytes);
        let started = Instant::now();
        let outcome = wire.exchange(&bytes).await;
        let elapsed = started.elapsed().as_micros() as u64;
        match outcome {
            Ok(head)
                if head.status == 200
                    && protocol::is_echo(wire.body(), head.sse, id, target.require_result_type) =>
            {
                w.hist.record(elapsed.max(1)).ok();
            }
            Ok(_) => w.errors += 1,
            Err(_) => {
                w.errors += 1;
                wire = Wire::connect(&ep.addr)
                    .await
                    .with_context(|| format!("reconnecting to {}", ep.addr))?;
            }
        }
    }
    if let Some(session) = &session {
        legacy::close_session(&mut wire, &ep, session)
            .await
            .with_context(|| format!("{}: ending a 2025-11-25 session", target.name))?;
    }
    Ok(w)
}

/// Loads one target for one round.
pub(crate) async fn round(
    args: &Args,
    target: &Target,
    seconds: f64,
    budget: Option<u64>,
) -> anyhow::Result<Round> {
    let arguments = protocol::arguments(&args.load.scenario);
    let revision = if target.legacy {
        Revision::Legacy
    } else {
        Revision::Current
    };
    let template = Arc::new(Template::call(revision, &target.tool, arguments));
    let target = Arc::new(target.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let cpu_before = target.cpu_us();
    let own_before = proc_stats::own_cpu_us();
    let per_worker = budget.map(|b| b.div_ceil(args.load.connections as u64));
    let started = Instant::now();
    let handles: Vec<_> = (0..args.load.connections)
        .map(|i| {
            tokio::spawn(worker(
                target.clone(),
                template.clone(),
                stop.clone(),
                per_worker,
                (i as u64) << 32,
            ))
        })
        .collect();
    if budget.is_none() {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        stop.store(true, Ordering::Relaxed);
    }
    let mut hist = stats::histogram();
    let mut errors = 0;
    for h in handles {
        let w = h.await??;
        hist.add(&w.hist).ok();
        errors += w.errors;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = match (cpu_before, target.cpu_us()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok(
        Round::new(&hist, errors, elapsed, cpu, target.peak_rss_kb())
            .with_load_generator(own_before.zip(proc_stats::own_cpu_us()).map(|(a, b)| b - a)),
    )
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    for target in &args.load.targets {
        if args.warmup > 0.0 && args.requests.is_none() {
            round(&args, target, args.warmup, None).await?;
        }
    }
    let mut rounds: BTreeMap<String, Vec<Round>> = BTreeMap::new();
    for _ in 0..args.load.rounds {
        for target in &args.load.targets {
            let r = round(&args, target, args.duration, args.requests).await?;
            eprintln!(
                "  {:<12} {:>9.0} req/s  p50 {:>6} µs  p99 {:>6} µs  errors {}",
                target.name, r.rps, r.p50_us, r.p99_us, r.errors
            );
            rounds.entry(target.name.clone()).or_default().push(r);
        }
    }
    let summaries: BTreeMap<String, Summary> = rounds
        .into_iter()
        .map(|(k, v)| (k, stats::summarize(v)))
        .collect();
    Ok(serde_json::json!({
        "kind": "http",
        "scenario": args.load.scenario,
        "connections": args.load.connections,
        "targets": summaries,
    }))
}
