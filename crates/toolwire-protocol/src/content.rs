//! Content blocks of tool results, prompts and sampling messages, and resource contents.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Icon, JsonObject};

/// Who a piece of content is meant for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human user.
    User,
    /// The model.
    Assistant,
}

/// Display hints attached to content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Intended audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// Importance from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// ISO-8601 time of the last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

/// A content block (`type`-tagged). Read by [`ContentBlock`]'s own `Deserialize`: see there.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// `{"type":"text"}`.
    Text(TextContent),
    /// `{"type":"image"}`.
    Image(ImageContent),
    /// `{"type":"audio"}`.
    Audio(AudioContent),
    /// `{"type":"resource_link"}`.
    ResourceLink(ResourceLink),
    /// `{"type":"resource"}`.
    #[serde(rename = "resource")]
    EmbeddedResource(EmbeddedResource),
}

/// The `type` of each content block, in the order of [`ContentBlock`]'s variants.
const BLOCK_TYPES: &[&str] = &["text", "image", "audio", "resource_link", "resource"];

/// A content block is read as serde's `type`-tagged enum reads it, in one pass when `type` is
/// its first key (as every SDK writes it): the rest of the object is read straight into the
/// variant. The derived reading buffers every block whole before reading it again, which cost a
/// tool result's reading more than parsing it. A block whose `type` comes later is gathered
/// into an object first, as before.
impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> serde::de::Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a content block (an object with a type)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ContentBlock, A::Error> {
        use serde::de::Error as _;
        use serde::de::value::MapAccessDeserializer;
        let Some(first) = map.next_key::<crate::extra::Key<'de>>()? else {
            return Err(A::Error::missing_field("type"));
        };
        if first.0 == "type" {
            let kind = map.next_value::<crate::extra::Key<'de>>()?;
            return block_of(&kind.0, MapAccessDeserializer::new(map));
        }
        let mut object = JsonObject::new();
        object.insert(first.0.into_owned(), map.next_value()?);
        while let Some(key) = map.next_key::<crate::extra::Key<'de>>()? {
            object.insert(key.0.into_owned(), map.next_value()?);
        }
        let kind = match object.remove("type") {
            Some(Value::String(kind)) => kind,
            Some(other) => {
                return Err(A::Error::invalid_type(
                    crate::extra::unexpected(&other),
                    &"a string",
                ));
            }
            None => return Err(A::Error::missing_field("type")),
        };
        block_of(&kind, Value::Object(object)).map_err(A::Error::custom)
    }
}

/// The block of type `kind` read from `rest`, the object's other keys.
fn block_of<'de, D: serde::Deserializer<'de>>(
    kind: &str,
    rest: D,
) -> Result<ContentBlock, D::Error> {
    Ok(match kind {
        "text" => ContentBlock::Text(TextContent::deserialize(rest)?),
        "image" => ContentBlock::Image(ImageContent::deserialize(rest)?),
        "audio" => ContentBlock::Audio(AudioContent::deserialize(rest)?),
        "resource_link" => ContentBlock::ResourceLink(ResourceLink::deserialize(rest)?),
        "resource" => ContentBlock::EmbeddedResource(EmbeddedResource::deserialize(rest)?),
        other => return Err(serde::de::Error::unknown_variant(other, BLOCK_TYPES)),
    })
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextContent::new(text))
    }

    /// An image block from base64 data (T-22).
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Image(ImageContent {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        })
    }

    /// An audio block from base64 data (T-22).
    pub fn audio(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        ContentBlock::Audio(AudioContent {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        })
    }

    /// An embedded resource block.
    pub fn resource(contents: ResourceContents) -> Self {
        ContentBlock::EmbeddedResource(EmbeddedResource {
            resource: contents,
            annotations: None,
            meta: None,
        })
    }
}

/// Text content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

impl TextContent {
    /// Text content without annotations.
    pub fn new(text: impl Into<String>) -> Self {
        TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
        }
    }
}

/// Image content: base64 `data` and its MIME type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64-encoded image bytes.
    pub data: String,
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Audio content: base64 `data` and its MIME type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioContent {
    /// Base64-encoded audio bytes.
    pub data: String,
    /// MIME type, e.g. `audio/wav`.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A link to a resource the client may read (T-18).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// The resource URI.
    pub uri: String,
    /// Programmatic name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A resource embedded in content (R-07).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource's contents.
    pub resource: ResourceContents,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// The contents of a resource: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceContents {
    /// Text contents.
    Text(TextResourceContents),
    /// Binary contents.
    Blob(BlobResourceContents),
}

impl ResourceContents {
    /// Text contents with a MIME type.
    pub fn text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ResourceContents::Text(TextResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            text: text.into(),
            meta: None,
        })
    }

    /// Binary contents (base64) with a MIME type.
    pub fn blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        blob_base64: impl Into<String>,
    ) -> Self {
        ResourceContents::Blob(BlobResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            blob: blob_base64.into(),
            meta: None,
        })
    }

    /// The URI of the contents.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text(t) => &t.uri,
            ResourceContents::Blob(b) => &b.uri,
        }
    }
}

