//! The contract of a [`SessionStore`]: a session is found by its id until it has been idle for
//! the store's idle time, each use (a touch or a change) restarts that time, changes are kept,
//! and a removed session is gone.

use std::sync::Arc;
use std::time::Duration;

use toolwire_protocol::{ClientCapabilities, Implementation, LoggingLevel};

use super::{LONG, NOW};
use crate::state::sessions::{SessionRecord, SessionStore};

/// Runs every check of the session store contract, each on a fresh store that `make` builds
/// with the idle time it is given.
pub async fn session_store<F: Fn(Duration) -> Arc<dyn SessionStore>>(make: F) {
    let idle = Duration::from_millis(LONG);
    records_round_trip_and_changes_are_kept(make(idle)).await;
    use_keeps_a_session_and_idleness_ends_it(make(idle)).await;
    removed_and_unknown_sessions_are_absent(make(idle)).await;
}

fn record(id: &str) -> SessionRecord {
    SessionRecord::new(
        id.to_owned(),
        "2025-11-25",
        ClientCapabilities::default(),
        Some(Implementation::new("contract", "1")),
        Some("alice".to_owned()),
    )
}

async fn touch(store: &dyn SessionStore, id: &str, now: u64) -> Option<SessionRecord> {
    store.touch(id, now).await.expect("the store answers")
}

async fn update(
    store: &dyn SessionStore,
    id: &str,
    now: u64,
    change: impl FnMut(&mut SessionRecord) + Send + 'static,
) -> bool {
    store
        .update(id, now, Box::new(change))
        .await
        .expect("the store answers")
}

/// What `initialize` stored and what the session set since read back whole.
async fn records_round_trip_and_changes_are_kept(store: Arc<dyn SessionStore>) {
    let store = &*store;
    store.create(record("s1"), NOW).await.expect("created");
    store.create(record("s2"), NOW).await.expect("created");
    assert_eq!(touch(store, "s1", NOW).await, Some(record("s1")));
    assert!(
        update(store, "s1", NOW + 1, |r| {
            r.log_level = Some(LoggingLevel::Warning);
            r.subscriptions.insert("file:///a".to_owned());
            r.subscriptions.insert("file:///b".to_owned());
        })
        .await
    );
    assert!(
        update(store, "s1", NOW + 2, |r| {
            r.subscriptions.remove("file:///a");
        })
        .await
    );
    let mut want = record("s1");
    want.log_level = Some(LoggingLevel::Warning);
    want.subscriptions.insert("file:///b".to_owned());
    assert_eq!(touch(store, "s1", NOW + 3).await, Some(want));
    assert_eq!(
        touch(store, "s2", NOW + 3).await,
        Some(record("s2")),
        "sessions are independent"
    );
}

/// A session lives while it is used, touched or changed, and ends once idle for the store's
/// idle time.
async fn use_keeps_a_session_and_idleness_ends_it(store: Arc<dyn SessionStore>) {
    let store = &*store;
    store.create(record("kept"), NOW).await.expect("created");
    store.create(record("idle"), NOW).await.expect("created");
    // Touched just before its idle time runs out, then changed just before the next one does.
    let touched = NOW + LONG - 1;
    assert!(touch(store, "kept", touched).await.is_some());
    let changed = touched + LONG - 1;
    assert!(
        update(store, "kept", changed, |r| r.log_level =
            Some(LoggingLevel::Debug))
        .await
    );
    assert_eq!(
        touch(store, "idle", NOW + LONG).await,
        None,
        "idle since {NOW}"
    );
    assert!(!update(store, "idle", NOW + LONG, |_| {}).await, "gone");
    assert!(
        touch(store, "kept", changed + LONG - 1).await.is_some(),
        "the change counted as use"
    );
    assert_eq!(touch(store, "kept", changed + 2 * LONG).await, None);
}

/// A removed session is gone for every call; an unknown one was never there.
async fn removed_and_unknown_sessions_are_absent(store: Arc<dyn SessionStore>) {
    let store = &*store;
    assert_eq!(touch(store, "nope", NOW).await, None);
    assert!(!update(store, "nope", NOW, |_| {}).await);
    assert!(!store.remove("nope").await.expect("the store answers"));
    store.create(record("s"), NOW).await.expect("created");
    assert!(store.remove("s").await.expect("the store answers"));
    assert_eq!(touch(store, "s", NOW).await, None);
    assert!(!update(store, "s", NOW, |_| {}).await);
    assert!(
        !store.remove("s").await.expect("the store answers"),
        "already removed"
    );
}
