//! A request's result as the request path hands it on: checked for its `resultType` (B-05,
//! B-06), and read once into the type its caller wants. An HTTP reply's result comes as its
//! text ([`Message::Result`](crate::transport::Message)): a tool's result is read from that
//! text straight into a `CallToolResult`, without a tree of values built and read again.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use toolwire_protocol::{ResultType, TASKS_EXTENSION};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::Message;

/// A checked result.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The result's text, and its `resultType` (absent: complete).
    Text {
        /// The result object's text.
        text: Box<RawValue>,
        /// What it says it is.
        kind: ResultType,
    },
    /// The result as a tree, with its `resultType` set.
    Tree(Value),
}

/// The `resultType` of a result's text, read without reading the rest.
#[derive(serde::Deserialize)]
struct Kind<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<&'a RawValue>,
}

impl Answer {
    /// The result `text`, with its `resultType` read: `None` when it is not an object, the
    /// type's text when it is not a string.
    pub(crate) fn of_text(text: Box<RawValue>) -> std::result::Result<Answer, Unread> {
        // A raw value's text starts with the value itself; a derived struct would also read
        // an array, by position.
        if !text.get().starts_with('{') {
            return Err(Unread::NotAnObject);
        }
        let kind = match serde_json::from_str::<Kind<'_>>(text.get()) {
            Ok(Kind { result_type: None }) => ResultType::Complete,
            Ok(Kind {
                result_type: Some(kind),
            }) => match serde_json::from_str::<ResultType>(kind.get()) {
                Ok(kind) => kind,
                Err(_) => return Err(Unread::NotAString(kind.get().to_owned())),
            },
            Err(_) => return Err(Unread::NotAnObject),
        };
        Ok(Answer::Text { text, kind })
    }

    /// Whether the result is of `kind`.
    pub(crate) fn is(&self, kind: &ResultType) -> bool {
        match self {
            Answer::Text { kind: own, .. } => own == kind,
            Answer::Tree(result) => result_type(result).as_ref() == Some(kind),
        }
    }

    /// Whether the result is a tool's error (`isError: true`).
    pub(crate) fn is_tool_error(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Failed {
            #[serde(rename = "isError", default)]
            is_error: Option<bool>,
        }
        match self {
            Answer::Text { text, .. } => serde_json::from_str::<Failed>(text.get())
                .is_ok_and(|failed| failed.is_error == Some(true)),
            Answer::Tree(result) => result.get("isError") == Some(&Value::Bool(true)),
        }
    }

    /// The result as a tree, with `resultType` set (complete when it was absent, B-06).
    pub(crate) fn into_value(self) -> Result<Value> {
        match self {
            Answer::Tree(result) => Ok(result),
            Answer::Text { text, kind } => {
                let mut result: Value = serde_json::from_str(text.get())
                    .map_err(|e| Error::InvalidResponse(format!("the result: {e}")))?;
                if let Some(object) = result.as_object_mut() {
                    object
                        .entry("resultType")
                        .or_insert_with(|| Value::String(kind.as_str().to_owned()));
                }
                Ok(result)
            }
        }
    }

    /// The result read as `T`; `what` names it in an error (the method).
    pub(crate) fn read<T: DeserializeOwned>(self, what: &str) -> Result<T> {
        let read = match self {
            Answer::Text { text, .. } => serde_json::from_str(text.get()),
            Answer::Tree(result) => serde_json::from_value(result),
        };
        read.map_err(|e| Error::InvalidResponse(format!("{what}: {e}")))
    }
}

/// The `resultType` of a result tree, read in place (a `&Value` deserializes without a copy).
pub(crate) fn result_type(result: &Value) -> Option<ResultType> {
    result
        .get("resultType")
        .and_then(|t| <ResultType as serde::Deserialize>::deserialize(t).ok())
}

/// Why a result's text could not be taken for a result.
#[derive(Debug)]
pub(crate) enum Unread {
    /// The result is not an object.
    NotAnObject,
    /// Its `resultType` is not a string: the type's text.
    NotAString(String),
}

