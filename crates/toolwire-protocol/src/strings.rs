//! Every string of a tool result that is read as text, in one walk kept next to the types, for
//! code that sanitizes what it hands on (a server's output guard, a host cleaning results for
//! its model): a field added to a result is added here, and every sanitizer sees it.
//!
//! The walk passes each string to a rewrite that returns `Some(new)` to replace it or `None`
//! to keep it, so text that needs no work is never copied. Object keys of `_meta`,
//! `structuredContent` and unknown fields are passed too; a key that is rewritten moves to
//! its new name. Base64 payloads (image and audio `data`, a blob's contents) are bytes, not
//! text, and are left out; so are numbers, booleans and request ids.

use serde_json::Value;

use crate::{
    Annotations, CallToolResult, ContentBlock, Icon, Implementation, JsonObject, ResourceContents,
    ResultMeta,
};

/// A rewrite of one string: `Some(new)` replaces it, `None` keeps it.
pub type Rewrite<'a> = dyn FnMut(&str) -> Option<String> + 'a;

impl CallToolResult {
    /// Rewrites every string of the result: its content blocks, `structuredContent` at any
    /// depth (keys included), `_meta` and unknown fields.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        for block in &mut self.content {
            block.rewrite_strings(f);
        }
        if let Some(value) = &mut self.structured_content {
            rewrite_json(value, f);
        }
        if let Some(meta) = &mut self.meta {
            meta.rewrite_strings(f);
        }
        rewrite_object(&mut self.extra, f);
    }
}

impl ContentBlock {
    /// Rewrites every string of the block: text, URIs, names, titles, descriptions, MIME
    /// types, icons, annotations and `_meta`, but not base64 data.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        let (annotations, meta) = match self {
            ContentBlock::Text(t) => {
                rewrite(&mut t.text, f);
                (&mut t.annotations, &mut t.meta)
            }
            ContentBlock::Image(i) => {
                rewrite(&mut i.mime_type, f);
                (&mut i.annotations, &mut i.meta)
            }
            ContentBlock::Audio(a) => {
                rewrite(&mut a.mime_type, f);
                (&mut a.annotations, &mut a.meta)
            }
            ContentBlock::ResourceLink(link) => {
                for text in [&mut link.uri, &mut link.name]
                    .into_iter()
                    .chain(link.title.as_mut())
                    .chain(link.description.as_mut())
                    .chain(link.mime_type.as_mut())
                {
                    rewrite(text, f);
                }
                for icon in link.icons.iter_mut().flatten() {
                    icon.rewrite_strings(f);
                }
                (&mut link.annotations, &mut link.meta)
            }
            ContentBlock::EmbeddedResource(embedded) => {
                embedded.resource.rewrite_strings(f);
                (&mut embedded.annotations, &mut embedded.meta)
            }
        };
        if let Some(annotations) = annotations {
            annotations.rewrite_strings(f);
        }
        if let Some(meta) = meta {
            rewrite_object(meta, f);
        }
    }
}

impl ResourceContents {
    /// Rewrites the URI, the MIME type, the text (not a blob's base64) and `_meta`.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        let (uri, mime_type, meta) = match self {
            ResourceContents::Text(t) => {
                rewrite(&mut t.text, f);
                (&mut t.uri, &mut t.mime_type, &mut t.meta)
            }
            ResourceContents::Blob(b) => (&mut b.uri, &mut b.mime_type, &mut b.meta),
        };
        rewrite(uri, f);
        if let Some(mime_type) = mime_type {
            rewrite(mime_type, f);
        }
        if let Some(meta) = meta {
            rewrite_object(meta, f);
        }
    }
}

impl ResultMeta {
    /// Rewrites the server's self-description and every other key's strings.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        if let Some(info) = &mut self.server_info {
            info.rewrite_strings(f);
        }
        rewrite_object(&mut self.extra, f);
    }
}

impl Implementation {
    /// Rewrites the name, version, title, description, website and icons, and unknown fields.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        for text in [&mut self.name, &mut self.version]
            .into_iter()
            .chain(self.title.as_mut())
            .chain(self.description.as_mut())
            .chain(self.website_url.as_mut())
        {
            rewrite(text, f);
        }
        for icon in self.icons.iter_mut().flatten() {
            icon.rewrite_strings(f);
        }
        rewrite_object(&mut self.extra, f);
    }
}

impl Icon {
    /// Rewrites the source, MIME type, sizes and theme.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        rewrite(&mut self.src, f);
        for text in self
            .mime_type
            .iter_mut()
            .chain(self.sizes.iter_mut().flatten())
            .chain(self.theme.iter_mut())
        {
            rewrite(text, f);
        }
    }
}

