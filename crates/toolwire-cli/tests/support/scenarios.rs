//! What several `toolwire serve --store redis://…` instances must do together, written once and
//! run two ways: with the test's own client spreading its calls over the instances
//! (tests/cluster.rs, Redis only: any machine), and through HAProxy
//! (tests/system_parts/balancer.rs, where HAProxy is installed).

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Cluster, Reply, Rotation, Route, call, call_body, client};

/// The longest a whole scenario may take.
pub(crate) const TEST_LIMIT: Duration = Duration::from_secs(180);

/// The quota of `echo` in the rate scenario: calls per second, with a burst of 4 (a burst of
/// one would refuse a call that arrives a hair early after an accepted one that arrived late,
/// so the pacing's jitter, not the quota, would set the share).
pub(crate) const QUOTA_PER_SECOND: u32 = 20;

/// The instances' settings for the rate scenario: X-Forwarded-For names the client (every test
/// client is one caller, 127.0.0.1), and echo's quota is small enough to reach.
pub(crate) const RATE_TOML: &str = r#"
[limits]
forwarded_header = "x-forwarded-for"
trusted_proxies = 1
off = "only echo has a quota in this test"
http_off = "the flood limit has its own tests"

[tools.echo]
rate_limit = { calls = 20, period_seconds = 1, burst = 4 }
"#;

pub(crate) fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// `introduce`'s three rounds on `urls` in turn (one URL per round); the instances that
/// served them (X-Served-By, through a balancer) and the last round's answer (to replay).
pub(crate) async fn introduce_on(http: &reqwest::Client, urls: [&str; 3]) -> (Vec<String>, Value) {
    let mut served = Vec::new();
    let mut extra = json!({});
    let answers = [
        json!({"name": accept(json!({"name": "Ada"}))}),
        json!({"colour": accept(json!({"colour": "teal"}))}),
    ];
    for (round, url) in urls.into_iter().enumerate() {
        let reply = call(
            http,
            url,
            &call_body(9, "introduce", json!({}), extra.clone()),
        )
        .await
        .unwrap();
        served.push(reply.served_by.clone().unwrap_or_default());
        let result = &reply.json["result"];
        if round == 2 {
            assert_eq!(reply.text().unwrap(), "Ada likes teal.", "{reply:?}");
            return (served, extra);
        }
        assert_eq!(result["resultType"], "input_required", "{reply:?}");
        extra = json!({"inputResponses": answers[round]});
        if let Some(state) = result["requestState"].as_str() {
            extra["requestState"] = json!(state);
        }
    }
    unreachable!("three rounds")
}

/// A redeemed `requestState` (the `answer` that completed a call) is refused at `url`.
pub(crate) async fn refused_as_redeemed(http: &reqwest::Client, url: &str, answer: &Value) {
    let replayed = call(
        http,
        url,
        &call_body(4, "introduce", json!({}), answer.clone()),
    )
    .await
    .unwrap();
    assert_eq!(
        replayed.json["error"]["code"], -32602,
        "{url}: a redeemed state is refused: {replayed:?}"
    );
}

/// A note created at `urls[0]`, appended to at the next ones, reads back whole at `read`;
/// the instances that served the reads.
pub(crate) async fn note_across(
    http: &reqwest::Client,
    urls: &[&str],
    read: &[&str],
) -> BTreeSet<String> {
    let created = call(
        http,
        urls[0],
        &call_body(1, "note_create", json!({"text": "one"}), json!({})),
    )
    .await
    .unwrap();
    let note = created.json["result"]["structuredContent"]["note"]
        .as_str()
        .unwrap_or_else(|| panic!("a handle: {created:?}"))
        .to_owned();
    for (i, url) in urls[1..].iter().enumerate() {
        let args = json!({"note": note, "text": format!("line {}", i + 2)});
        let appended = call(http, url, &call_body(2, "note_append", args, json!({})))
            .await
            .unwrap();
        assert_eq!(
            appended.json["result"]["structuredContent"]["lines"],
            i + 2,
            "{url}: {appended:?}"
        );
    }
    let mut whole = vec!["one".to_owned()];
    whole.extend((2..=urls.len()).map(|i| format!("line {i}")));
    let whole = whole.join("\n");
    let body = call_body(3, "note_read", json!({"note": note}), json!({}));
    let mut served = BTreeSet::new();
    for url in read {
        let reply = call(http, url, &body).await.unwrap();
        assert_eq!(reply.text().unwrap(), whole, "{url}");
        served.insert(reply.served_by.unwrap_or_default());
    }
    served
}

