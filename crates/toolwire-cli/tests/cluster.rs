//! Several `toolwire serve --store redis://…` instances behind HAProxy (round-robin, no
//! stickiness), end to end with real redis-server, haproxy and toolwire binaries started by
//! scripts/cluster: any instance answers any request, and losing an instance or Redis for a
//! while costs what is documented and nothing more.
//!
//! Needs Debian's redis-server and haproxy; the tests fail saying what to install when they are
//! missing, unless TOOLWIRE_SKIP_CLUSTER_TESTS=1. The Python SDK test needs mcp 1.x from
//! `scripts/legacy-clients install`. They run one at a time (each starts its own cluster).

#[path = "support/cluster.rs"]
mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Cluster, Reply, call, call_body, client};

/// One cluster at a time: the load tests would otherwise share two cores with each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest a whole test may take.
const TEST_LIMIT: Duration = Duration::from_secs(180);

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// `introduce`'s rounds, each on another instance, complete; its redeemed state is refused by
/// every instance, through the balancer too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introduce_completes_across_instances_and_a_redeemed_state_is_refused_by_all() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(3, false);
    let http = client();
    let run = async {
        let [a, b, c] = [0, 1, 2].map(|i| cluster.instances[i].url.clone());
        let first = call(&http, &a, &call_body(1, "introduce", json!({}), json!({})))
            .await
            .unwrap();
        assert_eq!(
            first.json["result"]["resultType"], "input_required",
            "{first:?}"
        );
        let named = json!({"inputResponses": {"name": accept(json!({"name": "Ada"}))}});
        let second = call(&http, &b, &call_body(2, "introduce", json!({}), named))
            .await
            .unwrap();
        let state = second.json["result"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("a sealed state: {second:?}"))
            .to_owned();
        let answer = json!({
            "inputResponses": {"colour": accept(json!({"colour": "teal"}))},
            "requestState": state,
        });
        let third = call(
            &http,
            &c,
            &call_body(3, "introduce", json!({}), answer.clone()),
        )
        .await
        .unwrap();
        assert_eq!(
            third.text().unwrap(),
            "Ada likes teal.",
            "sealed by b, opened by c"
        );
        for url in [&a, &b, &c, &cluster.front] {
            let replayed = call(
                &http,
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
        // Through the balancer alone: the rounds land where round-robin sends them.
        let served = introduce_through(&http, &cluster.front).await;
        assert!(
            served.iter().collect::<BTreeSet<_>>().len() > 1,
            "round-robin spread the rounds: {served:?}"
        );
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
}

/// `introduce`'s three rounds through `front`; the instances that served them.
async fn introduce_through(http: &reqwest::Client, front: &str) -> Vec<String> {
    let mut served = Vec::new();
    let mut extra = json!({});
    let mut answers = [
        json!({"name": accept(json!({"name": "Grace"}))}),
        json!({"colour": accept(json!({"colour": "red"}))}),
    ]
    .into_iter();
    loop {
        let reply = call(http, front, &call_body(9, "introduce", json!({}), extra))
            .await
            .unwrap();
        served.push(reply.served_by.clone().unwrap_or_default());
        let result = &reply.json["result"];
        if result["resultType"] == "complete" {
            assert_eq!(reply.text().unwrap(), "Grace likes red.", "{reply:?}");
            return served;
        }
        let next = answers
            .next()
            .unwrap_or_else(|| panic!("a third question: {reply:?}"));
        extra = json!({"inputResponses": next});
        if let Some(state) = result["requestState"].as_str() {
            extra["requestState"] = json!(state);
        }
    }
}

/// A note written through the balancer reads back through it and from each instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_written_through_the_balancer_reads_back_from_every_instance() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(3, false);
    let http = client();
    let run = async {
        let front = &cluster.front;
        let created = call(
            &http,
            front,
            &call_body(1, "note_create", json!({"text": "one"}), json!({})),
        )
        .await
        .unwrap();
        let note = created.json["result"]["structuredContent"]["note"]
            .as_str()
            .unwrap_or_else(|| panic!("a handle: {created:?}"))
            .to_owned();
        for (i, line) in ["two", "three"].iter().enumerate() {
            let args = json!({"note": note, "text": line});
            let appended = call(&http, front, &call_body(2, "note_append", args, json!({})))
                .await
                .unwrap();
            assert_eq!(
                appended.json["result"]["structuredContent"]["lines"],
                i + 2,
                "{appended:?}"
            );
        }
        let read = call_body(3, "note_read", json!({"note": note}), json!({}));
        let mut served = BTreeSet::new();
        for _ in 0..3 {
            let reply = call(&http, front, &read).await.unwrap();
            assert_eq!(reply.text().unwrap(), "one\ntwo\nthree");
            served.insert(reply.served_by.unwrap_or_default());
        }
        assert_eq!(served.len(), 3, "each instance read it once: {served:?}");
        for instance in &cluster.instances {
            let reply = call(&http, &instance.url, &read).await.unwrap();
            assert_eq!(reply.text().unwrap(), "one\ntwo\nthree", "{}", instance.url);
        }
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
}

/// The Python SDK mcp 1.x, a legacy (2025-11-25) client with a session, through the balancer
/// to two instances: it initializes, lists the tools and calls echo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_1x_lists_and_calls_tools_through_the_balancer() {
    python_client_through_the_balancer(&["PASS initialize", "PASS tools/list", "PASS echo"]).await;
}

/// The same client answers greet's elicitation through the balancer: the server's
/// `elicitation/create` goes out on the call's stream from one instance, and the client's answer
/// is a new POST that round-robin may send to the other, which relays it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_1x_answers_an_elicitation_through_the_balancer() {
    python_client_through_the_balancer(&["PASS greet"]).await;
}

