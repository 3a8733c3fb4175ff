//! Every file under `tests/fixtures/examples/<Type>/` (copied from the official schema's
//! examples) is parsed into our type for `<Type>`, written back, compared with the input, and
//! the written JSON is validated against `$defs/<Type>` of the official JSON Schema.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolwire_protocol::methods::MetaParams;
use toolwire_protocol::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn round_trip<T: Serialize + DeserializeOwned>(input: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(input.clone()).map_err(|e| format!("parse: {e}"))?;
    serde_json::to_value(&typed).map_err(|e| format!("write: {e}"))
}

/// Our type for each schema definition that has examples.
fn round_trip_as(def: &str, input: &Value) -> Result<Value, String> {
    match def {
        "AudioContent" | "ImageContent" | "TextContent" | "ResourceLink" | "EmbeddedResource" => {
            round_trip::<ContentBlock>(input)
        }
        "ToolUseContent" | "ToolResultContent" => round_trip::<SamplingContent>(input),
        "BlobResourceContents" | "TextResourceContents" => round_trip::<ResourceContents>(input),
        "BooleanSchema"
        | "NumberSchema"
        | "StringSchema"
        | "TitledMultiSelectEnumSchema"
        | "TitledSingleSelectEnumSchema"
        | "UntitledMultiSelectEnumSchema"
        | "UntitledSingleSelectEnumSchema" => round_trip::<PrimitiveSchema>(input),
        "CallToolRequest" => round_trip::<Request<CallToolParams>>(input),
        "CallToolRequestParams" => round_trip::<CallToolParams>(input),
        "CallToolResult" => round_trip::<CallToolResult>(input),
        "CallToolResultResponse" => round_trip::<Response<CallToolResult>>(input),
        "CancelledNotification" => round_trip::<Notification<CancelledParams>>(input),
        "CancelledNotificationParams" => round_trip::<CancelledParams>(input),
        "ClientCapabilities" => round_trip::<ClientCapabilities>(input),
        "CompleteRequest" => round_trip::<Request<CompleteParams>>(input),
        "CompleteRequestParams" => round_trip::<CompleteParams>(input),
        "CompleteResult" => round_trip::<CompleteResult>(input),
        "CompleteResultResponse" => round_trip::<Response<CompleteResult>>(input),
        "CreateMessageRequest" | "ElicitRequest" | "ListRootsRequest" => {
            round_trip::<InputRequest>(input)
        }
        "CreateMessageRequestParams" => round_trip::<CreateMessageParams>(input),
        "CreateMessageResult" => round_trip::<CreateMessageResult>(input),
        "DiscoverRequest" => round_trip::<Request<MetaParams>>(input),
        "DiscoverResult" => round_trip::<DiscoverResult>(input),
        "DiscoverResultResponse" => round_trip::<Response<DiscoverResult>>(input),
        "ElicitRequestFormParams" | "ElicitRequestURLParams" => {
            round_trip::<ElicitRequestParams>(input)
        }
        "ElicitResult" => round_trip::<ElicitResult>(input),
        "GetPromptRequest" => round_trip::<Request<GetPromptParams>>(input),
        "GetPromptRequestParams" => round_trip::<GetPromptParams>(input),
        "GetPromptResult" => round_trip::<GetPromptResult>(input),
        "GetPromptResultResponse" => round_trip::<Response<GetPromptResult>>(input),
        "HeaderMismatchError"
        | "MissingRequiredClientCapabilityError"
        | "UnsupportedProtocolVersionError" => round_trip::<ErrorResponse>(input),
        "InternalError" | "InvalidParamsError" | "MethodNotFoundError" | "ParseError" => {
            round_trip::<ErrorObject>(input)
        }
        "InputRequests" => round_trip::<InputRequests>(input),
        "InputRequiredResult" => round_trip::<InputRequiredResult>(input),
        "InputResponses" => round_trip::<InputResponses>(input),
        "ListPromptsRequest"
        | "ListResourceTemplatesRequest"
        | "ListResourcesRequest"
        | "ListToolsRequest" => round_trip::<Request<PaginatedParams>>(input),
        "PaginatedRequestParams" => round_trip::<PaginatedParams>(input),
        "ListPromptsResult" => round_trip::<ListPromptsResult>(input),
        "ListPromptsResultResponse" => round_trip::<Response<ListPromptsResult>>(input),
        "ListResourceTemplatesResult" => round_trip::<ListResourceTemplatesResult>(input),
        "ListResourceTemplatesResultResponse" => {
            round_trip::<Response<ListResourceTemplatesResult>>(input)
        }
        "ListResourcesResult" => round_trip::<ListResourcesResult>(input),
        "ListResourcesResultResponse" => round_trip::<Response<ListResourcesResult>>(input),
        "ListRootsResult" => round_trip::<ListRootsResult>(input),
        "ListToolsResult" => round_trip::<ListToolsResult>(input),
        "ListToolsResultResponse" => round_trip::<Response<ListToolsResult>>(input),
        "LoggingMessageNotification" => round_trip::<Notification<LoggingMessageParams>>(input),
        "LoggingMessageNotificationParams" => round_trip::<LoggingMessageParams>(input),
        "ModelPreferences" => round_trip::<ModelPreferences>(input),
        "ProgressNotification" => round_trip::<Notification<ProgressParams>>(input),
        "ProgressNotificationParams" => round_trip::<ProgressParams>(input),
        "PromptListChangedNotification"
        | "ResourceListChangedNotification"
        | "ToolListChangedNotification" => round_trip::<Notification<ListChangedParams>>(input),
        "ReadResourceRequest" => round_trip::<Request<ReadResourceParams>>(input),
        "ReadResourceResult" => round_trip::<ReadResourceResult>(input),
        "ReadResourceResultResponse" => round_trip::<Response<ReadResourceResult>>(input),
        "Resource" => round_trip::<Resource>(input),
        "ResourceUpdatedNotification" => round_trip::<Notification<ResourceUpdatedParams>>(input),
        "ResourceUpdatedNotificationParams" => round_trip::<ResourceUpdatedParams>(input),
        "Root" => round_trip::<Root>(input),
        "SamplingMessage" => round_trip::<SamplingMessage>(input),
        "ServerCapabilities" => round_trip::<ServerCapabilities>(input),
        "SubscriptionsAcknowledgedNotification" => {
            round_trip::<Notification<AcknowledgedParams>>(input)
        }
        "SubscriptionsListenRequest" => round_trip::<Request<ListenParams>>(input),
        "SubscriptionsListenResult" => round_trip::<EmptyResult>(input),
        "SubscriptionsListenResultResponse" => round_trip::<Response<EmptyResult>>(input),
        "Tool" => round_trip::<Tool>(input),
        other => Err(format!("no type mapped for {other}")),
    }
}

