//! Routing: the methods this server implements, each request's params parsed into a [`Route`],
//! and the answers to removed and legacy methods.

use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

use toolwire_protocol::methods::{
    CallTool as CallToolMethod, Complete as CompleteMethod, Discover, GetPrompt as GetPromptMethod,
    ListPrompts, ListResourceTemplates, ListResources, ListTools, Listen, Method, REMOVED_METHODS,
    ReadResource as ReadResourceMethod,
};
use toolwire_protocol::{
    CompletionArgument, CompletionContext, CompletionReference, ErrorObject, InputResponses,
    JsonObject, PROTOCOL_VERSION, SubscriptionFilter,
};

/// Protocol versions this server implements (V-01, V-02).
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

/// `tools/call` params.
#[derive(Debug)]
pub(crate) struct CallTool {
    pub(crate) name: String,
    pub(crate) arguments: Value,
    pub(crate) round: RoundParams,
}

/// The MRTR members of a retried request.
#[derive(Debug, Default)]
pub(crate) struct RoundParams {
    pub(crate) answers: Answers,
    pub(crate) request_state: Option<String>,
}

/// `inputResponses` as sent: the answers that parse, and why each other one did not. A handler
/// that reads a malformed key gets -32602; a key nobody asked about is ignored whatever its
/// shape (M-10; issue 8, item 4).
#[derive(Debug, Default)]
pub(crate) struct Answers {
    pub(crate) parsed: InputResponses,
    pub(crate) malformed: BTreeMap<String, String>,
}

impl Answers {
    pub(crate) fn read(raw: Option<JsonObject>) -> Answers {
        let mut answers = Answers::default();
        for (key, value) in raw.unwrap_or_default() {
            match serde_json::from_value(value) {
                Ok(response) => {
                    answers.parsed.insert(key, response);
                }
                Err(e) => {
                    answers.malformed.insert(key, e.to_string());
                }
            }
        }
        answers
    }
}

/// A parsed request of a method this server implements.
#[derive(Debug)]
pub(crate) enum Route {
    Discover,
    ListTools {
        cursor: Option<String>,
    },
    CallTool(CallTool),
    Listen {
        filter: SubscriptionFilter,
    },
    ListPrompts {
        cursor: Option<String>,
    },
    GetPrompt(GetPrompt),
    ListResources {
        cursor: Option<String>,
    },
    ListResourceTemplates {
        cursor: Option<String>,
    },
    ReadResource(ReadResource),
    Complete(Complete),
    TasksGet {
        task_id: String,
    },
    TasksUpdate {
        task_id: String,
        input_responses: InputResponses,
    },
    TasksCancel {
        task_id: String,
    },
}

/// `prompts/get` params.
#[derive(Debug)]
pub(crate) struct GetPrompt {
    pub(crate) name: String,
    pub(crate) arguments: BTreeMap<String, String>,
    pub(crate) round: RoundParams,
}

/// `resources/read` params.
#[derive(Debug)]
pub(crate) struct ReadResource {
    pub(crate) uri: String,
    pub(crate) round: RoundParams,
}

/// `completion/complete` params.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Complete {
    #[serde(rename = "ref")]
    pub(crate) reference: CompletionReference,
    pub(crate) argument: CompletionArgument,
    #[serde(default)]
    pub(crate) context: Option<CompletionContext>,
}

/// Params of the paginated lists.
#[derive(serde::Deserialize)]
struct Paginated {
    #[serde(default)]
    cursor: Option<String>,
}

