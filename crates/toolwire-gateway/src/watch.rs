//! Following the upstreams: each one is started and listed on its own (so that a slow one
//! holds up no other), then its list changes (its listen stream, or a poll when it offers
//! none) refresh it and bring the served tools in step; one that fails is tried again with a
//! growing wait while its last good list is still served.

use std::sync::Weak;
use std::time::Duration;

use futures::StreamExt as _;
use toolwire_host::ServerState;

use crate::gateway::Inner;

/// The first wait before a failed upstream is tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a failed upstream.
pub const RETRY_MOST: Duration = Duration::from_secs(60);
/// How often an upstream that announces no list changes is listed again.
const POLL: Duration = Duration::from_secs(60);

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

/// Follows one upstream: starts and lists it, then refreshes it on each change it announces
/// (or, when it announces none, now and then), and tries it again with a growing wait while it
/// fails.
async fn follow(gateway: Weak<Inner>, server: String) {
    if !refresh(&gateway, &server).await {
        return;
    }
    if let Some(inner) = gateway.upgrade() {
        inner.tried(&server);
    }
    let mut retry = RETRY_FIRST;
    loop {
        let going_on = match failed(&gateway, &server) {
            None => false,
            Some(true) => {
                let wait = retry;
                retry = (retry * 2).min(RETRY_MOST);
                tracing::info!(upstream = %server, ?wait, "the upstream failed; trying it again");
                tokio::time::sleep(wait).await;
                refresh(&gateway, &server).await
            }
            Some(false) => {
                retry = RETRY_FIRST;
                follow_changes(&gateway, &server).await
            }
        };
        if !going_on {
            return;
        }
    }
}

/// Follows a connected upstream's changes, listing it on each, until its stream ends, it
/// fails or a poll is due (`true`: follow it again), or the gateway is gone (`false`).
async fn follow_changes(gateway: &Weak<Inner>, server: &str) -> bool {
    let Some(inner) = gateway.upgrade() else {
        return false;
    };
    let mut changes = inner.host.list_changes_of(server).await;
    // The stream is followed without holding the gateway, so that dropping it ends this.
    drop(inner);
    if !changes.unavailable.is_empty() {
        // No stream: the upstream announces no changes, or it could not be reached (it may
        // have gone since it was listed). A listing tells which: a failed one is tried again
        // with the short waits of a failure, not the long one of a poll.
        // Followed again after the poll's wait, which lists it then.
        if !refresh(gateway, server).await {
            return false;
        }
        if failed(gateway, server) == Some(false) {
            tokio::time::sleep(POLL).await;
        }
        return true;
    }
    // The upstream was listed before its stream was acknowledged: a change in between was
    // announced to nobody, so it is listed once more now that changes reach the stream.
    if !refresh(gateway, server).await {
        return false;
    }
    // A change, or a reconnection (changes may have been missed): list again, on the same
    // stream, so that no change falls between two streams.
    while changes.next().await.is_some() {
        if !refresh(gateway, server).await {
            return false;
        }
        if failed(gateway, server) != Some(false) {
            return true;
        }
    }
    // The stream ended (the upstream went away, or closed it): followed again after a pause,
    // so that an upstream that ends every stream at once is not listed in a tight loop.
    tokio::time::sleep(RETRY_FIRST).await;
    true
}

/// Refreshes `server` (starting it if it is not running) and brings the served tools in
/// step; `false` when the gateway is gone.
async fn refresh(gateway: &Weak<Inner>, server: &str) -> bool {
    let Some(inner) = gateway.upgrade() else {
        return false;
    };
    if let Err(error) = inner.host.refresh_server(server).await {
        tracing::warn!(upstream = %server, %error, "the upstream could not be refreshed");
    }
    inner.sync();
    true
}

/// Whether `server` is failed now; `None` when the gateway is gone.
fn failed(gateway: &Weak<Inner>, server: &str) -> Option<bool> {
    let inner = gateway.upgrade()?;
    let failed = inner
        .host
        .servers()
        .iter()
        .any(|s| s.name == server && matches!(s.state, ServerState::Failed { .. }));
    Some(failed)
}