impl Unread {
    /// The error the request path reports for it.
    fn into_error(self) -> Error {
        match self {
            Unread::NotAnObject => Error::InvalidResponse("the result is not an object".into()),
            // B-05
            Unread::NotAString(kind) => {
                Error::InvalidResponse(format!("unknown resultType {kind}"))
            }
        }
    }
}

impl Client {
    /// The result, with `resultType` checked: absent reads as complete (B-06), unknown types
    /// are refused (B-05).
    pub(crate) fn checked_result(&self, message: Message, tasks: bool) -> Result<Answer> {
        let message = match message {
            Message::Result(text) => {
                let answer = Answer::of_text(text).map_err(Unread::into_error)?;
                if let Answer::Text { kind, .. } = &answer {
                    self.known_result_type(Some(kind.as_str()), tasks)?;
                }
                return Ok(answer);
            }
            Message::Tree(message) => message,
        };
        // Taken out of the message, not copied: a result may be large.
        let result = match message {
            Value::Object(mut members) => members.remove("result"),
            _ => None,
        };
        let Some(mut result) = result else {
            return Err(Error::InvalidResponse(
                "a response with neither result nor error".into(),
            ));
        };
        let object = result
            .as_object_mut()
            .ok_or_else(|| Error::InvalidResponse("the result is not an object".into()))?;
        let result_type = object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        self.known_result_type(result_type.as_str(), tasks)?;
        Ok(Answer::Tree(result))
    }

    /// Refuses a `resultType` this client does not know (B-05): `task` is known when the
    /// request or the client declared the tasks extension.
    fn known_result_type(&self, kind: Option<&str>, tasks: bool) -> Result<()> {
        match kind {
            Some("complete" | "input_required") => Ok(()),
            Some("task") if tasks || self.inner.config.extensions.contains_key(TASKS_EXTENSION) => {
                Ok(())
            }
            other => Err(Error::InvalidResponse(format!(
                // B-05
                "unknown resultType {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    #[test]
    fn a_results_type_is_read_from_its_text() {
        let cases = [
            (json!({"content": []}), ResultType::Complete),
            (
                json!({"content": [], "resultType": "complete"}),
                ResultType::Complete,
            ),
            (
                json!({"inputRequests": {}, "resultType": "input_required"}),
                ResultType::InputRequired,
            ),
            (json!({"resultType": "task"}), ResultType::Task),
            (
                json!({"resultType": "later"}),
                ResultType::Other("later".into()),
            ),
        ];
        for (result, kind) in cases {
            let answer = Answer::of_text(text(result.clone())).unwrap();
            assert!(answer.is(&kind), "{result}");
            let tree = answer.into_value().unwrap();
            assert_eq!(tree["resultType"], json!(kind.as_str()), "{result}");
            assert!(Answer::Tree(tree).is(&kind), "{result}");
        }
        // An escaped type is still its type.
        let escaped = RawValue::from_string(r#"{"resultType":"\u0074ask"}"#.into()).unwrap();
        assert!(Answer::of_text(escaped).unwrap().is(&ResultType::Task));
    }

    #[test]
    fn a_result_that_is_not_an_object_or_has_an_odd_type_is_unread() {
        assert!(matches!(
            Answer::of_text(text(json!([1]))),
            Err(Unread::NotAnObject)
        ));
        assert!(matches!(
            Answer::of_text(text(json!("x"))),
            Err(Unread::NotAnObject)
        ));
        match Answer::of_text(text(json!({"resultType": 5}))) {
            Err(Unread::NotAString(kind)) => assert_eq!(kind, "5"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_text_and_a_tree_read_alike() {
        let result = json!({"content": [{"type": "text", "text": "hi"}], "isError": true});
        let from_text: toolwire_protocol::CallToolResult = Answer::of_text(text(result.clone()))
            .unwrap()
            .read("tools/call")
            .unwrap();
        let from_tree: toolwire_protocol::CallToolResult =
            Answer::Tree(result).read("tools/call").unwrap();
        assert_eq!(from_text, from_tree);
        let error = Answer::Tree(json!({"content": 3}))
            .read::<toolwire_protocol::CallToolResult>("tools/call")
            .unwrap_err();
        assert!(error.to_string().contains("tools/call"), "{error}");
    }
}
