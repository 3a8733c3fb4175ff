//! A call's arguments from the command line: one JSON object, or `key=value` pairs typed by
//! the tool's input schema (`key:=JSON` for a value given as JSON).

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Map, Value};

/// The arguments `words` give for a tool with `input_schema`. Messages say what was given and
/// what the schema asks for, never the parser's internals; for JSON, where it goes wrong.
pub(crate) fn parse(words: &[String], input_schema: &Value) -> anyhow::Result<Map<String, Value>> {
    if let [only] = words {
        if only.trim_start().starts_with('{') {
            let value: Value = serde_json::from_str(only)
                .map_err(|e| anyhow!("the arguments are not JSON ({})", where_(&e)))?;
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
                .map_err(|e| anyhow!("{key}:= must be followed by JSON ({})", where_(&e)))?;
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

/// Where JSON goes wrong, in words.
fn where_(error: &serde_json::Error) -> String {
    if error.is_eof() {
        return "it ends too early".to_owned();
    }
    match error.line() {
        1 => format!("it goes wrong at character {}", error.column()),
        line => format!("it goes wrong at line {line}, character {}", error.column()),
    }
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
    let says = |what: &str| format!("the tool's schema says {key} is {what}");
    match kind {
        Some("string") => Ok(Value::String(text.to_owned())),
        Some("integer") => match text.trim().parse::<i64>() {
            Ok(n) => Ok(Value::from(n)),
            Err(_) => bail!(
                "{key}: {text:?} is not a whole number ({})",
                says("an integer")
            ),
        },
        // As written: `2` stays 2, `2.5` is 2.5 (a JSON number either way).
        Some("number") => match serde_json::from_str::<serde_json::Number>(text.trim()) {
            Ok(n) => Ok(Value::Number(n)),
            Err(_) => bail!("{key}: {text:?} is not a number ({})", says("a number")),
        },
        Some("boolean") => match text {
            "true" | "yes" => Ok(Value::Bool(true)),
            "false" | "no" => Ok(Value::Bool(false)),
            _ => bail!(
                "{key}: {text:?} is not true or false ({})",
                says("true or false")
            ),
        },
        Some(kind @ ("array" | "object")) => serde_json::from_str(text).map_err(|e| {
            let what = if kind == "array" {
                "an array"
            } else {
                "an object"
            };
            anyhow!(
                "{key}: {text:?} is not JSON ({}; {}, given as JSON)",
                where_(&e),
                says(what)
            )
        }),
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
        let said = |list: &[&str]| parse(&words(list), &schema).unwrap_err().to_string();
        assert_eq!(
            said(&["count=three"]),
            r#"count: "three" is not a whole number (the tool's schema says count is an integer)"#
        );
        assert_eq!(
            said(&["ratio=two"]),
            r#"ratio: "two" is not a number (the tool's schema says ratio is a number)"#
        );
        assert_eq!(
            said(&["loud=maybe"]),
            r#"loud: "maybe" is not true or false (the tool's schema says loud is true or false)"#
        );
        assert_eq!(
            said(&["tags=[a]"]),
            r#"tags: "[a]" is not JSON (it goes wrong at character 2; the tool's schema says tags is an array, given as JSON)"#
        );
        assert_eq!(
            said(&["raw:={"]),
            "raw:= must be followed by JSON (it ends too early)"
        );
        assert_eq!(
            said(&["{\"a\": x}"]),
            "the arguments are not JSON (it goes wrong at character 7)"
        );
        assert!(parse(&words(&["count"]), &schema).is_err());
        let object = parse(&words(&[r#"{"name": "x"}"#]), &schema).unwrap();
        assert_eq!(missing(&object, &schema), ["count"]);
        assert!(parse(&words(&["[1]"]), &schema).is_err());
        assert!(parse(&words(&["{nope"]), &schema).is_err());
    }
}
