//! An elicitation form in the terminal, built from the server's `requestedSchema`: one
//! question per field (required ones first, in the order the schema lists them), with the
//! field's title, description, type, limits and default; single and multi-select options by
//! number; every answer checked against the field's own schema (formats asserted) and asked
//! again when it does not fit. `:decline` or `:cancel` at any question ends the form.

use serde_json::{Map, Value, json};
use toolwire_client::protocol::{ElicitResult, RequestedSchema};
use toolwire_protocol::schema::{CompiledSchema, FormatMode, SchemaLimits};

use crate::terminal::{Json, Layout, json as safe_json, note, visible};
use crate::ui::{Tone, Ui};

/// One field of the form.
struct Field {
    name: String,
    schema: Value,
    required: bool,
    /// The options of a select field: (value, label).
    options: Vec<(String, String)>,
    multi: bool,
}

/// What an answer to one question was.
enum Answered {
    Value(Value),
    Skip,
    Decline,
    Cancel,
}

/// Asks for every field; the answers, a decline or a cancel.
pub(crate) async fn fill(ui: &Ui, schema: &RequestedSchema) -> ElicitResult {
    let fields = fields(schema);
    note(&ui.paint(
        Tone::Dim,
        "  (Enter keeps the default or skips an optional field; :decline or :cancel to stop)",
    ));
    let mut content = Map::new();
    for field in &fields {
        match ask_field(ui, field).await {
            Answered::Value(value) => {
                content.insert(field.name.clone(), value);
            }
            Answered::Skip => {}
            Answered::Decline => return toolwire_client::declined(),
            Answered::Cancel => return toolwire_client::cancelled(),
        }
    }
    let question = format!(
        "{} [y]es / [n]o (decline) / [c]ancel: ",
        ui.paint(Tone::Bold, "Send these answers?")
    );
    for field in &fields {
        if let Some(value) = content.get(&field.name) {
            note(&format!(
                "  {}: {}",
                visible(&field.name, Layout::Line),
                shown_value(field, value)
            ));
        }
    }
    match ui.choose(&question, &["yes", "no", "cancel"], None).await {
        Some("yes") => toolwire_client::accepted(&content).unwrap_or_else(|e| {
            // The answers hold the server's defaults.
            let problem = e.to_string();
            note(&format!(
                "toolwire: {}; declining",
                visible(&problem, Layout::Line)
            ));
            toolwire_client::declined()
        }),
        Some("no") => toolwire_client::declined(),
        _ => toolwire_client::cancelled(),
    }
}

/// Asks for the `missing` required arguments of a tool with `input_schema`, one question each;
/// false when the person stopped (`:decline` or `:cancel`).
pub(crate) async fn ask_arguments(
    ui: &Ui,
    input_schema: &Value,
    missing: &[String],
    arguments: &mut Map<String, Value>,
) -> bool {
    note(&ui.paint(Tone::Dim, "  (:cancel to stop)"));
    for name in missing {
        let schema = input_schema["properties"][name].clone();
        let (options, multi) = options(&schema);
        let field = Field {
            name: name.clone(),
            schema,
            required: true,
            options,
            multi,
        };
        match ask_field(ui, &field).await {
            Answered::Value(value) => {
                arguments.insert(name.clone(), value);
            }
            Answered::Skip => {}
            Answered::Decline | Answered::Cancel => return false,
        }
    }
    true
}

/// The fields: required ones in the schema's `required` order, then the others by name.
fn fields(schema: &RequestedSchema) -> Vec<Field> {
    let required = schema.required.clone().unwrap_or_default();
    let mut names: Vec<&String> = required
        .iter()
        .filter(|n| schema.properties.contains_key(*n))
        .collect();
    names.extend(schema.properties.keys().filter(|n| !required.contains(n)));
    names
        .into_iter()
        .map(|name| {
            let schema = serde_json::to_value(&schema.properties[name]).unwrap_or(Value::Null);
            let (options, multi) = options(&schema);
            Field {
                name: name.clone(),
                required: required.contains(name),
                options,
                multi,
                schema,
            }
        })
        .collect()
}

/// A select field's options as (value, label), and whether several may be chosen.
fn options(schema: &Value) -> (Vec<(String, String)>, bool) {
    let titled = |list: &Value| -> Vec<(String, String)> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| {
                let value = o["const"].as_str()?.to_owned();
                let label = o["title"].as_str().unwrap_or(&value).to_owned();
                Some((value, label))
            })
            .collect()
    };
    let plain = |list: &Value, names: &Value| -> Vec<(String, String)> {
        list.as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, v)| {
                let value = v.as_str()?.to_owned();
                let label = names[i].as_str().unwrap_or(&value).to_owned();
                Some((value, label))
            })
            .collect()
    };
    if schema["type"] == "array" {
        let items = &schema["items"];
        let options = if items.get("anyOf").is_some() {
            titled(&items["anyOf"])
        } else {
            plain(&items["enum"], &Value::Null)
        };
        return (options, true);
    }
    if schema.get("oneOf").is_some() {
        return (titled(&schema["oneOf"]), false);
    }
    (plain(&schema["enum"], &schema["enumNames"]), false)
}

