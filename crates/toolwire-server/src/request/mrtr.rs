//! How a handler ends without a result: a [`ToolError`], one kind of which is
//! [`InputRequired`], the handler side of multi round-trip requests (M-01…M-19). A handler asks
//! for input with it (returned as an error, so `?` works) and reads the answers of the previous
//! round from its [`RequestContext`](crate::request::context::RequestContext). The server checks
//! what it asks for against the capabilities the client declared (M-05) and seals the handler's
//! state (M-06, M-07).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde_json::Value;
use toolwire_protocol::{
    ClientCapabilities, CreateMessageParams, ElicitFormParams, ElicitRequestParams,
    ElicitUrlParams, ElicitationCapability, ErrorObject, InputRequest, InputRequests, JsonObject,
    ListRootsParams, RequestedSchema, RootsCapability, SamplingCapability, UrlMode,
};

/// How a tool call fails.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool could not do what was asked (bad value, upstream failure, business rule). The
    /// model sees the message in an `isError` result and can correct itself (T-13).
    Failed(String),
    /// The request itself is refused with this JSON-RPC error, e.g. -32021 (B-20).
    Protocol(ErrorObject),
    /// Something broke inside the server. It is logged; the client only learns that the tool
    /// failed, never the details.
    Internal(Box<dyn std::error::Error + Send + Sync>),
    /// The handler needs input from the client first: the request answers `input_required`
    /// (MRTR). Made from [`InputRequired`].
    InputRequired(Box<InputRequired>),
}

impl ToolError {
    /// A failure the model should see.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }

