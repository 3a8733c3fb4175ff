//! `_meta` objects: the per-request metadata every 2026-07-28 request carries (B-15), result and
//! notification metadata, and `Implementation` (client/server info).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::extra::deserialize_with_extra;
use crate::{
    ClientCapabilities, JsonObject, LoggingLevel, ProgressToken, RequestId, is_empty_object,
};

/// The member of params and results that holds their metadata.
pub const META_FIELD: &str = "_meta";
/// `_meta` key of the token for progress notifications about a request (P-10).
pub const META_PROGRESS_TOKEN: &str = "progressToken";
/// `_meta` key of the protocol version a request speaks.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the capabilities a client declares on one request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's self-description.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the minimum log level the client wants on this request (P-17).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of the server's self-description in results (B-18).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key tagging every message of a subscription stream (L-06).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key of the W3C Trace Context `traceparent` of a request: the caller's span, the
/// parent of the server's (OT-01). Unprefixed, as in the HTTP header of the same name.
pub const META_TRACEPARENT: &str = "traceparent";
/// `_meta` key of the W3C Trace Context `tracestate` that goes with `traceparent` (OT-01).
pub const META_TRACESTATE: &str = "tracestate";
/// `_meta` key of the W3C Baggage of a request (OT-01).
pub const META_BAGGAGE: &str = "baggage";
/// The `_meta` keys of the W3C trace context, in the order they are read.
pub const META_TRACE_CONTEXT: [&str; 3] = [META_TRACEPARENT, META_TRACESTATE, META_BAGGAGE];

/// A client's or server's self-description (self-reported; B-19).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Home page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Fields this crate does not know, kept for round-trips.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

impl Implementation {
    /// An implementation with a name and a version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Implementation {
            name: name.into(),
            version: version.into(),
            ..Default::default()
        }
    }
}

deserialize_with_extra!(Implementation {
    required: [name = "name", version = "version"],
    optional: [
        title = "title",
        description = "description",
        website_url = "websiteUrl",
        icons = "icons"
    ],
});

/// An icon for display (B-23).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An `https:` or `data:` URI.
    pub src: String,
    /// MIME type of the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes such as `"48x48"` or `"any"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// `"light"` or `"dark"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
}

/// The `_meta` of a request (B-15): reserved keys typed, all other keys kept in `extra`
/// (`traceparent`, vendor keys…).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestMeta {
    /// The protocol version this request speaks (required).
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: String,
    /// The capabilities the client declares for this request (required; `{}` = none).
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: ClientCapabilities,
    /// The client's self-description (should be present; B-17).
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Implementation>,
    /// Minimum level of `notifications/message` wanted on this request (P-17).
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<LoggingLevel>,
    /// Token for `notifications/progress` about this request.
    #[serde(
        rename = "progressToken",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub progress_token: Option<ProgressToken>,
    /// Any other keys.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

impl RequestMeta {
    /// Metadata for `protocol_version` with the given capabilities and client info.
    pub fn new(
        protocol_version: impl Into<String>,
        client_capabilities: ClientCapabilities,
        client_info: Option<Implementation>,
    ) -> Self {
        RequestMeta {
            protocol_version: protocol_version.into(),
            client_capabilities,
            client_info,
            ..Default::default()
        }
    }

    /// Reads the `_meta` of a request's raw params, saying exactly what is missing (B-16).
    ///
    /// `params` is the raw `params` member (absent params count as missing `_meta`).
    pub fn from_params(params: Option<&RawValue>) -> Result<RequestMeta, MetaError> {
        #[derive(Deserialize)]
        struct Params<'a> {
            #[serde(rename = "_meta", borrow)]
            meta: Option<&'a RawValue>,
        }
        let params = params.ok_or(MetaError::MissingMeta)?;
        if !is_object(params) {
            return Err(MetaError::Invalid("params must be an object".into()));
        }
        let parsed: Params<'_> = serde_json::from_str(params.get())
            .map_err(|_| MetaError::Invalid("params must be an object".into()))?;
        let meta = parsed.meta.ok_or(MetaError::MissingMeta)?;
        if !is_object(meta) {
            return Err(MetaError::Invalid("_meta must be an object".into()));
        }
        let partial: PartialRequestMeta =
            serde_json::from_str(meta.get()).map_err(|e| MetaError::Invalid(e.to_string()))?;
        RequestMeta::try_from(ReadMeta(partial))
    }

    /// The value of a W3C trace context key ([`META_TRACEPARENT`], [`META_TRACESTATE`],
    /// [`META_BAGGAGE`]) when the request carries it as a string (OT-01). Whether the value is
    /// well formed is the reader's to check: a malformed one is ignored, never an error (OT-02).
    pub fn trace_context(&self, key: &str) -> Option<&str> {
        self.extra.get(key)?.as_str()
    }

    /// The request's W3C `traceparent`, as sent (OT-01).
    pub fn traceparent(&self) -> Option<&str> {
        self.trace_context(META_TRACEPARENT)
    }
}

/// A request's `_meta` as read, before its required keys are checked: a params type can read
/// `_meta` in the same pass as its other members, then check it with [`RequestMeta::try_from`].
/// [`RequestMeta::from_params`] is the same check after a pass of its own.
pub struct ReadMeta(PartialRequestMeta);

impl<'de> Deserialize<'de> for ReadMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PartialRequestMeta::deserialize(d).map(ReadMeta)
    }
}

impl TryFrom<ReadMeta> for RequestMeta {
    type Error = MetaError;

