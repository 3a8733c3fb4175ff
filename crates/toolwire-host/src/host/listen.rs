//! The servers' listen streams merged into one stream of list changes: tools, prompts and
//! resources.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{SelectAll, Stream, StreamExt as _};
use toolwire_client::Notification;
use toolwire_client::protocol::SubscriptionFilter;

use super::connect::Connection;

/// A change one server announced.
#[derive(Debug, Clone, PartialEq)]
pub struct ListChange {
    /// The server's name in the configuration.
    pub server: String,
    /// What it announced: its tool, prompt or resource list changed
    /// ([`Notification::ToolsListChanged`], [`Notification::PromptsListChanged`],
    /// [`Notification::ResourcesListChanged`]), its stream reconnected (changes may have been
    /// missed), or the subscriber fell behind. Each means: call
    /// [`Host::refresh`](super::Host::refresh) (or [`Host::refresh_server`](super::Host::refresh_server)).
    pub notification: Notification,
}

/// Every connected server's list changes in one stream. Servers that do not announce tool-list
/// changes are in [`ListChanges::unavailable`]; refresh now and then to see theirs. (A server
/// that offers no prompts or resources does not announce their changes, and is not
/// unavailable for it.)
pub struct ListChanges {
    streams: SelectAll<Pin<Box<dyn Stream<Item = ListChange> + Send>>>,
    /// The servers whose changes cannot be followed, and why.
    pub unavailable: Vec<(String, String)>,
}

impl std::fmt::Debug for ListChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListChanges")
            .field("streams", &self.streams.len())
            .field("unavailable", &self.unavailable)
            .finish()
    }
}

impl Stream for ListChanges {
    type Item = ListChange;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ListChange>> {
        if self.streams.is_empty() {
            // Nothing to follow: pending for ever, as a quiet stream would be.
            return Poll::Pending;
        }
        self.streams.poll_next_unpin(cx)
    }
}

/// The steps of [`Host::list_changes`](super::Host::list_changes): every connection's
/// subscription, merged.
pub(super) async fn list_changes<'c>(
    connections: impl Iterator<Item = &'c Connection>,
) -> ListChanges {
    {
        let filter = SubscriptionFilter {
            tools_list_changed: Some(true),
            prompts_list_changed: Some(true),
            resources_list_changed: Some(true),
            ..SubscriptionFilter::default()
        };
        let opened = futures::future::join_all(connections.map(|c| {
            let filter = filter.clone();
            async move { (c.config.name.clone(), c.client.listen(filter).await) }
        }))
        .await;
        let mut changes = ListChanges {
            streams: SelectAll::new(),
            unavailable: Vec::new(),
        };
        for (server, subscription) in opened {
            let subscription = match subscription {
                Ok(s) if s.acknowledged().tools_list_changed == Some(true) => s,
                Ok(_) => {
                    changes.unavailable.push((
                        server,
                        "the server does not announce tool-list changes".into(),
                    ));
                    continue;
                }
                Err(e) => {
                    changes.unavailable.push((server, e.to_string()));
                    continue;
                }
            };
            let name = server.clone();
            let stream = subscription.filter_map(move |item| {
                let notification = match item {
                    Ok(
                        n @ (Notification::ToolsListChanged
                        | Notification::PromptsListChanged
                        | Notification::ResourcesListChanged
                        | Notification::Reconnected
                        | Notification::Missed { .. }),
                    ) => Some(n),
                    Ok(_) => None,
                    Err(_) => Some(Notification::Reconnected),
                };
                let server = name.clone();
                async move {
                    notification.map(|notification| ListChange {
                        server,
                        notification,
                    })
                }
            });
            changes.streams.push(Box::pin(stream));
        }
        changes
    }
}
