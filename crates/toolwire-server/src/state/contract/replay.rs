//! The contract of a [`ReplayGuard`] (M-08): a token is redeemed once, and stays spent until it
//! expires, however many redeem it at once.

use std::sync::Arc;

use tokio::sync::Barrier;

use super::{LONG, NOW, RACERS};
use crate::state::request_state::ReplayGuard;

/// Runs every check of the replay guard contract, each on a fresh guard from `make`.
pub async fn replay_guard<F: Fn() -> Arc<dyn ReplayGuard>>(make: F) {
    redeems_once(make()).await;
    stays_spent_until_it_expires(make()).await;
    one_of_many_racers_wins(make()).await;
}

async fn redeem(guard: &dyn ReplayGuard, token: [u8; 12], expires: u64, now: u64) -> bool {
    guard
        .redeem(token, expires, now)
        .await
        .expect("the guard answers")
}

/// The first redemption is true, every later one false; tokens do not affect each other.
async fn redeems_once(guard: Arc<dyn ReplayGuard>) {
    let (a, b) = ([1; 12], [2; 12]);
    assert!(redeem(&*guard, a, NOW + LONG, NOW).await, "first use");
    assert!(!redeem(&*guard, a, NOW + LONG, NOW).await, "second use");
    assert!(
        !redeem(&*guard, a, NOW + 2 * LONG, NOW + 1).await,
        "a second use with another expiry"
    );
    assert!(
        redeem(&*guard, b, NOW + LONG, NOW + 1).await,
        "another token"
    );
    assert!(!redeem(&*guard, b, NOW + LONG, NOW + 2).await);
}

/// A spent token is refused up to the last millisecond of its life.
async fn stays_spent_until_it_expires(guard: Arc<dyn ReplayGuard>) {
    let token = [3; 12];
    let expires = NOW + LONG;
    assert!(redeem(&*guard, token, expires, NOW).await);
    for now in [NOW + 1, NOW + LONG / 2, expires - 1] {
        assert!(
            !redeem(&*guard, token, expires, now).await,
            "spent at {now} (expires at {expires})"
        );
    }
}

/// Many redeem one token at once: exactly one wins.
async fn one_of_many_racers_wins(guard: Arc<dyn ReplayGuard>) {
    let token = [4; 12];
    let start = Arc::new(Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|_| {
            let (guard, start) = (guard.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                redeem(&*guard, token, NOW + LONG, NOW).await
            })
        })
        .collect();
    let mut winners = 0;
    for racer in racers {
        winners += usize::from(racer.await.expect("a racer finishes"));
    }
    assert_eq!(winners, 1, "{RACERS} racers redeemed one token");
}
