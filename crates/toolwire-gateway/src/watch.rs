//! Following the upstreams: each one is started and listed on its own (so that a slow one
//! holds up no other), then its list changes (its listen stream, or a poll when it offers
//! none) refresh it and bring the served tools in step; one that fails is tried again with a
//! growing wait while its last good list is still served.
//!
//! The resources the downstream server's listeners follow ([`Server::followed_resources`]) are
//! followed upstream too, each on the upstream that offers it, under its own URI (the listen
//! stream's `resourceSubscriptions`, a legacy upstream's `resources/subscribe`), and each
//! update an upstream sends becomes [`Server::notify_resource_updated`] of the served URI. At
//! most [`MAX_FOLLOWED`] resources are followed per upstream; when the set changes, the
//! stream is opened again after [`REFOLLOW_WAIT`] (so that a set that churns costs one
//! re-opening per wait, not one per change), the new one before the old is dropped.
//!
//! [`Server::followed_resources`]: toolwire_server::Server::followed_resources
//! [`Server::notify_resource_updated`]: toolwire_server::Server::notify_resource_updated

use std::sync::Weak;
use std::time::Duration;

use std::collections::BTreeSet;

use futures::StreamExt as _;
use toolwire_client::Notification;
use toolwire_host::{Host, ListChange, ListChanges, ServerState};
use toolwire_server::{FollowedResources, Server};

/// The first wait before a failed upstream is tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a failed upstream.
pub const RETRY_MOST: Duration = Duration::from_secs(60);
/// The most resources followed on one upstream: past it, the first ones (in order of their
/// URIs) are followed and the others are not (said in the log), so that callers cannot make
/// the gateway ask an upstream for an unbounded subscription.
pub const MAX_FOLLOWED: usize = 256;
/// How long the gateway waits, after the followed resources changed, before it opens an
/// upstream's stream again with the new set: changes meanwhile are taken together.
pub const REFOLLOW_WAIT: Duration = Duration::from_millis(250);
/// How often an upstream that announces no list changes is listed again.
const POLL: Duration = Duration::from_secs(60);
/// How often the pins of withheld tools are read again, for a change approved by another
/// process on the same state (`toolwire pins approve`).
const PINS_RECHECK: Duration = Duration::from_secs(2);

/// What following the upstreams reads of the gateway and asks of it. The gateway implements
/// it, and its tasks here hold it weakly: they end once the gateway is gone.
pub(crate) trait Watched: Send + Sync {
    /// The host that reaches the upstreams.
    fn host(&self) -> &Host;
    /// The downstream server, whose listeners follow resources.
    fn server(&self) -> &Server;
    /// Whether a tool is withheld for a changed definition.
    fn withholds(&self) -> bool;
    /// Brings the served tools, prompts and resources in step with the host's lists.
    fn sync(&self);
    /// Notes that `upstream`'s first try has ended (its tools, if it answered, are served).
    fn tried(&self, upstream: &str);
}

/// What the gateway does besides following each upstream (each has a task of its own,
/// [`follow`], started and stopped as upstreams come and go): reads withheld tools' pins
/// again, until the gateway is gone.
pub(crate) async fn watch(gateway: Weak<dyn Watched>) {
    recheck_pins(gateway).await;
}

/// While a tool is withheld, reads its pin again now and then, and serves it once approved.
async fn recheck_pins(gateway: Weak<dyn Watched>) {
    loop {
        tokio::time::sleep(PINS_RECHECK).await;
        let Some(inner) = gateway.upgrade() else {
            return;
        };
        if !inner.withholds() {
            continue;
        }
        match inner.host().recheck_pins() {
            Ok(approved) if !approved.is_empty() => {
                tracing::info!(
                    approved = %approved.join(", "),
                    "changes approved elsewhere: served again"
                );
                inner.sync();
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "the pins could not be read again"),
        }
    }
}

/// Follows one upstream until the gateway is gone: while it is failed, tries it again with
/// a growing wait; while it is up, holds its listen stream and refreshes on every change.
pub(crate) async fn follow(gateway: Weak<dyn Watched>, server: String) {
    // The first start: the gateway waits for each upstream's first answer (or its failure).
    if !refresh(&gateway, &server).await {
        return;
    }
    if let Some(inner) = gateway.upgrade() {
        inner.tried(&server);
    }
    let mut retry = RETRY_FIRST;
    let mut said = Said::default();
    loop {
        let Some(failed) = failed(&gateway, &server) else {
            return;
        };
        if failed {
            tracing::info!(upstream = %server, wait_s = retry.as_secs(), "the upstream failed; trying it again");
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(RETRY_MOST);
            if !refresh(&gateway, &server).await {
                return;
            }
            continue;
        }
        retry = RETRY_FIRST;
        if !listen(&gateway, &server, &mut said).await {
            return;
        }
    }
}

/// Whether `server` is failed; `None` when the gateway is gone.
fn failed(gateway: &Weak<dyn Watched>, server: &str) -> Option<bool> {
    let inner = gateway.upgrade()?;
    let servers = inner.host().servers();
    Some(
        servers
            .iter()
            .any(|s| s.name == server && matches!(s.state, ServerState::Failed { .. })),
    )
}

/// Refreshes `server` and brings the served tools in step; `false` when the gateway is gone.
async fn refresh(gateway: &Weak<dyn Watched>, server: &str) -> bool {
    let Some(inner) = gateway.upgrade() else {
        return false;
    };
    if let Err(error) = inner.host().refresh_server(server).await {
        tracing::warn!(upstream = %server, %error, "the upstream could not be refreshed");
    }
    inner.sync();
    true
}

