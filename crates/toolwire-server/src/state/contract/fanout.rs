//! The contract of a [`ChangeFanOut`]: every change published by any instance of a group
//! sharing a store reaches every subscriber of every instance, once, and the changes of one
//! instance arrive in the order they were published.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::state::fanout::{Change, ChangeFanOut};

/// How long a change may take to reach another instance before the suite gives up.
const DELIVERY: Duration = Duration::from_secs(10);

/// Runs every check of the fan-out contract. `group` makes the fan-outs of a fresh group of
/// instances sharing one store: one for a backend of one process, several for a shared one.
pub async fn change_fan_out<F: Fn() -> Vec<Arc<dyn ChangeFanOut>>>(group: F) {
    every_change_reaches_every_subscriber_once(group()).await;
    a_change_published_before_subscribing_is_not_delivered(group()).await;
}

/// The next change, within [`DELIVERY`].
async fn next(receiver: &mut broadcast::Receiver<Change>, who: usize) -> Change {
    match tokio::time::timeout(DELIVERY, receiver.recv()).await {
        Ok(Ok(change)) => change,
        Ok(Err(error)) => panic!("subscriber {who}: {error}"),
        Err(_) => panic!("subscriber {who}: no change arrived within {DELIVERY:?}"),
    }
}

async fn connected(group: &[Arc<dyn ChangeFanOut>]) {
    for (i, member) in group.iter().enumerate() {
        tokio::time::timeout(DELIVERY, member.connected())
            .await
            .unwrap_or_else(|_| panic!("instance {i} did not connect within {DELIVERY:?}"));
    }
}

/// Two subscribers on each instance; each instance publishes three changes, then a marker of
/// its own. Each subscriber sees, per publisher, exactly those changes in order: none twice
/// (its own instance's included), none lost.
async fn every_change_reaches_every_subscriber_once(group: Vec<Arc<dyn ChangeFanOut>>) {
    connected(&group).await;
    let mut receivers: Vec<_> = group
        .iter()
        .flat_map(|member| [member.subscribe(), member.subscribe()])
        .collect();
    let published = |i: usize| {
        vec![
            Change::ResourceUpdated(format!("test://{i}/a").into()),
            Change::Tools,
            Change::ResourceUpdated(format!("test://{i}/b").into()),
            Change::ResourceUpdated(format!("test://{i}/end").into()),
        ]
    };
    for (i, member) in group.iter().enumerate() {
        for change in published(i) {
            member.publish(change);
        }
    }
    for (who, receiver) in receivers.iter_mut().enumerate() {
        let mut seen = Vec::new();
        let mut ended = 0;
        while ended < group.len() {
            let change = next(receiver, who).await;
            if matches!(&change, Change::ResourceUpdated(uri) if uri.ends_with("/end")) {
                ended += 1;
            }
            seen.push(change);
        }
        for i in 0..group.len() {
            let from_i: Vec<&Change> = seen
                .iter()
                .filter(|c| match c {
                    Change::ResourceUpdated(uri) => uri.starts_with(&format!("test://{i}/")),
                    _ => false,
                })
                .collect();
            let expected = published(i);
            let expected: Vec<&Change> = expected
                .iter()
                .filter(|c| matches!(c, Change::ResourceUpdated(_)))
                .collect();
            assert_eq!(
                from_i, expected,
                "subscriber {who}: the updates of instance {i}"
            );
        }
        let tools = seen.iter().filter(|c| **c == Change::Tools).count();
        assert_eq!(
            tools,
            group.len(),
            "subscriber {who}: one Tools per instance"
        );
    }
    // A second change of an instance reaches the others after every copy of its first ones:
    // once every subscriber saw every instance's fence, a change delivered twice would have
    // shown before it.
    for (i, member) in group.iter().enumerate() {
        member.publish(Change::ResourceUpdated(format!("test://{i}/fence").into()));
    }
    for (who, receiver) in receivers.iter_mut().enumerate() {
        for _ in 0..group.len() {
            let change = next(receiver, who).await;
            assert!(
                matches!(&change, Change::ResourceUpdated(uri) if uri.ends_with("/fence")),
                "subscriber {who}: a change delivered twice: {change:?}"
            );
        }
    }
}

/// A subscriber gets what is published after it subscribed, not before.
async fn a_change_published_before_subscribing_is_not_delivered(group: Vec<Arc<dyn ChangeFanOut>>) {
    connected(&group).await;
    let first = &group[0];
    first.publish(Change::Prompts);
    let mut late = first.subscribe();
    first.publish(Change::Resources);
    assert_eq!(next(&mut late, 0).await, Change::Resources);
}