/// What one call of a load came to.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The right answer.
    Right,
    /// A note created: its handle and text.
    Noted(String, String),
    /// No answer: an HTTP error status or a connection error.
    Failed(String),
    /// An answer that is an error in the protocol or the tool (JSON-RPC error or isError).
    Refused(String),
    /// An answer that is not the one asked for.
    Wrong(String),
}

/// One call of a load: an echo of a message only this call sends, or (every fifth) a new note.
async fn one_call(http: &reqwest::Client, rotation: &Rotation, client: usize, i: usize) -> Outcome {
    let text = format!("c{client}-{i}");
    let body = if i % 5 == 0 {
        call_body(i as u64, "note_create", json!({"text": text}), json!({}))
    } else {
        call_body(i as u64, "echo", json!({"message": text}), json!({}))
    };
    let reply = match rotation.call(http, &body).await {
        Ok(reply) => reply,
        Err(connection) => return Outcome::Failed(connection),
    };
    judge(&reply, &text, i % 5 == 0)
}

fn judge(reply: &Reply, text: &str, note: bool) -> Outcome {
    let result = &reply.json["result"];
    if reply.status != 200 && !reply.json["error"].is_object() {
        return Outcome::Failed(format!("HTTP {}", reply.status));
    }
    if reply.json["error"].is_object() || result["isError"] == true {
        return Outcome::Refused(reply.json.to_string());
    }
    match (note, reply.text()) {
        (false, Ok(echoed)) if echoed == text => Outcome::Right,
        (true, Ok(_)) => match result["structuredContent"]["note"].as_str() {
            Some(handle) => Outcome::Noted(handle.to_owned(), text.to_owned()),
            None => Outcome::Wrong(reply.json.to_string()),
        },
        _ => Outcome::Wrong(reply.json.to_string()),
    }
}

