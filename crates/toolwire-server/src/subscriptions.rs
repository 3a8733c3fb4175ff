//! `subscriptions/listen` (CHECKLIST §7): acknowledge the honoured filter, then forward matching
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
    AcknowledgedParams, EmptyResult, ListChangedParams, NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED,
    NOTIFICATION_TOOLS_LIST_CHANGED, Notification, NotificationMeta, RequestId, ResultMeta,
    ResultType, SubscriptionFilter,
};

use crate::context::RequestContext;
use crate::dispatch::Final;
use crate::server::{Change, Server};

/// One message of a subscription stream; the closing result is `last`.
pub(crate) struct ListenMessage {
    pub(crate) json: String,
    pub(crate) last: bool,
}

impl Server {
    /// The part of `filter` this server honours (L-04): unsupported kinds are left out.
    pub(crate) fn honoured(&self, filter: &SubscriptionFilter) -> SubscriptionFilter {
        SubscriptionFilter {
            tools_list_changed: (filter.tools_list_changed == Some(true)).then_some(true),
            ..Default::default()
        }
    }

    /// The messages of one subscription: the acknowledgement (L-03), then the changes the
    /// honoured filter asks for (L-02, L-06), then — when `closing` fires — the closing result
    /// (L-10). It ends without a result when `cancel` fires (L-09).
    pub(crate) fn listen_stream(
        &self,
        id: RequestId,
        filter: &SubscriptionFilter,
        cancel: CancellationToken,
        closing: CancellationToken,
    ) -> impl Stream<Item = ListenMessage> + Send + 'static {
        let honoured = self.honoured(filter);
        // Subscribe before acknowledging so no change between the two is missed.
        let mut changes = self.inner.changes.subscribe();
        let result_meta = self.result_meta();
        async_stream::stream! {
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
                let wanted: &[Change] = match &change {
                    Ok(change) => std::slice::from_ref(change),
                    // Missed changes: tell the client about every kind it follows (conservative).
                    Err(RecvError::Lagged(_)) => &[Change::Tools],
                    Err(RecvError::Closed) => break,
                };
                for change in wanted {
                    match change {
                        Change::Tools if honoured.tools_list_changed == Some(true) => {
                            yield notification(NOTIFICATION_TOOLS_LIST_CHANGED, ListChangedParams { meta: tag() });
                        }
                        Change::Tools => {}
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
            ctx.cancellation().clone(),
            ctx.closing().clone(),
        );
        let mut stream = std::pin::pin!(stream);
        while let Some(message) = stream.next().await {
            if message.last {
                return Some(Final {
                    json: message.json,
                    error_code: None,
                });
            }
            if !ctx.send_json(message.json).await {
                return None;
            }
        }
        None
    }
}

fn notification<P: Serialize>(method: &str, params: P) -> ListenMessage {
    let json = serde_json::to_string(&Notification::new(method, params)).unwrap_or_else(|e| {
        tracing::error!(error = %e, method, "cannot serialize a notification");
        String::new()
    });
    ListenMessage { json, last: false }
}
