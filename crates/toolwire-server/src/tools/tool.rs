//! Tools as values: a definition (name, schemas, annotations) plus an async handler.
//!
//! Typed tools take a `serde` + `schemars` argument type, whose schema becomes `inputSchema`, and
//! return anything that is [`ToolOutput`]: text, content blocks, a full result, or
//! [`Structured`] output whose schema becomes `outputSchema`. Raw tools take a schema value and a
//! closure over the JSON arguments.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolwire_protocol::{
    CallToolResult, ContentBlock, Icon, JsonObject, Tool as ToolDefinition, ToolAnnotations,
};

use crate::request::context::RequestContext;
use crate::request::mrtr::{ToolError, schema_object};
use crate::state::handles::HandleRetention;

/// What a tool handler may return.
pub trait ToolOutput: Send + 'static {
    /// The `outputSchema` this output type implies, if any.
    fn output_schema() -> Option<JsonObject> {
        None
    }

    /// Converts into the call result.
    fn into_result(self) -> Result<CallToolResult, ToolError>;
}

impl ToolOutput for CallToolResult {
    fn into_result(self) -> Result<CallToolResult, ToolError> {
        Ok(self)
    }
}

impl ToolOutput for String {
    fn into_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::text(self))
    }
}

impl ToolOutput for &'static str {
    fn into_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::text(self))
    }
}

impl ToolOutput for ContentBlock {
    fn into_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::new(vec![self]))
    }
}

impl ToolOutput for Vec<ContentBlock> {
    fn into_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::new(self))
    }
}

impl<T: ToolOutput, E: Into<ToolError> + Send + 'static> ToolOutput for Result<T, E> {
    fn output_schema() -> Option<JsonObject> {
        T::output_schema()
    }

    fn into_result(self) -> Result<CallToolResult, ToolError> {
        self.map_err(Into::into)?.into_result()
    }
}

/// Structured output: serialized into `structuredContent`, validated against the
/// `outputSchema` generated from `T` (T-10), and repeated as JSON text for older clients (T-11).
#[derive(Debug, Clone, PartialEq)]
pub struct Structured<T>(pub T);

impl<T: Serialize + JsonSchema + Send + 'static> ToolOutput for Structured<T> {
    fn output_schema() -> Option<JsonObject> {
        Some(schema_object::<T>())
    }

    fn into_result(self) -> Result<CallToolResult, ToolError> {
        let value = serde_json::to_value(&self.0).map_err(ToolError::internal)?;
        Ok(structured_result(value))
    }
}

/// A result carrying `value` as `structuredContent` and as a JSON `text` block (T-11).
pub fn structured_result(value: Value) -> CallToolResult {
    CallToolResult {
        content: vec![ContentBlock::text(value.to_string())],
        structured_content: Some(value),
        ..Default::default()
    }
}

/// Arguments of a tool that takes none: `{"type":"object","additionalProperties":false}` (T-07).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "additionalProperties": false})
    }
}

/// The type-erased handler: validated JSON arguments in, a result out. The arguments are lent,
/// not given, so that the call can still bind request state to them afterwards without a copy
/// or a digest up front.
pub(crate) type Handler = Arc<
    dyn Fn(&Value, RequestContext) -> BoxFuture<'static, Result<CallToolResult, ToolError>>
        + Send
        + Sync,
>;

/// A tool: its definition and its handler. Register it with [`crate::ServerBuilder::tool`] or
/// [`crate::Server::add_tool`], which check the definition (T-06, T-08, T-20, J-03…J-08).
#[derive(Clone)]
pub struct Tool {
    pub(crate) definition: ToolDefinition,
    pub(crate) handler: Handler,
    pub(crate) task_support: Option<TaskSupport>,
    /// Whether a call becomes a task only when its handler says so
    /// ([`Tool::deferred_task`]).
    pub(crate) deferred_task: bool,
    /// OAuth scopes a caller needs to see and call the tool (HTTP with OAuth only).
    pub(crate) scopes: Vec<String>,
    /// Its own output guard, instead of the server's.
    pub(crate) output_guard: Option<crate::safety::output::OutputGuard>,
    /// Its own time limit, instead of the server's.
    pub(crate) timeout: Option<Timeout>,
    /// Its own rate limit per caller, instead of the server's.
    pub(crate) rate_limit: Option<Limit>,
    /// How many tokens of the caller's bucket one call takes.
    pub(crate) cost: u32,
    /// The handles it creates: their retention joins the description.
    pub(crate) handles: Vec<HandleRetention>,
}

