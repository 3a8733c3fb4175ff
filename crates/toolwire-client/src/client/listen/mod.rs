//! `subscriptions/listen` from the client's side: one stream of typed
//! notifications per subscription, the acknowledged filter compared with the request (L-05),
//! tool-list changes invalidating the tool cache (K-09), a reconnect after an unexpected drop
//! (L-11) and after a stdio server restart (L-12), and the stream closed when the subscription
//! is dropped (L-09: HTTP closes the stream, stdio sends `notifications/cancelled`).
//! Its rules are under “subscriptions/listen” in docs/requirements.md.
//!
//! A legacy server has no listen: its unsolicited list-change notifications (on stdio, or on the
//! standalone GET stream over HTTP) feed the subscription instead, filtered by what its
//! `initialize` result says it sends; resource subscriptions use `resources/subscribe`.

mod mailbox;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use toolwire_protocol::legacy::{ResourceSubscriptionParams, Subscribe, Unsubscribe};
use toolwire_protocol::methods::{Listen, Method};
use toolwire_protocol::{
    AcknowledgedParams, ErrorObject, ListenParams, NOTIFICATION_PROMPTS_LIST_CHANGED,
    NOTIFICATION_RESOURCES_LIST_CHANGED, NOTIFICATION_RESOURCES_UPDATED,
    NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED, NOTIFICATION_TOOLS_LIST_CHANGED, SubscriptionFilter,
};

use self::mailbox::{Mailbox, Outbox, lock, mailbox};
use crate::client::rpc::Progress;
use crate::client::{Client, RpcOptions, params};
use crate::error::{Error, Result};
use crate::state::{Era, LegacySession};
use crate::transport::{Failure, Outgoing, Transport};

/// The longest wait between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The first wait before reconnecting.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// A notification delivered on a subscription.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Notification {
    /// The tool list changed (the client's tool cache is already invalidated).
    ToolsListChanged,
    /// The prompt list changed.
    PromptsListChanged,
    /// The resource list changed.
    ResourcesListChanged,
    /// A subscribed resource changed.
    ResourceUpdated {
        /// The resource.
        uri: String,
    },
    /// The stream dropped and was opened again: changes in between may have been missed, so
    /// anything cached should be fetched again (L-11, L-12).
    Reconnected,
    /// The subscriber fell behind: this many notifications that cannot be merged (see
    /// [`Subscription`]) were dropped here, so anything cached should be fetched again.
    Missed {
        /// How many were dropped.
        count: u64,
    },
    /// Any other notification on the stream.
    Other {
        /// Its method.
        method: String,
        /// Its params.
        params: Value,
    },
}

impl Notification {
    fn from_message(message: &Value) -> Option<Notification> {
        let method = message["method"].as_str()?;
        Some(match method {
            NOTIFICATION_TOOLS_LIST_CHANGED => Notification::ToolsListChanged,
            NOTIFICATION_PROMPTS_LIST_CHANGED => Notification::PromptsListChanged,
            NOTIFICATION_RESOURCES_LIST_CHANGED => Notification::ResourcesListChanged,
            NOTIFICATION_RESOURCES_UPDATED => Notification::ResourceUpdated {
                uri: message["params"]["uri"].as_str()?.to_owned(),
            },
            _ => Notification::Other {
                method: method.to_owned(),
                params: message.get("params").cloned().unwrap_or(Value::Null),
            },
        })
    }

    fn wanted(&self, filter: &SubscriptionFilter) -> bool {
        match self {
            Notification::ToolsListChanged => filter.tools_list_changed == Some(true),
            Notification::PromptsListChanged => filter.prompts_list_changed == Some(true),
            Notification::ResourcesListChanged => filter.resources_list_changed == Some(true),
            Notification::ResourceUpdated { uri } => filter
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|u| u == uri)),
            Notification::Reconnected
            | Notification::Missed { .. }
            | Notification::Other { .. } => true,
        }
    }
}

/// An open subscription. Dropping it ends the subscription on the server.
///
/// Notifications wait here until taken, and the wait is bounded, so a server that floods and a
/// consumer that is slow cannot grow memory without limit. A list change, a resource update
/// (per URI) or a reconnection that is already waiting absorbs a repeat: the consumer acts on
/// it when it takes it, after both happened, so nothing is lost. Other notifications wait up to
/// [`Subscription::CAPACITY`]; past that they are dropped and counted, and the consumer gets
/// one [`Notification::Missed`] in their place. An error ending the subscription always comes
/// last.
#[derive(Debug)]
pub struct Subscription {
    mailbox: Arc<Mutex<Mailbox>>,
    acknowledged: SubscriptionFilter,
    task: tokio::task::AbortHandle,
    /// A legacy server's resources this subscription subscribed to, given back when dropped.
    subscribed: Option<LegacySubscribed>,
}

