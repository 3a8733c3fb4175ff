//! Several `toolwire serve --store redis://…` instances behind a real HAProxy (round-robin, no
//! stickiness, a health check on each instance), started by scripts/cluster: the scenarios of
//! tests/cluster.rs with the balancer choosing the instance, and a legacy client with a session
//! (the Python SDK mcp 1.x) across instances.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use toolwire_testkit::RegistryPart;

use crate::scenarios::{self, Listener, TEST_LIMIT};
use crate::support::{Cluster, call, call_body, client};

/// One cluster at a time: the load tests would otherwise share two cores with each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `scenario` on a cluster of its own, one at a time, within [`TEST_LIMIT`].
fn on_cluster<F: Future<Output = ()>>(
    cluster: impl FnOnce() -> Cluster,
    scenario: impl FnOnce(Cluster) -> F,
) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = cluster();
    crate::block_on(async move {
        tokio::time::timeout(TEST_LIMIT, scenario(cluster))
            .await
            .expect("done in time");
    });
}

/// `introduce`'s rounds through the balancer land on several instances and complete; its
/// redeemed state is refused through the balancer and by every instance.
pub(crate) fn introduce_completes_through_the_balancer_and_a_redeemed_state_is_refused_by_all() {
    on_cluster(
        || Cluster::balanced(3, false),
        |cluster| async move {
            let http = client();
            let front = cluster.front.as_str();
            let (served, answer) = scenarios::introduce_on(&http, [front; 3]).await;
            assert!(
                served.iter().collect::<BTreeSet<_>>().len() > 1,
                "round-robin spread the rounds: {served:?}"
            );
            scenarios::refused_as_redeemed(&http, front, &answer).await;
            for instance in &cluster.instances {
                scenarios::refused_as_redeemed(&http, &instance.url, &answer).await;
            }
        },
    );
}

/// A note written through the balancer reads back through it (each instance reading once)
/// and from each instance directly.
pub(crate) fn a_note_written_through_the_balancer_reads_back_from_every_instance() {
    on_cluster(
        || Cluster::balanced(3, false),
        |cluster| async move {
            let http = client();
            let front = cluster.front.as_str();
            let served = scenarios::note_across(&http, &[front; 3], &[front; 3]).await;
            assert_eq!(served.len(), 3, "each instance read it once: {served:?}");
            let urls: Vec<&str> = cluster.instances.iter().map(|i| i.url.as_str()).collect();
            scenarios::note_across(&http, &[front], &urls).await;
        },
    );
}

/// `kill -9` of an instance behind the balancer during 2,000 calls from 8 clients.
pub(crate) fn kill_9_of_an_instance_behind_the_balancer_fails_only_its_calls_in_flight() {
    on_cluster(
        || Cluster::balanced(3, false),
        |cluster| async move { scenarios::kill_9_under_load(&cluster).await },
    );
}

/// Redis away for 5 s under load through the balancer: the balancer keeps every instance (their
/// health check needs no store), and the instances refuse only what needs it.
pub(crate) fn redis_away_behind_the_balancer_refuses_what_needs_it_and_comes_back() {
    on_cluster(
        || Cluster::balanced(3, true),
        |cluster| async move { scenarios::redis_away_under_load(&cluster).await },
    );
}

/// A listener opened through the balancer hears each change once, whichever instance the
/// change's call landed on.
pub(crate) fn a_listener_through_the_balancer_hears_changes_made_on_other_instances_once() {
    on_cluster(
        || Cluster::balanced(3, false),
        |cluster| async move {
            let http = client();
            let toggle = call_body(1, "toggle_shout", json!({}), json!({}));
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
        },
    );
}

/// One caller at twice its quota through the balancer: half of its calls are refused.
pub(crate) fn a_caller_at_twice_its_quota_through_the_balancer_is_refused_half_the_time() {
    on_cluster(
        || Cluster::up_with(3, false, scenarios::RATE_TOML, true),
        |cluster| async move { scenarios::twice_the_quota(&cluster).await },
    );
}

/// The Python SDK mcp 1.x, a legacy (2025-11-25) client with a session, through the balancer
/// to two instances: it initializes, lists the tools and calls echo.
pub(crate) fn the_python_sdk_1x_lists_and_calls_tools_through_the_balancer() {
    python_client_through_the_balancer(&["PASS initialize", "PASS tools/list", "PASS echo"]);
}

/// The same client answers greet's elicitation through the balancer: the server's
/// `elicitation/create` goes out on the call's stream from one instance, and the client's
/// answer is a new POST that round-robin may send to the other, which relays it.
pub(crate) fn the_python_sdk_1x_answers_an_elicitation_through_the_balancer() {
    python_client_through_the_balancer(&["PASS greet"]);
}

/// Runs interop/python/legacy_client.py (up to greet) against a two-instance cluster and looks
/// for `steps` in what it says. The Python SDK installs itself on first use (scripts/parts).
fn python_client_through_the_balancer(steps: &'static [&'static str]) {
    let python = RegistryPart::Mcp1Python.path();
    on_cluster(
        || Cluster::balanced(2, false),
        |cluster| async move {
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
        },
    );
}
