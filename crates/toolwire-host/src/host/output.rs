//! What reaches the model of a result: terminal escapes, control characters and hidden format
//! characters removed from every string (of a tool's result, a prompt or a resource's
//! contents), and a tool's text capped with a visible note.

use std::borrow::Cow;

use toolwire_client::protocol::{
    CallToolResult, ContentBlock, GetPromptResult, ReadResourceResult,
};
use toolwire_sanitize::text;

/// Removes ANSI escape sequences, control characters (newline and tab stay) and hidden format
/// characters (zero-width spaces and joiners, bidi controls, tag characters…) from every
/// string of the result the model may read: text blocks, link and resource URIs, names and
/// descriptions, `_meta`, and `structuredContent` at any depth, keys included. Returns how
/// many characters went.
pub(super) fn clean(result: &mut CallToolResult) -> usize {
    cleaning(|f| result.rewrite_strings(f))
}

/// [`clean`] of a rendered prompt: its description, every message's content and `_meta`.
pub(super) fn clean_prompt(result: &mut GetPromptResult) -> usize {
    cleaning(|f| {
        if let Some(description) = &mut result.description {
            if let Some(clean) = f(description) {
                *description = clean;
            }
        }
        for message in &mut result.messages {
            message.content.rewrite_strings(f);
        }
        if let Some(meta) = &mut result.meta {
            meta.rewrite_strings(f);
        }
    })
}

/// [`clean`] of a resource read: every contents' URI, MIME type and text (not a blob's
/// base64), and `_meta`.
pub(super) fn clean_read(result: &mut ReadResourceResult) -> usize {
    cleaning(|f| {
        for contents in &mut result.contents {
            contents.rewrite_strings(f);
        }
        if let Some(meta) = &mut result.meta {
            meta.rewrite_strings(f);
        }
    })
}

/// Runs `walk` with a rewrite that cleans each string; how many characters went.
fn cleaning(walk: impl FnOnce(&mut toolwire_client::protocol::strings::Rewrite<'_>)) -> usize {
    let mut removed = 0;
    walk(&mut |string| match text::clean(string) {
        (Cow::Owned(clean), count) => {
            removed += count;
            Some(clean)
        }
        (Cow::Borrowed(_), _) => None,
    });
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
    fn hidden_characters_go_from_every_string_of_the_result() {
        use toolwire_client::protocol::{ResourceContents, ResourceLink};
        // A right-to-left override and a zero-width space: what the model reads is not what
        // the text says.
        let hidden = "pay\u{202e}\u{200b}lia\u{2066}";
        let mut meta = serde_json::Map::new();
        meta.insert(format!("note{hidden}"), serde_json::json!([hidden]));
        let mut result = CallToolResult::new(vec![
            ContentBlock::text(hidden),
            ContentBlock::ResourceLink(ResourceLink {
                uri: format!("https://example.com/{hidden}"),
                name: hidden.into(),
                description: Some(hidden.into()),
                meta: Some(meta.clone()),
                ..Default::default()
            }),
            ContentBlock::resource(ResourceContents::text(
                format!("notes://{hidden}"),
                "text/plain",
                hidden,
            )),
        ]);
        result.structured_content = Some(serde_json::json!({hidden: {"deep": [hidden]}}));
        result.meta = Some(toolwire_client::protocol::ResultMeta {
            extra: meta,
            ..Default::default()
        });
        assert_eq!(
            clean(&mut result),
            12 * 3,
            "twelve strings, three characters each"
        );
        let json = serde_json::to_string(&result).unwrap();
        for c in ['\u{202e}', '\u{200b}', '\u{2066}'] {
            assert!(!json.contains(c), "{json}");
        }
        assert!(json.contains("https://example.com/paylia"), "{json}");
        assert_eq!(
            result.structured_content.unwrap(),
            serde_json::json!({"paylia": {"deep": ["paylia"]}})
        );
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