/// JSON equality where numbers compare by value (`50` equals `50.0`), as JSON Schema does.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// What we are expected to write for an example; differs from the input only where the input
/// carries what the shape cannot: the `roots/list` example has a JSON-RPC `id` (input requests
/// carry none, M-04) and no params (we always write `params`); one resources/read response omits
/// the cache hints its schema requires, which read as "stale, private" (K-05, K-08).
fn expected_output(def: &str, input: &Value) -> Value {
    let mut want = input.clone();
    if def == "ReadResourceResultResponse" {
        let result = want["result"].as_object_mut().unwrap();
        result
            .entry("ttlMs")
            .or_insert_with(|| serde_json::json!(0));
        result
            .entry("cacheScope")
            .or_insert_with(|| serde_json::json!("private"));
    }
    if def == "ListRootsRequest" {
        let obj = want.as_object_mut().unwrap();
        obj.remove("id");
        obj.entry("params").or_insert_with(|| serde_json::json!({}));
    }
    want
}

fn schema_validator(def: &str, document: &Value) -> jsonschema::Validator {
    let mut root = document.clone();
    root.as_object_mut()
        .unwrap()
        .insert("$ref".into(), Value::String(format!("#/$defs/{def}")));
    jsonschema::draft202012::options()
        .build(&root)
        .expect("official schema compiles")
}

#[test]
fn every_official_example_round_trips_and_validates() {
    let schema_text = std::fs::read_to_string(fixtures().join("schema-2026-07-28.json")).unwrap();
    let document: Value = serde_json::from_str(&schema_text).unwrap();
    let mut dirs: Vec<_> = std::fs::read_dir(fixtures().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    let mut failures = Vec::new();
    let mut checked = 0;
    for dir in dirs {
        let def = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let validator = schema_validator(&def, &document);
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let input: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let label = format!("{def}/{}", path.file_name().unwrap().to_str().unwrap());
            checked += 1;
            match round_trip_as(&def, &input) {
                Err(e) => failures.push(format!("{label}: {e}")),
                Ok(out) => {
                    let want = expected_output(&def, &input);
                    if !same_json(&out, &want) {
                        failures.push(format!("{label}: wrote {out}\n  expected {want}"));
                    }
                    for error in validator.iter_errors(&out) {
                        failures.push(format!(
                            "{label}: schema: {} at {}",
                            error,
                            error.instance_path().as_str()
                        ));
                    }
                }
            }
        }
    }
    assert!(checked >= 100, "only {checked} examples found");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
