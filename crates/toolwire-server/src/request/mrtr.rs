//! Multi round-trip requests, the handler side (M-01…M-19): a handler asks for input with
//! [`InputRequired`] (returned as an error, so `?` works) and reads the answers of the previous
//! round from its [`RequestContext`]. The server checks what it asks for against the
//! capabilities the client declared (M-05) and seals the handler's state (M-06, M-07).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolwire_protocol::{
    ClientCapabilities, CreateMessageParams, CreateMessageResult, ElicitAction, ElicitFormParams,
    ElicitRequestParams, ElicitUrlParams, ElicitationCapability, ErrorObject, InputRequest,
    InputRequests, InputResponse, InputResponses, JsonObject, ListRootsParams, RequestedSchema,
    Root, RootsCapability, SamplingCapability, UrlMode,
};

use crate::request::context::RequestContext;
use crate::tools::tool::ToolError;

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

    /// State the server seals and gives back on the retry ([`RequestContext::request_state`]).
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

/// The answers and state a request carries from the previous round.
#[derive(Debug, Default)]
pub(crate) struct Round {
    pub(crate) responses: InputResponses,
    /// Answers that did not parse, with why: an error only if the handler asks for one.
    pub(crate) malformed: BTreeMap<String, String>,
    pub(crate) state: Option<Value>,
}

impl RequestContext {
    /// The raw answers to the previous round's input requests (empty on a first round).
    pub fn input_responses(&self) -> &InputResponses {
        static EMPTY: InputResponses = BTreeMap::new();
        self.round().map_or(&EMPTY, |r| &r.responses)
    }

    /// The answer under `key`: -32602 if it was sent but is not an answer of any kind.
    fn answer(&self, key: &str) -> Result<Option<&InputResponse>, ToolError> {
        if let Some(why) = self.round().and_then(|r| r.malformed.get(key)) {
            return Err(malformed(key, &format!("is malformed: {why}")));
        }
        Ok(self.input_responses().get(key))
    }

    /// The state the handler attached to the previous round, verified and decrypted.
    pub fn request_state<T: DeserializeOwned>(&self) -> Result<Option<T>, ToolError> {
        match self.round().and_then(|r| r.state.clone()) {
            None => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(ToolError::internal),
        }
    }

    /// The answer to the form asked for under `key`: `None` if it was not answered (ask again,
    /// M-10); -32602 if the answer is not a form answer or its content does not fit `T`.
    pub fn elicited<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<Elicited<T>>, ToolError> {
        let Some(response) = self.answer(key)? else {
            return Ok(None);
        };
        let InputResponse::Elicit(result) = response else {
            return Err(malformed(key, "is not an answer to elicitation/create"));
        };
        Ok(Some(match result.action {
            ElicitAction::Decline => Elicited::Declined,
            ElicitAction::Cancel => Elicited::Cancelled,
            ElicitAction::Accept => {
                let content = serde_json::to_value(result.content.clone().unwrap_or_default())
                    .map_err(ToolError::internal)?;
                let form = serde_json::from_value(content)
                    .map_err(|e| malformed(key, &format!("does not fit the form: {e}")))?;
                Elicited::Accepted(form)
            }
        }))
    }

    /// The client model's answer to the sampling request under `key`.
    pub fn sampled(&self, key: &str) -> Result<Option<&CreateMessageResult>, ToolError> {
        match self.answer(key)? {
            None => Ok(None),
            Some(InputResponse::CreateMessage(result)) => Ok(Some(result)),
            Some(_) => Err(malformed(key, "is not an answer to sampling/createMessage")),
        }
    }

    /// The client's roots, answering the request under `key`.
    pub fn listed_roots(&self, key: &str) -> Result<Option<&[Root]>, ToolError> {
        match self.answer(key)? {
            None => Ok(None),
            Some(InputResponse::ListRoots(result)) => Ok(Some(&result.roots)),
            Some(_) => Err(malformed(key, "is not an answer to roots/list")),
        }
    }
}

fn malformed(key: &str, why: &str) -> ToolError {
    ToolError::Protocol(ErrorObject::invalid_params(format!(
        "inputResponses.{key} {why}"
    )))
}

/// The flat form schema of `T` (J-10), or why `T` is not flat.
fn form_schema<T: JsonSchema>() -> Result<RequestedSchema, String> {
    let schema = crate::tools::tool::schema_object::<T>();
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