    /// An internal error, kept out of the result.
    pub fn internal(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ToolError::Internal(error.into())
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Failed(m) => write!(f, "tool failed: {m}"),
            ToolError::Protocol(e) => write!(f, "request refused: {e}"),
            ToolError::Internal(e) => write!(f, "internal error: {e}"),
            ToolError::InputRequired(_) => write!(f, "input required"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<ErrorObject> for ToolError {
    fn from(e: ErrorObject) -> Self {
        ToolError::Protocol(e)
    }
}

/// What a handler needs before it can finish: named input requests and optional state to get
/// back on the retry. Return it as an error (`Err(InputRequired::new()…into())` or `?`).
///
/// ```
/// use toolwire_server::{Elicited, InputRequired, NoArgs, RequestContext, Tool, ToolError};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Name {
///     /// Your name.
///     name: String,
/// }
///
/// let tool = Tool::new("greet", |_: NoArgs, ctx: RequestContext| async move {
///     match ctx.elicited::<Name>("user_name")? {
///         Some(Elicited::Accepted(form)) => Ok(format!("Hello, {}!", form.name)),
///         Some(_) => Ok("Hello, stranger!".to_owned()),
///         None => Err(ToolError::from(InputRequired::new().elicit::<Name>("user_name", "What is your name?"))),
///     }
/// });
/// # let _ = tool;
/// ```
#[derive(Debug, Clone, Default)]
pub struct InputRequired {
    pub(crate) requests: InputRequests,
    pub(crate) state: Option<Value>,
    /// A request the builder could not form (a form type that is not flat, J-10).
    pub(crate) problem: Option<String>,
}

impl InputRequired {
    /// Nothing requested yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the user to fill in a form whose fields are `T`'s (flat: strings, numbers, integers,
    /// booleans and enums only, J-10).
    pub fn elicit<T: JsonSchema>(self, key: impl Into<String>, message: impl Into<String>) -> Self {
        match form_schema::<T>() {
            Ok(schema) => self.elicit_schema(key, message, schema),
            Err(problem) => Self {
                problem: Some(problem),
                ..self
            },
        }
    }

    /// Asks the user to fill in a form with this schema.
    pub fn elicit_schema(
        mut self,
        key: impl Into<String>,
        message: impl Into<String>,
        schema: RequestedSchema,
    ) -> Self {
        let params = ElicitFormParams {
            mode: None,
            message: message.into(),
            requested_schema: schema,
            meta: None,
        };
        self.requests.insert(
            key.into(),
            InputRequest::Elicit(ElicitRequestParams::Form(params)),
        );
        self
    }

    /// Asks the user to open a URL (for anything sensitive: never ask for secrets in a form, M-15).
    pub fn elicit_url(
        mut self,
        key: impl Into<String>,
        message: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        let params = ElicitUrlParams {
            mode: UrlMode::Url,
            message: message.into(),
            url: url.into(),
            meta: None,
        };
        self.requests.insert(
            key.into(),
            InputRequest::Elicit(ElicitRequestParams::Url(params)),
        );
        self
    }

    /// Asks the client's model for a completion (sampling; deprecated in 2026-07-28, V-16).
    pub fn sample(mut self, key: impl Into<String>, params: CreateMessageParams) -> Self {
        self.requests
            .insert(key.into(), InputRequest::CreateMessage(Box::new(params)));
        self
    }

    /// Asks for the client's roots (deprecated in 2026-07-28, V-16).
    pub fn list_roots(mut self, key: impl Into<String>) -> Self {
        self.requests.insert(
            key.into(),
            InputRequest::ListRoots(ListRootsParams::default()),
        );
        self
    }

    /// Asks for `request` under `key` as it is: for a handler that passes on another server's
    /// request verbatim (a gateway relaying its upstream's rounds). The client's declared
    /// capabilities are checked against it like any other request (M-05).
    pub fn request(mut self, key: impl Into<String>, request: InputRequest) -> Self {
        self.requests.insert(key.into(), request);
        self
    }

    /// State the server seals and gives back on the retry
    /// ([`RequestContext::request_state`](crate::RequestContext::request_state)).
    pub fn state(mut self, state: impl Serialize) -> Self {
        match serde_json::to_value(state) {
            Ok(value) => self.state = Some(value),
            Err(e) => self.problem = Some(format!("the state does not serialize: {e}")),
        }
        self
    }

    /// The capabilities the requests need that `declared` lacks (M-05), or `None`.
    pub(crate) fn missing_capabilities(
        &self,
        declared: &ClientCapabilities,
    ) -> Option<ClientCapabilities> {
        let mut missing = ClientCapabilities::default();
        for request in self.requests.values() {
            match request {
                InputRequest::Elicit(ElicitRequestParams::Form(_))
                    if !declared.supports_elicitation_form() =>
                {
                    missing
                        .elicitation
                        .get_or_insert_with(ElicitationCapability::default)
                        .form = Some(JsonObject::new());
                }
                InputRequest::Elicit(ElicitRequestParams::Url(_))
                    if !declared.supports_elicitation_url() =>
                {
                    missing
                        .elicitation
                        .get_or_insert_with(ElicitationCapability::default)
                        .url = Some(JsonObject::new());
                }
                InputRequest::CreateMessage(p) => {
                    let sampling = declared.sampling.as_ref();
                    if sampling.is_none() {
                        missing
                            .sampling
                            .get_or_insert_with(SamplingCapability::default);
                    }
                    if p.tools.is_some() && sampling.and_then(|s| s.tools.as_ref()).is_none() {
                        missing
                            .sampling
                            .get_or_insert_with(SamplingCapability::default)
                            .tools = Some(JsonObject::new());
                    }
                }
                InputRequest::ListRoots(_) if declared.roots.is_none() => {
                    missing.roots = Some(RootsCapability::default());
                }
                _ => {}
            }
        }
        (missing != ClientCapabilities::default()).then_some(missing)
    }
}

impl From<InputRequired> for ToolError {
    fn from(input: InputRequired) -> Self {
        ToolError::InputRequired(Box::new(input))
    }
}

/// The user's answer to a form.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited<T> {
    /// Submitted, with the form's content.
    Accepted(T),
    /// Explicitly refused.
    Declined,
    /// Dismissed.
    Cancelled,
}

/// The flat form schema of `T` (J-10), or why `T` is not flat.
fn form_schema<T: JsonSchema>() -> Result<RequestedSchema, String> {
    let schema = schema_object::<T>();
    let mut properties = BTreeMap::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, mut prop) in props {
        // `Option<T>` fields come out as `type: [T, "null"]`; the form's `required` says it.
        if let Some(Value::Array(types)) = prop.get("type") {
            let named: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
            if let [single] = named.as_slice() {
                prop["type"] = single.clone();
            }
        }
        let field = serde_json::from_value(prop)
            // J-10
            .map_err(|e| format!("form field {name:?} is not a primitive: {e}"))?;
        properties.insert(name, field);
    }
    let required = schema
        .get("required")
        .and_then(|r| serde_json::from_value(r.clone()).ok());
    Ok(RequestedSchema {
        schema: None,
        type_: "object".into(),
        properties,
        required,
    })
}

/// The schema of `T`, 2020-12, with subschemas inlined and without `$schema`/`title` noise.
pub(crate) fn schema_object<T: JsonSchema>() -> JsonObject {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut object = match schema.to_value() {
        Value::Object(map) => map,
        other => JsonObject::from_iter([("const".to_owned(), other)]),
    };
    object.remove("title");
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Form {
        /// Name.
        name: String,
        age: Option<u8>,
        agree: bool,
        color: Color,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Color {
        Red,
        Blue,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Nested {
        inner: Form,
    }

    #[test]
    fn forms_are_flat_primitive_schemas() {
        let input = InputRequired::new().elicit::<Form>("f", "Fill it in");
        assert!(input.problem.is_none(), "{:?}", input.problem);
        let json = serde_json::to_value(&input.requests["f"]).unwrap();
        assert_eq!(json["method"], "elicitation/create");
        let schema = &json["params"]["requestedSchema"];
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["age"]["type"], "integer");
        assert_eq!(
            schema["properties"]["color"]["enum"],
            json!(["red", "blue"])
        );
        assert_eq!(schema["required"], json!(["name", "agree", "color"]));
        let nested = InputRequired::new().elicit::<Nested>("n", "No");
        assert!(nested.problem.unwrap().contains("is not a primitive"));
    }

    #[test]
    fn missing_capabilities_are_named() {
        let ask = InputRequired::new()
            .elicit_schema(
                "a",
                "m",
                RequestedSchema {
                    type_: "object".into(),
                    ..Default::default()
                },
            )
            .elicit_url("b", "m", "https://example.com")
            .sample(
                "c",
                CreateMessageParams {
                    tools: Some(vec![]),
                    ..Default::default()
                },
            )
            .list_roots("d");
        let caps = |v: Value| serde_json::from_value::<ClientCapabilities>(v).unwrap();
        let missing = ask.missing_capabilities(&caps(json!({}))).unwrap();
        assert_eq!(
            serde_json::to_value(&missing).unwrap(),
            json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}})
        );
        let all = caps(
            json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}}),
        );
        assert_eq!(ask.missing_capabilities(&all), None);
        let sampling_only = InputRequired::new().sample("s", CreateMessageParams::default());
        assert_eq!(
            sampling_only.missing_capabilities(&caps(json!({"sampling": {}}))),
            None
        );
    }
}
