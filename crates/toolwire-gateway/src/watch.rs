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
/// How often the pins of withheld tools are read again, for a change approved by another
/// process on the same state (`toolwire pins approve`).
const PINS_RECHECK: Duration = Duration::from_secs(2);

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
    let followers =
        futures::future::join_all(names.into_iter().map(|name| follow(gateway.clone(), name)));
    tokio::join!(followers, recheck_pins(gateway.clone()));
}

/// While a tool is withheld, reads its pin again now and then, and serves it once approved.
async fn recheck_pins(gateway: Weak<Inner>) {
    loop {
        tokio::time::sleep(PINS_RECHECK).await;
        let Some(inner) = gateway.upgrade() else {
            return;
        };
        if !inner.mirror.withholds() {
            continue;
        }
        match inner.host.recheck_pins() {
            Ok(approved) if !approved.is_empty() => {
                tracing::info!(?approved, "changes approved elsewhere: served again");
                inner.sync();
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "the pins could not be read again"),
        }
    }
}

/// Follows one upstream until the gateway is gone: while it is failed, tries it again with
/// a growing wait; while it is up, holds its listen stream and refreshes on every change.
async fn follow(gateway: Weak<Inner>, server: String) {
    // The first start: the gateway waits for each upstream's first answer (or its failure).
    if !refresh(&gateway, &server).await {
        return;
    }
    if let Some(inner) = gateway.upgrade() {
        inner.tried(&server);
    }
    let mut retry = RETRY_FIRST;
    loop {
        let Some(failed) = failed(&gateway, &server) else {
            return;
        };
        if failed {
            tracing::info!(upstream = %server, wait = ?retry, "the upstream failed; trying it again");
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(RETRY_MOST);
            if !refresh(&gateway, &server).await {
                return;
            }
            continue;
        }
        retry = RETRY_FIRST;
        if !listen(&gateway, &server).await {
            return;
        }
    }
}

/// Whether `server` is failed; `None` when the gateway is gone.
fn failed(gateway: &Weak<Inner>, server: &str) -> Option<bool> {
    let inner = gateway.upgrade()?;
    let servers = inner.host.servers();
    Some(
        servers
            .iter()
            .any(|s| s.name == server && matches!(s.state, ServerState::Failed { .. })),
    )
}

/// Refreshes `server` and brings the served tools in step; `false` when the gateway is gone.
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

/// Subscribes to `server`'s list changes, then lists it (so that a change made before the
/// subscription took hold is not missed), then refreshes on each change until the stream
/// ends or the server fails. An upstream that announces no changes is listed every
/// [`POLL`]. `false` when the gateway is gone.
async fn listen(gateway: &Weak<Inner>, server: &str) -> bool {
    let Some(inner) = gateway.upgrade() else {
        return false;
    };
    let mut changes = inner.host.list_changes_of(server).await;
    // The stream is followed without holding the gateway, so that dropping it ends this.
    drop(inner);
    if !refresh(gateway, server).await {
        return false;
    }
    if !changes.unavailable.is_empty() {
        // No stream: the upstream announces no changes (then it is polled), or could not be
        // reached (then the refresh just now found it failed, and it is retried).
        if failed(gateway, server) == Some(false) {
            tokio::time::sleep(POLL).await;
        }
        return gateway.strong_count() > 0;
    }
    // A change, a reconnection (changes may have been missed): each means list again. The
    // end of the stream means subscribe again.
    while changes.next().await.is_some() {
        if !refresh(gateway, server).await {
            return false;
        }
        match failed(gateway, server) {
            None => return false,
            Some(true) => return true,
            Some(false) => {}
        }
    }
    // The stream ended (the upstream closed it, or went away): list again to know which.
    refresh(gateway, server).await
}