/// Asks one field until the answer fits its schema.
async fn ask_field(ui: &Ui, field: &Field) -> Answered {
    let label = field.schema["title"]
        .as_str()
        .unwrap_or(&field.name)
        .to_owned();
    let mut heading = visible(&label, Layout::Line).into_owned();
    if let Some(description) = field.schema["description"].as_str() {
        heading.push_str(&ui.paint(
            Tone::Dim,
            &format!(" — {}", visible(description, Layout::Line)),
        ));
    }
    note(&format!("  {}", ui.paint(Tone::Bold, &heading)));
    for (i, (_, option)) in field.options.iter().enumerate() {
        note(&format!("    {}) {}", i + 1, visible(option, Layout::Line)));
    }
    let compiled = field.schema.as_object().and_then(|s| {
        CompiledSchema::compile_with_formats(s, SchemaLimits::default(), FormatMode::Assert).ok()
    });
    let question = format!("  {}: ", hint(field));
    loop {
        let Some(answer) = ui.ask(&question).await else {
            return Answered::Cancel;
        };
        let answer = answer.trim();
        match answer {
            ":decline" => return Answered::Decline,
            ":cancel" => return Answered::Cancel,
            "" => {
                if let Some(default) = field.schema.get("default") {
                    return Answered::Value(default.clone());
                }
                if !field.required {
                    return Answered::Skip;
                }
                note(&ui.paint(Tone::Red, "  ✗ required"));
                continue;
            }
            _ => {}
        }
        let value = match parse(field, answer) {
            Ok(value) => value,
            Err(problem) => {
                // The problem quotes the answer, which may be pasted text.
                note(&ui.paint(
                    Tone::Red,
                    &format!("  ✗ {}", visible(&problem, Layout::Line)),
                ));
                continue;
            }
        };
        if let Some(compiled) = &compiled {
            let violations = compiled.violations(&value, 1);
            if let Some(first) = violations.first.first() {
                note(&ui.paint(
                    Tone::Red,
                    &format!("  ✗ {}", visible(&first.message, Layout::Line)),
                ));
                continue;
            }
        }
        return Answered::Value(value);
    }
}

/// What the question says about the expected answer.
fn hint(field: &Field) -> String {
    let schema = &field.schema;
    let mut parts: Vec<String> = Vec::new();
    if !field.options.is_empty() {
        let n = field.options.len();
        parts.push(if field.multi {
            format!("numbers 1-{n}, comma-separated")
        } else {
            format!("a number 1-{n}")
        });
    } else {
        match schema["type"].as_str() {
            Some("boolean") => parts.push("y/n".into()),
            Some("integer") => parts.push("a whole number".into()),
            Some("number") => parts.push("a number".into()),
            Some("array" | "object") => parts.push("JSON".into()),
            _ => {
                if let Some(format) = schema["format"].as_str() {
                    parts.push(match format {
                        "date" => "a date, YYYY-MM-DD".into(),
                        "date-time" => "a date and time, YYYY-MM-DDTHH:MM:SSZ".into(),
                        "email" => "an email address".into(),
                        "uri" => "a URI".into(),
                        other => visible(other, Layout::Line).into_owned(),
                    });
                }
            }
        }
    }
    let bound = |key: &str| schema.get(key).map(shown_bound);
    match (bound("minimum"), bound("maximum")) {
        (Some(min), Some(max)) => parts.push(format!("{min} to {max}")),
        (Some(min), None) => parts.push(format!("at least {min}")),
        (None, Some(max)) => parts.push(format!("at most {max}")),
        _ => {}
    }
    match (bound("minLength"), bound("maxLength")) {
        (Some(min), Some(max)) => parts.push(format!("{min} to {max} characters")),
        (Some(min), None) => parts.push(format!("at least {min} characters")),
        (None, Some(max)) => parts.push(format!("at most {max} characters")),
        _ => {}
    }
    if field.required {
        parts.push("required".into());
    }
    if let Some(default) = schema.get("default") {
        parts.push(format!("default {}", shown_value(field, default)));
    }
    let name = visible(&field.name, Layout::Line);
    if parts.is_empty() {
        name.into_owned()
    } else {
        format!("{name} ({})", parts.join(", "))
    }
}

/// A bound (`minimum`, `maxLength`, …) as the person reads it. It should be a number, but it
/// is the server's JSON, which may hold a string of any characters where a number belongs:
/// anything but a number is shown as JSON with its control characters escaped.
fn shown_bound(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        other => safe_json(other, Json::Compact).unwrap_or_else(|_| "?".into()),
    }
}

