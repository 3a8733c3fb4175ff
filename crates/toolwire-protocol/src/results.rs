//! What every result shares: `resultType` (B-04), cache hints (K-01), the shape of a page of a
//! paginated list, and `server/discover`.

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::{JsonObject, ResultMeta, ServerCapabilities, is_empty_object};

/// The kind of a result. A result without `resultType` (a legacy peer) reads as `Complete` (B-06).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResultType {
    /// The request is done.
    #[default]
    Complete,
    /// The server needs client input first (MRTR).
    InputRequired,
    /// The request became a task (tasks extension).
    Task,
    /// A type this crate does not know; clients must reject it unless an extension defines it (B-05).
    Other(String),
}

impl ResultType {
    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            ResultType::Complete => "complete",
            ResultType::InputRequired => "input_required",
            ResultType::Task => "task",
            ResultType::Other(s) => s,
        }
    }
}

impl Serialize for ResultType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResultType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
        Ok(match &*s {
            "complete" => ResultType::Complete,
            "input_required" => ResultType::InputRequired,
            "task" => ResultType::Task,
            other => ResultType::Other(other.to_owned()),
        })
    }
}

/// Who may share a cached result (K-08). A result from a peer that omits it reads as
/// `Private`, the scope that never leaks across credentials; an omitted `ttlMs` reads as 0 (stale).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client may reuse it.
    Public,
    /// Only the same authorization context may reuse it.
    #[default]
    Private,
}

/// A result with only `resultType` and `_meta` (e.g. the end of a listen stream).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyResult {
    /// Always present on the wire.
    #[serde(default)]
    pub result_type: ResultType,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

/// One page of a paginated list (`tools/list`, `prompts/list`, `resources/list`,
/// `resources/templates/list`; T-05): the items under their list's own member, the cursor of the
/// next page, and the cache hints (K-01, K-10), one shape for every list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult<T> {
    /// Always `complete`.
    pub result_type: ResultType,
    /// This page of items, under [`Listed::MEMBER`] on the wire.
    pub items: Vec<T>,
    /// Cursor of the next page; absent on the last page (K-14).
    pub next_cursor: Option<String>,
    /// Cache lifetime in milliseconds; read leniently (K-05, Q-10).
    pub ttl_ms: u64,
    /// Cache scope, the same on every page (K-10).
    pub cache_scope: CacheScope,
    /// Result metadata.
    pub meta: Option<ResultMeta>,
}

impl<T> Default for ListResult<T> {
    fn default() -> Self {
        ListResult {
            result_type: ResultType::default(),
            items: Vec::new(),
            next_cursor: None,
            ttl_ms: 0,
            cache_scope: CacheScope::default(),
            meta: None,
        }
    }
}

/// What a paginated list holds: the name of the member its items are under.
pub trait Listed {
    /// The member (`tools`, `prompts`, `resources`, `resourceTemplates`).
    const MEMBER: &'static str;
}

impl<T: Listed + Serialize> Serialize for ListResult<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut page = s.serialize_struct("ListResult", 6)?;
        page.serialize_field("resultType", &self.result_type)?;
        page.serialize_field(T::MEMBER, &self.items)?;
        match &self.next_cursor {
            Some(cursor) => page.serialize_field("nextCursor", cursor)?,
            None => page.skip_field("nextCursor")?,
        }
        page.serialize_field("ttlMs", &self.ttl_ms)?;
        page.serialize_field("cacheScope", &self.cache_scope)?;
        match &self.meta {
            Some(meta) => page.serialize_field("_meta", meta)?,
            None => page.skip_field("_meta")?,
        }
        page.end()
    }
}