/// A load on `route` from `clients` concurrent clients, each on its own connections (and its
/// own rotation over the instances), of `calls` calls in all, or until `stop` once `calls` is
/// reached; `done` counts finished calls.
pub(crate) async fn load(
    route: &Route,
    clients: usize,
    calls: usize,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> Vec<(Instant, Outcome)> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (rotation, done, stop) = (Rotation::new(route, c), done.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let http = client();
            let mut outcomes = Vec::new();
            for i in 0.. {
                let n = done.load(Ordering::SeqCst);
                if n >= calls && stop.load(Ordering::SeqCst) {
                    break;
                }
                let outcome = one_call(&http, &rotation, c, i).await;
                outcomes.push((Instant::now(), outcome));
                done.fetch_add(1, Ordering::SeqCst);
            }
            outcomes
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// Waits (bounded) until `done` reaches `n`.
async fn reached(done: &AtomicUsize, n: usize) {
    let limit = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::SeqCst) < n {
        assert!(Instant::now() < limit, "the load stalled at {done:?} calls");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every acknowledged note reads back whole through `url`.
async fn notes_read_back(http: &reqwest::Client, url: &str, notes: &[(String, String)]) {
    for (handle, text) in notes {
        let reply = call(
            http,
            url,
            &call_body(1, "note_read", json!({"note": handle}), json!({})),
        )
        .await
        .unwrap();
        assert_eq!(
            reply.text().as_deref(),
            Ok(text.as_str()),
            "{url}: note {handle}"
        );
    }
}

fn noted(outcomes: &[(Instant, Outcome)]) -> Vec<(String, String)> {
    outcomes
        .iter()
        .filter_map(|(_, o)| match o {
            Outcome::Noted(handle, text) => Some((handle.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

/// `kill -9` of instance 2 of 3 during 2,000 calls from 8 clients on `cluster.route()`: only
/// calls in flight on it fail (at most one a client), each with an HTTP error or a connection
/// error, never a wrong answer; every acknowledged note reads back from the survivors.
pub(crate) async fn kill_9_under_load(cluster: &Cluster) {
    const CLIENTS: usize = 8;
    const CALLS: usize = 2000;
    let (done, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(true)),
    );
    let running = tokio::spawn({
        let (route, done, stop) = (cluster.route(), done.clone(), stop.clone());
        async move { load(&route, CLIENTS, CALLS, done, stop).await }
    });
    reached(&done, CALLS / 3).await;
    let victim = cluster.instances[1].pid;
    let status = std::process::Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let outcomes = running.await.unwrap();
    let wrong: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Wrong(_) | Outcome::Refused(_)))
        .collect();
    assert!(wrong.is_empty(), "wrong answers or refusals: {wrong:?}");
    let failed: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
        .collect();
    assert!(
        failed.len() <= CLIENTS,
        "only calls in flight on the killed instance fail (at most one a client): {failed:?}"
    );
    assert!(outcomes.len() >= CALLS, "{} calls", outcomes.len());
    let notes = noted(&outcomes);
    assert!(
        notes.len() >= CALLS / 5 - CLIENTS,
        "{} notes acknowledged",
        notes.len()
    );
    let http = client();
    if let Route::Front(front) = cluster.route() {
        notes_read_back(&http, &front, &notes).await;
    }
    // Every note from the first survivor, the first fifty from the other.
    for (i, instance) in cluster.instances.iter().enumerate() {
        if i != 1 {
            assert!(Cluster::alive(instance.pid), "instance {} runs", i + 1);
            let some = if i == 0 {
                notes.len()
            } else {
                notes.len().min(50)
            };
            notes_read_back(&http, &instance.url, &notes[..some]).await;
        }
    }
    eprintln!(
        "kill -9 under load: {} calls, {} failed (connection or HTTP errors of calls in flight)",
        outcomes.len(),
        failed.len()
    );
}

/// Redis stopped for 5 s during a load from 4 clients on `cluster.route()`, then started again
/// (with its append-only file, as a deployment keeps it): plain calls go on being answered,
/// calls that need the store are refused with an error saying to try again (never a wrong
/// answer), no instance exits, and the store serves again without restarting anything.
pub(crate) async fn redis_away_under_load(cluster: &Cluster) {
    const CLIENTS: usize = 4;
    let http = client();
    let first = Rotation::new(&cluster.route(), 0);
    // A round's sealed state taken before Redis goes away, redeemed while it is away.
    let named = json!({"inputResponses": {"name": accept(json!({"name": "Ada"}))}});
    let asked = first
        .call(&http, &call_body(1, "introduce", json!({}), named))
        .await
        .unwrap();
    let state = asked.json["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let (done, stop) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let running = tokio::spawn({
        let (route, done, stop) = (cluster.route(), done.clone(), stop.clone());
        async move { load(&route, CLIENTS, 400, done, stop).await }
    });
    reached(&done, 200).await;
    let away = Instant::now();
    cluster.redis("stop-redis");
    let answer = json!({
        "inputResponses": {"colour": accept(json!({"colour": "teal"}))},
        "requestState": state,
    });
    let retry = first
        .call(&http, &call_body(2, "introduce", json!({}), answer))
        .await
        .unwrap();
    assert_eq!(retry.json["error"]["code"], -32603, "{retry:?}");
    let during = done.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5).saturating_sub(away.elapsed())).await;
    let served_while_away = done.load(Ordering::SeqCst) - during;
    cluster.redis("start-redis");
    let back = Instant::now();
    // The store serves again without a restart: a note is created within 10 s.
    let note = loop {
        let reply = first
            .call(
                &http,
                &call_body(3, "note_create", json!({"text": "back"}), json!({})),
            )
            .await
            .unwrap();
        if let Some(note) = reply.json["result"]["structuredContent"]["note"].as_str() {
            break note.to_owned();
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "no note 10 s after Redis is back: {reply:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let after = done.load(Ordering::SeqCst);
    reached(&done, after + 200).await;
    stop.store(true, Ordering::SeqCst);
    let outcomes = running.await.unwrap();
    check_outage(&outcomes, away, back, served_while_away);
    let mut notes = noted(&outcomes);
    notes.push((note, "back".to_owned()));
    notes_read_back(&http, &first.url(), &notes).await;
    for (i, instance) in cluster.instances.iter().enumerate() {
        assert!(
            Cluster::alive(instance.pid),
            "instance {} runs: {}",
            i + 1,
            cluster.log(&format!("instance-{}.log", i + 1))
        );
    }
}

/// While Redis was away (`away`..`back`, and the reconnection after): calls answered, those
/// needing the store refused saying to try again; nothing failed or answered wrongly at any
/// time.
fn check_outage(
    outcomes: &[(Instant, Outcome)],
    away: Instant,
    back: Instant,
    served_while_away: usize,
) {
    let mut refused = 0;
    for (at, outcome) in outcomes {
        match outcome {
            Outcome::Right | Outcome::Noted(..) => {}
            Outcome::Refused(why) => {
                assert!(*at >= away, "refused before Redis went away: {why}");
                let reconnected = back + Duration::from_secs(10);
                assert!(
                    *at <= reconnected,
                    "refused 10 s after Redis was back: {why}"
                );
                assert!(why.contains("try again") || why.contains("-32603"), "{why}");
                refused += 1;
                assert!(
                    why.contains("note handles"),
                    "only calls needing the store are refused: {why}"
                );
            }
            Outcome::Failed(why) | Outcome::Wrong(why) => panic!("{why}"),
        }
    }
    assert!(
        served_while_away > 0,
        "calls were answered while Redis was away"
    );
    eprintln!("Redis away 5 s: {served_while_away} calls answered meanwhile, {refused} refused");
}

/// One caller at twice its quota on `cluster.route()` (three instances of [`RATE_TOML`] on one
/// Redis): half of its calls are refused (50 % ± 5 %), as with one instance, not none of them
/// (three quotas).
pub(crate) async fn twice_the_quota(cluster: &Cluster) {
    let http = client();
    let rotation = Rotation::new(&cluster.route(), 0);
    // Ten seconds at twice the quota: 200 of 400 fit, and the burst 4 more.
    let calls = 20 * QUOTA_PER_SECOND;
    let every = Duration::from_secs(1) / (2 * QUOTA_PER_SECOND);
    let started = tokio::time::Instant::now();
    let (mut answered, mut refused) = (0u32, 0u32);
    for i in 0..calls {
        tokio::time::sleep_until(started + every * i).await;
        let body = call_body(u64::from(i), "echo", json!({"message": "hi"}), json!({}));
        let reply = rotation.call(&http, &body).await.unwrap();
        let result = &reply.json["result"];
        if reply.text().is_ok_and(|t| t == "hi") {
            answered += 1;
        } else if result["isError"] == true
            && result["_meta"].get("dev.toolwire/rateLimited").is_some()
        {
            refused += 1;
        } else {
            panic!("neither an answer nor a quota refusal: {reply:?}");
        }
    }
    let share = f64::from(refused) / f64::from(calls);
    assert!(
        (0.45..=0.55).contains(&share),
        "{refused} of {calls} refused ({:.1} %), {answered} answered",
        share * 100.0
    );
}

/// A `subscriptions/listen` stream: its serving instance and what arrives on it.
pub(crate) struct Listener {
    pub(crate) served_by: Option<String>,
    response: reqwest::Response,
    buffered: String,
}

impl Listener {
    /// Opens a listen stream for tool-list changes at `url` (an instance or the front), and
    /// waits for its acknowledgement.
    pub(crate) async fn open(http: &reqwest::Client, url: &str) -> Listener {
        let body = json!({
            "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {
                "notifications": {"toolsListChanged": true},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}
                }
            }
        });
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .header("x-forwarded-for", "127.0.0.1")
            .timeout(Duration::from_secs(120))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "listen at {url}");
        let served_by = response
            .headers()
            .get("x-served-by")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut listener = Listener {
            served_by,
            response,
            buffered: String::new(),
        };
        let first = listener.next(Duration::from_secs(10)).await;
        assert_eq!(
            first.as_ref().map(|m| m["method"].clone()),
            Some(json!("notifications/subscriptions/acknowledged")),
            "{first:?}"
        );
        listener
    }

    /// The next message on the stream, or `None` if none came within `wait`.
    async fn next(&mut self, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(end) = self.buffered.find("\n\n") {
                let event: String = self.buffered.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) {
                    return Some(serde_json::from_str(data.trim()).unwrap());
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffered.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None)) => panic!("the listen stream ended"),
                Ok(Err(e)) => panic!("the listen stream failed: {e}"),
                Err(_) => return None,
            }
        }
    }

    /// Expects exactly one `tools/list_changed` within 10 s, and no second one within 1 s.
    pub(crate) async fn hears_one_change(&mut self) {
        let change = self.next(Duration::from_secs(10)).await;
        assert_eq!(
            change.as_ref().map(|m| m["method"].clone()),
            Some(json!("notifications/tools/list_changed")),
            "{change:?}"
        );
        let again = self.next(Duration::from_secs(1)).await;
        assert!(again.is_none(), "the change arrived twice: {again:?}");
    }
}
