//! Multi round-trip requests: input requests a server returns, the client's
//! answers, and the shapes of elicitation, sampling and roots.
//! Its rules are under “Multi round-trip requests (MRTR)” in docs/requirements.md.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{JsonObject, ResultMeta, ResultType, Role, SamplingContent, Tool, is_empty_object};

/// Method of an elicitation input request.
pub const METHOD_ELICIT: &str = "elicitation/create";
/// Method of a sampling input request.
pub const METHOD_CREATE_MESSAGE: &str = "sampling/createMessage";
/// Method of a roots input request.
pub const METHOD_LIST_ROOTS: &str = "roots/list";

/// Input requests by key (M-04).
pub type InputRequests = BTreeMap<String, InputRequest>;
/// The client's answers by the keys of the input requests.
pub type InputResponses = BTreeMap<String, InputResponse>;

/// `{"resultType":"input_required", inputRequests?, requestState?}` (M-01, M-03).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always `input_required`.
    #[serde(default = "input_required")]
    pub result_type: ResultType,
    /// What the client must answer before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque state the client echoes verbatim (M-12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

fn input_required() -> ResultType {
    ResultType::InputRequired
}

/// One input request: `{method, params}`, without `jsonrpc` or `id`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InputRequest {
    /// `elicitation/create`.
    Elicit(ElicitRequestParams),
    /// `sampling/createMessage`.
    CreateMessage(Box<CreateMessageParams>),
    /// `roots/list`.
    ListRoots(ListRootsParams),
}

impl InputRequest {
    /// The method name.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Elicit(_) => METHOD_ELICIT,
            InputRequest::CreateMessage(_) => METHOD_CREATE_MESSAGE,
            InputRequest::ListRoots(_) => METHOD_LIST_ROOTS,
        }
    }
}

impl Serialize for InputRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("method", self.method())?;
        match self {
            InputRequest::Elicit(p) => map.serialize_entry("params", p)?,
            InputRequest::CreateMessage(p) => map.serialize_entry("params", p)?,
            InputRequest::ListRoots(p) => map.serialize_entry("params", p)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            method: String,
            #[serde(default)]
            params: Option<Value>,
        }
        let raw = Raw::deserialize(d)?;
        let params = raw
            .params
            .unwrap_or_else(|| Value::Object(JsonObject::new()));
        let parsed = match raw.method.as_str() {
            METHOD_ELICIT => serde_json::from_value(params).map(InputRequest::Elicit),
            METHOD_CREATE_MESSAGE => {
                serde_json::from_value(params).map(|p| InputRequest::CreateMessage(Box::new(p)))
            }
            METHOD_LIST_ROOTS => serde_json::from_value(params).map(InputRequest::ListRoots),
            other => {
                return Err(de::Error::custom(format!(
                    "unknown input request method {other:?}"
                )));
            }
        };
        parsed.map_err(de::Error::custom)
    }
}

/// A client's answer to one input request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum InputResponse {
    /// Answer to `sampling/createMessage`.
    CreateMessage(Box<CreateMessageResult>),
    /// Answer to `roots/list`.
    ListRoots(ListRootsResult),
    /// Answer to `elicitation/create`.
    Elicit(ElicitResult),
}

/// Params of `elicitation/create`: a form or a URL (M-15).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ElicitRequestParams {
    /// URL mode (`mode: "url"`).
    Url(ElicitUrlParams),
    /// Form mode (`mode` absent or `"form"`).
    Form(ElicitFormParams),
}

/// Form-mode elicitation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitFormParams {
    /// `"form"` or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to ask the user.
    pub message: String,
    /// A flat object schema of primitives (J-10).
    pub requested_schema: RequestedSchema,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// The restricted schema of an elicitation form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestedSchema {
    /// Optional dialect.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Always `"object"`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Field schemas by name.
    pub properties: BTreeMap<String, PrimitiveSchema>,
    /// Required fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
}

/// URL-mode elicitation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitUrlParams {
    /// Always `"url"`.
    pub mode: UrlMode,
    /// Why the user should open the URL.
    pub message: String,
    /// The URL to open.
    pub url: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// The literal `"url"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UrlMode {
    /// `"url"`.
    #[default]
    #[serde(rename = "url")]
    Url,
}

/// A field of an elicitation form (PrimitiveSchemaDefinition), told apart by its keywords.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum PrimitiveSchema {
    /// Single select with titled options (`oneOf`).
    TitledSingleSelect(TitledSingleSelectEnumSchema),
    /// Multi select (`type: array`).
    MultiSelect(MultiSelectEnumSchema),
    /// Single select (`enum`, optionally with legacy `enumNames`).
    SingleSelect(SingleSelectEnumSchema),
    /// String field.
    String(StringSchema),
    /// Number or integer field.
    Number(NumberSchema),
    /// Boolean field.
    Boolean(BooleanSchema),
}

