//! `subscriptions/listen` (L-01…L-12): acknowledge the honoured filter, then forward matching
//! changes, each tagged with the subscription id, until the client cancels or the server shuts
//! down (then a closing result). The server keeps no subscription state beyond the open stream.
//!
//! A subscription is a plain stream of messages: HTTP turns it straight into the SSE body (no
//! task, no channel per stream), other transports forward it through the request context.

use futures::{Stream, StreamExt as _};
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use toolwire_protocol::{
    AcknowledgedParams, EmptyResult, ListChangedParams, NOTIFICATION_PROMPTS_LIST_CHANGED,
    NOTIFICATION_RESOURCES_LIST_CHANGED, NOTIFICATION_RESOURCES_UPDATED,
    NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED, NOTIFICATION_TOOLS_LIST_CHANGED, Notification,
    NotificationMeta, RequestId, ResourceUpdatedParams, ResultMeta, ResultType, SubscriptionFilter,
};

use crate::request::context::RequestContext;
use crate::request::outcome::Final;
use crate::server::Server;
use crate::server::offers::covers;
use crate::server::visibility::SeenTools;
use crate::tools::catalog::permits;
use crate::tools::offered::Change;
use crate::tools::visibility::Follower;

/// One message of a subscription stream; the closing result is `last`.
pub(crate) struct ListenMessage {
    pub(crate) json: String,
    pub(crate) last: bool,
}

impl Server {
    /// The part of `filter` this server honours (L-04): kinds it does not offer are left out,
    /// and so are resources the caller may not read, for its scopes (with OAuth) or because
    /// the server's [`ToolVisibility`](crate::ToolVisibility) hides them from it: a
    /// subscription must not tell a caller when something it may not read changes.
    pub(crate) fn honoured(
        &self,
        filter: &SubscriptionFilter,
        follower: &Follower,
    ) -> SubscriptionFilter {
        let granted = follower.scopes.as_deref();
        let offers = self.offers();
        let readable = |uri: &String| {
            permits(granted, &self.resource_scopes(uri)) && !self.hides_resource(follower, uri)
        };
        let asked =
            |flag: Option<bool>, offered: bool| (flag == Some(true) && offered).then_some(true);
        SubscriptionFilter {
            tools_list_changed: asked(filter.tools_list_changed, true),
            prompts_list_changed: asked(filter.prompts_list_changed, offers.prompts),
            resources_list_changed: asked(filter.resources_list_changed, offers.resources),
            resource_subscriptions: filter
                .resource_subscriptions
                .as_ref()
                .map(|uris| {
                    uris.iter()
                        .filter(|u| readable(u))
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .filter(|uris| offers.resources && !uris.is_empty()),
        }
    }

    /// The messages of one subscription: the acknowledgement (L-03), then the changes the
    /// honoured filter asks for (L-02, L-06), then — when `closing` fires — the closing result
    /// (L-10). It ends without a result when `cancel` fires (L-09).
    pub(crate) fn listen_stream(
        &self,
        id: RequestId,
        filter: &SubscriptionFilter,
        follower: Follower,
        cancel: CancellationToken,
        closing: CancellationToken,
    ) -> impl Stream<Item = ListenMessage> + Send + 'static {
        let honoured = self.honoured(filter, &follower);
        // Subscribe before acknowledging so no change between the two is missed.
        let mut changes = self.subscribe_changes();
        let result_meta = self.result_meta().cloned();
        // The tool list this caller sees, where callers see different lists: a change of the
        // tool set is passed on only when it changed (a change it cannot see is not its).
        let server = self.clone();
        let mut seen =
            (honoured.tools_list_changed == Some(true)).then(|| SeenTools::new(&server, follower));
        // The resources it follows count as followed here while the stream lives.
        let following = honoured
            .resource_subscriptions
            .as_ref()
            .map(|uris| self.followers().hold(uris.iter().cloned().collect()));
        // Counted as open while the stream lives (O-04).
        let open = self.metrics().map(crate::observe::Metrics::listen_stream);
        async_stream::stream! {
            let _following = following;
            let _open = open;
            let tag = || Some(NotificationMeta::subscription(id.clone()));
            let ack = AcknowledgedParams { meta: tag(), notifications: honoured.clone() };
            yield notification(NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED, ack);
            loop {
                let change = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return,
                    _ = closing.cancelled() => break,
                    change = changes.recv() => change,
                };
                let changes_seen: Vec<Change> = match change {
                    Ok(Change::Missed) => missed(&honoured),
                    Ok(change) => vec![change],
                    // Missed changes: tell the client about everything it follows (conservative).
                    Err(RecvError::Lagged(_)) => missed(&honoured),
                    Err(RecvError::Closed) => break,
                };
                for change in changes_seen {
                    if seen.as_mut().is_some_and(|seen| !seen.is_news(&server, &change)) {
                        continue;
                    }
                    if let Some(message) = message_for(&honoured, &change, tag()) {
                        yield message;
                    }
                }
            }
            // Server-initiated end: the closing result carries the subscription id (L-06, L-10).
            let meta = ResultMeta { subscription_id: Some(id.clone()), ..result_meta.unwrap_or_default() };
            let result = EmptyResult { result_type: ResultType::Complete, meta: Some(meta), ..Default::default() };
            yield ListenMessage { json: Final::result(&id, &result).json, last: true };
        }
    }

