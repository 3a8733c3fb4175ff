//! Pins in a real Redis: the contract every pin store keeps, and a store that goes away or
//! hangs is an error naming it within the store's timeout, never a hang; the next call after
//! it is back connects again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toolwire_host::{PinStore, Pins, RedisPins, pins::contract};
use toolwire_testkit::RedisServer;

fn pins(redis: &RedisServer, prefix: &str) -> RedisPins {
    let client = redis::Client::open(redis.url.as_str()).expect("a Redis URL");
    RedisPins::new(client, prefix, Duration::from_millis(300))
}

#[test]
fn redis_pins_keep_the_contract() {
    let redis = RedisServer::start();
    // A new handle (a new connection) each time, as another process would have.
    contract::all(&|| Arc::new(pins(&redis, "contract:")) as Arc<dyn PinStore>);
    // Another prefix is another service's pins.
    assert!(pins(&redis, "other:").load("fs").unwrap().is_empty());
    assert!(!pins(&redis, "contract:").load("fs").unwrap().is_empty());
}

#[test]
fn a_store_that_goes_away_or_hangs_is_an_error_then_serves_again() {
    let mut redis = RedisServer::start();
    let store = pins(&redis, "away:");
    let listed = [("t".to_owned(), serde_json::json!({"name": "t"}))]
        .into_iter()
        .collect();
    Pins::new(Arc::new(pins(&redis, "away:")))
        .check("fs", &listed)
        .unwrap();

    redis.pause();
    let started = Instant::now();
    let hung = store.load("fs").unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let said = hung.to_string();
    assert!(
        said.contains("\"fs\"") && said.contains("127.0.0.1"),
        "{said}"
    );
    redis.resume();
    assert_eq!(
        store.load("fs").unwrap().len(),
        1,
        "connects again once it answers"
    );

    redis.stop();
    let started = Instant::now();
    let away = store.load("fs").unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(away.to_string().contains("127.0.0.1"), "{away}");
    redis.restart();
    // No persistence in the test's Redis: the pins went with it, and the store serves again.
    assert!(store.load("fs").unwrap().is_empty());
}