    /// Names the first required key that is missing (B-16).
    fn try_from(read: ReadMeta) -> Result<Self, MetaError> {
        let partial = read.0;
        // clientInfo is self-reported and optional (B-17, B-19): a malformed one is ignored
        // rather than failing the request.
        let client_info = partial
            .client_info
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        Ok(RequestMeta {
            protocol_version: partial
                .protocol_version
                .ok_or(MetaError::MissingProtocolVersion)?,
            client_capabilities: partial
                .client_capabilities
                .ok_or(MetaError::MissingClientCapabilities)?,
            client_info,
            log_level: partial.log_level,
            progress_token: partial.progress_token,
            extra: partial.extra,
        })
    }
}

/// Whether raw JSON is an object (serde would also read a struct from an array).
pub fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// `RequestMeta` with the required keys optional, so a missing key is reported by name in one pass.
struct PartialRequestMeta {
    protocol_version: Option<String>,
    client_capabilities: Option<ClientCapabilities>,
    /// Raw, read into an `Implementation` afterwards: a `Value` costs an allocation per key.
    client_info: Option<Box<RawValue>>,
    log_level: Option<LoggingLevel>,
    progress_token: Option<ProgressToken>,
    extra: JsonObject,
}

deserialize_with_extra!(PartialRequestMeta {
    required: [],
    optional: [
        protocol_version = "io.modelcontextprotocol/protocolVersion",
        client_capabilities = "io.modelcontextprotocol/clientCapabilities",
        client_info = "io.modelcontextprotocol/clientInfo",
        log_level = "io.modelcontextprotocol/logLevel",
        progress_token = "progressToken",
    ],
});

/// Why a request's `_meta` is unusable; every variant maps to -32602 (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaError {
    /// `params._meta` is absent.
    MissingMeta,
    /// `io.modelcontextprotocol/protocolVersion` is absent.
    MissingProtocolVersion,
    /// `io.modelcontextprotocol/clientCapabilities` is absent.
    MissingClientCapabilities,
    /// Present but malformed (wrong type, unknown log level…).
    Invalid(String),
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaError::MissingMeta => write!(f, "Missing required params._meta"),
            MetaError::MissingProtocolVersion => {
                write!(f, "Missing required _meta field {META_PROTOCOL_VERSION}")
            }
            MetaError::MissingClientCapabilities => {
                write!(f, "Missing required _meta field {META_CLIENT_CAPABILITIES}")
            }
            MetaError::Invalid(why) => write!(f, "Invalid _meta: {why}"),
        }
    }
}

impl std::error::Error for MetaError {}

/// The `_meta` of a result (B-18).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultMeta {
    /// The server's self-description.
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_info: Option<Implementation>,
    /// Set on the result that closes a subscription stream (L-06).
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// Any other keys.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// The `_meta` of a notification: the subscription it belongs to, if any (S-06, L-06).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NotificationMeta {
    /// The id of the `subscriptions/listen` request this notification belongs to.
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// Any other keys.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

impl NotificationMeta {
    /// Metadata tagging a notification with its subscription.
    pub fn subscription(id: RequestId) -> Self {
        NotificationMeta {
            subscription_id: Some(id),
            extra: JsonObject::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(params: Value) -> Result<RequestMeta, MetaError> {
        let text = params.to_string();
        let raw: &RawValue = serde_json::from_str(&text).unwrap();
        RequestMeta::from_params(Some(raw))
    }

    #[test]
    fn from_params_names_what_is_missing() {
        let pv = META_PROTOCOL_VERSION;
        let cc = META_CLIENT_CAPABILITIES;
        let cases = [
            (json!({}), Err(MetaError::MissingMeta)),
            (
                json!({"_meta": {cc: {}}}),
                Err(MetaError::MissingProtocolVersion),
            ),
            (
                json!({"_meta": {pv: "2026-07-28"}}),
                Err(MetaError::MissingClientCapabilities),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input.clone()), want, "{input}");
        }
        assert!(matches!(parse(json!([])), Err(MetaError::Invalid(_))));
        assert!(matches!(
            parse(json!({"_meta": ["2026-07-28", {}]})),
            Err(MetaError::Invalid(_))
        ));
        let lenient =
            parse(json!({"_meta": {pv: "x", cc: {}, META_CLIENT_INFO: {"name": "no version"}}}))
                .unwrap();
        assert_eq!(
            lenient.client_info, None,
            "a malformed clientInfo is ignored"
        );
        assert!(matches!(
            parse(json!({"_meta": 3})),
            Err(MetaError::Invalid(_))
        ));
        assert!(matches!(
            parse(json!({"_meta": {pv: "x", cc: {}, META_LOG_LEVEL: "loud"}})),
            Err(MetaError::Invalid(_))
        ));
        assert_eq!(RequestMeta::from_params(None), Err(MetaError::MissingMeta));
    }

    #[test]
    fn unknown_meta_keys_survive() {
        let input = json!({
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {"sampling": {}},
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "com.example/x": [1, 2],
        });
        let meta = parse(json!({ "_meta": input.clone() })).unwrap();
        assert_eq!(meta.extra.len(), 2);
        assert!(meta.client_capabilities.sampling.is_some());
        assert_eq!(serde_json::to_value(&meta).unwrap(), input);
        assert_eq!(
            meta.traceparent(),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        assert_eq!(meta.trace_context(META_TRACESTATE), None);
    }

    #[test]
    fn trace_context_is_read_only_as_strings() {
        let meta = parse(json!({"_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {},
            META_TRACEPARENT: 7,
            META_TRACESTATE: "vendor=1",
            META_BAGGAGE: "k=v",
        }}))
        .unwrap();
        assert_eq!(meta.traceparent(), None, "a number is no traceparent");
        assert_eq!(meta.trace_context(META_TRACESTATE), Some("vendor=1"));
        assert_eq!(meta.trace_context(META_BAGGAGE), Some("k=v"));
    }
}
