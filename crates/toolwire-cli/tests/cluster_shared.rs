//! What several `toolwire serve --store redis://…` instances behind HAProxy share beyond
//! records: a change made through one instance reaches a listener held by another, once; and a
//! caller's quota is one quota across every instance, not one per instance.
//!
//! Needs Debian's redis-server and haproxy, like tests/cluster.rs (same harness, same skip
//! variable); each test starts its own cluster, one at a time.

// The harness is shared with tests/cluster.rs, which uses the parts these tests do not.
#[path = "support/cluster.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Cluster, call, call_body, client};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest a whole test may take.
const TEST_LIMIT: Duration = Duration::from_secs(180);

/// The quota of `echo` in the rate test: calls per second, with a burst of 4 (a burst of one
/// would refuse a call that arrives a hair early after an accepted one that arrived late, so
/// the pacing's jitter, not the quota, would set the share).
const QUOTA_PER_SECOND: u32 = 20;

/// The instances' settings for the rate test: HAProxy's X-Forwarded-For names the client (every
/// test client is one caller, 127.0.0.1), and echo's quota is small enough to reach.
const RATE_TOML: &str = r#"
[limits]
forwarded_header = "x-forwarded-for"
trusted_proxies = 1
off = "only echo has a quota in this test"
http_off = "the flood limit has its own tests"

[tools.echo]
rate_limit = { calls = 20, period_seconds = 1, burst = 4 }
"#;

/// A `subscriptions/listen` stream: its serving instance and what arrives on it.
struct Listener {
    served_by: Option<String>,
    response: reqwest::Response,
    buffered: String,
}

impl Listener {
    /// Opens a listen stream for tool-list changes at `url` (an instance or the front), and
    /// waits for its acknowledgement.
    async fn open(http: &reqwest::Client, url: &str) -> Listener {
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
    async fn hears_one_change(&mut self) {
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

/// A listener held by one instance hears the change made through another: instance 2's
/// listener and instance 1's `toggle_shout`, directly; then a listener opened through the
/// balancer and `toggle_shout` calls through it until one lands on another instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_on_one_instance_hears_a_change_made_through_another_once() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(3, false);
    let http = client();
    let run = async {
        let toggle = call_body(1, "toggle_shout", json!({}), json!({}));
        let (one, two) = (&cluster.instances[0].url, &cluster.instances[1].url);
        let mut listener = Listener::open(&http, two).await;
        let toggled = call(&http, one, &toggle).await.unwrap();
        toggled.text().unwrap();
        listener.hears_one_change().await;

        let mut listener = Listener::open(&http, &cluster.front).await;
        let holder = listener
            .served_by
            .clone()
            .expect("X-Served-By on the stream");
        let mut elsewhere = 0;
        for _ in 0..6 {
            let toggled = call(&http, &cluster.front, &toggle).await.unwrap();
            toggled.text().unwrap();
            let here = toggled.served_by.clone().expect("X-Served-By");
            listener.hears_one_change().await;
            elsewhere += usize::from(here != holder);
        }
        assert!(
            elsewhere >= 2,
            "round-robin sent changes to other instances"
        );
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
}

/// One caller at twice its quota, round-robin over three instances on one Redis: half of its
/// calls are refused (50 % ± 5 %), as with one instance, not none of them (three quotas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_at_twice_its_quota_across_three_instances_is_refused_half_the_time() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up_with(3, false, RATE_TOML);
    let http = client();
    let run = async {
        // Ten seconds at twice the quota: 200 of 400 fit, and the burst 4 more.
        let calls = 20 * QUOTA_PER_SECOND;
        let every = Duration::from_secs(1) / (2 * QUOTA_PER_SECOND);
        let started = tokio::time::Instant::now();
        let (mut answered, mut refused) = (0u32, 0u32);
        for i in 0..calls {
            tokio::time::sleep_until(started + every * i).await;
            let body = call_body(u64::from(i), "echo", json!({"message": "hi"}), json!({}));
            let reply = call(&http, &cluster.front, &body).await.unwrap();
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
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
}
