//! The latency of calls that touch server state, one at a time on one connection: a
//! multi-round-trip call (the retry opens a sealed, single-use `requestState`), a task's
//! creation and one `tasks/get` of it, and a handle's compare-and-swap update. Run against a
//! server in memory and one whose state is in Redis, it shows what the shared store adds per
//! operation. The server must offer `toolwire-bench-server --state-tools`.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::http::{Endpoint, connect, endpoint, exchange, post};
use crate::http_load::Target;
use crate::protocol;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// NAME=URL of a server with the state tools; repeat for several.
    #[arg(long = "target", required = true)]
    targets: Vec<Target>,
    /// Operations of each kind per target.
    #[arg(long, default_value_t = 2000)]
    count: u32,
}

/// The operations measured, in the order they run.
const OPERATIONS: [&str; 4] = ["mrtr round", "task create", "task get", "handle update"];

type Sender = hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>;

/// One target's connection and request ids.
struct Session {
    sender: Sender,
    endpoint: Endpoint,
    id: u64,
}

impl Session {
    /// Sends `method` with `params` (and `_meta` declaring `capabilities`); the reply's result,
    /// or an error naming what came back instead.
    async fn request(
        &mut self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
        capabilities: Value,
    ) -> anyhow::Result<Value> {
        self.id += 1;
        let mut meta = protocol::meta();
        meta["io.modelcontextprotocol/clientCapabilities"] = capabilities;
        params["_meta"] = meta;
        let body = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        let req = post(&self.endpoint, method, name, body.to_string());
        let (status, reply) = exchange(&mut self.sender, req).await?;
        match reply {
            Some(mut message) if status == 200 && message.get("result").is_some() => {
                Ok(message["result"].take())
            }
            other => bail!("{method} {name:?}: HTTP {status}, {other:?}"),
        }
    }

    async fn call(
        &mut self,
        name: &str,
        extra: Value,
        capabilities: Value,
    ) -> anyhow::Result<Value> {
        let mut params = json!({"name": name, "arguments": {}});
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        self.request("tools/call", Some(name), params, capabilities)
            .await
    }
}

/// The text of a complete result, or an error.
fn text(result: &Value) -> anyhow::Result<&str> {
    if result["resultType"] != "complete" || result["isError"] == true {
        bail!("not a complete result: {result}");
    }
    result["content"][0]["text"].as_str().context("no text")
}

/// One multi-round-trip call: the first round asks, the retry answers with the sealed state.
async fn mrtr_round(s: &mut Session) -> anyhow::Result<()> {
    let forms = json!({"elicitation": {"form": {}}});
    let first = s.call("ask", json!({}), forms.clone()).await?;
    let state = first["requestState"]
        .as_str()
        .with_context(|| format!("no requestState: {first}"))?
        .to_owned();
    let answer = json!({
        "inputResponses": {"answer": {"action": "accept", "content": {"answer": "yes"}}},
        "requestState": state,
    });
    let done = s.call("ask", answer, forms).await?;
    if text(&done)? != "yes" {
        bail!("the retry answered {done}");
    }
    Ok(())
}

/// Creates a task; its id.
async fn task_create(s: &mut Session) -> anyhow::Result<String> {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let created = s.call("wait", json!({}), tasks).await?;
    created["taskId"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("not a task: {created}"))
}

async fn task_get(s: &mut Session, task_id: &str) -> anyhow::Result<()> {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let got = s
        .request(
            "tasks/get",
            Some(task_id),
            json!({"taskId": task_id}),
            tasks,
        )
        .await?;
    if got["taskId"] != task_id {
        bail!("tasks/get answered {got}");
    }
    Ok(())
}

async fn handle_update(s: &mut Session, counter: &str, expect: u32) -> anyhow::Result<()> {
    let bumped = s
        .call(
            "counter_bump",
            json!({"arguments": {"counter": counter}}),
            json!({}),
        )
        .await?;
    if text(&bumped)? != expect.to_string() {
        bail!("counter_bump answered {bumped}, expected {expect}");
    }
    Ok(())
}

/// Each operation's latencies against one target, in µs.
async fn measure(target: &Target, count: u32) -> anyhow::Result<BTreeMap<&'static str, Value>> {
    let endpoint = endpoint(&target.url)?;
    let sender = connect(&endpoint.addr).await?;
    let mut s = Session {
        sender,
        endpoint,
        id: 0,
    };
    let mut hists: Vec<_> = OPERATIONS
        .iter()
        .map(|_| crate::stats::histogram())
        .collect();
    let created = s.call("counter_new", json!({}), json!({})).await?;
    let counter = text(&created)?.to_owned();
    for i in 1..=count {
        let started = Instant::now();
        mrtr_round(&mut s).await?;
        hists[0].record(started.elapsed().as_micros() as u64).ok();
        let started = Instant::now();
        let task_id = task_create(&mut s).await?;
        hists[1].record(started.elapsed().as_micros() as u64).ok();
        let started = Instant::now();
        task_get(&mut s, &task_id).await?;
        hists[2].record(started.elapsed().as_micros() as u64).ok();
        let started = Instant::now();
        handle_update(&mut s, &counter, i).await?;
        hists[3].record(started.elapsed().as_micros() as u64).ok();
    }
    Ok(OPERATIONS
        .iter()
        .zip(hists)
        .map(|(op, h)| {
            let row = json!({"count": h.len(), "p50_us": h.value_at_quantile(0.5), "p99_us": h.value_at_quantile(0.99)});
            (*op, row)
        })
        .collect())
}

pub(crate) async fn run(args: Args) -> anyhow::Result<Value> {
    let mut targets = BTreeMap::new();
    for target in &args.targets {
        let rows = measure(target, args.count)
            .await
            .with_context(|| format!("target {}", target.name))?;
        for (op, row) in &rows {
            eprintln!(
                "  {:<12} {:<14} p50 {:>6} µs  p99 {:>6} µs",
                target.name, op, row["p50_us"], row["p99_us"]
            );
        }
        targets.insert(target.name.clone(), rows);
    }
    Ok(json!({"kind": "state", "operations": OPERATIONS, "targets": targets}))
}