/// How often a caller may call a tool.
#[derive(Debug, Clone)]
pub(crate) enum Limit {
    To(crate::safety::limits::RateLimit),
    /// No limit, for the stated reason.
    Unlimited(String),
}

/// The key of a tool definition's `_meta` that advertises its time limit, in milliseconds.
pub const TIMEOUT_META_KEY: &str = "dev.toolwire/timeoutMs";

/// How long a tool may run.
#[derive(Debug, Clone)]
pub(crate) enum Timeout {
    After(Duration),
    /// No limit, for the stated reason.
    Never(String),
}

/// Whether a tool may run as a task (tasks extension, `io.modelcontextprotocol/tasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Runs as a task when the client declares the extension and the call does not finish at
    /// once; otherwise runs as a plain call.
    Optional,
    /// Only runs for clients that declare the extension (-32021 otherwise).
    Required,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("definition", &self.definition)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A typed tool: `A`'s JSON Schema (2020-12, subschemas inlined) is the `inputSchema`,
    /// validated arguments are deserialized into `A`, and `O`'s schema, if it has one, is the
    /// `outputSchema`.
    ///
    /// ```
    /// use toolwire_server::{RequestContext, Tool};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Echo {
    ///     /// What to say back.
    ///     message: String,
    /// }
    ///
    /// let tool = Tool::new("echo", |args: Echo, _ctx: RequestContext| async move { args.message })
    ///     .description("Echoes the message");
    /// assert_eq!(tool.definition().input_schema["required"], serde_json::json!(["message"]));
    /// ```
    pub fn new<A, O, F, Fut>(name: impl Into<String>, handler: F) -> Tool
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: ToolOutput,
        F: Fn(A, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let handler: Handler =
            Arc::new(
                move |arguments: &Value, ctx| match parse_arguments::<A>(arguments) {
                    Ok(args) => {
                        let fut = handler(args, ctx);
                        Box::pin(async move { fut.await.into_result() })
                    }
                    // The schema accepted what serde did not: report it to the model like a violation.
                    Err(e) => Box::pin(std::future::ready(Ok(CallToolResult::error(format!(
                        "Invalid arguments: {e}"
                    ))))),
                },
            );
        Tool::with_handler(
            name.into(),
            input_schema_of::<A>(),
            O::output_schema(),
            handler,
        )
    }

    /// A raw tool: `input_schema` as given (kept verbatim, unknown keywords included) and a
    /// handler over the validated JSON arguments (an object).
    pub fn raw<O, F, Fut>(name: impl Into<String>, input_schema: Value, handler: F) -> Tool
    where
        O: ToolOutput,
        F: Fn(Value, RequestContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        // A raw handler owns its arguments: the one copy a call makes.
        let handler: Handler = Arc::new(move |arguments: &Value, ctx| {
            let fut = handler(arguments.clone(), ctx);
            Box::pin(async move { fut.await.into_result() })
        });
        let input_schema = match input_schema {
            Value::Object(map) => map,
            // Registration refuses a schema without `type: object` at its root (T-06).
            _ => JsonObject::new(),
        };
        Tool::with_handler(name.into(), input_schema, O::output_schema(), handler)
    }

    /// A tool with every option at its default: what [`Tool::new`] and [`Tool::raw`] share once
    /// they have a schema and a type-erased handler.
    fn with_handler(
        name: String,
        input_schema: JsonObject,
        output_schema: Option<JsonObject>,
        handler: Handler,
    ) -> Tool {
        Tool {
            definition: ToolDefinition {
                name,
                input_schema,
                output_schema,
                ..Default::default()
            },
            handler,
            task_support: None,
            deferred_task: false,
            scopes: Vec::new(),
            output_guard: None,
            timeout: None,
            rate_limit: None,
            cost: 1,
            handles: Vec::new(),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// The definition `tools/list` shows.
    pub fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    /// OAuth scopes a caller must have been granted to see this tool in `tools/list` and to
    /// call it, when the HTTP transport checks access tokens (`HttpConfig::oauth`); a call
    /// without them gets 403 `insufficient_scope` naming them (A-07). Ignored without OAuth.
    pub fn scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The OAuth scopes given with [`Tool::scopes`]: for what offers the tool to callers by
    /// other means than `tools/list` (a gateway's search), and must hold it to the same rule.
    pub fn required_scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Sanitizes this tool's results with `guard` instead of the server's (T-15).
    pub fn output_guard(mut self, guard: crate::safety::output::OutputGuard) -> Self {
        self.output_guard = Some(guard);
        self
    }

    /// Stops the handler after `limit` (instead of the server's limit, 60 s by default): its
    /// cancellation token fires and the model gets an `isError` result saying the call timed
    /// out. The limit is advertised in the definition's `_meta` ([`TIMEOUT_META_KEY`]).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(Timeout::After(limit));
        self
    }

    /// No time limit for this tool, for the stated reason (logged at registration).
    pub fn no_timeout(mut self, reason: impl Into<String>) -> Self {
        self.timeout = Some(Timeout::Never(reason.into()));
        self
    }

    /// Limits how often each caller (its principal, else its address) may call this tool,
    /// instead of the server's limit ([`crate::DEFAULT_TOOL_RATE_LIMIT`] unless the builder
    /// says otherwise). A caller over it gets an `isError` result that says when to retry,
    /// with the same in `_meta` ([`crate::RATE_LIMITED_META_KEY`]).
    pub fn rate_limit(mut self, limit: crate::safety::limits::RateLimit) -> Self {
        self.rate_limit = Some(Limit::To(limit));
        self
    }

    /// No rate limit for this tool, for the stated reason (logged at registration).
    pub fn no_rate_limit(mut self, reason: impl Into<String>) -> Self {
        self.rate_limit = Some(Limit::Unlimited(reason.into()));
        self
    }

    /// How many calls' worth of the caller's quota one call uses (default 1): an expensive
    /// tool can cost more. Registration refuses a cost larger than the bucket.
    pub fn cost(mut self, cost: u32) -> Self {
        self.cost = cost;
        self
    }

    /// Says that this tool hands out `store`'s handles: the retention sentence ("Note handles
    /// stay valid for 30 minutes after their last use and for 1 day at most; …") is appended to
    /// the description the model reads, and the lifetimes are listed in the definition's
    /// `_meta` ([`crate::state::handles::HANDLES_META_KEY`]) (T-21).
    pub fn creates_handles(mut self, handles: impl Into<HandleRetention>) -> Self {
        self.handles.push(handles.into());
        self
    }

    /// Sends this tool's results as the handler made them, unsanitized, for the stated reason
    /// (logged when the tool is registered): for a tool whose output is already safe or must
    /// stay byte-exact.
    pub fn raw_output(self, reason: impl Into<String>) -> Self {
        self.output_guard(crate::safety::output::OutputGuard::off(reason))
    }

    /// Lets the tool run as a task (tasks extension): a call that does not finish on its first
    /// step becomes a task the client polls.
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = Some(support);
        self
    }

    /// Makes a call that may run as a task (see [`Tool::task_support`]) a task only when its
    /// handler calls [`RequestContext::start_task`], rather than as soon as its first step has
    /// to wait: until then the call waits for its handler as a plain call does (within the
    /// tool's time limit), and a handler that never asks answers as a plain call. For a
    /// handler that learns only after a while whether its work is long (a relay whose own
    /// server decides whether to make a task).
    pub fn deferred_task(mut self) -> Self {
        self.deferred_task = true;
        self
    }

    /// Sets the description the model reads.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = Some(description.into());
        self
    }

    /// Sets the display name.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.definition.title = Some(title.into());
        self
    }

    /// Sets behaviour hints.
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.definition.annotations = Some(annotations);
        self
    }

    /// Sets icons.
    pub fn icons(mut self, icons: Vec<Icon>) -> Self {
        self.definition.icons = Some(icons);
        self
    }

    /// Sets the definition's `_meta`.
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.definition.meta = Some(meta);
        self
    }

    /// Sets or replaces the `outputSchema`; results must then carry conforming
    /// `structuredContent` (T-10). A non-object value is refused at registration.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.definition.output_schema = Some(match schema {
            Value::Object(map) => map,
            other => JsonObject::from_iter([("type".to_owned(), other)]),
        });
        self
    }
}

