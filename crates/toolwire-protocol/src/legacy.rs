//! The initialization-based revisions (2025-11-25 and earlier) that a dual-era server or client
//! still speaks: their versions, the `initialize` handshake, and the session-scoped methods that
//! 2026-07-28 removed. Plain data, like the rest of this crate.

use serde::{Deserialize, Serialize};

use crate::methods::method;
use crate::{
    ClientCapabilities, EmptyResult, Implementation, JsonObject, LoggingLevel, ServerCapabilities,
    is_empty_object,
};

/// The initialization-based revisions, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The newest initialization-based revision: what a server answers to a version it does not
/// know.
pub const LATEST_LEGACY_VERSION: &str = LEGACY_VERSIONS[0];

/// The version an HTTP client that sends no `MCP-Protocol-Version` header is assumed to speak
/// (2025-11-25, "Protocol Version Header").
pub const DEFAULT_HTTP_LEGACY_VERSION: &str = "2025-03-26";

/// `initialize`.
pub const METHOD_INITIALIZE: &str = "initialize";
/// `ping`.
pub const METHOD_PING: &str = "ping";
/// `logging/setLevel`.
pub const METHOD_SET_LEVEL: &str = "logging/setLevel";
/// `resources/subscribe`.
pub const METHOD_SUBSCRIBE: &str = "resources/subscribe";
/// `resources/unsubscribe`.
pub const METHOD_UNSUBSCRIBE: &str = "resources/unsubscribe";
/// `notifications/initialized`.
pub const NOTIFICATION_INITIALIZED: &str = "notifications/initialized";
/// `notifications/roots/list_changed`.
pub const NOTIFICATION_ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";

/// The header that carries a Streamable HTTP session's id (2025-11-25, "Session Management").
pub const SESSION_ID_HEADER: &str = "mcp-session-id";

/// The version a server answers to an `initialize` asking for `requested`: the same when the
/// server speaks it, else the newest it speaks (2025-11-25, "Version Negotiation").
pub fn negotiate_legacy_version(requested: &str) -> &'static str {
    LEGACY_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LATEST_LEGACY_VERSION)
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitializeParams {
    /// The newest version the client speaks.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// What the client supports, for the whole session.
    #[serde(default)]
    pub capabilities: ClientCapabilities,
    /// The client's self-description.
    #[serde(
        rename = "clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Implementation>,
    /// Fields this crate does not know (`_meta` among them).
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitializeResult {
    /// The version the session speaks.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// The server's self-description.
    #[serde(rename = "serverInfo")]
    pub server_info: Implementation,
    /// How to use the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// `logging/setLevel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetLevelParams {
    /// The lowest level the client wants to receive.
    pub level: LoggingLevel,
}

/// `resources/subscribe` and `resources/unsubscribe` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSubscriptionParams {
    /// The resource.
    pub uri: String,
}

method!(/// `initialize`: opens a session.
    Initialize, METHOD_INITIALIZE, InitializeParams, InitializeResult);
method!(/// `ping`, either way; answered with an empty object.
    Ping, METHOD_PING, JsonObject, JsonObject);
method!(/// `logging/setLevel`.
    SetLevel, METHOD_SET_LEVEL, SetLevelParams, EmptyResult);
method!(/// `resources/subscribe`.
    Subscribe, METHOD_SUBSCRIBE, ResourceSubscriptionParams, EmptyResult);
method!(/// `resources/unsubscribe`.
    Unsubscribe, METHOD_UNSUBSCRIBE, ResourceSubscriptionParams, EmptyResult);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_answers_a_known_version_else_the_newest() {
        for (asked, answer) in [
            ("2025-11-25", "2025-11-25"),
            ("2025-06-18", "2025-06-18"),
            ("2024-11-05", "2024-11-05"),
            ("2026-07-28", "2025-11-25"),
            ("1999-01-01", "2025-11-25"),
            ("", "2025-11-25"),
        ] {
            assert_eq!(negotiate_legacy_version(asked), answer, "{asked}");
        }
    }

    #[test]
    fn initialize_params_read_what_legacy_clients_send() {
        let params: InitializeParams = serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {}, "roots": {"listChanged": true}},
            "clientInfo": {"name": "inspector", "version": "2.12.0"},
            "_meta": {"x": 1}
        }))
        .unwrap();
        assert!(params.capabilities.supports_elicitation_form());
        assert!(params.capabilities.roots.is_some());
        assert_eq!(params.client_info.unwrap().name, "inspector");
        assert_eq!(params.extra["_meta"]["x"], 1);
    }
}