impl<'de> Deserialize<'de> for PrimitiveSchema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let has = |k: &str| value.get(k).is_some();
        let parsed = match value.get("type").and_then(Value::as_str) {
            Some("string") if has("oneOf") => {
                serde_json::from_value(value).map(PrimitiveSchema::TitledSingleSelect)
            }
            Some("string") if has("enum") => {
                serde_json::from_value(value).map(PrimitiveSchema::SingleSelect)
            }
            Some("string") => serde_json::from_value(value).map(PrimitiveSchema::String),
            Some("array") => serde_json::from_value(value).map(PrimitiveSchema::MultiSelect),
            Some("number" | "integer") => {
                serde_json::from_value(value).map(PrimitiveSchema::Number)
            }
            Some("boolean") => serde_json::from_value(value).map(PrimitiveSchema::Boolean),
            _ => {
                return Err(de::Error::custom(
                    "form fields must be string, number, integer, boolean or array",
                ));
            }
        };
        parsed.map_err(de::Error::custom)
    }
}

/// Common descriptive keys of form fields.
macro_rules! form_field {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// The JSON type keyword.
            #[serde(rename = "type")]
            pub type_: String,
            /// Label.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub title: Option<String>,
            /// Help text.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
            $($(#[$fm])* #[serde(default, skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }
    };
}

form_field!(
    /// `{type: "string"}` with optional format and length bounds.
    StringSchema {
        /// Minimum length.
        min_length: u64,
        /// Maximum length.
        max_length: u64,
        /// `date`, `date-time`, `email` or `uri`.
        format: String,
        /// Default value.
        default: String,
    }
);
form_field!(
    /// `{type: "number" | "integer"}`. Bounds and default keep their JSON form, so an
    /// integer field's `30` stays `30`.
    NumberSchema {
        /// Minimum.
        minimum: serde_json::Number,
        /// Maximum.
        maximum: serde_json::Number,
        /// Default value.
        default: serde_json::Number,
    }
);
form_field!(
    /// `{type: "boolean"}`.
    BooleanSchema {
        /// Default value.
        default: bool,
    }
);
form_field!(
    /// `{type: "string", enum}`; `enumNames` is the legacy titled form.
    SingleSelectEnumSchema {
        /// The options.
        r#enum: Vec<String>,
        /// Legacy display names.
        enum_names: Vec<String>,
        /// Default value.
        default: String,
    }
);
form_field!(
    /// `{type: "string", oneOf: [{const, title}]}`.
    TitledSingleSelectEnumSchema {
        /// The options.
        one_of: Vec<TitledOption>,
        /// Default value.
        default: String,
    }
);
form_field!(
    /// `{type: "array", items: {enum} | {anyOf: [{const, title}]}}`.
    MultiSelectEnumSchema {
        /// The option set.
        items: MultiSelectItems,
        /// Minimum selections.
        min_items: u64,
        /// Maximum selections.
        max_items: u64,
        /// Default selection.
        default: Vec<String>,
    }
);

/// Items of a multi-select field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MultiSelectItems {
    /// Titled options.
    Titled {
        /// The options.
        #[serde(rename = "anyOf")]
        any_of: Vec<TitledOption>,
    },
    /// Plain options.
    Untitled {
        /// Always `"string"`.
        #[serde(rename = "type")]
        type_: String,
        /// The options.
        r#enum: Vec<String>,
    },
}

/// An option with a display title.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TitledOption {
    /// The value.
    #[serde(rename = "const")]
    pub const_: String,
    /// The label.
    pub title: String,
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The submitted form (on accept in form mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<BTreeMap<String, ElicitValue>>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A submitted form value: string, integer, number, boolean or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ElicitValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Integer(i64),
    /// A number.
    Number(f64),
    /// A string.
    String(String),
    /// Selected options.
    Strings(Vec<String>),
}

/// The user's choice in an elicitation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted.
    #[default]
    Accept,
    /// Explicitly refused.
    Decline,
    /// Dismissed.
    Cancel,
}

/// Params of `sampling/createMessage` (deprecated; M-18).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageParams {
    /// The conversation.
    pub messages: Vec<SamplingMessage>,
    /// Token budget the client honours.
    pub max_tokens: u64,
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// `none`, `thisServer` or `allServers` (deprecated values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Provider metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Model preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// Tools the model may use (needs `sampling.tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Tool choice mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// One message of a sampling conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Speaker.
    pub role: Role,
    /// One block or several.
    pub content: SamplingMessageContent,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A sampling message's content: one block or an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SamplingMessageContent {
    /// One block.
    One(SamplingContent),
    /// Several blocks.
    Many(Vec<SamplingContent>),
}

/// The client's model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Speaker, normally `assistant`.
    pub role: Role,
    /// The generated content.
    pub content: SamplingMessageContent,
    /// The model that answered.
    pub model: String,
    /// Why generation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Model selection hints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Model name hints in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<ModelHint>>,
    /// 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<f64>,
    /// 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<f64>,
    /// 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<f64>,
}

/// A model name hint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelHint {
    /// A (sub)string of a model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// How the model may use tools in sampling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolChoice {
    /// `auto`, `none` or `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// Params of `roots/list` (deprecated).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsParams {
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// The client's roots.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A root the client exposes (`file://` URIs; M-19).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// The URI.
    pub uri: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}
