//! Client capabilities (declared per request) and server capabilities (in `server/discover`).

use serde::{Deserialize, Serialize};

use crate::extra::deserialize_with_extra;
use crate::{JsonObject, is_empty_object};

/// What a client supports, declared on every request (B-15, B-20). `{}` means nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClientCapabilities {
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The client can answer `roots/list` input requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<RootsCapability>,
    /// The client can answer `sampling/createMessage` input requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingCapability>,
    /// The client can answer `elicitation/create` input requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// Extensions by identifier, e.g. `io.modelcontextprotocol/tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

impl ClientCapabilities {
    /// Whether the client declared form-mode elicitation (`{}` means form; M-15).
    pub fn supports_elicitation_form(&self) -> bool {
        self.elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    }

    /// Whether the client declared URL-mode elicitation.
    pub fn supports_elicitation_url(&self) -> bool {
        self.elicitation.as_ref().is_some_and(|e| e.url.is_some())
    }

    /// Whether the client declared the extension `id`.
    pub fn has_extension(&self, id: &str) -> bool {
        self.extensions.as_ref().is_some_and(|e| e.contains_key(id))
    }
}

/// The `roots` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RootsCapability {
    /// Fields of the capability object (`listChanged` of older revisions lands here).
    pub extra: JsonObject,
}

/// The `sampling` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SamplingCapability {
    /// The client honours `includeContext` (deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
    /// The client supports `tools` and `toolChoice` in sampling requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// The `elicitation` client capability; `{}` means form mode only.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ElicitationCapability {
    /// Form mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<JsonObject>,
    /// URL mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<JsonObject>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// What a server offers, reported by `server/discover`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerCapabilities {
    /// Non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The server may send `notifications/message` (deprecated; P-16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// The server answers `completion/complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// The server offers prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChangedCapability>,
    /// The server offers resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// The server offers tools (T-01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChangedCapability>,
    /// Extensions by identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// A capability that may announce list changes (`tools`, `prompts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChangedCapability {
    /// Whether list-changed notifications are sent on listen streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
}

/// The `resources` server capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// Whether `resourceSubscriptions` on listen streams are honoured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// Whether list-changed notifications are sent on listen streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
}

deserialize_with_extra!(ClientCapabilities {
    required: [],
    optional: [
        experimental = "experimental",
        roots = "roots",
        sampling = "sampling",
        elicitation = "elicitation",
        extensions = "extensions"
    ],
});
deserialize_with_extra!(SamplingCapability {
    required: [],
    optional: [context = "context", tools = "tools"]
});
deserialize_with_extra!(ElicitationCapability {
    required: [],
    optional: [form = "form", url = "url"]
});
deserialize_with_extra!(ServerCapabilities {
    required: [],
    optional: [
        experimental = "experimental",
        logging = "logging",
        completions = "completions",
        prompts = "prompts",
        resources = "resources",
        tools = "tools",
        extensions = "extensions",
    ],
});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elicitation_modes() {
        let cases = [
            (json!({}), false, false),
            (json!({"elicitation": {}}), true, false),
            (json!({"elicitation": {"url": {}}}), false, true),
            (json!({"elicitation": {"form": {}, "url": {}}}), true, true),
        ];
        for (input, form, url) in cases {
            let caps: ClientCapabilities = serde_json::from_value(input.clone()).unwrap();
            assert_eq!(caps.supports_elicitation_form(), form, "{input}");
            assert_eq!(caps.supports_elicitation_url(), url, "{input}");
        }
    }

    #[test]
    fn unknown_keys_are_kept_and_required_shapes_checked() {
        let input = json!({"sampling": {"tools": {}, "x-vendor": 1}, "roots": {"listChanged": true}, "custom": [1]});
        let caps: ClientCapabilities = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(caps.extra["custom"], json!([1]));
        assert_eq!(caps.sampling.as_ref().unwrap().extra["x-vendor"], json!(1));
        assert_eq!(serde_json::to_value(&caps).unwrap(), input);
        assert!(serde_json::from_value::<ClientCapabilities>(json!({"sampling": 5})).is_err());
        assert!(serde_json::from_value::<ClientCapabilities>(json!([])).is_err());
        let null: ClientCapabilities = serde_json::from_value(json!({"sampling": null})).unwrap();
        assert!(null.sampling.is_none());
    }
}
