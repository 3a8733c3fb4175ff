//! `subscriptions/listen` (CHECKLIST §7): acknowledge the honoured filter, then forward matching
//! changes, each tagged with the subscription id, until the client cancels or the server shuts
//! down (then a closing result). The server keeps no subscription state beyond the open stream.

use tokio::sync::broadcast::error::RecvError;
use toolwire_protocol::{
    AcknowledgedParams, EmptyResult, ListChangedParams, NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED,
    NOTIFICATION_TOOLS_LIST_CHANGED, NotificationMeta, RequestId, ResultMeta, ResultType,
    SubscriptionFilter,
};

use crate::context::RequestContext;
use crate::dispatch::Final;
use crate::server::{Change, Server};

impl Server {
    /// The part of `filter` this server honours (L-04): unsupported kinds are left out.
    pub(crate) fn honoured(&self, filter: &SubscriptionFilter) -> SubscriptionFilter {
        SubscriptionFilter {
            tools_list_changed: (filter.tools_list_changed == Some(true)).then_some(true),
            ..Default::default()
        }
    }

    pub(crate) async fn listen(
        &self,
        id: &RequestId,
        filter: SubscriptionFilter,
        ctx: RequestContext,
    ) -> Option<Final> {
        let honoured = self.honoured(&filter);
        // Subscribe before acknowledging so no change between the two is missed.
        let mut changes = self.inner.changes.subscribe();
        let tag = || Some(NotificationMeta::subscription(id.clone()));
        let ack = AcknowledgedParams {
            meta: tag(),
            notifications: honoured.clone(),
        };
        if !ctx
            .notify(NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED, ack)
            .await
        {
            return None;
        }
        let closing = ctx.closing().clone();
        loop {
            let change = tokio::select! {
                biased;
                _ = ctx.cancellation().cancelled() => return None,
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
                let sent = match change {
                    Change::Tools if honoured.tools_list_changed == Some(true) => {
                        let params = ListChangedParams { meta: tag() };
                        ctx.notify(NOTIFICATION_TOOLS_LIST_CHANGED, params).await
                    }
                    Change::Tools => true,
                };
                if !sent {
                    return None;
                }
            }
        }
        // Server-initiated end: the closing result carries the subscription id (L-06, L-10).
        let meta = ResultMeta {
            subscription_id: Some(id.clone()),
            ..self.result_meta().unwrap_or_default()
        };
        let result = EmptyResult {
            result_type: ResultType::Complete,
            meta: Some(meta),
            ..Default::default()
        };
        Some(Final::result(id, &result))
    }
}
