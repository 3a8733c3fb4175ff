//! The JSON-RPC error object and the error codes MCP 2026-07-28 defines.
//! Its rules are under “Error codes” in docs/requirements.md.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ClientCapabilities;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or the capability is not offered.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid params: bad `_meta`, unknown tool, bad cursor, unknown log level… (E-01).
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// An HTTP header disagrees with the body, or a required header is missing (H-09, H-13).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare (B-20).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The requested protocol version is not implemented (V-02).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The `error` member of a JSON-RPC error response: what handlers return to fail a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code; see the constants of this module.
    pub code: i64,
    /// A short human-readable description.
    pub message: String,
    /// Structured details, defined per code for -32021 and -32022.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and a message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700: the bytes were not JSON.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// -32600: JSON, but not a valid JSON-RPC request.
    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    /// -32601 naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603 with a message. Keep internals out of it: clients see the message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32020: a header is missing or disagrees with the body.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, message)
    }

    /// -32021 with `data.requiredCapabilities` (B-20).
    pub fn missing_capability(required: &ClientCapabilities) -> Self {
        Self::new(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    /// -32022 with `data.supported` and `data.requested` (V-02).
    pub fn unsupported_version(supported: &[&str], requested: &str) -> Self {
        Self::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            format!("Unsupported protocol version: {requested}"),
        )
        .with_data(json!({ "supported": supported, "requested": requested }))
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_carry_the_spec_data() {
        let caps = ClientCapabilities {
            sampling: Some(Default::default()),
            ..Default::default()
        };
        let e = ErrorObject::missing_capability(&caps);
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data.unwrap(),
            json!({"requiredCapabilities": {"sampling": {}}})
        );
        let e = ErrorObject::unsupported_version(&["2026-07-28"], "v9");
        assert_eq!(
            e.data.unwrap(),
            json!({"supported": ["2026-07-28"], "requested": "v9"})
        );
        assert!(
            serde_json::to_value(ErrorObject::method_not_found("x"))
                .unwrap()
                .get("data")
                .is_none()
        );
    }
}
