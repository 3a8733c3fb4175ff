//! Following the upstreams: each one's list changes (its listen stream, kept open across
//! refreshes so that no change is lost, or a poll when it offers none) refresh it and bring the
//! served tools in step; one that fails is tried again with a growing wait while its last good
//! list is still served.

use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt as _;
use toolwire_host::{ListChanges, ServerState};

use crate::gateway::Inner;

/// The first wait before a failed upstream is tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a failed upstream, and between two lists of one that
/// announces no list changes.
pub const RETRY_MOST: Duration = Duration::from_secs(60);

/// Follows every upstream until the gateway is gone.
pub(crate) async fn watch(gateway: Weak<Inner>) {
    let Some(names) = gateway.upgrade().map(|g| {
        g.host
            .servers()
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
    }) else {
        return;
    };
    futures::future::join_all(names.into_iter().map(|name| follow(gateway.clone(), name))).await;
}

/// Follows one upstream: waits for its next change (or, failed, for its next try), then
/// refreshes it and brings the served tools in step.
async fn follow(gateway: Weak<Inner>, server: String) {
    let mut retry = RETRY_FIRST;
    // The upstream's subscription, kept across refreshes: a change it announces while the
    // upstream is being refreshed waits in it, rather than being lost before the next one.
    let mut changes = None;
    loop {
        let Some(wait) = next(&gateway, &server, &mut retry, &mut changes).await else {
            return;
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let Some(inner) = gateway.upgrade() else {
            return;
        };
        if let Err(error) = inner.host.refresh_server(&server).await {
            tracing::warn!(upstream = %server, %error, "the upstream could not be refreshed");
        }
        inner.sync();
    }
}

/// Waits for a reason to refresh `server`: `None` when the gateway is gone; else how long to
/// wait first (a failed upstream's retry, or the next poll of one not followed), or nothing (a
/// change came, or a subscription was just opened: what changed before it was not announced).
async fn next(
    gateway: &Weak<Inner>,
    server: &str,
    retry: &mut Duration,
    changes: &mut Option<ListChanges>,
) -> Option<Option<Duration>> {
    let inner = gateway.upgrade()?;
    let failed = inner
        .host
        .servers()
        .iter()
        .any(|s| s.name == server && matches!(s.state, ServerState::Failed { .. }));
    if failed {
        *changes = None;
        let wait = backoff(retry);
        tracing::info!(upstream = %server, ?wait, "the upstream failed; trying it again");
        return Some(Some(wait));
    }
    let Some(following) = changes.as_mut() else {
        let opened = inner.host.list_changes_of(server).await;
        if !opened.unavailable.is_empty() {
            // It announces no changes, or its stream could not be opened (it may be going
            // away): listed again after a wait that grows to a minute.
            return Some(Some(backoff(retry)));
        }
        *retry = RETRY_FIRST;
        *changes = Some(opened);
        return Some(None);
    };
    // The stream is followed without holding the gateway, so that dropping it ends this.
    drop(inner);
    // A change, a reconnection (changes may have been missed) or the end of the stream: each
    // means list again; after the end, a new subscription first.
    if following.next().await.is_none() {
        *changes = None;
    }
    Some(None)
}

/// The wait before the next try, doubled for the one after (up to [`RETRY_MOST`]).
fn backoff(retry: &mut Duration) -> Duration {
    let wait = *retry;
    *retry = (*retry * 2).min(RETRY_MOST);
    wait
}
