//! What every result shares: `resultType` (B-04), cache hints (K-01), and `server/discover`.

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
}
