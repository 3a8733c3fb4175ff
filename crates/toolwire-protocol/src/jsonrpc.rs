//! The JSON-RPC 2.0 envelope: ids, requests, notifications, responses (B-02…B-08).

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::ErrorObject;

/// The `"jsonrpc": "2.0"` marker; deserializing anything else fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Version2;

impl Serialize for Version2 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("2.0")
    }
}

impl<'de> Deserialize<'de> for Version2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
        if v == "2.0" {
            Ok(Version2)
        } else {
            Err(de::Error::custom(format!(
                "jsonrpc must be \"2.0\", got {v:?}"
            )))
        }
    }
}

/// A request id: a string or an integer, never null (B-03). An integral float such as `1.0`
/// reads as the integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = RequestId;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an integer")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                i64::try_from(v)
                    .map(RequestId::Number)
                    .map_err(|_| E::custom("id out of range"))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RequestId, E> {
                let integral = v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64;
                integral
                    .then_some(RequestId::Number(v as i64))
                    .ok_or_else(|| E::custom("id must be an integer"))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(v.to_owned()))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<RequestId, E> {
                Ok(RequestId::String(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl From<i64> for RequestId {
    fn from(v: i64) -> Self {
        RequestId::Number(v)
    }
}

impl From<&str> for RequestId {
    fn from(v: &str) -> Self {
        RequestId::String(v.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(v: String) -> Self {
        RequestId::String(v)
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            // As JSON text (Rust's debug quoting differs for control characters).
            RequestId::String(s) => {
                f.write_str(&serde_json::to_string(s).map_err(|_| std::fmt::Error)?)
            }
        }
    }
}

/// A progress token: a string or an integer (P-10).
pub type ProgressToken = RequestId;

/// A JSON-RPC request with typed params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request<P = Value> {
    /// Always `"2.0"`.
    pub jsonrpc: Version2,
    /// The request id.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params; in MCP 2026-07-28 every request has them (B-15).
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub params: Option<P>,
}

impl<P> Request<P> {
    /// A request with params.
    pub fn new(id: impl Into<RequestId>, method: impl Into<String>, params: P) -> Self {
        Request {
            jsonrpc: Version2,
            id: id.into(),
            method: method.into(),
            params: Some(params),
        }
    }
}

/// A JSON-RPC notification (no id, never answered; B-08).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification<P = Value> {
    /// Always `"2.0"`.
    pub jsonrpc: Version2,
    /// The method name.
    pub method: String,
    /// The params, if any.
    #[serde(default = "Option::default", skip_serializing_if = "Option::is_none")]
    pub params: Option<P>,
}

impl<P> Notification<P> {
    /// A notification with params.
    pub fn new(method: impl Into<String>, params: P) -> Self {
        Notification {
            jsonrpc: Version2,
            method: method.into(),
            params: Some(params),
        }
    }
}

/// A successful JSON-RPC response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response<R = Value> {
    /// Always `"2.0"`.
    pub jsonrpc: Version2,
    /// The id of the request this answers.
    pub id: RequestId,
    /// The result.
    pub result: R,
}

impl<R> Response<R> {
    /// A response to `id`.
    pub fn new(id: RequestId, result: R) -> Self {
        Response {
            jsonrpc: Version2,
            id,
            result,
        }
    }
}

/// A JSON-RPC error response; `id` is absent only when the request's id was unreadable (B-07).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// Always `"2.0"`.
    pub jsonrpc: Version2,
    /// The id of the failed request, if it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject,
}

impl ErrorResponse {
    /// An error response.
    pub fn new(id: Option<RequestId>, error: ErrorObject) -> Self {
        ErrorResponse {
            jsonrpc: Version2,
            id,
            error,
        }
    }
}

/// Any JSON-RPC message, with untyped params and result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A successful response.
    Response(Response),
    /// An error response.
    Error(ErrorResponse),
}

impl<'de> Deserialize<'de> for Message {
    /// Classifies by the members present, so a message is never misread as another kind.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Owned {
            #[serde(default)]
            jsonrpc: Option<String>,
            #[serde(default, deserialize_with = "deserialize_some")]
            id: Option<Value>,
            #[serde(default)]
            method: Option<String>,
            #[serde(default)]
            params: Option<Value>,
            #[serde(default, deserialize_with = "deserialize_some")]
            result: Option<Value>,
            #[serde(default)]
            error: Option<ErrorObject>,
        }
        let m = Owned::deserialize(d)?;
        let has_reply = m.result.is_some() || m.error.is_some();
        let kind = classify(
            m.jsonrpc.as_deref(),
            m.method.is_some(),
            m.id.as_ref(),
            has_reply,
        )
        .map_err(de::Error::custom)?;
        let id =
            m.id.and_then(|v| serde_json::from_value::<RequestId>(v).ok());
        Ok(match kind {
            MessageKind::Request(id) => Message::Request(Request {
                jsonrpc: Version2,
                id,
                method: m.method.unwrap_or_default(),
                params: m.params,
            }),
            MessageKind::Notification => Message::Notification(Notification {
                jsonrpc: Version2,
                method: m.method.unwrap_or_default(),
                params: m.params,
            }),
            MessageKind::Response => match (m.error, id) {
                (Some(error), id) => Message::Error(ErrorResponse {
                    jsonrpc: Version2,
                    id,
                    error,
                }),
                (None, Some(id)) => Message::Response(Response {
                    jsonrpc: Version2,
                    id,
                    result: m.result.unwrap_or(Value::Null),
                }),
                (None, None) => return Err(de::Error::custom("response without a valid id")),
            },
        })
    }
}

