//! `subscriptions/listen`: the filter, its acknowledgement and the closing result.
//! Its rules are under “subscriptions/listen” in docs/requirements.md.

use serde::{Deserialize, Serialize};

use crate::{NotificationMeta, RequestMeta};

/// Which notifications a listen stream opts into; an absent field means not subscribed (L-01).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
}

/// Params of `subscriptions/listen`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
    /// What to listen for.
    pub notifications: SubscriptionFilter,
}

/// Params of `notifications/subscriptions/acknowledged` (L-03, L-04).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcknowledgedParams {
    /// Carries the subscription id (Q-07: always sent).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
    /// The subset of the filter the server honours.
    pub notifications: SubscriptionFilter,
}