impl Subscription {
    /// How many notifications may wait for the consumer before the ones that cannot be merged
    /// are dropped.
    pub const CAPACITY: usize = 128;

    /// What the server agreed to send: the subset of the request it honours (L-04).
    pub fn acknowledged(&self) -> &SubscriptionFilter {
        &self.acknowledged
    }

    /// The next notification; `None` once the server ended the subscription (L-10). An error
    /// is the last item.
    pub async fn next(&mut self) -> Option<Result<Notification>> {
        std::future::poll_fn(|cx| lock(&self.mailbox).poll_take(cx)).await
    }
}

impl futures::Stream for Subscription {
    type Item = Result<Notification>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        lock(&self.mailbox).poll_take(cx)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(subscribed) = self.subscribed.take() {
            subscribed.release();
        }
    }
}

/// Aborts a task when dropped, unless taken.
struct AbortOnDrop(Option<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// The state one listen task shares with its message callback.
struct Listener {
    client: Client,
    tx: Outbox,
    ack: Option<oneshot::Sender<Result<SubscriptionFilter>>>,
    acked: bool,
}

impl Listener {
    fn on_message(&mut self, message: Value) {
        if message["method"] == NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED {
            let honoured = serde_json::from_value::<AcknowledgedParams>(message["params"].clone())
                .map(|p| p.notifications)
                .unwrap_or_default();
            match self.ack.take() {
                Some(ack) => {
                    let _ = ack.send(Ok(honoured));
                }
                // Acknowledged again after a reconnect.
                None => self.tx.push(Notification::Reconnected),
            }
            self.acked = true;
            return;
        }
        let Some(notification) = Notification::from_message(&message) else {
            return;
        };
        if notification == Notification::ToolsListChanged {
            self.client.invalidate_tools();
        }
        self.tx.push(notification);
    }

    /// Ends the subscription with an error: to `listen` before the acknowledgement, else to
    /// the stream.
    fn fail(mut self, error: Error) {
        match self.ack.take() {
            Some(ack) => {
                let _ = ack.send(Err(error));
            }
            None => self.tx.fail(error),
        }
    }
}

impl Client {
    /// Opens a subscription for the notifications `filter` asks for (L-01), and returns once the
    /// server acknowledged it. Compare [`Subscription::acknowledged`] with the request: a server
    /// leaves out what it does not support (L-05).
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Subscription> {
        let mut era = self.era_for_request().await?;
        if matches!(era, Era::Unknown) {
            // Settle the era first (HTTP): a legacy server has no listen.
            self.discover().await?;
            era = self.era_for_request().await?;
        }
        if let Era::Legacy(session) = era {
            return self.listen_legacy(filter, session).await;
        }
        let (inbox, tx) = mailbox();
        let (ack_tx, ack_rx) = oneshot::channel();
        let listener = Listener {
            client: self.clone(),
            tx,
            ack: Some(ack_tx),
            acked: false,
        };
        // Until the subscription exists, dropping this future (or failing) stops the task.
        let mut task = AbortOnDrop(Some(
            tokio::spawn(run(listener, filter.clone())).abort_handle(),
        ));
        let acknowledged = match tokio::time::timeout(self.inner.config.timeout, ack_rx).await {
            Ok(Ok(Ok(filter))) => filter,
            Ok(Ok(Err(error))) => return Err(error),
            Ok(Err(_)) => {
                return Err(Error::Transport(
                    "the listen stream ended before its acknowledgement".into(),
                ));
            }
            Err(_) => return Err(Error::Timeout(self.inner.config.timeout)),
        };
        warn_unhonoured(&filter, &acknowledged);
        Ok(Subscription {
            mailbox: inbox,
            acknowledged,
            task: task.0.take().expect("set above"),
            subscribed: None,
        })
    }

    async fn listen_legacy(
        &self,
        filter: SubscriptionFilter,
        session: Arc<LegacySession>,
    ) -> Result<Subscription> {
        let caps = &session.initialized["capabilities"];
        let list_changed = |kind: &str, asked: Option<bool>| {
            (asked == Some(true) && caps[kind]["listChanged"] == true).then_some(true)
        };
        let mut acknowledged = SubscriptionFilter {
            tools_list_changed: list_changed("tools", filter.tools_list_changed),
            prompts_list_changed: list_changed("prompts", filter.prompts_list_changed),
            resources_list_changed: list_changed("resources", filter.resources_list_changed),
            resource_subscriptions: None,
        };
        let mut held = None;
        if let Some(uris) = &filter.resource_subscriptions {
            if caps["resources"]["subscribe"] == true {
                let subscribed = self.subscribe_legacy(&session, uris).await;
                held = Some(LegacySubscribed {
                    client: Arc::downgrade(&self.inner),
                    session: session.clone(),
                    uris: subscribed.clone(),
                });
                acknowledged.resource_subscriptions = Some(subscribed);
            }
        }
        warn_unhonoured(&filter, &acknowledged);
        let mut events = self.inner.events.subscribe();
        if let Transport::Http(_) = &self.inner.transport {
            self.ensure_legacy_stream();
        }
        let (inbox, tx) = mailbox();
        let wanted = acknowledged.clone();
        let task = tokio::spawn(async move {
            loop {
                let notification = match events.recv().await {
                    Ok(message) => match Notification::from_message(&message) {
                        Some(n) if n.wanted(&wanted) => n,
                        _ => continue,
                    },
                    Err(broadcast::error::RecvError::Lagged(_)) => Notification::Reconnected,
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                if tx.is_closed() {
                    break;
                }
                tx.push(notification);
            }
        })
        .abort_handle();
        Ok(Subscription {
            mailbox: inbox,
            acknowledged,
            task,
            subscribed: held,
        })
    }

    /// Subscribes the legacy session to each of `uris` no subscription of this client follows
    /// yet (`resources/subscribe`); returns those followed now.
    async fn subscribe_legacy(&self, session: &LegacySession, uris: &[String]) -> Vec<String> {
        let mut counts = session.subscribed.lock().await;
        let mut subscribed = Vec::new();
        for uri in uris {
            if subscribed.contains(uri) {
                continue;
            }
            if !counts.contains_key(uri) {
                let params = params(&ResourceSubscriptionParams { uri: uri.clone() });
                let sent = self
                    .rpc(Subscribe::METHOD, &params, &RpcOptions::default())
                    .await;
                if let Err(error) = sent {
                    tracing::warn!(%uri, %error, "{} failed", Subscribe::METHOD);
                    continue;
                }
            }
            *counts.entry(uri.clone()).or_default() += 1;
            subscribed.push(uri.clone());
        }
        subscribed
    }

    /// Keeps the legacy HTTP server's standalone GET stream open, where its unsolicited
    /// notifications arrive, for as long as legacy subscriptions exist. Each connection uses
    /// the current session; a 404 renews the session first.
    fn ensure_legacy_stream(&self) {
        let Transport::Http(http) = &self.inner.transport else {
            return;
        };
        let mut slot = self
            .inner
            .legacy_stream
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let http = http.clone();
        let weak = Arc::downgrade(&self.inner);
        let task = tokio::spawn(async move {
            let mut backoff = FIRST_BACKOFF;
            loop {
                // Never hold the client across the stream: it must be able to go away.
                let session = {
                    let Some(inner) = weak.upgrade() else { return };
                    let client = Client { inner };
                    if client.inner.events.receiver_count() == 0 {
                        return;
                    }
                    match client.era_for_request().await {
                        Ok(Era::Legacy(session)) => session,
                        _ => return,
                    }
                };
                let deliver_to = weak.clone();
                let mut deliver = move |message: Value| {
                    if let Some(inner) = deliver_to.upgrade() {
                        Client { inner }.incoming(message);
                    }
                };
                let outcome = http
                    .get_stream(&session.version, session.session.as_deref(), &mut deliver)
                    .await;
                match outcome {
                    Err(Error::Http { status: 405, .. }) => {
                        tracing::info!(
                            "the legacy server offers no GET stream; no unsolicited notifications"
                        );
                        return;
                    }
                    Err(Error::Http { status: 404, .. }) => {
                        if let Some(inner) = weak.upgrade() {
                            Client { inner }.forget_legacy_session(&Era::Legacy(session));
                        }
                    }
                    Ok(()) => backoff = FIRST_BACKOFF,
                    Err(error) => tracing::debug!(%error, "the legacy GET stream failed"),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
        *slot = Some(task.abort_handle());
    }
}

/// The resources a legacy subscription subscribed its session to. Given back when the
/// subscription is dropped: each that no other subscription of the client follows is
/// unsubscribed (`resources/unsubscribe`), so that the server stops sending its updates.
#[derive(Debug)]
struct LegacySubscribed {
    client: std::sync::Weak<super::Inner>,
    session: Arc<LegacySession>,
    uris: Vec<String>,
}

impl LegacySubscribed {
    /// Gives the resources back, in a task of the current runtime (none: the client is being
    /// torn down with it, and so is the session).
    fn release(self) {
        if self.uris.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let mut counts = self.session.subscribed.lock().await;
            let client = self.client.upgrade().map(|inner| Client { inner });
            for uri in self.uris {
                let Some(count) = counts.get_mut(&uri) else {
                    continue;
                };
                *count -= 1;
                if *count > 0 {
                    continue;
                }
                counts.remove(&uri);
                let Some(client) = &client else { continue };
                let params = params(&ResourceSubscriptionParams { uri: uri.clone() });
                let sent = client
                    .rpc(Unsubscribe::METHOD, &params, &RpcOptions::default())
                    .await;
                if let Err(error) = sent {
                    tracing::debug!(%uri, %error, "{} failed", Unsubscribe::METHOD);
                }
            }
        });
    }
}

/// L-05: says which parts of the request the server does not honour.
fn warn_unhonoured(asked: &SubscriptionFilter, honoured: &SubscriptionFilter) {
    let dropped = |a: Option<bool>, h: Option<bool>| a == Some(true) && h != Some(true);
    let mut missing = Vec::new();
    if dropped(asked.tools_list_changed, honoured.tools_list_changed) {
        missing.push("toolsListChanged".to_owned());
    }
    if dropped(asked.prompts_list_changed, honoured.prompts_list_changed) {
        missing.push("promptsListChanged".to_owned());
    }
    if dropped(
        asked.resources_list_changed,
        honoured.resources_list_changed,
    ) {
        missing.push("resourcesListChanged".to_owned());
    }
    for uri in asked.resource_subscriptions.iter().flatten() {
        let kept = honoured
            .resource_subscriptions
            .as_ref()
            .is_some_and(|h| h.contains(uri));
        if !kept {
            missing.push(format!("resourceSubscriptions {uri}"));
        }
    }
    if !missing.is_empty() {
        tracing::warn!(
            missing = %missing.join(", "),
            "the server does not honour part of the subscription"
        );
    }
}

/// One subscription's life: listen, deliver, and reconnect after unexpected drops.
async fn run(mut listener: Listener, filter: SubscriptionFilter) {
    let client = listener.client.clone();
    let mut backoff = FIRST_BACKOFF;
    let mut authorizations = 0;
    loop {
        if listener.tx.is_closed() {
            // Nobody is listening any more.
            return;
        }
        let token = client.token_generation();
        let era = match client.era_for_request().await {
            Ok(era) => era,
            Err(error) if listener.ack.is_some() || client.is_closed() => {
                return listener.fail(error);
            }
            Err(error) => {
                tracing::debug!(%error, "cannot reach the server to listen again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let outcome = match listen_once(&mut listener, &era, &filter).await {
            Ok(outcome) => outcome,
            Err(error) => return listener.fail(error),
        };
        match outcome {
            Ok(reply) => {
                if let Some(error) = reply.message.error() {
                    let error = serde_json::from_value::<ErrorObject>(error.clone())
                        .map(Error::Rpc)
                        .unwrap_or_else(|e| {
                            Error::InvalidResponse(format!("malformed error: {e}"))
                        });
                    return listener.fail(error);
                }
                // The server ended the subscription (L-10).
                return;
            }
            Err(Failure::Error(error @ Error::Unauthorized { .. })) => {
                // A challenge: authorize and listen again with the new token.
                let options = crate::client::RpcOptions::default();
                match client
                    .authorized_again(&error, token, &mut authorizations, &options)
                    .await
                {
                    Ok(true) => continue,
                    Ok(false) => return listener.fail(error),
                    Err(failed) => return listener.fail(failed),
                }
            }
            Err(Failure::Error(error)) if listener.ack.is_some() => return listener.fail(error),
            Err(failure) if client.is_closed() => return listener.fail(failure.into_error()),
            Err(failure) => {
                // An unexpected drop (L-11); on stdio the server is started again first and the
                // listen re-sent (L-12).
                if listener.acked {
                    backoff = FIRST_BACKOFF;
                    authorizations = 0;
                }
                let error = failure.into_error();
                tracing::info!(
                    %error,
                    backoff_ms = backoff.as_millis() as u64,
                    "the listen stream dropped; reconnecting"
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Sends one `subscriptions/listen` in `era` and waits for the stream's end, the listener
/// taking every message on the way. The outer error: the request could not be written.
async fn listen_once(
    listener: &mut Listener,
    era: &Era,
    filter: &SubscriptionFilter,
) -> Result<std::result::Result<crate::transport::Reply, Failure>> {
    let client = listener.client.clone();
    let id = client.next_id();
    let params = params(&ListenParams {
        notifications: filter.clone(),
        ..Default::default()
    });
    let body = client.envelope(era, id, Listen::METHOD, &params, Progress::Unwanted)?;
    let (version, session) = client.wire_identity(era);
    let out = Outgoing {
        id: Some(id),
        method: Listen::METHOD,
        body,
        name: None,
        mirrored: &[],
        version: Some(&version),
        session: session.as_deref(),
        legacy: false,
        bearer: None,
        trace: None,
    };
    listener.acked = false;
    let mut on_message = |message: Value| listener.on_message(message);
    Ok(client.inner.transport.request(&out, &mut on_message).await)
}
