//! What a request ends with: a call's outcome, and the final message as it goes out.

use serde::Serialize;
use toolwire_protocol::{CallToolResult, ErrorObject, InputRequiredResult, RequestId, Version2};

/// How a call ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Complete(CallToolResult),
    InputRequired(InputRequiredResult),
    Task(toolwire_protocol::CreateTaskResult),
}

/// A request's final message, serialized.
#[derive(Debug)]
pub(crate) struct Final {
    pub(crate) json: String,
    /// The error code when the final message is an error.
    pub(crate) error_code: Option<i64>,
    /// Whether it is a tool result with `isError` (for metrics).
    pub(crate) tool_error: bool,
}

#[derive(Serialize)]
struct ResultOut<'a, R: ?Sized> {
    jsonrpc: Version2,
    id: &'a RequestId,
    result: &'a R,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: Version2,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

impl Final {
    pub(crate) fn result<R: Serialize + ?Sized>(id: &RequestId, result: &R) -> Final {
        match serde_json::to_string(&ResultOut {
            jsonrpc: Version2,
            id,
            result,
        }) {
            Ok(json) => Final {
                json,
                error_code: None,
                tool_error: false,
            },
            Err(e) => {
                tracing::error!(error = %e, "cannot serialize a result");
                Final::error(Some(id), &ErrorObject::internal("Internal error"))
            }
        }
    }

    /// A result response with `,"_meta":…` (`meta_member`) appended to the result object, for
    /// results that serialize as a non-empty object without `_meta`.
    pub(crate) fn result_with_meta<R: Serialize>(
        id: &RequestId,
        result: &R,
        meta_member: &str,
    ) -> Final {
        let mut done = Final::result(id, result);
        if done.error_code.is_none() && done.json.ends_with("}}") {
            let at = done.json.len() - 2;
            done.json.insert_str(at, meta_member);
        }
        done
    }

    pub(crate) fn error(id: Option<&RequestId>, error: &ErrorObject) -> Final {
        let json = serde_json::to_string(&ErrorOut {
            jsonrpc: Version2,
            id,
            error,
        })
        .unwrap_or_else(|_| {
            r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"}}"#.into()
        });
        Final {
            json,
            error_code: Some(error.code),
            tool_error: false,
        }
    }
}