impl<'de, T: Listed + Deserialize<'de>> Deserialize<'de> for ListResult<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, Visitor};

        /// `ttlMs`, read leniently.
        struct Ttl(u64);
        impl<'de> Deserialize<'de> for Ttl {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                crate::ttl::lenient(d).map(Ttl)
            }
        }

        struct Page<T>(std::marker::PhantomData<T>);
        impl<'de, T: Listed + Deserialize<'de>> Visitor<'de> for Page<T> {
            type Value = ListResult<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a page of {}", T::MEMBER)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut page = ListResult::default();
                let mut items = None;
                let mut seen = [false; 5];
                let mut once = |slot: usize, key: &'static str| {
                    if std::mem::replace(&mut seen[slot], true) {
                        Err(A::Error::duplicate_field(key))
                    } else {
                        Ok(())
                    }
                };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "resultType" => {
                            once(0, "resultType")?;
                            page.result_type = map.next_value()?;
                        }
                        "nextCursor" => {
                            once(1, "nextCursor")?;
                            page.next_cursor = map.next_value()?;
                        }
                        "ttlMs" => {
                            once(2, "ttlMs")?;
                            page.ttl_ms = map.next_value::<Ttl>()?.0;
                        }
                        "cacheScope" => {
                            once(3, "cacheScope")?;
                            page.cache_scope = map.next_value()?;
                        }
                        "_meta" => {
                            once(4, "_meta")?;
                            page.meta = map.next_value()?;
                        }
                        member if member == T::MEMBER => {
                            if items.is_some() {
                                return Err(A::Error::duplicate_field(T::MEMBER));
                            }
                            items = Some(map.next_value()?);
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                page.items = items.ok_or_else(|| A::Error::missing_field(T::MEMBER))?;
                Ok(page)
            }
        }

        d.deserialize_map(Page(std::marker::PhantomData))
    }
}

/// The result of `server/discover` (V-01).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: ResultType,
    /// Protocol versions the server implements.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Guidance for the model about using this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the result may be cached, in milliseconds.
    #[serde(default, deserialize_with = "crate::ttl::lenient")]
    pub ttl_ms: u64,
    /// Who may share the cached result.
    #[serde(default)]
    pub cache_scope: CacheScope,
    /// Result metadata (serverInfo).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// Fields this crate does not know.
    #[serde(flatten, skip_serializing_if = "is_empty_object")]
    pub extra: JsonObject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_type_reads_every_kind_and_defaults_to_complete() {
        for (text, want) in [
            ("complete", ResultType::Complete),
            ("input_required", ResultType::InputRequired),
            ("task", ResultType::Task),
            ("weird", ResultType::Other("weird".into())),
        ] {
            let got: ResultType = serde_json::from_value(json!(text)).unwrap();
            assert_eq!(got, want);
            assert_eq!(serde_json::to_value(&got).unwrap(), json!(text));
        }
        let legacy: EmptyResult = serde_json::from_value(json!({})).unwrap();
        assert_eq!(legacy.result_type, ResultType::Complete);
    }

    #[test]
    fn every_list_page_keeps_its_own_member_and_its_wire_shape() {
        use crate::{ListPromptsResult, ListResourceTemplatesResult, ListToolsResult};
        let tools = json!({"resultType": "complete", "tools": [{"name": "a", "inputSchema": {"type": "object"}}],
            "nextCursor": "c", "ttlMs": 5, "cacheScope": "private"});
        let page: ListToolsResult = serde_json::from_value(tools.clone()).unwrap();
        assert_eq!(
            (page.items.len(), page.next_cursor.as_deref()),
            (1, Some("c"))
        );
        assert_eq!(serde_json::to_value(&page).unwrap(), tools);
        // The last page has no cursor, and the cursor is left out rather than null.
        let last: ListPromptsResult =
            serde_json::from_value(json!({"prompts": [], "ttlMs": 2.5})).unwrap();
        assert_eq!((last.ttl_ms, &last.next_cursor), (2, &None));
        assert_eq!(
            serde_json::to_value(&last).unwrap(),
            json!({"resultType": "complete", "prompts": [], "ttlMs": 2, "cacheScope": "private"})
        );
        // Another list's member is not this list's items.
        let wrong = serde_json::from_value::<ListResourceTemplatesResult>(json!({"resources": []}));
        assert!(wrong.unwrap_err().to_string().contains("resourceTemplates"));
        let twice = r#"{"tools": [], "tools": []}"#;
        assert!(serde_json::from_str::<ListToolsResult>(twice).is_err());
    }
}
