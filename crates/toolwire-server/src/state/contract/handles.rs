//! The contract of a [`HandleBackend`]: records round-trip whole, a replace succeeds only over
//! the version it was read at, a removed record is gone, and a purge removes exactly what is no
//! longer alive.

use std::sync::Arc;

use super::{LONG, NOW, RACERS};
use crate::state::handles::{HandleBackend, HandleRecord};

/// Runs every check of the handle backend contract, each on a fresh backend from `make`.
pub async fn handle_backend<F: Fn() -> Arc<dyn HandleBackend>>(make: F) {
    records_round_trip_and_replace_checks_the_version(make()).await;
    removed_and_unknown_records_are_absent(make()).await;
    a_purge_removes_what_is_no_longer_alive(make()).await;
    racing_writers_lose_nothing(make()).await;
}

/// A record of `id` alive for [`LONG`] (idle) and twice that (at most).
fn record(id: &str, value: &str) -> HandleRecord {
    HandleRecord::new(
        id.to_owned(),
        "alice".to_owned(),
        value.to_owned(),
        NOW,
        NOW + 2 * LONG,
        NOW + LONG,
    )
}

async fn get(backend: &dyn HandleBackend, id: &str) -> Option<HandleRecord> {
    backend.get(id).await.expect("the backend answers")
}

async fn replace(backend: &dyn HandleBackend, record: HandleRecord) -> bool {
    backend.replace(record).await.expect("the backend answers")
}

/// Stored records read back whole; a replace needs the version it read, plus one.
async fn records_round_trip_and_replace_checks_the_version(backend: Arc<dyn HandleBackend>) {
    let backend = &*backend;
    backend
        .insert(record("note_a", r#"["é",1]"#))
        .await
        .expect("inserted");
    backend
        .insert(record("note_b", "null"))
        .await
        .expect("inserted");
    assert_eq!(
        get(backend, "note_a").await,
        Some(record("note_a", r#"["é",1]"#))
    );
    let read = get(backend, "note_a").await.expect("there");
    let mut next = read.clone();
    next.value = r#"["é",1,2]"#.to_owned();
    next.idle_until_ms = NOW + LONG + 5;
    next.version = 1;
    assert!(replace(backend, next.clone()).await);
    assert_eq!(get(backend, "note_a").await, Some(next.clone()));
    let mut late = read;
    late.value = "[]".to_owned();
    late.version = 1;
    assert!(
        !replace(backend, late).await,
        "written over version 0 again"
    );
    let mut skipping = next.clone();
    skipping.version = 5;
    assert!(!replace(backend, skipping).await, "a version skipped");
    assert_eq!(get(backend, "note_a").await, Some(next));
    assert_eq!(
        get(backend, "note_b").await,
        Some(record("note_b", "null")),
        "records are independent"
    );
}

/// An unknown id reads as absent and cannot be replaced; a removed one is gone.
async fn removed_and_unknown_records_are_absent(backend: Arc<dyn HandleBackend>) {
    let backend = &*backend;
    assert_eq!(get(backend, "note_none").await, None);
    let mut ghost = record("note_none", "1");
    ghost.version = 1;
    assert!(!replace(backend, ghost).await, "nothing to replace");
    assert_eq!(get(backend, "note_none").await, None, "nor was it created");
    let removed = |id| async move { backend.remove(id).await.expect("the backend answers") };
    assert!(!removed("note_none").await);
    backend
        .insert(record("note_x", "1"))
        .await
        .expect("inserted");
    assert!(removed("note_x").await);
    assert_eq!(get(backend, "note_x").await, None);
    assert!(!removed("note_x").await, "already removed");
}

/// A purge at a time removes the records not alive then (idle too long, or too old) and
/// counts them; the others stay.
async fn a_purge_removes_what_is_no_longer_alive(backend: Arc<dyn HandleBackend>) {
    let backend = &*backend;
    let mut idle = record("note_idle", "1");
    idle.idle_until_ms = NOW + 10;
    let mut old = record("note_old", "2");
    old.expires_ms = NOW + 10;
    for r in [idle, old, record("note_live", "3")] {
        backend.insert(r).await.expect("inserted");
    }
    let purged = backend.purge(NOW + 9).await.expect("the backend answers");
    assert_eq!(purged, 0, "all alive at {}", NOW + 9);
    let purged = backend.purge(NOW + 10).await.expect("the backend answers");
    assert_eq!(purged, 2);
    assert_eq!(get(backend, "note_idle").await, None);
    assert_eq!(get(backend, "note_old").await, None);
    assert_eq!(
        get(backend, "note_live").await,
        Some(record("note_live", "3"))
    );
}

/// Writers racing over one record, each retrying on conflict, lose no write.
async fn racing_writers_lose_nothing(backend: Arc<dyn HandleBackend>) {
    const WRITES: u64 = 5;
    backend
        .insert(record("note_race", "0"))
        .await
        .expect("inserted");
    let writers: Vec<_> = (0..RACERS)
        .map(|_| {
            let backend = backend.clone();
            tokio::spawn(async move {
                for _ in 0..WRITES {
                    loop {
                        let mut r = get(&*backend, "note_race").await.expect("there");
                        let n: u64 = r.value.parse().expect("a number");
                        r.value = (n + 1).to_string();
                        r.version += 1;
                        if replace(&*backend, r).await {
                            break;
                        }
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer finishes");
    }
    let r = get(&*backend, "note_race").await.expect("there");
    assert_eq!(
        (r.value, r.version),
        ((RACERS as u64 * WRITES).to_string(), RACERS as u64 * WRITES)
    );
}