/// What was said in the log about one upstream's followed resources, so that it is said once.
#[derive(Default)]
struct Said {
    /// The upstream does not follow resources asked of it.
    unfollowed: bool,
    /// More resources were asked to be followed than [`MAX_FOLLOWED`].
    capped: bool,
}

/// Subscribes to `server`'s list changes and to updates of the resources followed downstream
/// that it offers, then lists it (so that a change made before the subscription took hold is
/// not missed), then refreshes on each change and passes each update on, until the stream
/// ends or the server fails; the subscription is opened again when the followed resources
/// change. An upstream that announces no list changes is listed every [`POLL`] (its stream,
/// if it follows resources, still brings their updates). `false` when the gateway is gone.
async fn listen(gateway: &Weak<dyn Watched>, server: &str, said: &mut Said) -> bool {
    let Some(inner) = gateway.upgrade() else {
        return false;
    };
    let mut followed = inner.server().followed_resources();
    let mut asked = to_follow(&*inner, server, &followed.current(), said);
    let mut changes = inner.host().changes_of(server, &asked).await;
    // The stream is followed without holding the gateway, so that dropping it ends this.
    drop(inner);
    unfollowed(server, &changes, said);
    if !refresh(gateway, server).await {
        return false;
    }
    let polled = !changes.unavailable.is_empty();
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + POLL, POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if polled {
            // No list changes announced: the upstream announces none (then it is polled), or
            // could not be reached (then the refresh found it failed, and it is retried).
            match failed(gateway, server) {
                None => return false,
                Some(true) => return true,
                Some(false) => {}
            }
        }
        let change = tokio::select! {
            change = changes.next() => change,
            _ = poll.tick(), if polled => {
                if !refresh(gateway, server).await {
                    return false;
                }
                continue;
            }
            alive = followed.changed() => {
                if !alive {
                    return false;
                }
                match refollow(gateway, server, &mut followed, &asked, said).await {
                    None => return false,
                    Some(None) => {}
                    Some(Some((now, reopened))) => {
                        (asked, changes) = (now, reopened);
                        if !changes.unavailable.is_empty() && !polled {
                            // It could not be opened again: start over.
                            return refresh(gateway, server).await;
                        }
                    }
                }
                continue;
            }
        };
        // The end of the stream means subscribe again: list again to know whether the
        // upstream went away.
        let Some(change) = change else {
            return refresh(gateway, server).await;
        };
        if let Some(end) = on_change(gateway, server, change, &asked).await {
            return end;
        }
    }
}

/// Acts on one change `server` announced: an update is passed on downstream; a list change, a
/// reconnection or a gap (then any followed resource may have changed meanwhile, and each is
/// said to have) means listing again. `Some(false)` when the gateway is gone, `Some(true)`
/// when the upstream failed, `None` to go on.
async fn on_change(
    gateway: &Weak<dyn Watched>,
    server: &str,
    change: ListChange,
    asked: &[String],
) -> Option<bool> {
    let missed = match change.notification {
        Notification::ResourceUpdated { uri } => {
            let Some(inner) = gateway.upgrade() else {
                return Some(false);
            };
            inner.server().notify_resource_updated(&uri);
            return None;
        }
        Notification::Reconnected | Notification::Missed { .. } => true,
        _ => false,
    };
    if missed {
        let Some(inner) = gateway.upgrade() else {
            return Some(false);
        };
        for uri in asked {
            inner.server().notify_resource_updated(uri);
        }
    }
    if !refresh(gateway, server).await {
        return Some(false);
    }
    match failed(gateway, server) {
        None => Some(false),
        Some(true) => Some(true),
        Some(false) => None,
    }
}

/// After the followed resources changed: waits [`REFOLLOW_WAIT`] for more changes, then,
/// when what `server` should follow is no longer `asked`, opens its stream with the new set.
/// `None` when the gateway is gone; `Some(None)` when nothing of `server`'s changed.
async fn refollow(
    gateway: &Weak<dyn Watched>,
    server: &str,
    followed: &mut FollowedResources,
    asked: &[String],
    said: &mut Said,
) -> Option<Option<(Vec<String>, ListChanges)>> {
    tokio::time::sleep(REFOLLOW_WAIT).await;
    let inner = gateway.upgrade()?;
    let now = to_follow(&*inner, server, &followed.current(), said);
    if now == asked {
        return Some(None);
    }
    tracing::debug!(upstream = %server, resources = now.len(), "following other resources upstream");
    let reopened = inner.host().changes_of(server, &now).await;
    unfollowed(server, &reopened, said);
    Some(Some((now, reopened)))
}

/// The followed resources (served URIs) that `server` offers, at most [`MAX_FOLLOWED`].
fn to_follow(
    inner: &dyn Watched,
    server: &str,
    followed: &BTreeSet<String>,
    said: &mut Said,
) -> Vec<String> {
    let mut of_server = followed
        .iter()
        .filter(|uri| inner.host().server_of_uri(uri).as_deref() == Some(server));
    let asked: Vec<String> = of_server.by_ref().take(MAX_FOLLOWED).cloned().collect();
    let left = of_server.count();
    if left > 0 && !said.capped {
        said.capped = true;
        tracing::warn!(
            upstream = %server,
            followed = MAX_FOLLOWED,
            left,
            "callers follow more of this upstream's resources than the gateway follows upstream: the others get no updates"
        );
    }
    asked
}

/// Says once that `server` does not follow resources asked of it.
fn unfollowed(server: &str, changes: &ListChanges, said: &mut Said) {
    if !changes.unfollowed.is_empty() && !said.unfollowed {
        said.unfollowed = true;
        tracing::info!(
            upstream = %server,
            resources = %changes.unfollowed.join(", "),
            "the upstream does not follow resources for the gateway (no resource subscriptions): callers that follow them get no updates"
        );
    }
}
