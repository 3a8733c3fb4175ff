//! Times one call of each Redis backend operation: the median of [`ROUNDS`] calls.

use std::time::{Duration, Instant};

use toolwire_server::handles::HandleRecord;
use toolwire_server::protocol::{TaskInfo, TaskStatus};
use toolwire_server::{SessionRecord, Store, TaskRecord};

const ROUNDS: usize = 200;

/// A plausible "now" in ms.
const NOW: u64 = 1_796_428_800_000;
const LIFE: u64 = 600_000;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

/// Times `call` [`ROUNDS`] times, given the round's number.
async fn time<F: Future>(mut call: impl FnMut(usize) -> F) -> Duration {
    let mut times = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let start = Instant::now();
        call(round).await;
        times.push(start.elapsed());
    }
    median(times)
}

fn task(id: usize) -> TaskRecord {
    TaskRecord {
        info: TaskInfo {
            task_id: format!("t{id}"),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-12-05T00:00:00Z".to_owned(),
            last_updated_at: "2026-12-05T00:00:00Z".to_owned(),
            ttl_ms: Some(LIFE),
            poll_interval_ms: Some(500),
        },
        principal: Some("alice".to_owned()),
        input_requests: None,
        result: None,
        error: None,
        owner: None,
        scopes: Vec::new(),
        answers: None,
        expires_ms: Some(NOW + LIFE),
        version: 0,
    }
}

fn handle(id: usize) -> HandleRecord {
    HandleRecord::new(
        format!("note_{id}"),
        "alice".to_owned(),
        "\"a note\"".to_owned(),
        NOW,
        NOW + 2 * LIFE,
        NOW + LIFE,
    )
}

/// Each operation's name and median time.
pub async fn medians(store: &Store) -> Vec<(&'static str, Duration)> {
    let (guard, tasks, handles) = (
        store.replay_guard(),
        store.task_store(),
        store.handle_backend(),
    );
    let sessions = store.session_store(10_000, Duration::from_millis(LIFE));
    let mut out = Vec::new();
    out.push((
        "replay redeem",
        time(|i| {
            let mut id = [0u8; 12];
            id[..8].copy_from_slice(&(i as u64).to_be_bytes());
            let guard = guard.clone();
            async move { guard.redeem(id, NOW + LIFE, NOW).await.unwrap() }
        })
        .await,
    ));
    let t = &*tasks;
    out.push((
        "task insert",
        time(|i| async move { t.insert(task(i)).await.unwrap() }).await,
    ));
    out.push((
        "task get",
        time(|i| async move { t.get(&format!("t{i}"), NOW).await.unwrap() }).await,
    ));
    out.push((
        "task replace",
        time(|i| async move {
            let mut next = task(i);
            next.version = 1;
            assert!(t.replace(next).await.unwrap());
        })
        .await,
    ));
    let s = &*sessions;
    let record = |i: usize| {
        SessionRecord::new(
            format!("s{i}"),
            "2025-11-25",
            Default::default(),
            None,
            None,
        )
    };
    out.push((
        "session create",
        time(|i| async move { s.create(record(i), NOW).await.unwrap() }).await,
    ));
    out.push((
        "session touch",
        time(|i| async move { s.touch(&format!("s{i}"), NOW).await.unwrap() }).await,
    ));
    out.push((
        "session update",
        time(|i| async move {
            let id = format!("s{i}");
            assert!(s.update(&id, NOW, Box::new(|_| {})).await.unwrap());
        })
        .await,
    ));
    let h = &*handles;
    out.push((
        "handle insert",
        time(|i| async move { h.insert(handle(i)).await.unwrap() }).await,
    ));
    out.push((
        "handle get",
        time(|i| async move { h.get(&format!("note_{i}")).await.unwrap() }).await,
    ));
    out.push((
        "handle replace",
        time(|i| async move {
            let mut next = handle(i);
            next.version = 1;
            assert!(h.replace(next).await.unwrap());
        })
        .await,
    ));
    out
}