/// Text resource contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResourceContents {
    /// The URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text.
    pub text: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Binary resource contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobResourceContents {
    /// The URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Base64-encoded bytes.
    pub blob: String,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A `tool_use` block of a sampling message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// Identifier of this use.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The tool's arguments.
    pub input: JsonObject,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A `tool_result` block of a sampling message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The `tool_use` this answers.
    pub tool_use_id: String,
    /// The result content.
    pub content: Vec<ContentBlock>,
    /// Structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A content block of a sampling message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SamplingContent {
    /// Text.
    Text(TextContent),
    /// Image.
    Image(ImageContent),
    /// Audio.
    Audio(AudioContent),
    /// A tool use by the model.
    ToolUse(ToolUseContent),
    /// A tool result.
    ToolResult(ToolResultContent),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reading `ContentBlock` had when it derived `Deserialize`.
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Derived {
        Text(TextContent),
        Image(ImageContent),
        Audio(AudioContent),
        ResourceLink(ResourceLink),
        #[serde(rename = "resource")]
        EmbeddedResource(EmbeddedResource),
    }

    impl From<Derived> for ContentBlock {
        fn from(derived: Derived) -> ContentBlock {
            match derived {
                Derived::Text(c) => ContentBlock::Text(c),
                Derived::Image(c) => ContentBlock::Image(c),
                Derived::Audio(c) => ContentBlock::Audio(c),
                Derived::ResourceLink(c) => ContentBlock::ResourceLink(c),
                Derived::EmbeddedResource(c) => ContentBlock::EmbeddedResource(c),
            }
        }
    }

    #[test]
    fn blocks_read_as_the_derived_reading_read_them() {
        let inputs = [
            r#"{"type":"text","text":"hi"}"#,
            r#"{"text":"hi","type":"text"}"#,
            r#"{"type":"text","text":"h\u00e9","annotations":{"priority":1,"audience":["user"]},"_meta":{"a":1},"unknown":3}"#,
            r#"{"annotations":{"priority":0.5},"type":"text","text":"later"}"#,
            r#"{"type":"image","data":"AA==","mimeType":"image/png"}"#,
            r#"{"type":"audio","data":"AA==","mimeType":"audio/wav"}"#,
            r#"{"type":"resource_link","uri":"file:///a","name":"a"}"#,
            r#"{"type":"resource","resource":{"uri":"file:///a","text":"x"}}"#,
            r#"{"type":"resource","resource":{"uri":"file:///a","blob":"AA=="}}"#,
            r#"{"\u0074ype":"text","text":"escaped key"}"#,
            // Refused by both readings.
            r#"{"type":"video","url":"x"}"#,
            r#"{}"#,
            r#"{"text":"hi"}"#,
            r#"{"type":1,"text":"hi"}"#,
            r#"{"text":"x","type":null}"#,
            r#"{"type":"text"}"#,
            r#"{"type":"text","text":5}"#,
            r#"{"type":"image","data":"AA=="}"#,
            r#""text""#,
            r#"7"#,
        ];
        for input in inputs {
            let ours = serde_json::from_str::<ContentBlock>(input);
            let derived = serde_json::from_str::<Derived>(input).map(ContentBlock::from);
            match (&ours, &derived) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{input}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{input}: ours {ours:?}, derived {derived:?}"),
            }
            // From a tree too, as a client reads a result it already holds.
            let value: Value = serde_json::from_str(input).unwrap();
            let ours = serde_json::from_value::<ContentBlock>(value.clone());
            let derived = serde_json::from_value::<Derived>(value).map(ContentBlock::from);
            assert_eq!(ours.is_ok(), derived.is_ok(), "{input}");
            if let (Ok(a), Ok(b)) = (ours, derived) {
                assert_eq!(a, b, "{input}");
            }
        }
    }

    #[test]
    fn an_unknown_type_is_named_in_the_error() {
        let error = serde_json::from_str::<ContentBlock>(r#"{"type":"video"}"#).unwrap_err();
        assert!(
            error.to_string().contains("unknown variant `video`"),
            "{error}"
        );
        let error = serde_json::from_str::<ContentBlock>(r#"{"text":"x"}"#).unwrap_err();
        assert!(
            error.to_string().contains("missing field `type`"),
            "{error}"
        );
    }

    #[test]
    fn content_blocks_are_type_tagged() {
        let cases = [
            (ContentBlock::text("hi"), json!({"type":"text","text":"hi"})),
            (
                ContentBlock::image("AA==", "image/png"),
                json!({"type":"image","data":"AA==","mimeType":"image/png"}),
            ),
            (
                ContentBlock::audio("AA==", "audio/wav"),
                json!({"type":"audio","data":"AA==","mimeType":"audio/wav"}),
            ),
            (
                ContentBlock::resource(ResourceContents::text("test://x", "text/plain", "t")),
                json!({"type":"resource","resource":{"uri":"test://x","mimeType":"text/plain","text":"t"}}),
            ),
            (
                ContentBlock::resource(ResourceContents::blob("test://b", "image/png", "AA==")),
                json!({"type":"resource","resource":{"uri":"test://b","mimeType":"image/png","blob":"AA=="}}),
            ),
        ];
        for (block, want) in cases {
            assert_eq!(serde_json::to_value(&block).unwrap(), want);
            assert_eq!(serde_json::from_value::<ContentBlock>(want).unwrap(), block);
        }
    }
}
