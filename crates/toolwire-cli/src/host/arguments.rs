//! A call's arguments from the command line: one JSON object, or `key=value` pairs typed by
//! the tool's input schema (`key:=JSON` for a value given as JSON).

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

/// The arguments `words` give for a tool with `input_schema`.
pub(crate) fn parse(words: &[String], input_schema: &Value) -> anyhow::Result<Map<String, Value>> {
    if let [only] = words {
        if only.trim_start().starts_with('{') {
            let value: Value = serde_json::from_str(only).context("the arguments are not JSON")?;
            return match value {
                Value::Object(map) => Ok(map),
                _ => bail!("the arguments must be a JSON object"),
            };
        }
    }
    let mut arguments = Map::new();
    for word in words {
        if let Some((key, json)) = word.split_once(":=") {
            let value = serde_json::from_str(json)
                .with_context(|| format!("{key}:= must be followed by JSON"))?;
            arguments.insert(key.to_owned(), value);
            continue;
        }
        let (key, text) = word.split_once('=').with_context(|| {
            format!("{word:?}: give arguments as one JSON object, or as key=value pairs")
        })?;
        let schema = &input_schema["properties"][key];
        arguments.insert(key.to_owned(), typed(key, text, schema)?);
    }
    Ok(arguments)
}

/// `text` as the type `schema` asks for.
fn typed(key: &str, text: &str, schema: &Value) -> anyhow::Result<Value> {
    let kind = match &schema["type"] {
        Value::String(kind) => Some(kind.as_str()),
        // ["integer", "null"]: the first type that is not null.
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null"),
        _ => None,
    };
    match kind {
        Some("string") => Ok(Value::String(text.to_owned())),
        Some("integer") => text
            .parse::<i64>()
            .map(Value::from)
            .with_context(|| format!("{key}: {text:?} is not a whole number")),
        // As written: `2` stays 2, `2.5` is 2.5 (a JSON number either way).
        Some("number") => serde_json::from_str::<serde_json::Number>(text.trim())
            .map(Value::Number)
            .with_context(|| format!("{key}: {text:?} is not a number")),
        Some("boolean") => match text {
            "true" | "yes" => Ok(Value::Bool(true)),
            "false" | "no" => Ok(Value::Bool(false)),
            _ => bail!("{key}: {text:?} is not true or false"),
        },
        Some("array" | "object") => {
            serde_json::from_str(text).with_context(|| format!("{key}: {text:?} is not JSON"))
        }
        // No type: JSON if it reads as JSON, else the text.
        _ => Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))),
    }
}

/// The required properties of `input_schema` that `arguments` lacks.
pub(crate) fn missing(arguments: &Map<String, Value>, input_schema: &Value) -> Vec<String> {
    input_schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !arguments.contains_key(*name))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn pairs_are_typed_by_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "count": {"type": "integer"}, "ratio": {"type": "number"}, "whole": {"type": "number"},
            "loud": {"type": "boolean"}, "tags": {"type": "array"}, "limit": {"type": ["integer", "null"]},
        }, "required": ["name", "count"]});
        let parsed = parse(
            &words(&[
                "name=42",
                "count=3",
                "ratio=0.5",
                "whole=2",
                "loud=true",
                "tags=[\"a\"]",
                "limit=7",
                "extra=1",
                "raw:={\"k\":1}",
            ]),
            &schema,
        )
        .unwrap();
        assert_eq!(
            Value::Object(parsed),
            json!({"name": "42", "count": 3, "ratio": 0.5, "whole": 2, "loud": true, "tags": ["a"], "limit": 7, "extra": 1, "raw": {"k": 1}})
        );
        assert!(
            parse(&words(&["count=three"]), &schema)
                .unwrap_err()
                .to_string()
                .contains("whole number")
        );
        assert!(parse(&words(&["count"]), &schema).is_err());
        let object = parse(&words(&[r#"{"name": "x"}"#]), &schema).unwrap();
        assert_eq!(missing(&object, &schema), ["count"]);
        assert!(parse(&words(&["[1]"]), &schema).is_err());
        assert!(parse(&words(&["{nope"]), &schema).is_err());
    }
}
