//! The JSON values of a configuration read one at a time, each error naming the file, the
//! server and the key: strings, booleans, lists, objects of strings, time limits and glob
//! patterns.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use super::super::ConfigError;
use super::super::keys;

/// The longest `timeoutMs` accepted: a day.
const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// Where a problem is: the file and, inside it, the server.
pub(super) struct At<'a> {
    pub(super) file: &'a Path,
    pub(super) server: Option<&'a str>,
}

impl At<'_> {
    pub(super) fn err(
        &self,
        key: impl Into<Option<String>>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            server: self.server.map(str::to_owned),
            key: key.into(),
            message: message.into(),
        }
    }
}

pub(super) fn timeout(value: &Value, at: &At<'_>, key: &str) -> Result<Duration, ConfigError> {
    match value.as_u64() {
        Some(ms @ 1..=MAX_TIMEOUT_MS) => Ok(Duration::from_millis(ms)),
        _ => Err(at.err(
            key.to_owned(),
            format!(
                "must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS} (got {value})"
            ),
        )),
    }
}

/// A list of glob patterns, each checked to compile.
pub(super) fn globs(
    value: Option<&Value>,
    at: &At<'_>,
    key: &str,
) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for (i, pattern) in array(value, at, key)?.iter().enumerate() {
        let key = format!("{key}[{i}]");
        let pattern = string(pattern, at, &key)?;
        crate::glob::Glob::new(pattern).map_err(|e| at.err(key, e.to_string()))?;
        out.push(pattern.to_owned());
    }
    Ok(out)
}

pub(super) fn only_keys(
    map: &Map<String, Value>,
    allowed: &[&str],
    at: &At<'_>,
    key: &str,
) -> Result<(), ConfigError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(at.err(
            format!("{key}.{k}"),
            keys::unknown(k, allowed, &format!("\"{key}\"")),
        )),
        None => Ok(()),
    }
}

/// Whether leaving `value` out loses anything: `[]`, `{}`, `""` and `null` hold nothing.
pub(in crate::config) fn holds_something(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

pub(super) fn string<'v>(value: &'v Value, at: &At<'_>, key: &str) -> Result<&'v str, ConfigError> {
    value
        .as_str()
        .ok_or_else(|| at.err(key.to_owned(), format!("must be a string (got {value})")))
}

pub(super) fn boolean(value: &Value, at: &At<'_>, key: &str) -> Result<bool, ConfigError> {
    value.as_bool().ok_or_else(|| {
        at.err(
            key.to_owned(),
            format!("must be true or false (got {value})"),
        )
    })
}

pub(super) fn array<'v>(
    value: Option<&'v Value>,
    at: &At<'_>,
    key: &str,
) -> Result<&'v [Value], ConfigError> {
    match value {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(at.err(key.to_owned(), format!("must be a list (got {other})"))),
    }
}

pub(super) fn strings<'v>(
    value: Option<&'v Value>,
    at: &At<'_>,
    key: &str,
) -> Result<Vec<(&'v String, &'v str)>, ConfigError> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| Ok((k, string(v, at, &format!("{key}.{k}"))?)))
            .collect(),
        Some(other) => Err(at.err(
            key.to_owned(),
            format!("must be an object of strings (got {other})"),
        )),
    }
}