impl Route {
    /// Parses the params of `method`: -32601 for a method this server does not implement
    /// (removed ones included, V-15), -32602 for params of the wrong shape.
    pub(crate) fn parse(method: &str, params: Option<&RawValue>) -> Result<Route, ErrorObject> {
        fn params_of<'a, T: serde::Deserialize<'a>>(
            method: &str,
            params: Option<&'a RawValue>,
        ) -> Result<T, ErrorObject> {
            let text = params.map_or("{}", RawValue::get);
            if !text.trim_start().starts_with('{') {
                return Err(ErrorObject::invalid_params(format!(
                    "Invalid params for {method}: params must be an object"
                )));
            }
            serde_json::from_str(text).map_err(|e| {
                ErrorObject::invalid_params(format!("Invalid params for {method}: {e}"))
            })
        }
        match method {
            Discover::METHOD => Ok(Route::Discover),
            ListTools::METHOD => {
                #[derive(serde::Deserialize)]
                struct P {
                    #[serde(default)]
                    cursor: Option<String>,
                }
                let p: P = params_of(method, params)?;
                Ok(Route::ListTools { cursor: p.cursor })
            }
            CallToolMethod::METHOD => {
                #[derive(serde::Deserialize)]
                struct P {
                    name: String,
                    #[serde(default, deserialize_with = "present")]
                    arguments: Option<Value>,
                    #[serde(default, rename = "inputResponses")]
                    input_responses: Option<JsonObject>,
                    #[serde(default, rename = "requestState")]
                    request_state: Option<String>,
                }
                let p: P = params_of(method, params)?;
                let arguments = match p.arguments {
                    None => Value::Object(JsonObject::new()),
                    Some(args @ Value::Object(_)) => args,
                    Some(_) => {
                        return Err(ErrorObject::invalid_params(
                            "Invalid params for tools/call: arguments must be an object",
                        ));
                    }
                };
                Ok(Route::CallTool(CallTool {
                    name: p.name,
                    arguments,
                    round: RoundParams {
                        answers: Answers::read(p.input_responses),
                        request_state: p.request_state,
                    },
                }))
            }
            ListPrompts::METHOD => Ok(Route::ListPrompts {
                cursor: params_of::<Paginated>(method, params)?.cursor,
            }),
            ListResources::METHOD => Ok(Route::ListResources {
                cursor: params_of::<Paginated>(method, params)?.cursor,
            }),
            ListResourceTemplates::METHOD => Ok(Route::ListResourceTemplates {
                cursor: params_of::<Paginated>(method, params)?.cursor,
            }),
            GetPromptMethod::METHOD => {
                #[derive(serde::Deserialize)]
                struct P {
                    name: String,
                    #[serde(default)]
                    arguments: Option<BTreeMap<String, String>>,
                    #[serde(default, rename = "inputResponses")]
                    input_responses: Option<JsonObject>,
                    #[serde(default, rename = "requestState")]
                    request_state: Option<String>,
                }
                let p: P = params_of(method, params)?;
                Ok(Route::GetPrompt(GetPrompt {
                    name: p.name,
                    arguments: p.arguments.unwrap_or_default(),
                    round: RoundParams {
                        answers: Answers::read(p.input_responses),
                        request_state: p.request_state,
                    },
                }))
            }
            ReadResourceMethod::METHOD => {
                #[derive(serde::Deserialize)]
                struct P {
                    uri: String,
                    #[serde(default, rename = "inputResponses")]
                    input_responses: Option<JsonObject>,
                    #[serde(default, rename = "requestState")]
                    request_state: Option<String>,
                }
                let p: P = params_of(method, params)?;
                Ok(Route::ReadResource(ReadResource {
                    uri: p.uri,
                    round: RoundParams {
                        answers: Answers::read(p.input_responses),
                        request_state: p.request_state,
                    },
                }))
            }
            CompleteMethod::METHOD => Ok(Route::Complete(params_of(method, params)?)),
            "tasks/get" | "tasks/cancel" => {
                #[derive(serde::Deserialize)]
                struct P {
                    #[serde(rename = "taskId")]
                    task_id: String,
                }
                let task_id = params_of::<P>(method, params)?.task_id;
                Ok(if method == "tasks/get" {
                    Route::TasksGet { task_id }
                } else {
                    Route::TasksCancel { task_id }
                })
            }
            "tasks/update" => {
                #[derive(serde::Deserialize)]
                struct P {
                    #[serde(rename = "taskId")]
                    task_id: String,
                    #[serde(rename = "inputResponses", default)]
                    input_responses: Option<JsonObject>,
                }
                let p = params_of::<P>(method, params)?;
                // Unknown keys are tolerated whatever their shape; the task takes the answers
                // to its own requests.
                Ok(Route::TasksUpdate {
                    task_id: p.task_id,
                    input_responses: Answers::read(p.input_responses).parsed,
                })
            }
            Listen::METHOD => {
                #[derive(serde::Deserialize)]
                struct P {
                    notifications: SubscriptionFilter,
                }
                let p: P = params_of(method, params)?;
                Ok(Route::Listen {
                    filter: p.notifications,
                })
            }
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }

    /// The value the `Mcp-Name` header must carry, for methods that have one (H-22).
    pub(crate) fn name_header(&self) -> Option<&str> {
        match self {
            Route::CallTool(call) => Some(&call.name),
            Route::GetPrompt(get) => Some(&get.name),
            Route::ReadResource(read) => Some(&read.uri),
            Route::TasksGet { task_id }
            | Route::TasksCancel { task_id }
            | Route::TasksUpdate { task_id, .. } => Some(task_id),
            _ => None,
        }
    }
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// Names the revision in the -32601 of a method 2026-07-28 removed (V-15).
pub(crate) fn removed_method_error(method: &str, error: ErrorObject) -> ErrorObject {
    if error.code == toolwire_protocol::METHOD_NOT_FOUND && REMOVED_METHODS.contains(&method) {
        ErrorObject::method_not_found(method).with_data(serde_json::json!({
            "reason": "removed in protocol version 2026-07-28",
            "supportedVersions": SUPPORTED_VERSIONS,
        }))
    } else {
        error
    }
}

/// A legacy `initialize` (no 2026-07-28 `_meta`) is answered with -32022 naming the versions
/// this server speaks, so an older client learns why (V-08).
pub(crate) fn legacy_initialize(method: &str, params: Option<&RawValue>) -> Option<ErrorObject> {
    if method != "initialize" {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Legacy {
        #[serde(rename = "protocolVersion", default)]
        protocol_version: Option<String>,
    }
    let requested = params
        .and_then(|p| serde_json::from_str::<Legacy>(p.get()).ok())
        .and_then(|l| l.protocol_version)
        .unwrap_or_default();
    Some(ErrorObject::unsupported_version(
        SUPPORTED_VERSIONS,
        &requested,
    ))
}
