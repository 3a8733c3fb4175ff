//! Helpers shared by the host's end-to-end tests.

use toolwire_client::protocol::CallToolResult;

/// The first content block's text ("" when it has none).
pub(crate) fn text(result: &CallToolResult) -> String {
    serde_json::to_value(result).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
