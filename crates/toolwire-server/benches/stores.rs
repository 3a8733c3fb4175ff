//! The in-memory stores under load: one `redeem` of a request-state token and one task insert
//! while 1,000 and 100,000 unexpired entries are held. The cost per operation must not grow
//! with the number held (a full sweep per call would make them quadratic).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use toolwire_server::protocol::{TaskInfo, TaskStatus};
use toolwire_server::{
    MemoryReplayGuard, MemoryTaskStore, ReplayGuard, StoreError, TaskRecord, TaskStore,
};

/// The in-memory stores answer at once, and never fail: their futures are ready when made.
fn ready<T>(future: impl std::future::Future<Output = Result<T, StoreError>>) -> T {
    futures::FutureExt::now_or_never(future)
        .expect("an in-memory store answers at once")
        .expect("an in-memory store does not fail")
}

fn token(i: u64) -> [u8; 12] {
    let mut id = [0u8; 12];
    id[..8].copy_from_slice(&i.to_be_bytes());
    id
}

fn record(i: u64, now: u64) -> TaskRecord {
    TaskRecord {
        info: TaskInfo {
            task_id: format!("task-{i}"),
            status: TaskStatus::Working,
            status_message: None,
            created_at: String::new(),
            last_updated_at: String::new(),
            ttl_ms: Some(300_000),
            poll_interval_ms: None,
        },
        principal: None,
        input_requests: None,
        result: None,
        error: None,
        owner: None,
        scopes: Vec::new(),
        answers: None,
        expires_ms: Some(now + 300_000),
        version: 0,
    }
}

fn stores(c: &mut Criterion) {
    let mut group = c.benchmark_group("stores");
    for held in [1_000u64, 100_000] {
        group.bench_with_input(
            BenchmarkId::new("replay_redeem", held),
            &held,
            |b, &held| {
                let guard = MemoryReplayGuard::default();
                for i in 0..held {
                    ready(guard.redeem(token(i), u64::MAX, 0));
                }
                let mut next = held;
                b.iter(|| {
                    next += 1;
                    black_box(ready(guard.redeem(token(next), u64::MAX, 1)));
                });
            },
        );
        group.bench_with_input(BenchmarkId::new("task_insert", held), &held, |b, &held| {
            let store = MemoryTaskStore::default();
            for i in 0..held {
                ready(store.insert(record(i, 0)));
            }
            let mut next = held;
            b.iter(|| {
                next += 1;
                ready(store.insert(black_box(record(next, 1))));
            });
        });
    }
    group.finish();
}

criterion_group!(benches, stores);
criterion_main!(benches);