impl Annotations {
    /// Rewrites `lastModified`, the one string annotations have.
    pub fn rewrite_strings(&mut self, f: &mut Rewrite<'_>) {
        if let Some(last_modified) = &mut self.last_modified {
            rewrite(last_modified, f);
        }
    }
}

/// Rewrites every string of a JSON value at any depth, object keys included.
pub fn rewrite_json(value: &mut Value, f: &mut Rewrite<'_>) {
    match value {
        Value::String(text) => rewrite(text, f),
        Value::Array(items) => items.iter_mut().for_each(|item| rewrite_json(item, f)),
        Value::Object(map) => rewrite_object(map, f),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Rewrites every key and value of an object. A rewritten key takes its entry to the new name
/// (replacing an entry already there).
pub fn rewrite_object(map: &mut JsonObject, f: &mut Rewrite<'_>) {
    let renamed: Vec<(String, String)> = map
        .keys()
        .filter_map(|key| f(key).map(|new| (key.clone(), new)))
        .collect();
    for (old, new) in renamed {
        if let Some(value) = map.remove(&old) {
            map.insert(new, value);
        }
    }
    map.values_mut().for_each(|value| rewrite_json(value, f));
}

fn rewrite(text: &mut String, f: &mut Rewrite<'_>) {
    if let Some(new) = f(text) {
        *text = new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The paths of the strings and keys of `value` that contain `marker`.
    fn paths_with(value: &Value, marker: &str, path: &str, found: &mut Vec<String>) {
        match value {
            Value::String(text) if text.contains(marker) => found.push(path.to_owned()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    paths_with(item, marker, &format!("{path}/{i}"), found);
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    if key.contains(marker) {
                        found.push(format!("{path}/{key} (key)"));
                    }
                    paths_with(item, marker, &format!("{path}/{key}"), found);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_string_but_base64_payloads_is_rewritten() {
        let s = "SECRET";
        let meta = json!({"SECRET-key": {"deep": [s]}});
        let icon = json!({"src": s, "mimeType": s, "sizes": [s], "theme": s});
        let annotations = json!({"audience": ["user"], "priority": 1, "lastModified": s});
        let wire = json!({
            "resultType": "complete",
            "content": [
                {"type": "text", "text": s, "annotations": annotations, "_meta": meta},
                {"type": "image", "data": s, "mimeType": s, "annotations": annotations, "_meta": meta},
                {"type": "audio", "data": s, "mimeType": s, "_meta": meta},
                {"type": "resource_link", "uri": s, "name": s, "title": s, "description": s,
                 "mimeType": s, "size": 1, "icons": [icon], "annotations": annotations, "_meta": meta},
                {"type": "resource", "resource": {"uri": s, "mimeType": s, "text": s, "_meta": meta},
                 "annotations": annotations, "_meta": meta},
                {"type": "resource", "resource": {"uri": s, "mimeType": s, "blob": s, "_meta": meta}},
            ],
            "structuredContent": {"SECRET": [{"SECRET": s}], "n": 1},
            "isError": false,
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": s, "version": s, "title": s,
                    "description": s, "websiteUrl": s, "icons": [icon], "vendor": s},
                "SECRET": s,
            },
            "unknownField": {"SECRET": s},
        });
        let mut result: CallToolResult = serde_json::from_value(wire.clone()).unwrap();
        let mut calls = 0;
        result.rewrite_strings(&mut |text| {
            calls += 1;
            text.contains(s).then(|| text.replace(s, "ok"))
        });
        let mut left = Vec::new();
        paths_with(&serde_json::to_value(&result).unwrap(), s, "", &mut left);
        assert_eq!(
            left,
            [
                "/content/1/data",
                "/content/2/data",
                "/content/5/resource/blob"
            ],
            "only base64 payloads keep it"
        );
        let mut before = Vec::new();
        paths_with(&wire, s, "", &mut before);
        assert!(calls >= before.len() - left.len(), "{calls} calls");
    }

    #[test]
    fn strings_that_need_no_rewrite_stay_as_they_are() {
        let mut value = json!({"a": ["b", {"c": "d"}], "e": 1});
        let before = value.clone();
        rewrite_json(&mut value, &mut |_| None);
        assert_eq!(value, before);
        rewrite_json(&mut value, &mut |text| {
            (text == "c").then(|| "C".to_owned())
        });
        assert_eq!(value, json!({"a": ["b", {"C": "d"}], "e": 1}));
    }
}