    /// A subscription run through a request context (stdio, in memory): its notifications go
    /// out through the context, its closing result is the final message.
    pub(crate) async fn listen(
        &self,
        id: &RequestId,
        filter: SubscriptionFilter,
        ctx: RequestContext,
    ) -> Option<Final> {
        let stream = self.listen_stream(
            id.clone(),
            &filter,
            Follower::of(&ctx),
            ctx.cancellation().clone(),
            ctx.closing().clone(),
        );
        let mut stream = std::pin::pin!(stream);
        while let Some(message) = stream.next().await {
            if message.last {
                return Some(Final {
                    json: message.json,
                    error_code: None,
                    tool_error: false,
                });
            }
            if !ctx.send_json(message.json).await {
                return None;
            }
        }
        None
    }
}

/// The notification a change means for a stream with this honoured filter, if any.
pub(crate) fn message_for(
    honoured: &SubscriptionFilter,
    change: &Change,
    meta: Option<NotificationMeta>,
) -> Option<ListenMessage> {
    let on = |flag: Option<bool>| flag == Some(true);
    match change {
        Change::Tools if on(honoured.tools_list_changed) => Some(notification(
            NOTIFICATION_TOOLS_LIST_CHANGED,
            ListChangedParams { meta },
        )),
        Change::Prompts if on(honoured.prompts_list_changed) => Some(notification(
            NOTIFICATION_PROMPTS_LIST_CHANGED,
            ListChangedParams { meta },
        )),
        Change::Resources if on(honoured.resources_list_changed) => Some(notification(
            NOTIFICATION_RESOURCES_LIST_CHANGED,
            ListChangedParams { meta },
        )),
        Change::ResourceUpdated(uri) => {
            let subscribed = honoured
                .resource_subscriptions
                .as_deref()
                .unwrap_or_default();
            subscribed.iter().any(|s| covers(s, uri)).then(|| {
                notification(
                    NOTIFICATION_RESOURCES_UPDATED,
                    ResourceUpdatedParams {
                        uri: uri.to_string(),
                        meta,
                    },
                )
            })
        }
        _ => None,
    }
}

/// What to announce after missing changes: every list the stream follows, and an update of
/// every resource it subscribed to.
pub(crate) fn missed(honoured: &SubscriptionFilter) -> Vec<Change> {
    let mut changes = vec![Change::Tools, Change::Prompts, Change::Resources];
    for uri in honoured.resource_subscriptions.iter().flatten() {
        changes.push(Change::ResourceUpdated(uri.as_str().into()));
    }
    changes
}

fn notification<P: Serialize>(method: &str, params: P) -> ListenMessage {
    let json = serde_json::to_string(&Notification::new(method, params)).unwrap_or_else(|e| {
        tracing::error!(error = %e, method, "cannot serialize a notification");
        String::new()
    });
    ListenMessage { json, last: false }
}
