use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::*;
use crate::clock::ManualClock;
use crate::state::StoreError;

fn notes(backend: Arc<dyn HandleBackend>, clock: &Arc<ManualClock>) -> HandleStore<Vec<String>> {
    HandleStore::new("note", backend)
        .unwrap()
        .lifetimes(Duration::from_secs(60), Duration::from_secs(600))
        .recovery("Call notes_create to start a new note.")
        .clock(clock.clone())
}

/// The contract every backend keeps.
async fn the_contract(backend: Arc<dyn HandleBackend>) {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let store = notes(backend, &clock);
    let id = store
        .create_as(Some("alice"), &vec!["a".into()])
        .await
        .unwrap();
    // 128 random bits, base64url, behind the prefix.
    assert!(
        id.starts_with("note_") && id.len() == "note_".len() + 22,
        "{id}"
    );
    let other = store.create_as(Some("alice"), &vec![]).await.unwrap();
    assert_ne!(id, other);

    store
        .update_as(Some("alice"), &id, |n| n.push("b".into()))
        .await
        .unwrap();
    assert_eq!(store.get_as(Some("alice"), &id).await.unwrap(), ["a", "b"]);

    // Another principal, anonymous, a foreign prefix, a made-up id: all unknown, same words.
    for (owner, handle) in [
        (Some("bob"), id.as_str()),
        (None, id.as_str()),
        (Some("alice"), "task_AAAAAAAAAAAAAAAAAAAAAA"),
        (Some("alice"), "note_AAAAAAAAAAAAAAAAAAAAAA"),
    ] {
        let error = store.get_as(owner, handle).await.unwrap_err();
        assert!(matches!(error, HandleError::Unknown { .. }), "{error}");
        let text = error.to_string();
        assert!(text.contains("Call notes_create"), "{text}");
        assert!(
            text.contains("1 minute after their last use and for 10 minutes at most"),
            "{text}"
        );
    }

    // Each use renews the idle lifetime; the absolute one holds regardless.
    for _ in 0..11 {
        clock.advance(50000);
        store.get_as(Some("alice"), &id).await.unwrap();
    }
    // At 605 s: used 55 s ago, but created more than 600 s ago.
    clock.advance(55000);
    let error = store.get_as(Some("alice"), &id).await.unwrap_err();
    assert!(matches!(error, HandleError::Expired { .. }), "{error}");
    // The unused one went idle long ago; purging removes both.
    assert!(matches!(
        store.get_as(Some("alice"), &other).await.unwrap_err(),
        HandleError::Expired { .. }
    ));
    assert_eq!(store.purge_expired().await.unwrap(), 2);
    assert!(matches!(
        store.get_as(Some("alice"), &id).await.unwrap_err(),
        HandleError::Unknown { .. }
    ));

    // Concurrent updates lose nothing.
    let id = store.create_as(None, &vec![]).await.unwrap();
    let writers = (0..8).map(|i| {
        let (store, id) = (store.clone(), id.clone());
        tokio::spawn(async move {
            for j in 0..10 {
                store
                    .update_as(None, &id, |n| n.push(format!("{i}.{j}")))
                    .await
                    .unwrap();
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        writer.await.unwrap();
    }
    assert_eq!(store.get_as(None, &id).await.unwrap().len(), 80);

    store.remove_as(None, &id).await.unwrap();
    assert!(store.get_as(None, &id).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_keeps_the_contract() {
    the_contract(Arc::new(MemoryHandles::default())).await;
    crate::state::contract::handle_backend(|| Arc::new(MemoryHandles::default())).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_the_contract_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("handles.db");
    the_contract(Arc::new(SqliteHandles::open(&path).unwrap())).await;
    let fresh = std::sync::atomic::AtomicUsize::new(0);
    crate::state::contract::handle_backend(|| {
        let n = fresh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(SqliteHandles::open(dir.path().join(format!("contract{n}.db"))).unwrap())
    })
    .await;

    let clock = Arc::new(ManualClock::new(5_000_000));
    let id = {
        let store = notes(Arc::new(SqliteHandles::open(&path).unwrap()), &clock);
        store
            .create_as(Some("alice"), &vec!["kept".into()])
            .await
            .unwrap()
    };
    let store = notes(Arc::new(SqliteHandles::open(&path).unwrap()), &clock);
    assert_eq!(store.get_as(Some("alice"), &id).await.unwrap(), ["kept"]);
}

#[tokio::test]
async fn a_full_memory_store_makes_room_from_expired_handles_only() {
    let clock = Arc::new(ManualClock::new(0));
    let store = notes(Arc::new(MemoryHandles::new(2)), &clock);
    store.create_as(None, &vec![]).await.unwrap();
    store.create_as(None, &vec![]).await.unwrap();
    let error = store.create_as(None, &vec![]).await.unwrap_err();
    assert!(matches!(error, HandleError::Full { .. }), "{error}");
    assert!(matches!(ToolError::from(error), ToolError::Failed(_)));
    clock.advance(61000);
    store.create_as(None, &vec![]).await.unwrap();
}

#[test]
fn kinds_retention_and_durations_read_well() {
    assert!(HandleStore::<()>::in_memory("Note").is_err());
    assert!(HandleStore::<()>::in_memory("note_x").is_err());
    assert!(HandleStore::<()>::in_memory("").is_err());
    let store = HandleStore::<()>::in_memory("note").unwrap();
    assert_eq!(
        store.retention(),
        "note handles stay valid for 30 minutes after their last use and for 1 day at most"
    );
    let retention = HandleRetention::from(&store);
    assert!(
        retention.sentence.starts_with("Note handles stay valid"),
        "{}",
        retention.sentence
    );
    assert_eq!(retention.meta["idleMs"], 1_800_000);
    assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
    assert_eq!(human(Duration::from_secs(90)), "90 seconds");
    assert_eq!(shown(&"x".repeat(100)).chars().count(), 65);
}

/// The modes of the files in `dir`, by name.
#[cfg(all(feature = "sqlite", unix))]
fn modes(dir: &std::path::Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut modes: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            (
                entry.file_name().into_string().unwrap(),
                format!("{mode:04o}"),
            )
        })
        .collect();
    modes.sort();
    modes
}

/// The database and the files SQLite keeps beside it (`-wal`, `-shm`) hold every handle's
/// value: readable by their owner only, from their creation. A database others could read
/// (an older version's) is made private, side files too, when it is opened.
#[cfg(all(feature = "sqlite", unix))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_files_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("handles.db");
    let clock = Arc::new(ManualClock::new(1_000_000));
    let store = notes(Arc::new(SqliteHandles::open(&path).unwrap()), &clock);
    store
        .create_as(Some("alice"), &vec!["a secret".into()])
        .await
        .unwrap();
    let private = |names: &[&str]| -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "0600".to_owned()))
            .collect()
    };
    let all = ["handles.db", "handles.db-shm", "handles.db-wal"];
    assert_eq!(modes(dir), private(&all), "while open");

    for name in all {
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let again = notes(Arc::new(SqliteHandles::open(&path).unwrap()), &clock);
    again
        .create_as(Some("bob"), &vec!["b".into()])
        .await
        .unwrap();
    assert_eq!(modes(dir), private(&all), "made private when opened");
    drop((store, again));
}

/// A backend whose store is away: every call fails as unavailable.
struct Away;

impl HandleBackend for Away {
    fn insert(&self, _: HandleRecord) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(std::future::ready(Err(away())))
    }
    fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<HandleRecord>, BackendError>> {
        Box::pin(std::future::ready(Err(away())))
    }
    fn replace(&self, _: HandleRecord) -> BoxFuture<'_, Result<bool, BackendError>> {
        Box::pin(std::future::ready(Err(away())))
    }
    fn remove<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<bool, BackendError>> {
        Box::pin(std::future::ready(Err(away())))
    }
    fn purge(&self, _: u64) -> BoxFuture<'_, Result<u64, BackendError>> {
        Box::pin(std::future::ready(Err(away())))
    }
}

fn away() -> BackendError {
    Box::new(StoreError::unavailable("connection refused"))
}

/// A store that is away is an `isError` result the model can act on (try again), not an
/// internal error that hides why.
#[tokio::test]
async fn an_unavailable_store_says_so_and_to_try_again() {
    let clock = Arc::new(ManualClock::new(0));
    let store = notes(Arc::new(Away), &clock);
    let created = store.create_as(None, &vec![]).await.unwrap_err();
    let read = store
        .get_as(None, "note_AAAAAAAAAAAAAAAAAAAAAA")
        .await
        .unwrap_err();
    for error in [created, read] {
        assert!(matches!(error, HandleError::Unavailable { .. }), "{error}");
        let ToolError::Failed(message) = ToolError::from(error) else {
            panic!("not a tool failure")
        };
        assert!(message.contains("unavailable; try again"), "{message}");
        assert!(
            !message.contains("refused"),
            "the cause stays in the logs: {message}"
        );
    }
}