/// Runs interop/python/legacy_client.py (up to greet) against a two-instance cluster and looks
/// for `steps` in what it says.
async fn python_client_through_the_balancer(steps: &[&str]) {
    if !support::available() {
        return;
    }
    let home = std::env::var_os("TOOLWIRE_INTEROP_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| std::path::Path::new(&h).join(".cache/toolwire-interop"))
        })
        .expect("HOME or TOOLWIRE_INTEROP_HOME");
    let python = home.join("legacy/bin/python");
    assert!(
        python.exists(),
        "no Python with mcp 1.x at {}: run scripts/legacy-clients install",
        python.display()
    );
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(2, false);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../interop/python/legacy_client.py"
    );
    let run = tokio::process::Command::new(&python)
        .args([script, "--http", &cluster.front, "--no-list-changed"])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the client is done within 90 s")
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    for step in steps {
        assert!(
            said.contains(step),
            "{step}:\n{said}\n{}\ninstance 1:\n{}\ninstance 2:\n{}",
            String::from_utf8_lossy(&output.stderr),
            cluster.log("instance-1.log"),
            cluster.log("instance-2.log")
        );
    }
}

/// What one call of a load came to.
#[derive(Debug)]
enum Outcome {
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
async fn one_call(http: &reqwest::Client, front: &str, client: usize, i: usize) -> Outcome {
    let text = format!("c{client}-{i}");
    let body = if i % 5 == 0 {
        call_body(i as u64, "note_create", json!({"text": text}), json!({}))
    } else {
        call_body(i as u64, "echo", json!({"message": text}), json!({}))
    };
    let reply = match call(http, front, &body).await {
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

/// A load through `front` from `clients` concurrent clients, each on its own connections, of
/// `calls` calls in all, or until `stop` once `calls` is reached; `done` counts finished calls.
async fn load(
    front: &str,
    clients: usize,
    calls: usize,
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> Vec<(Instant, Outcome)> {
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (front, done, stop) = (front.to_owned(), done.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let http = client();
            let mut outcomes = Vec::new();
            for i in 0.. {
                let n = done.load(Ordering::SeqCst);
                if n >= calls && stop.load(Ordering::SeqCst) {
                    break;
                }
                let outcome = one_call(&http, &front, c, i).await;
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

/// `kill -9` of one instance during 2,000 calls from 8 clients: only calls in flight on it
/// fail (at most one a client), each with an HTTP error or a connection error, never a wrong
/// answer; every acknowledged note reads back from the survivors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_an_instance_under_load_fails_only_its_calls_in_flight_and_loses_no_note() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(3, false);
    const CLIENTS: usize = 8;
    const CALLS: usize = 2000;
    let run = async {
        let (done, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(true)),
        );
        let running = tokio::spawn({
            let (front, done, stop) = (cluster.front.clone(), done.clone(), stop.clone());
            async move { load(&front, CLIENTS, CALLS, done, stop).await }
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
        notes_read_back(&http, &cluster.front, &notes).await;
        for (i, instance) in cluster.instances.iter().enumerate() {
            if i != 1 {
                assert!(Cluster::alive(instance.pid), "instance {} runs", i + 1);
                notes_read_back(&http, &instance.url, &notes[..notes.len().min(50)]).await;
            }
        }
        eprintln!(
            "kill -9 under load: {} calls, {} failed: {failed:?}",
            outcomes.len(),
            failed.len()
        );
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
}

/// Redis stopped for 5 s during a load from 4 clients, then started again (with its
/// append-only file, as a deployment keeps it): plain calls go on being answered, calls that
/// need the store are refused with an error saying to try again (never a wrong answer), no
/// instance exits, and the store serves again without restarting anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_away_for_5_seconds_under_load_refuses_what_needs_it_and_comes_back() {
    if !support::available() {
        return;
    }
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up(3, true);
    const CLIENTS: usize = 4;
    let run = async {
        let http = client();
        // A round's sealed state taken before Redis goes away, redeemed while it is away.
        let named = json!({"inputResponses": {"name": accept(json!({"name": "Ada"}))}});
        let asked = call(
            &http,
            &cluster.front,
            &call_body(1, "introduce", json!({}), named),
        )
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
            let (front, done, stop) = (cluster.front.clone(), done.clone(), stop.clone());
            async move { load(&front, CLIENTS, 400, done, stop).await }
        });
        reached(&done, 200).await;
        let away = Instant::now();
        cluster.redis("stop-redis");
        let answer = json!({
            "inputResponses": {"colour": accept(json!({"colour": "teal"}))},
            "requestState": state,
        });
        let retry = call(
            &http,
            &cluster.front,
            &call_body(2, "introduce", json!({}), answer),
        )
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
            let reply = call(
                &http,
                &cluster.front,
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
        notes_read_back(&http, &cluster.front, &notes).await;
        for (i, instance) in cluster.instances.iter().enumerate() {
            assert!(
                Cluster::alive(instance.pid),
                "instance {} runs: {}",
                i + 1,
                cluster.log(&format!("instance-{}.log", i + 1))
            );
        }
    };
    tokio::time::timeout(TEST_LIMIT, run)
        .await
        .expect("done in time");
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