/// Deserializes validated arguments; `{}` also reads as `null`, so `()` works as "no arguments".
fn parse_arguments<A: DeserializeOwned>(arguments: &Value) -> Result<A, serde_json::Error> {
    let empty = arguments.as_object().is_some_and(JsonObject::is_empty);
    A::deserialize(arguments).or_else(|e| {
        if empty {
            A::deserialize(&Value::Null).map_err(|_| e)
        } else {
            Err(e)
        }
    })
}

/// The input schema of `A`: a type without fields (or `()`) becomes the no-argument schema (T-07).
fn input_schema_of<A: JsonSchema>() -> JsonObject {
    let mut schema = schema_object::<A>();
    if schema.get("type") == Some(&Value::String("null".into())) {
        schema.insert("type".into(), "object".into());
        schema.insert("additionalProperties".into(), false.into());
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// A name.
        name: String,
        count: Option<u32>,
        inner: Inner,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        #[schemars(extend("x-mcp-header" = "Region"))]
        region: String,
    }

    #[derive(Serialize, JsonSchema)]
    struct Out {
        total: u32,
    }

    #[test]
    fn typed_schemas_are_inline_objects() {
        let tool = Tool::new("t", |_: Args, _| async { Structured(Out { total: 1 }) });
        let schema = Value::Object(tool.definition.input_schema.clone());
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["name", "inner"]));
        assert_eq!(
            schema["properties"]["inner"]["properties"]["region"]["x-mcp-header"],
            "Region"
        );
        assert!(
            schema.get("$schema").is_none()
                && schema.get("title").is_none()
                && schema.get("$defs").is_none()
        );
        let output = Value::Object(tool.definition.output_schema.clone().unwrap());
        assert_eq!(output["properties"]["total"]["type"], "integer");
    }

    #[test]
    fn no_argument_tools_take_an_empty_object() {
        for schema in [
            Tool::new("a", |_: NoArgs, _| async { "x" })
                .definition
                .input_schema,
            Tool::new("b", |_: (), _| async { "x" })
                .definition
                .input_schema,
        ] {
            assert_eq!(
                Value::Object(schema),
                json!({"type": "object", "additionalProperties": false})
            );
        }
        let args: NoArgs = serde_json::from_value(json!({})).unwrap();
        assert_eq!(args, NoArgs {});
    }

    #[test]
    fn outputs_convert() {
        let r = Structured(Out { total: 3 }).into_result().unwrap();
        assert_eq!(r.structured_content, Some(json!({"total": 3})));
        assert_eq!(
            serde_json::to_value(&r.content).unwrap(),
            json!([{"type": "text", "text": "{\"total\":3}"}])
        );
        let failed: Result<String, ToolError> = Err(ToolError::failed("no"));
        assert!(matches!(failed.into_result(), Err(ToolError::Failed(m)) if m == "no"));
        assert_eq!(
            <Result<Structured<Out>, ToolError>>::output_schema().unwrap()["type"],
            "object"
        );
        assert!(String::output_schema().is_none());
    }
}