/// Classifies a message from its members, or says why it is not JSON-RPC 2.0 (→ -32600).
fn classify(
    jsonrpc: Option<&str>,
    has_method: bool,
    id: Option<&Value>,
    has_reply: bool,
) -> Result<MessageKind, String> {
    if jsonrpc != Some("2.0") {
        return Err("jsonrpc must be \"2.0\"".into());
    }
    match (has_method, id) {
        (true, None) => Ok(MessageKind::Notification),
        (true, Some(id)) => match RequestId::deserialize(id) {
            Ok(id) => Ok(MessageKind::Request(id)),
            Err(_) => Err("id must be a string or an integer".into()),
        },
        (false, _) if has_reply => Ok(MessageKind::Response),
        (false, _) => Err("missing method".into()),
    }
}

/// A JSON-RPC message read without interpreting params or result, borrowing from the input.
///
/// Servers parse a frame into this first: it is cheap, keeps `params` as raw JSON for the
/// method-specific parse, and tells a request from a notification or a stray response.
#[derive(Debug, Deserialize)]
pub struct RawMessage<'a> {
    /// The version marker; checked by [`RawMessage::kind`].
    #[serde(default, borrow)]
    pub jsonrpc: Option<std::borrow::Cow<'a, str>>,
    /// The id, when present.
    #[serde(default, deserialize_with = "deserialize_some")]
    pub id: Option<Value>,
    /// The method, for requests and notifications.
    #[serde(default, borrow)]
    pub method: Option<std::borrow::Cow<'a, str>>,
    /// The raw params.
    #[serde(default, borrow)]
    pub params: Option<&'a RawValue>,
    /// The raw result, for responses.
    #[serde(default, borrow)]
    pub result: Option<&'a RawValue>,
    /// The error, for error responses.
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

fn deserialize_some<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// What kind of message a [`RawMessage`] is.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageKind {
    /// Has `method` and a valid `id`.
    Request(RequestId),
    /// Has `method` and no `id`.
    Notification,
    /// Has `result` or `error`.
    Response,
}

impl RawMessage<'_> {
    /// The id if it is a valid request id, for echoing in error responses.
    pub fn request_id(&self) -> Option<RequestId> {
        self.id
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Classifies the message, or says why it is not valid JSON-RPC 2.0 (→ -32600).
    pub fn kind(&self) -> Result<MessageKind, String> {
        let has_reply = self.result.is_some() || self.error.is_some();
        classify(
            self.jsonrpc.as_deref(),
            self.method.is_some(),
            self.id.as_ref(),
            has_reply,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_messages() {
        let cases = [
            (
                json!({"jsonrpc":"2.0","id":1,"method":"m"}),
                Ok(MessageKind::Request(1.into())),
            ),
            (
                json!({"jsonrpc":"2.0","id":"a","method":"m"}),
                Ok(MessageKind::Request("a".into())),
            ),
            (
                json!({"jsonrpc":"2.0","method":"m"}),
                Ok(MessageKind::Notification),
            ),
            (
                json!({"jsonrpc":"2.0","id":1,"result":{}}),
                Ok(MessageKind::Response),
            ),
            (json!({"jsonrpc":"2.0","id":null,"method":"m"}), Err(())),
            (json!({"jsonrpc":"2.0","id":1.5,"method":"m"}), Err(())),
            (
                json!({"jsonrpc":"2.0","id":2.0,"method":"m"}),
                Ok(MessageKind::Request(2.into())),
            ),
            (json!({"jsonrpc":"2.0","id":[1],"method":"m"}), Err(())),
            (json!({"jsonrpc":"1.0","id":1,"method":"m"}), Err(())),
            (json!({"id":1,"method":"m"}), Err(())),
            (json!({"jsonrpc":"2.0","id":1}), Err(())),
        ];
        for (input, want) in cases {
            let text = input.to_string();
            let raw: RawMessage<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(raw.kind().map_err(|_| ()), want, "{input}");
        }
    }

    #[test]
    fn messages_round_trip() {
        for input in [
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}),
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}),
            json!({"jsonrpc":"2.0","id":"x","result":{"resultType":"complete"}}),
            json!({"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}),
            json!({"jsonrpc":"2.0","error":{"code":-32700,"message":"bad"}}),
        ] {
            let msg: Message = serde_json::from_value(input.clone()).unwrap();
            assert_eq!(serde_json::to_value(&msg).unwrap(), input);
        }
    }
}
