//! The servers' listen streams merged into one stream of list changes: tools, prompts and
//! resources.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{SelectAll, Stream, StreamExt as _};
use toolwire_client::protocol::SubscriptionFilter;
use toolwire_client::{Notification, Subscription};

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
/// changes are in [`ListChanges::unavailable`]; refresh now and then to see theirs (the
/// stream still brings the updates of the resources such a server follows). (A server
/// that offers no prompts or resources does not announce their changes, and is not
/// unavailable for it.)
pub struct ListChanges {
    streams: SelectAll<Pin<Box<dyn Stream<Item = ListChange> + Send>>>,
    /// The servers whose changes cannot be followed, and why.
    pub unavailable: Vec<(String, String)>,
    /// The resources asked to be followed ([`Host::changes_of`](super::Host::changes_of)) whose
    /// updates the server does not send (it does not support subscriptions, or refused them),
    /// under the host's URIs.
    pub unfollowed: Vec<String>,
}

impl std::fmt::Debug for ListChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListChanges")
            .field("streams", &self.streams.len())
            .field("unavailable", &self.unavailable)
            .field("unfollowed", &self.unfollowed)
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

/// Resources to follow on one server: the server's own URIs, each with the host's URI for it.
pub(super) struct Following {
    pub(super) server: String,
    pub(super) uris: Vec<(String, String)>,
}

/// The steps of [`Host::list_changes`](super::Host::list_changes): every connection's
/// subscription, merged; with `following`, updates of those resources of its server too.
pub(super) async fn list_changes<'c>(
    connections: impl Iterator<Item = &'c Connection>,
    following: Option<Following>,
) -> ListChanges {
    {
        let filter = SubscriptionFilter {
            tools_list_changed: Some(true),
            prompts_list_changed: Some(true),
            resources_list_changed: Some(true),
            ..SubscriptionFilter::default()
        };
        let following = following.as_ref();
        let opened = futures::future::join_all(connections.map(|c| {
            let mut filter = filter.clone();
            let name = c.config.name.clone();
            if let Some(f) = following.filter(|f| f.server == name && !f.uris.is_empty()) {
                let own = f.uris.iter().map(|(own, _)| own.clone()).collect();
                filter.resource_subscriptions = Some(own);
            }
            async move {
                // Changes of the lists the server says it announces: one that offers no
                // prompts is not asked for prompt-list changes (and not warned about them).
                if let Ok(discovered) = c.client.discover().await {
                    let announces =
                        |list_changed: Option<bool>| (list_changed == Some(true)).then_some(true);
                    let capabilities = discovered.capabilities;
                    filter.prompts_list_changed =
                        announces(capabilities.prompts.and_then(|p| p.list_changed));
                    filter.resources_list_changed =
                        announces(capabilities.resources.and_then(|r| r.list_changed));
                }
                (name, c.client.listen(filter).await)
            }
        }))
        .await;
        let mut changes = ListChanges {
            streams: SelectAll::new(),
            unavailable: Vec::new(),
            unfollowed: Vec::new(),
        };
        for (server, subscription) in opened {
            let subscription = match subscription {
                Ok(s) => s,
                Err(e) => {
                    changes.unavailable.push((server, e.to_string()));
                    continue;
                }
            };
            // The followed resources, the server's own URI to the host's.
            let mut followed = Vec::new();
            if let Some(f) = following.filter(|f| f.server == server) {
                let acknowledged = subscription
                    .acknowledged()
                    .resource_subscriptions
                    .as_deref();
                for (own, hosts) in &f.uris {
                    if acknowledged.unwrap_or_default().contains(own) {
                        followed.push((own.clone(), hosts.clone()));
                    } else {
                        changes.unfollowed.push(hosts.clone());
                    }
                }
            }
            if subscription.acknowledged().tools_list_changed != Some(true) {
                changes.unavailable.push((
                    server.clone(),
                    "the server does not announce tool-list changes".into(),
                ));
                // Its stream is kept for the updates of the resources it follows, if any.
                if followed.is_empty() {
                    continue;
                }
            }
            let stream = announced(server, subscription, followed);
            changes.streams.push(Box::pin(stream));
        }
        changes
    }
}

/// The changes `server`'s subscription announces: its list changes, reconnections and gaps,
/// and the updates of the `followed` resources (the server's own URI, the host's), under the
/// host's URIs.
fn announced(
    server: String,
    subscription: Subscription,
    followed: Vec<(String, String)>,
) -> impl Stream<Item = ListChange> + Send + 'static {
    subscription.filter_map(move |item| {
        let notification = match item {
            Ok(
                n @ (Notification::ToolsListChanged
                | Notification::PromptsListChanged
                | Notification::ResourcesListChanged
                | Notification::Reconnected
                | Notification::Missed { .. }),
            ) => Some(n),
            Ok(Notification::ResourceUpdated { uri }) => updated_under_host_uri(&followed, &uri)
                .map(|uri| Notification::ResourceUpdated { uri }),
            Ok(_) => None,
            Err(_) => Some(Notification::Reconnected),
        };
        let server = server.clone();
        async move {
            notification.map(|notification| ListChange {
                server,
                notification,
            })
        }
    })
}

/// The host's URI for an update of the server's resource `uri`, if it is one of `followed` or
/// under one of them (a server may send updates of resources under a subscribed one); `None`
/// for an update nobody asked for.
fn updated_under_host_uri(followed: &[(String, String)], uri: &str) -> Option<String> {
    followed.iter().find_map(|(own, hosts)| {
        let rest = uri.strip_prefix(own.as_str())?;
        let under = rest.is_empty() || own.ends_with('/') || rest.starts_with('/');
        // The host's URI is the server's own preceded by its prefix (or unchanged): the same
        // rest follows it.
        under.then(|| format!("{hosts}{rest}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_are_reported_under_the_host_uri_of_what_was_followed() {
        let followed = vec![
            ("file:///a".to_owned(), "toolwire://fs/file:///a".to_owned()),
            (
                "file:///dir/".to_owned(),
                "toolwire://fs/file:///dir/".to_owned(),
            ),
        ];
        let table: &[(&str, Option<&str>)] = &[
            ("file:///a", Some("toolwire://fs/file:///a")),
            ("file:///a/b", Some("toolwire://fs/file:///a/b")),
            ("file:///dir/x", Some("toolwire://fs/file:///dir/x")),
            ("file:///ab", None),
            ("file:///other", None),
        ];
        for (uri, want) in table {
            assert_eq!(
                updated_under_host_uri(&followed, uri).as_deref(),
                *want,
                "{uri}"
            );
        }
    }
}
