//! The notifications a legacy session gets without asking: legacy clients have no
//! `subscriptions/listen`, so every list change the server offers and every update of a
//! subscribed resource goes to them on the connection (stdio) or the session's GET stream.

use std::collections::BTreeSet;

use tokio::sync::broadcast::error::RecvError;
use toolwire_protocol::SubscriptionFilter;

use crate::server::Server;
use crate::server::subscriptions::{message_for, missed};
use crate::tools::offered::Change;

/// The notifications (serialized) that a change, or a gap in the changes seen (`Lagged`),
/// means for a legacy session subscribed to `subscriptions`.
pub(crate) fn notifications_for(
    server: &Server,
    change: &Result<Change, RecvError>,
    subscriptions: &BTreeSet<String>,
) -> Vec<String> {
    let offers = server.offers();
    let follows = SubscriptionFilter {
        tools_list_changed: Some(true),
        prompts_list_changed: offers.prompts.then_some(true),
        resources_list_changed: offers.resources.then_some(true),
        resource_subscriptions: Some(subscriptions.iter().cloned().collect()),
    };
    let changes = match change {
        Ok(Change::Missed) | Err(RecvError::Lagged(_)) => missed(&follows),
        Ok(change) => vec![change.clone()],
        Err(RecvError::Closed) => Vec::new(),
    };
    changes
        .iter()
        .filter_map(|change| message_for(&follows, change, None))
        .map(|message| message.json)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn server() -> Server {
        Server::builder("t", "1").offer_resources().build().unwrap()
    }

    fn read(messages: Vec<String>) -> Vec<Value> {
        messages
            .iter()
            .map(|m| serde_json::from_str(m).unwrap())
            .collect()
    }

    #[test]
    fn list_changes_and_subscribed_updates_are_untagged_notifications() {
        let server = server();
        let subscribed = BTreeSet::from(["file:///a".to_owned()]);
        assert_eq!(
            read(notifications_for(&server, &Ok(Change::Tools), &subscribed)),
            [json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})]
        );
        assert!(
            notifications_for(&server, &Ok(Change::Prompts), &subscribed).is_empty(),
            "prompts are not offered"
        );
        assert_eq!(
            read(notifications_for(
                &server,
                &Ok(Change::ResourceUpdated("file:///a".into())),
                &subscribed
            )),
            [
                json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}})
            ]
        );
        assert!(
            notifications_for(
                &server,
                &Ok(Change::ResourceUpdated("file:///b".into())),
                &subscribed
            )
            .is_empty()
        );
        let after_a_gap = read(notifications_for(
            &server,
            &Err(RecvError::Lagged(3)),
            &subscribed,
        ));
        let methods: Vec<&str> = after_a_gap
            .iter()
            .map(|m| m["method"].as_str().unwrap())
            .collect();
        assert_eq!(
            methods,
            [
                "notifications/tools/list_changed",
                "notifications/resources/list_changed",
                "notifications/resources/updated"
            ]
        );
    }
}
