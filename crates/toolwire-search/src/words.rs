//! A tool definition as text to index: its names split into words, and the text of each field
//! the index weighs on its own.

use serde_json::Value;
use toolwire_protocol::Tool;

/// How deep into an input schema's nested objects parameter names and descriptions are taken.
const SCHEMA_DEPTH: usize = 3;

/// At most this much of one field's text is indexed: a definition cannot make itself heavy
/// (or slow to index) by length.
const MOST_FIELD_TEXT: usize = 16 * 1024;

/// `text` with its identifiers split into words: `__`, `_`, `-`, `.`, `/` and `:` become
/// spaces, and a lower-case letter or digit followed by an upper-case one, or an upper-case
/// run followed by a capitalised word (`HTTPServer`), gets a space between them. Other text
/// is kept as it is: `createIssue` → `create Issue`, `get_file_contents` → `get file contents`.
pub(crate) fn split_identifiers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if matches!(c, '_' | '-' | '.' | '/' | ':') {
            out.push(' ');
            continue;
        }
        if i > 0 && c.is_uppercase() {
            let before = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if before.is_lowercase()
                || before.is_ascii_digit()
                || (before.is_uppercase() && next_lower)
            {
                out.push(' ');
            }
        }
        out.push(c);
    }
    out
}

/// The text of each field of one tool, as indexed.
pub(crate) struct Fields {
    /// The name a caller calls it by and the upstream's name for it, split into words.
    pub(crate) name: String,
    /// Its server's name (the prefix), split into words.
    pub(crate) server: String,
    /// Its title, or its annotations' title.
    pub(crate) title: String,
    /// Its description.
    pub(crate) description: String,
    /// Its parameters' names (split) and descriptions, nested objects' included.
    pub(crate) parameters: String,
    /// Every field above, as one text.
    pub(crate) all: String,
}

impl Fields {
    /// The fields of `tool`, served as `name` from `server`.
    pub(crate) fn of(name: &str, server: &str, tool: &Tool) -> Fields {
        let mut names = split_identifiers(name);
        if !name.ends_with(tool.name.as_str()) {
            names.push(' ');
            names.push_str(&split_identifiers(&tool.name));
        }
        let title = tool
            .title
            .as_deref()
            .or_else(|| tool.annotations.as_ref()?.title.as_deref())
            .unwrap_or_default();
        let mut parameters = String::new();
        collect_parameters(&tool.input_schema, SCHEMA_DEPTH, &mut parameters);
        let mut fields = Fields {
            name: capped(names),
            server: capped(split_identifiers(server)),
            title: capped(title.to_owned()),
            description: capped(tool.description.clone().unwrap_or_default()),
            parameters: capped(parameters),
            all: String::new(),
        };
        fields.all = [
            &fields.server,
            &fields.name,
            &fields.title,
            &fields.description,
            &fields.parameters,
        ]
        .map(String::as_str)
        .join(" ");
        fields
    }
}

/// `text`, cut at [`MOST_FIELD_TEXT`] bytes (on a character boundary).
fn capped(mut text: String) -> String {
    if text.len() > MOST_FIELD_TEXT {
        let mut end = MOST_FIELD_TEXT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Appends the names (split into words) and descriptions of `schema`'s properties to `out`,
/// and those of the objects nested in them (items of arrays included), `depth` levels down.
fn collect_parameters(schema: &serde_json::Map<String, Value>, depth: usize, out: &mut String) {
    if depth == 0 || out.len() > MOST_FIELD_TEXT {
        return;
    }
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (name, property) in properties {
        out.push_str(&split_identifiers(name));
        out.push(' ');
        let Value::Object(property) = property else {
            continue;
        };
        if let Some(Value::String(description)) = property.get("description") {
            out.push_str(description);
            out.push(' ');
        }
        collect_parameters(property, depth - 1, out);
        if let Some(Value::Object(items)) = property.get("items") {
            collect_parameters(items, depth - 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_split_into_words() {
        assert_eq!(split_identifiers("get_file_contents"), "get file contents");
        assert_eq!(
            split_identifiers("github__createIssue"),
            "github  create Issue"
        );
        assert_eq!(split_identifiers("browser-navigate"), "browser navigate");
        assert_eq!(
            split_identifiers("parseHTTPResponse2"),
            "parse HTTP Response2"
        );
        assert_eq!(split_identifiers("v2Api"), "v2 Api");
        assert_eq!(split_identifiers("plain words stay"), "plain words stay");
    }

    #[test]
    fn parameters_nested_objects_and_array_items_are_taken() {
        let tool: Tool = serde_json::from_value(serde_json::json!({
            "name": "t",
            "inputSchema": {"type": "object", "properties": {
                "repoOwner": {"type": "string", "description": "who owns it"},
                "files": {"type": "array", "items": {"type": "object", "properties": {
                    "filePath": {"type": "string", "description": "where it goes"}
                }}}
            }}
        }))
        .unwrap();
        let fields = Fields::of("gh__t", "gh", &tool);
        assert!(fields.parameters.contains("repo Owner who owns it"));
        assert!(fields.parameters.contains("file Path where it goes"));
        assert_eq!(fields.name, "gh  t");
    }

    #[test]
    fn a_long_field_is_cut_on_a_character_boundary() {
        let text = "é".repeat(MOST_FIELD_TEXT);
        let cut = capped(text);
        assert!(cut.len() <= MOST_FIELD_TEXT);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
