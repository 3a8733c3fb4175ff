//! Listen fan-out through Redis pub/sub: every change is delivered to this instance's
//! subscribers at once and published on `PREFIX changes`, tagged with this fan-out's instance
//! id; a connection of its own, subscribed to that channel, hands every other instance's
//! changes to the local subscribers, and skips this instance's own (delivered already).
//!
//! While Redis is away the local subscribers still get the local changes. A publication that
//! fails is not retried as such: once Redis answers again the instance publishes
//! [`Change::Missed`], and an instance whose subscription broke tells its own subscribers
//! the same once it is subscribed again, so that no listener stays unaware of a change it may
//! have missed. A warning is logged once per outage, and a note when the link is back.
//!
//! The same subscription (one connection per instance) also reads the session relay's channel
//! (`PREFIX sessions-relay`, see [`super::relay`]), so that a session relay costs no connection
//! of its own and is subscribed whenever the fan-out is [`ChangeFanOut::connected`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use redis::aio::{PubSubSink, PubSubStream};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::relay::{RedisSessionRelay, RelayHub};
use super::{Outage, Shared};
use crate::state::StoreError;
use crate::state::fanout::{CHANGE_BACKLOG, Change, ChangeFanOut};

/// How often the subscription's connection is checked with a `PING`, so that a connection
/// that died silently (no reset, a partition) is noticed and made again.
const PING_EVERY: Duration = Duration::from_secs(5);

/// The longest wait between two attempts to reach Redis again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A message on the channel: who published it, and the change.
#[derive(Serialize, Deserialize)]
struct Wire {
    from: String,
    #[serde(flatten)]
    change: WireChange,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
enum WireChange {
    Tools,
    Prompts,
    Resources,
    ResourceUpdated { uri: String },
    Missed,
    Task { id: String },
}

impl From<&Change> for WireChange {
    fn from(change: &Change) -> Self {
        match change {
            Change::Tools => WireChange::Tools,
            Change::Prompts => WireChange::Prompts,
            Change::Resources => WireChange::Resources,
            Change::ResourceUpdated(uri) => WireChange::ResourceUpdated {
                uri: uri.to_string(),
            },
            Change::Missed => WireChange::Missed,
            Change::Task(id) => WireChange::Task { id: id.to_string() },
        }
    }
}

impl From<WireChange> for Change {
    fn from(change: WireChange) -> Self {
        match change {
            WireChange::Tools => Change::Tools,
            WireChange::Prompts => Change::Prompts,
            WireChange::Resources => Change::Resources,
            WireChange::ResourceUpdated { uri } => Change::ResourceUpdated(uri.into()),
            WireChange::Missed => Change::Missed,
            WireChange::Task { id } => Change::Task(id.into()),
        }
    }
}

/// The fan-out of one server on a Redis store.
pub(crate) struct RedisFanOut {
    local: broadcast::Sender<Change>,
    outgoing: mpsc::Sender<Change>,
    /// Set when a change could not be queued for publication: [`Change::Missed`] goes out
    /// next.
    lost: Arc<AtomicBool>,
    subscribed: watch::Receiver<bool>,
    relay: Arc<RelayHub>,
    /// Stops the publisher and the subscription once the fan-out and its session relay are
    /// dropped.
    stop: Arc<DropGuard>,
}

impl std::fmt::Debug for RedisFanOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisFanOut").finish_non_exhaustive()
    }
}

/// What the publisher and the subscription share.
struct Link {
    redis: Shared,
    channel: String,
    /// This fan-out's instance id, on every message it publishes.
    id: String,
    local: broadcast::Sender<Change>,
    relay: Arc<RelayHub>,
    lost: Arc<AtomicBool>,
    outage: Outage,
    stop: CancellationToken,
}

impl RedisFanOut {
    /// A fan-out with an instance id of its own; its publisher and subscription run on the
    /// current Tokio runtime (without one, changes stay in this process, which is logged).
    pub(crate) fn new(redis: Shared) -> Self {
        let local = broadcast::channel(CHANGE_BACKLOG).0;
        let (outgoing, queue) = mpsc::channel(CHANGE_BACKLOG);
        let (subscribed_tx, subscribed) = watch::channel(false);
        let stop = CancellationToken::new();
        let lost = Arc::new(AtomicBool::new(false));
        let id = toolwire_protocol::hex::encode(&rand::random::<[u8; 16]>());
        let relay = Arc::new(RelayHub::new(redis.clone(), id.clone()));
        let link = Arc::new(Link {
            channel: redis.name("changes"),
            redis,
            id,
            local: local.clone(),
            relay: relay.clone(),
            lost: lost.clone(),
            outage: Outage::new(
                "listen fan-out",
                "changes reach only this instance's listeners",
            ),
            stop: stop.clone(),
        });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(publish(link.clone(), queue));
                runtime.spawn(subscribe(link, subscribed_tx));
            }
            Err(_) => tracing::warn!(
                "a Redis change fan-out made outside a Tokio runtime: changes reach only this instance"
            ),
        }
        RedisFanOut {
            local,
            outgoing,
            lost,
            subscribed,
            relay,
            stop: Arc::new(stop.drop_guard()),
        }
    }

    /// The session relay of this instance, received through this fan-out's subscription.
    pub(crate) fn session_relay(&self) -> RedisSessionRelay {
        RedisSessionRelay::new(self.relay.clone(), self.stop.clone())
    }
}

