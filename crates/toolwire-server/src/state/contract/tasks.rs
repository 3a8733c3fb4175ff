//! The contract of a [`TaskStore`]: records round-trip whole (whatever state a task is in),
//! a replace succeeds only over the version it was read at, and expired or unknown records
//! read as absent.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use toolwire_protocol::{ErrorObject, InputRequest, ListRootsParams, TaskInfo, TaskStatus};

use super::{LONG, NOW, RACERS};
use crate::state::task_store::{TaskRecord, TaskStore};

/// Runs every check of the task store contract, each on a fresh store from `make`.
pub async fn task_store<F: Fn() -> Arc<dyn TaskStore>>(make: F) {
    records_round_trip_in_every_status(make()).await;
    a_stale_replace_is_refused(make()).await;
    unknown_and_expired_records_are_absent(make()).await;
    racing_writers_lose_nothing(make()).await;
}

/// A change a task goes through, beside its status.
type Change = Box<dyn Fn(&mut TaskRecord)>;

/// A new working task of `id`, alive for [`LONG`].
fn working(id: &str) -> TaskRecord {
    TaskRecord {
        info: TaskInfo {
            task_id: id.to_owned(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-12-05T00:00:00Z".to_owned(),
            last_updated_at: "2026-12-05T00:00:00Z".to_owned(),
            ttl_ms: Some(LONG),
            poll_interval_ms: Some(500),
        },
        principal: Some("alice".to_owned()),
        input_requests: None,
        result: None,
        error: None,
        owner: None,
        scopes: Vec::new(),
        answers: None,
        expires_ms: Some(NOW + LONG),
        version: 0,
    }
}

async fn get(store: &dyn TaskStore, id: &str, now: u64) -> Option<TaskRecord> {
    store.get(id, now).await.expect("the store answers")
}

async fn replace(store: &dyn TaskStore, record: TaskRecord) -> bool {
    store.replace(record).await.expect("the store answers")
}

/// Reads `id`, changes it with `change` and writes it back as the next version.
async fn change(store: &dyn TaskStore, id: &str, change: impl FnOnce(&mut TaskRecord)) -> bool {
    let mut record = get(store, id, NOW).await.expect("the record is there");
    change(&mut record);
    record.version += 1;
    replace(store, record).await
}

/// What a task goes through (input asked, answered, completed; failed; cancelled) is stored
/// and read back whole.
async fn records_round_trip_in_every_status(store: Arc<dyn TaskStore>) {
    let store = &*store;
    store.insert(working("t1")).await.expect("inserted");
    assert_eq!(get(store, "t1", NOW).await, Some(working("t1")));
    let mut asked = BTreeMap::new();
    asked.insert(
        "roots".to_owned(),
        InputRequest::ListRoots(ListRootsParams::default()),
    );
    let steps: [(TaskStatus, Change); 4] = [
        (
            TaskStatus::InputRequired,
            Box::new(move |r| r.input_requests = Some(asked.clone())),
        ),
        (TaskStatus::Working, Box::new(|r| r.input_requests = None)),
        (
            TaskStatus::Completed,
            Box::new(|r| r.result = Some(json!({"content": [], "isError": false}))),
        ),
        (
            TaskStatus::Failed,
            Box::new(|r| r.error = Some(ErrorObject::internal("it broke"))),
        ),
    ];
    for (version, (status, apply)) in (1..).zip(steps) {
        let mut want = get(store, "t1", NOW).await.expect("still there");
        want.info.status = status;
        want.info.status_message = Some(format!("step {version}"));
        apply(&mut want);
        want.version = version;
        assert!(replace(store, want.clone()).await, "step to {status:?}");
        assert_eq!(get(store, "t1", NOW).await, Some(want));
    }
    store.insert(working("t2")).await.expect("inserted");
    assert!(change(store, "t2", |r| r.info.status = TaskStatus::Cancelled).await);
    let cancelled = get(store, "t2", NOW).await.expect("still there");
    assert_eq!(
        (cancelled.info.status, cancelled.version),
        (TaskStatus::Cancelled, 1)
    );
    assert_eq!(
        get(store, "t1", NOW).await.map(|r| r.info.status),
        Some(TaskStatus::Failed),
        "records are independent"
    );
}

/// A replace over a version someone else already replaced changes nothing.
async fn a_stale_replace_is_refused(store: Arc<dyn TaskStore>) {
    let store = &*store;
    store.insert(working("t")).await.expect("inserted");
    let read = get(store, "t", NOW).await.expect("there");
    let mut first = read.clone();
    first.info.status = TaskStatus::Cancelled;
    first.version = 1;
    assert!(replace(store, first.clone()).await);
    let mut late = read;
    late.info.status = TaskStatus::Completed;
    late.version = 1;
    assert!(!replace(store, late).await, "written over version 0 again");
    let mut skipping = first.clone();
    skipping.version = 3;
    assert!(!replace(store, skipping).await, "a version skipped");
    assert_eq!(get(store, "t", NOW).await, Some(first));
}

/// An unknown id reads as absent and cannot be replaced; a record past its expiry reads as
/// absent, and a replace that moves the expiry moves it.
async fn unknown_and_expired_records_are_absent(store: Arc<dyn TaskStore>) {
    let store = &*store;
    assert_eq!(get(store, "nope", NOW).await, None);
    let mut ghost = working("nope");
    ghost.version = 1;
    assert!(!replace(store, ghost).await, "nothing to replace");
    assert_eq!(get(store, "nope", NOW).await, None, "nor was it created");
    store.insert(working("short")).await.expect("inserted");
    assert!(get(store, "short", NOW + LONG - 1).await.is_some());
    assert_eq!(get(store, "short", NOW + LONG).await, None, "expired");
    store.insert(working("kept")).await.expect("inserted");
    assert!(change(store, "kept", |r| r.expires_ms = Some(NOW + 2 * LONG)).await);
    assert!(
        get(store, "kept", NOW + LONG).await.is_some(),
        "kept longer"
    );
    assert_eq!(get(store, "kept", NOW + 2 * LONG).await, None);
}

/// Writers racing over one record, each retrying on conflict, lose no write.
async fn racing_writers_lose_nothing(store: Arc<dyn TaskStore>) {
    const WRITES: usize = 5;
    store.insert(working("race")).await.expect("inserted");
    let writers: Vec<_> = (0..RACERS)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..WRITES {
                    while !change(&*store, "race", |r| {
                        let n = r.result.as_ref().and_then(|v| v.as_u64()).unwrap_or(0);
                        r.result = Some(json!(n + 1));
                    })
                    .await
                    {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer finishes");
    }
    let record = get(&*store, "race", NOW).await.expect("there");
    assert_eq!(record.result, Some(json!(RACERS * WRITES)));
    assert_eq!(record.version, (RACERS * WRITES) as u64);
}