/// A value as the person reads it: options by their labels.
fn shown_value(field: &Field, value: &Value) -> String {
    let label = |v: &Value| -> String {
        field
            .options
            .iter()
            .find(|(option, _)| Some(option.as_str()) == v.as_str())
            .map(|(_, label)| label.clone())
            .unwrap_or_else(|| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    };
    let shown = match value {
        Value::Array(items) if field.multi => {
            items.iter().map(label).collect::<Vec<_>>().join(", ")
        }
        other => label(other),
    };
    visible(&shown, Layout::Line).into_owned()
}

/// The typed value of an answer.
fn parse(field: &Field, answer: &str) -> Result<Value, String> {
    if !field.options.is_empty() {
        let pick = |word: &str| -> Result<String, String> {
            let word = word.trim();
            if let Ok(n) = word.parse::<usize>() {
                if (1..=field.options.len()).contains(&n) {
                    return Ok(field.options[n - 1].0.clone());
                }
            }
            field
                .options
                .iter()
                .find(|(value, label)| value == word || label.eq_ignore_ascii_case(word))
                .map(|(value, _)| value.clone())
                .ok_or_else(|| format!("{word:?} is not one of the options"))
        };
        return if field.multi {
            let picked: Vec<String> = answer
                .split(',')
                .filter(|w| !w.trim().is_empty())
                .map(pick)
                .collect::<Result<_, _>>()?;
            Ok(json!(picked))
        } else {
            pick(answer).map(Value::String)
        };
    }
    match field.schema["type"].as_str() {
        Some("boolean") => match answer.to_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("answer y or n".into()),
        },
        Some("integer") => answer
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{answer:?} is not a whole number")),
        Some("number") => serde_json::from_str::<serde_json::Number>(answer)
            .map(Value::Number)
            .map_err(|_| format!("{answer:?} is not a number")),
        Some("array" | "object") => {
            serde_json::from_str(answer).map_err(|_| format!("{answer:?} is not JSON"))
        }
        _ => Ok(Value::String(answer.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(value: Value) -> RequestedSchema {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn required_fields_come_first_and_options_carry_titles() {
        let form = schema(json!({
            "type": "object",
            "properties": {
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "name": {"type": "string", "minLength": 1},
                "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                "size": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
            },
            "required": ["name", "color"],
        }));
        let fields = fields(&form);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["name", "color", "age", "size", "tags"]);
        assert_eq!(
            fields[1].options,
            [("r".into(), "Red".into()), ("g".into(), "Green".into())]
        );
        assert_eq!(fields[3].options[1], ("m".into(), "Medium".into()));
        assert!(fields[4].multi);
        assert_eq!(hint(&fields[2]), "age (a whole number, 0 to 150)");
        assert_eq!(hint(&fields[1]), "color (a number 1-2, required)");
    }

    #[test]
    fn bounds_that_are_not_numbers_are_shown_escaped() {
        let field = |schema: Value| Field {
            name: "n".into(),
            schema,
            required: false,
            options: Vec::new(),
            multi: false,
        };
        let cases = [
            (
                json!({"type": "integer", "minimum": 1, "maximum": 2.5}),
                "n (a whole number, 1 to 2.5)",
            ),
            (
                json!({"type": "integer", "minimum": "\u{9b}31m", "maximum": "\u{1b}[2J"}),
                r#"n (a whole number, "\u009b31m" to "\u001b[2J")"#,
            ),
            (
                json!({"minLength": "\u{202e}", "maxLength": {"k": ["\u{7f}"]}}),
                r#"n ("\u202e" to {"k":["\u007f"]} characters)"#,
            ),
            (json!({"maximum": null}), "n (at most null)"),
            (
                json!({"format": "\u{85}x", "default": "\u{2066}d"}),
                "n (<U+0085>x, default <U+2066>d)",
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(hint(&field(schema.clone())), expected, "{schema}");
        }
    }

    #[test]
    fn answers_are_typed_by_the_field() {
        let form = schema(json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "x": {"type": "number"},
                "ok": {"type": "boolean"},
                "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}},
            },
        }));
        let fields = fields(&form);
        let field = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
        assert_eq!(parse(field("n"), "42"), Ok(json!(42)));
        assert!(parse(field("n"), "4.2").is_err());
        assert_eq!(parse(field("x"), "4.5"), Ok(json!(4.5)));
        assert_eq!(parse(field("ok"), "Yes"), Ok(json!(true)));
        assert!(parse(field("ok"), "maybe").is_err());
        assert_eq!(parse(field("color"), "2"), Ok(json!("g")));
        assert_eq!(parse(field("color"), "red"), Ok(json!("r")));
        assert!(parse(field("color"), "3").is_err());
        assert_eq!(parse(field("tags"), "2, 1"), Ok(json!(["b", "a"])));
    }
}
