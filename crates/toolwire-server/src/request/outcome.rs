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

/// The room a response starts with: a short tool result with its `_meta` fits.
const RESPONSE_CAPACITY: usize = 256;

impl Final {
    pub(crate) fn result<R: Serialize + ?Sized>(id: &RequestId, result: &R) -> Final {
        Final::written(id, result, 0)
    }

    /// A result response with `,"_meta":…` (`meta_member`) appended to the result object, for
    /// results that serialize as a non-empty object without `_meta`. Written into one buffer
    /// with room for the member, so that appending it does not move the response.
    pub(crate) fn result_with_meta<R: Serialize>(
        id: &RequestId,
        result: &R,
        meta_member: &str,
    ) -> Final {
        let mut done = Final::written(id, result, meta_member.len());
        if done.error_code.is_none() && done.json.ends_with("}}") {
            let at = done.json.len() - 2;
            done.json.insert_str(at, meta_member);
        }
        done
    }

    /// The response for `result`, in a buffer with `spare` bytes of room beyond a small
    /// result's size (serde_json's own `to_string` starts at 128 bytes and grows by doubling).
    fn written<R: Serialize + ?Sized>(id: &RequestId, result: &R, spare: usize) -> Final {
        let mut out = Vec::with_capacity(RESPONSE_CAPACITY + spare);
        let response = ResultOut {
            jsonrpc: Version2,
            id,
            result,
        };
        let written = match serde_json::to_writer(&mut out, &response) {
            Ok(()) => String::from_utf8(out).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match written {
            Ok(json) => Final {
                json,
                error_code: None,
                tool_error: false,
            },
            Err(why) => {
                tracing::error!(error = %why, "cannot serialize a result");
                Final::error(Some(id), &ErrorObject::internal("Internal error"))
            }
        }
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
