//! What reaches the model of a result: terminal escapes and control characters removed, and
//! the text capped with a visible note.

use serde_json::Value;
use toolwire_client::protocol::{CallToolResult, ContentBlock, ResourceContents};
use toolwire_sanitize::text;

/// Removes ANSI escape sequences and control characters (newline and tab stay) from every text
/// the model reads: text blocks, embedded text resources and the strings of
/// `structuredContent`. Returns how many characters went.
pub(super) fn clean(result: &mut CallToolResult) -> usize {
    let mut removed = 0;
    for block in &mut result.content {
        let text = match block {
            ContentBlock::Text(t) => &mut t.text,
            ContentBlock::EmbeddedResource(r) => match &mut r.resource {
                ResourceContents::Text(t) => &mut t.text,
                ResourceContents::Blob(_) => continue,
            },
            _ => continue,
        };
        removed += clean_string(text);
    }
    if let Some(structured) = &mut result.structured_content {
        removed += clean_value(structured);
    }
    removed
}

fn clean_value(value: &mut Value) -> usize {
    match value {
        Value::String(s) => clean_string(s),
        Value::Array(items) => items.iter_mut().map(clean_value).sum(),
        Value::Object(map) => map.values_mut().map(clean_value).sum(),
        _ => 0,
    }
}

fn clean_string(s: &mut String) -> usize {
    if !text::needs_cleaning(s) {
        return 0;
    }
    let (clean, removed) = text::clean(s);
    *s = clean.into_owned();
    removed
}

/// Cuts the result's text to `max` characters in all, with one visible note where it was cut;
/// text blocks after the cut are dropped, and `structuredContent` over the cap too (the text
/// holds its serialization, T-11). Returns whether it cut.
pub(super) fn cap(result: &mut CallToolResult, max: usize) -> bool {
    let total: usize = result
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) => t.text.chars().count(),
            _ => 0,
        })
        .sum();
    let mut cut = false;
    if total > max {
        let mut left = max;
        let mut noted = false;
        result.content.retain_mut(|block| {
            let ContentBlock::Text(text) = block else {
                return true;
            };
            if noted {
                return false;
            }
            let chars = text.text.chars().count();
            if chars > left {
                let end = text
                    .text
                    .char_indices()
                    .nth(left)
                    .map_or(text.text.len(), |(i, _)| i);
                text.text.truncate(end);
                text.text.push_str(&format!(
                    "\n[… truncated by the host: the result had {total} characters of text, the first {max} are shown]"
                ));
                noted = true;
            }
            left -= chars.min(left);
            true
        });
        cut = true;
    }
    if let Some(structured) = &result.structured_content {
        if structured.to_string().chars().count() > max {
            result.structured_content = None;
            cut = true;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(result: &CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn escapes_and_controls_go_from_every_text_the_model_reads() {
        let mut result = CallToolResult::text("\u{1b}[31mred\u{1b}[0m\u{7}\n\tok");
        result.structured_content = Some(serde_json::json!({"a": ["x\u{1b}]0;title\u{7}y", 1]}));
        assert_eq!(clean(&mut result), 20);
        assert_eq!(texts(&result), ["red\n\tok"]);
        assert_eq!(result.structured_content.unwrap()["a"][0], "xy");
        let mut plain = CallToolResult::text("plain ✓");
        assert_eq!(clean(&mut plain), 0);
    }

    #[test]
    fn one_note_where_the_text_is_cut_and_nothing_after_it() {
        let mut result = CallToolResult::text("abcdé");
        result
            .content
            .push(ContentBlock::Text(toolwire_client::protocol::TextContent {
                text: "fghij".into(),
                annotations: None,
                meta: None,
            }));
        result.content.push(result.content[1].clone());
        assert!(cap(&mut result, 7));
        let shown = texts(&result);
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert_eq!(shown[0], "abcdé");
        assert!(shown[1].starts_with("fg\n[… truncated by the host: the result had 15 characters"));
        let mut small = CallToolResult::text("short");
        assert!(!cap(&mut small, 7));
        assert_eq!(texts(&small), ["short"]);
    }
}
