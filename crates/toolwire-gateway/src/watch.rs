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

/// Follows one upstream: starts and lists it, then waits for its next change (or, failed,
/// for its next try), refreshes it and brings the served tools in step.
async fn follow(gateway: Weak<Inner>, server: String) {
    if !refresh(&gateway, &server).await {
        return;
    }
    if let Some(inner) = gateway.upgrade() {
        inner.tried(&server);
    }
    let mut retry = RETRY_FIRST;
    loop {
        let Some(wait) = next(&gateway, &server, &mut retry).await else {
            return;
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        if !refresh(&gateway, &server).await {
            return;
        }
    }
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

/// Waits for a reason to refresh `server`: `None` when the gateway is gone; else how long to
/// wait first (a failed upstream's retry), or nothing (a change came).
async fn next(
    gateway: &Weak<Inner>,
    server: &str,
    retry: &mut Duration,
) -> Option<Option<Duration>> {
    let inner = gateway.upgrade()?;
    let failed = inner
        .host
        .servers()
        .iter()
        .any(|s| s.name == server && matches!(s.state, ServerState::Failed { .. }));
    if failed {
        let wait = *retry;
        *retry = (*retry * 2).min(RETRY_MOST);
        tracing::info!(upstream = %server, ?wait, "the upstream failed; trying it again");
        return Some(Some(wait));
    }
    *retry = RETRY_FIRST;
    let mut changes = inner.host.list_changes_of(server).await;
    // The stream is followed without holding the gateway, so that dropping it ends this.
    drop(inner);
    if !changes.unavailable.is_empty() {
        return Some(Some(POLL));
    }
    // A change, a reconnection (changes may have been missed) or the end of the stream: each
    // means list again.
    changes.next().await;
    Some(None)
}
