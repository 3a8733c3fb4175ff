//! Tools: definitions, `tools/list` and `tools/call`.
//! Its rules are under “Server offering tools” in docs/requirements.md.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    ContentBlock, Icon, InputResponses, JsonObject, ListResult, Listed, RequestMeta, ResultMeta,
    ResultType, is_empty_object,
};

/// A tool definition as listed by `tools/list` (T-06, T-09).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Unique name, `[A-Za-z0-9_.-]{1,128}` (T-08).
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// JSON Schema of the arguments; root `type: object`; unknown keywords kept verbatim (J-09).
    pub input_schema: JsonObject,
    /// JSON Schema of `structuredContent` (T-10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Behaviour hints; untrusted unless the server is (C-02).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// Hints about a tool's behaviour; defaults per the spec when absent (C-06).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy data (default true; meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating the call has no further effect (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool talks to an open world of external entities (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// Params of paginated list requests (`tools/list`, `prompts/list`, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaginatedParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
    /// Opaque cursor from a previous page's `nextCursor` (K-14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The result of `tools/list` (T-05).
pub type ListToolsResult = ListResult<Tool>;

impl Listed for Tool {
    const MEMBER: &'static str = "tools";
}

/// Params of `tools/call` (C-09).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
    /// The tool to call.
    pub name: String,
    /// The arguments, an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Answers to a previous round's input requests (MRTR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// The opaque state of a previous round, echoed verbatim (M-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
}

/// The result of a completed `tools/call` (T-12). Read in one pass (`deserialize_with_extra!`):
/// a client reads one for every call.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// `complete` for this type.
    pub result_type: ResultType,
    /// Unstructured content, always present.
    pub content: Vec<ContentBlock>,
    /// Structured output, conforming to the tool's `outputSchema` (T-10); any JSON value
    /// (`null` included: present, it is `Some`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed (absent = false; C-06).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

crate::extra::deserialize_with_extra!(CallToolResult {
    required: [content = "content"],
    optional: [is_error = "isError", meta = "_meta"],
    defaulted: [result_type = "resultType"],
    present: [structured_content = "structuredContent"],
});

impl CallToolResult {
    /// A successful result with these content blocks.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        CallToolResult {
            content,
            ..Default::default()
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![ContentBlock::text(text)])
    }

    /// A tool execution error (`isError: true`) explaining itself in one text block (T-13).
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            is_error: Some(true),
            ..Self::text(text)
        }
    }

    /// Whether the result reports a tool error.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reading `CallToolResult` had when it derived `Deserialize`.
    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Derived {
        #[serde(default)]
        result_type: ResultType,
        content: Vec<ContentBlock>,
        #[serde(default, deserialize_with = "present")]
        structured_content: Option<Value>,
        #[serde(default)]
        is_error: Option<bool>,
        #[serde(rename = "_meta", default)]
        meta: Option<ResultMeta>,
        #[serde(flatten)]
        extra: JsonObject,
    }

    fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Deserialize::deserialize(d).map(Some)
    }

    #[test]
    fn results_read_as_the_derived_reading_read_them() {
        let inputs = [
            r#"{"content":[]}"#,
            r#"{"resultType":"complete","content":[{"type":"text","text":"hello"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#,
            r#"{"content":[{"type":"text","text":"x"}],"structuredContent":null,"isError":null}"#,
            r#"{"content":[],"structuredContent":{"a":[1,2]},"isError":true,"unknown":{"b":1},"other":2}"#,
            r#"{"content":[],"resultType":"something_new"}"#,
            r#"{"content":[],"_meta":{"progressToken":3,"custom":"x"}}"#,
            // Refused by both readings.
            r#"{}"#,
            r#"{"content":{}}"#,
            r#"{"content":[],"isError":"yes"}"#,
            r#"{"content":[],"resultType":null}"#,
            r#"{"content":[{"type":"video"}]}"#,
            r#"[]"#,
        ];
        for input in inputs {
            let ours = serde_json::from_str::<CallToolResult>(input);
            let derived = serde_json::from_str::<Derived>(input);
            match (&ours, &derived) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.result_type, b.result_type, "{input}");
                    assert_eq!(a.content, b.content, "{input}");
                    assert_eq!(a.structured_content, b.structured_content, "{input}");
                    assert_eq!(a.is_error, b.is_error, "{input}");
                    assert_eq!(a.meta, b.meta, "{input}");
                    assert_eq!(a.extra, b.extra, "{input}");
                    // And it writes back what it read.
                    let again: CallToolResult =
                        serde_json::from_value(serde_json::to_value(a).unwrap()).unwrap();
                    assert_eq!(&again, a, "{input}");
                }
                (Err(_), Err(_)) => {}
                _ => panic!("{input}: ours {ours:?}, derived {derived:?}"),
            }
        }
    }
}
