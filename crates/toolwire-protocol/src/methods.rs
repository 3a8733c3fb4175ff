//! Typed requests: each MCP method as a type with its name, params and result.
//!
//! Servers route on [`Method::METHOD`] and clients build requests from [`Method::Params`], so a
//! method name is spelled once.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{
    AcknowledgedParams, CallToolParams, CallToolResult, CompleteParams, CompleteResult,
    CreateMessageParams, CreateMessageResult, DiscoverResult, ElicitRequestParams, ElicitResult,
    EmptyResult, GetPromptParams, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListRootsParams, ListRootsResult, ListToolsResult, ListenParams,
    PaginatedParams, ReadResourceParams, ReadResourceResult, RequestMeta,
};

/// A request method: its wire name, params and result.
pub trait Method {
    /// The wire name.
    const METHOD: &'static str;
    /// The params.
    type Params: Serialize + DeserializeOwned;
    /// The complete result (an `input_required` result may come instead where MRTR applies).
    type Result: Serialize + DeserializeOwned;

    /// The value of the `Mcp-Name` header for these params (H-13): the tool's or prompt's
    /// name, the resource's URI; `None` for a method without one.
    fn mcp_name(params: &Self::Params) -> Option<&str> {
        let _ = params;
        None
    }
}

/// Params that are only `_meta`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MetaParams {
    /// Request metadata.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

macro_rules! method {
    ($(#[$m:meta])* $name:ident, $wire:expr, $params:ty, $result:ty
        $(, mcp_name: |$p:ident| $named:expr)?) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;
        impl $crate::methods::Method for $name {
            const METHOD: &'static str = $wire;
            type Params = $params;
            type Result = $result;
            $(
                fn mcp_name($p: &Self::Params) -> Option<&str> {
                    Some($named)
                }
            )?
        }
    };
}

method!(/// `server/discover` (V-01).
    Discover, "server/discover", MetaParams, DiscoverResult);
method!(/// `tools/list`.
    ListTools, "tools/list", PaginatedParams, ListToolsResult);
method!(/// `tools/call`.
    CallTool, "tools/call", CallToolParams, CallToolResult, mcp_name: |p| &p.name);
method!(/// `subscriptions/listen`; the result closes the stream.
    Listen, "subscriptions/listen", ListenParams, EmptyResult);
method!(/// `resources/list`.
    ListResources, "resources/list", PaginatedParams, ListResourcesResult);
method!(/// `resources/templates/list`.
    ListResourceTemplates, "resources/templates/list", PaginatedParams, ListResourceTemplatesResult);
method!(/// `resources/read`.
    ReadResource, "resources/read", ReadResourceParams, ReadResourceResult, mcp_name: |p| &p.uri);
method!(/// `prompts/list`.
    ListPrompts, "prompts/list", PaginatedParams, ListPromptsResult);
method!(/// `prompts/get`.
    GetPrompt, "prompts/get", GetPromptParams, GetPromptResult, mcp_name: |p| &p.name);
method!(/// `completion/complete`.
    Complete, "completion/complete", CompleteParams, CompleteResult);
method!(/// `elicitation/create`: an input request (M-04), or a legacy server's request.
    Elicit, crate::METHOD_ELICIT, ElicitRequestParams, ElicitResult);
method!(/// `sampling/createMessage`: an input request (M-04), or a legacy server's request.
    CreateMessage, crate::METHOD_CREATE_MESSAGE, CreateMessageParams, CreateMessageResult);
method!(/// `roots/list`: an input request (M-04), or a legacy server's request.
    ListRoots, crate::METHOD_LIST_ROOTS, ListRootsParams, ListRootsResult);

pub(crate) use method;

/// The acknowledgement's params type, re-exported for symmetry with the methods.
pub type Acknowledged = AcknowledgedParams;

/// Methods earlier revisions had and 2026-07-28 removed (V-15); servers answer them with -32601.
pub const REMOVED_METHODS: &[&str] = &[
    "initialize",
    "notifications/initialized",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "notifications/roots/list_changed",
    "notifications/elicitation/complete",
    "tasks/result",
    "tasks/list",
];

// The tasks extension's methods (`io.modelcontextprotocol/tasks`), spelled once like the others.
// Their `Mcp-Name` is the task's id (H-13).
method!(/// `tasks/get`: a task's status and, by status, its input requests, result or error.
    GetTask, "tasks/get", crate::TaskParams, crate::GetTaskResult, mcp_name: |p| &p.task_id);
method!(/// `tasks/update`: answers to a task's input requests.
    UpdateTask, "tasks/update", crate::UpdateTaskParams, crate::EmptyResult,
    mcp_name: |p| &p.task_id);
method!(/// `tasks/cancel`: stops a task.
    CancelTask, "tasks/cancel", crate::TaskParams, crate::EmptyResult, mcp_name: |p| &p.task_id);
