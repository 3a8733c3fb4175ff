//! `tools/call` over stdio: one client keeps N requests in flight to a child server process.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::proc_stats;
use crate::protocol::{self, Revision, Template};
use crate::stats::{self, Round, Summary};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// NAME=COMMAND (split on spaces): a server to spawn; repeat for several.
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// Targets that need the legacy `initialize` handshake first (by name).
    #[arg(long = "initialize")]
    initialize: Vec<String>,
    /// Targets whose results lack `resultType` (by name); they are still checked otherwise.
    #[arg(long = "no-result-type")]
    no_result_type: Vec<String>,
    /// `echo` or `realistic`.
    #[arg(long, default_value = "echo")]
    scenario: String,
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    inflight: usize,
    /// Seconds per round per target.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Instead of a duration: requests per round (smoke mode).
    #[arg(long)]
    requests: Option<u64>,
    /// Rounds, interleaving targets.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

struct Server {
    name: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    require_result_type: bool,
}

impl Server {
    async fn spawn(spec: &str, args: &Args) -> anyhow::Result<Server> {
        let (name, command) = spec.split_once('=').context("expected NAME=COMMAND")?;
        let mut words = command.split_whitespace();
        let program = words.next().context("empty command")?;
        let mut child = Command::new(program)
            .args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {command}"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::with_capacity(64 * 1024, child.stdout.take().context("stdout")?);
        let mut server = Server {
            name: name.to_owned(),
            child,
            stdin,
            stdout,
            next_id: 1_000_000,
            require_result_type: !args.no_result_type.iter().any(|n| n == name),
        };
        if args.initialize.iter().any(|n| n == name) {
            server.initialize().await?;
        }
        Ok(server)
    }

    /// The legacy handshake, for servers that need it before anything else.
    async fn initialize(&mut self) -> anyhow::Result<()> {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "mcp-load", "version": "1"}}});
        self.stdin.write_all(format!("{init}\n").as_bytes()).await?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).await?;
        anyhow::ensure!(!line.is_empty(), "no initialize reply");
        anyhow::ensure!(line.contains("\"result\""), "initialize failed: {line}");
        let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        self.stdin.write_all(format!("{done}\n").as_bytes()).await?;
        Ok(())
    }
}

/// One round: keep `inflight` requests outstanding until time or budget runs out, then drain.
/// The loop costs the load generator little per request (requests written from a template
/// into one buffer, replies read into a reused one, the id found by bytes), so that the raw
/// stdio ceiling, not this side, is what limits its row.
async fn round(server: &mut Server, args: &Args) -> anyhow::Result<Round> {
    let template = Template::call(
        Revision::Current,
        "echo",
        protocol::arguments(&args.scenario),
    );
    let pid = server.child.id();
    let cpu_before = pid.and_then(proc_stats::cpu_us);
    let own_before = proc_stats::own_cpu_us();
    let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(args.inflight * 2);
    let deadline = Instant::now() + Duration::from_secs_f64(args.duration);
    let first = server.next_id;
    let budget = args.requests.unwrap_or(u64::MAX);
    let started = Instant::now();
    let mut hist = stats::histogram();
    let mut errors = 0u64;
    let (mut sent, mut received) = (0u64, 0u64);
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut line = Vec::with_capacity(4 * 1024);
    loop {
        // Send while there is room, then read one reply.
        let now = Instant::now();
        while sent < budget && sent - received < args.inflight as u64 && now < deadline {
            let id = first + sent;
            sent += 1;
            template.write(id, &mut buf);
            buf.push(b'\n');
            sent_at.insert(id, now);
        }
        if !buf.is_empty() {
            server.stdin.write_all(&buf).await?;
            server.stdin.flush().await?;
            buf.clear();
        }
        if received == sent {
            break;
        }
        line.clear();
        let read = tokio::time::timeout(
            Duration::from_secs(30),
            server.stdout.read_until(b'\n', &mut line),
        )
        .await
        .context("no reply within 30 s")??;
        anyhow::ensure!(read > 0, "the server closed stdout");
        let Some(id) = reply_id(&line) else {
            // A notification (no id) is skipped; a line that is not JSON is an error.
            if serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_err() {
                errors += 1;
            }
            continue;
        };
        let Some(at) = sent_at.remove(&id) else {
            continue;
        };
        received += 1;
        if protocol::is_echo(&line, false, id, server.require_result_type) {
            hist.record((at.elapsed().as_micros() as u64).max(1)).ok();
        } else {
            errors += 1;
        }
    }
    server.next_id = first + sent;
    let cpu = match (cpu_before, pid.and_then(proc_stats::cpu_us)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok(Round::new(
        &hist,
        errors,
        started.elapsed().as_secs_f64(),
        cpu,
        pid.and_then(proc_stats::peak_rss_kb),
    )
    .with_load_generator(own_before.zip(proc_stats::own_cpu_us()).map(|(a, b)| b - a)))
}

/// The id of a reply line: read as bytes where it is written `"id":DIGITS`, else parsed.
fn reply_id(line: &[u8]) -> Option<u64> {
    // Built once: building a searcher costs more than running it on one line.
    static ID: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"id\":"));
    if let Some(at) = ID.find(line) {
        let digits = &line[at + 5..];
        let end = digits
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(digits.len());
        if end > 0 && end < 20 {
            return std::str::from_utf8(&digits[..end]).ok()?.parse().ok();
        }
    }
    #[derive(serde::Deserialize)]
    struct Id {
        #[serde(default)]
        id: Option<u64>,
    }
    serde_json::from_slice::<Id>(line).ok()?.id
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let mut servers = Vec::new();
    for spec in &args.targets {
        servers.push(Server::spawn(spec, &args).await?);
    }
    let mut rounds: BTreeMap<String, Vec<Round>> = BTreeMap::new();
    for _ in 0..args.rounds {
        for server in &mut servers {
            let r = round(server, &args).await?;
            eprintln!(
                "  {:<12} {:>9.0} req/s  p50 {:>6} µs  p99 {:>6} µs  errors {}",
                server.name, r.rps, r.p50_us, r.p99_us, r.errors
            );
            rounds.entry(server.name.clone()).or_default().push(r);
        }
    }
    let summaries: BTreeMap<String, Summary> = rounds
        .into_iter()
        .map(|(k, v)| (k, stats::summarize(v)))
        .collect();
    Ok(serde_json::json!({
        "kind": "stdio",
        "scenario": args.scenario,
        "inflight": args.inflight,
        "targets": summaries,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_id_is_read_by_bytes_or_parsed() {
        assert_eq!(
            reply_id(br#"{"jsonrpc":"2.0","id":1000042,"result":{}}"#),
            Some(1000042)
        );
        assert_eq!(
            reply_id(br#"{"jsonrpc":"2.0", "id": 7, "result":{}}"#),
            Some(7)
        );
        assert_eq!(
            reply_id(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            None
        );
        assert_eq!(reply_id(b"not json"), None);
    }
}