impl ChangeFanOut for RedisFanOut {
    fn publish(&self, change: Change) {
        let _ = self.local.send(change.clone());
        if let Err(mpsc::error::TrySendError::Full(_)) = self.outgoing.try_send(change) {
            self.lost.store(true, Ordering::Relaxed);
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.local.subscribe()
    }

    fn connected(&self) -> BoxFuture<'_, ()> {
        let mut subscribed = self.subscribed.clone();
        Box::pin(async move {
            let _ = subscribed.wait_for(|s| *s).await;
        })
    }
}

impl Link {
    async fn send(&self, change: &Change) -> Result<(), StoreError> {
        let wire = Wire {
            from: self.id.clone(),
            change: change.into(),
        };
        let text = serde_json::to_string(&wire).map_err(StoreError::corrupt)?;
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&self.channel).arg(text);
        self.redis.query::<i64>(&cmd).await.map(drop)
    }

    /// Waits `backoff` (or until stopped: false).
    async fn pause(&self, backoff: Duration) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = tokio::time::sleep(backoff) => true,
        }
    }
}

/// Publishes the queued changes in order. After a failure, [`Change::Missed`] is published
/// (retried every second) before anything else, for the changes that did not go out.
async fn publish(link: Arc<Link>, mut queue: mpsc::Receiver<Change>) {
    loop {
        let next = if link.lost.load(Ordering::Relaxed) {
            tokio::select! {
                () = link.stop.cancelled() => return,
                change = queue.recv() => change,
                () = tokio::time::sleep(MAX_BACKOFF) => Some(Change::Missed),
            }
        } else {
            tokio::select! {
                () = link.stop.cancelled() => return,
                change = queue.recv() => change,
            }
        };
        let Some(change) = next else { return };
        if link.lost.load(Ordering::Relaxed) {
            if let Err(error) = link.send(&Change::Missed).await {
                link.outage.failed(&error);
                continue;
            }
            link.lost.store(false, Ordering::Relaxed);
            link.outage.recovered();
            if change == Change::Missed {
                continue;
            }
        }
        match link.send(&change).await {
            Ok(()) => link.outage.recovered(),
            Err(error) => {
                link.lost.store(true, Ordering::Relaxed);
                link.outage.failed(&error);
            }
        }
    }
}

/// Keeps a subscription to the channel, made again after every failure, and hands other
/// instances' changes to the local subscribers. A subscription made again after a failure
/// first tells them [`Change::Missed`].
async fn subscribe(link: Arc<Link>, subscribed: watch::Sender<bool>) {
    let mut failed_before = false;
    let mut backoff = Duration::from_millis(50);
    loop {
        match connect(&link).await {
            Ok((sink, stream)) => {
                backoff = Duration::from_millis(50);
                if failed_before {
                    let _ = link.local.send(Change::Missed);
                }
                subscribed.send_replace(true);
                link.outage.recovered();
                let broken = relay(&link, sink, stream).await;
                subscribed.send_replace(false);
                match broken {
                    None => return,
                    Some(error) => link.outage.failed(&error),
                }
            }
            Err(error) => link.outage.failed(&error),
        }
        failed_before = true;
        if !link.pause(backoff).await {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A new connection subscribed to the change and session relay channels, within the store's timeout.
async fn connect(link: &Link) -> Result<(PubSubSink, PubSubStream), StoreError> {
    let made = async {
        let mut pubsub = link.redis.client().get_async_pubsub().await?;
        pubsub
            .subscribe(&[link.channel.as_str(), link.relay.channel()])
            .await?;
        Ok::<_, redis::RedisError>(pubsub.split())
    };
    match tokio::time::timeout(link.redis.timeout(), made).await {
        Ok(Ok(split)) => Ok(split),
        Ok(Err(error)) => Err(StoreError::unavailable(error)),
        Err(_) => Err(StoreError::unavailable(super::NoAnswer(
            link.redis.timeout(),
        ))),
    }
}

/// Hands the channel's messages of other instances to the local subscribers until the
/// connection breaks (the reason) or the fan-out stops (`None`).
async fn relay(link: &Link, mut sink: PubSubSink, mut stream: PubSubStream) -> Option<StoreError> {
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        let message = tokio::select! {
            () = link.stop.cancelled() => return None,
            message = stream.next() => message,
            _ = ping.tick() => {
                let pong = tokio::time::timeout(link.redis.timeout(), sink.ping::<redis::Value>()).await;
                match pong {
                    Ok(Ok(_)) => continue,
                    Ok(Err(error)) => return Some(StoreError::unavailable(error)),
                    Err(_) => return Some(StoreError::unavailable(super::NoAnswer(link.redis.timeout()))),
                }
            }
        };
        let Some(message) = message else {
            return Some(StoreError::unavailable(Closed));
        };
        if message.get_channel_name() == link.relay.channel() {
            if let Ok(payload) = message.get_payload::<String>() {
                link.relay.incoming(&payload);
            }
            continue;
        }
        let wire = message
            .get_payload::<String>()
            .ok()
            .and_then(|text| serde_json::from_str::<Wire>(&text).ok());
        match wire {
            Some(wire) if wire.from != link.id => {
                let _ = link.local.send(wire.change.into());
            }
            Some(_) => {}
            None => tracing::debug!("an unreadable message on the change channel, skipped"),
        }
    }
}

/// The subscription's connection closed.
#[derive(Debug, thiserror::Error)]
#[error("the connection of the change subscription closed")]
struct Closed;
