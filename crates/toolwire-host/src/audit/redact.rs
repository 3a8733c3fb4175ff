//! What the audit log keeps of a call's arguments: by default, everything but secrets. A value
//! under a sensitive name (`password`, `api_key`, …) is replaced whole by `[REDACTED:key]`;
//! inside every other string, credentials that look like one (tokens, keys, passwords in URLs:
//! [`toolwire_sanitize::DEFAULT_SECRET_PATTERNS`]) become `[REDACTED:kind]`, and so does a key
//! that is itself a credential. Names are matched and secrets found with invisible characters
//! (zero-width spaces, joiners…) read past, so `pass\u{200b}word` is still a sensitive name.
//! Both lists take the configuration's additions (`audit.redactKeys`, `audit.redactPatterns`);
//! `"arguments": "full"` logs arguments as sent. The approver and the server always get them
//! whole.

use std::sync::Arc;

use serde_json::Value;
use toolwire_sanitize::{Redactor, text};

use crate::config::AuditConfig;
use crate::glob::{GlobError, Globs};

/// Argument names whose values are never logged, matched case-insensitively.
pub const DEFAULT_REDACTED_KEYS: &[&str] = &[
    "*password*",
    "*passwd*",
    "*passphrase*",
    "*secret*",
    "*token*",
    "*api_key*",
    "*apikey*",
    "*api-key*",
    "*private_key*",
    "*credential*",
    "authorization",
    "cookie",
];

/// Why redaction rules do not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedactionError {
    /// A sensitive name (`redactKeys`) is not a valid glob.
    #[error(transparent)]
    Key(#[from] GlobError),
    /// A secret pattern (`redactPatterns`) is not a valid regular expression.
    #[error("{reason}")]
    Pattern {
        /// What is wrong with it, naming the pattern.
        reason: String,
    },
}

/// Redaction rules, compiled once; cheap to clone.
#[derive(Debug, Clone)]
pub struct Redaction {
    /// `None`: arguments are logged in full.
    rules: Option<Arc<Rules>>,
}

#[derive(Debug)]
struct Rules {
    keys: Globs,
    patterns: Arc<Redactor>,
}

impl Redaction {
    /// Arguments logged in full.
    pub fn none() -> Redaction {
        Redaction { rules: None }
    }

    /// The default keys and patterns.
    pub fn defaults() -> Result<Redaction, RedactionError> {
        Redaction::new(&AuditConfig::default())
    }

    /// The rules of a configuration: the defaults and its additions, or none for
    /// `"arguments": "full"`. A pattern that does not compile is an error naming it.
    pub fn new(config: &AuditConfig) -> Result<Redaction, RedactionError> {
        if config.full_arguments {
            return Ok(Redaction::none());
        }
        let keys: Vec<String> = DEFAULT_REDACTED_KEYS
            .iter()
            .map(|k| k.to_string())
            .chain(config.redact_keys.iter().map(|k| k.to_lowercase()))
            .collect();
        let pattern_error = |e: &dyn std::fmt::Display| RedactionError::Pattern {
            reason: e.to_string(),
        };
        let patterns = if config.redact_patterns.is_empty() {
            Redactor::defaults().map_err(|e| pattern_error(&e))?
        } else {
            Arc::new(
                Redactor::with_defaults(&config.redact_patterns).map_err(|e| pattern_error(&e))?,
            )
        };
        Ok(Redaction {
            rules: Some(Arc::new(Rules {
                keys: Globs::new(&keys)?,
                patterns,
            })),
        })
    }

    /// Whether anything is redacted.
    pub fn is_on(&self) -> bool {
        self.rules.is_some()
    }

    /// `arguments` as the log keeps them, and how many values were redacted.
    pub fn apply(&self, arguments: &Value) -> (Value, usize) {
        let mut out = arguments.clone();
        let count = match &self.rules {
            Some(rules) => rules.redact(&mut out),
            None => 0,
        };
        (out, count)
    }
}

impl Rules {
    /// Values under sensitive names go whole; the others are redacted inside.
    fn redact_entries(&self, map: &mut serde_json::Map<String, Value>) -> usize {
        map.iter_mut()
            .map(|(key, value)| {
                let name = text::without_ignorable(key).to_lowercase();
                if !value.is_null() && self.keys.matches(&name) {
                    *value = Value::String("[REDACTED:key]".into());
                    1
                } else {
                    self.redact(value)
                }
            })
            .sum()
    }

    fn redact(&self, value: &mut Value) -> usize {
        match value {
            Value::Object(map) => {
                let mut count = self.redact_entries(map);
                // A key can be a credential too (`{"ghp_…": true}`): it goes under its
                // redacted name, once its value has been judged by the name it came with.
                let secret_keys: Vec<(String, String, usize)> = map
                    .keys()
                    .filter_map(|key| match self.patterns.redact(key) {
                        (std::borrow::Cow::Owned(redacted), found) => {
                            Some((key.clone(), redacted, found))
                        }
                        (std::borrow::Cow::Borrowed(_), _) => None,
                    })
                    .collect();
                for (key, redacted, found) in secret_keys {
                    if let Some(value) = map.remove(&key) {
                        map.insert(redacted, value);
                        count += found;
                    }
                }
                count
            }
            Value::Array(items) => items.iter_mut().map(|v| self.redact(v)).sum(),
            Value::String(text) => {
                let (clean, found) = self.patterns.redact(text);
                if found > 0 {
                    *text = clean.into_owned();
                }
                found
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sensitive_names_go_whole_and_secrets_inside_strings_go() {
        let redaction = Redaction::defaults().unwrap();
        let (logged, count) = redaction.apply(&json!({
            "user": "ada",
            "Password": "hunter2",
            "options": {"GitHub_Token": {"value": "x"}, "depth": 3, "apiKey": null},
            "command": "curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://api",
            "urls": ["postgres://admin:hunter22@db/app", "https://example.com"],
        }));
        assert_eq!(count, 4, "{logged}");
        assert_eq!(logged["user"], "ada");
        assert_eq!(logged["Password"], "[REDACTED:key]");
        assert_eq!(logged["options"]["GitHub_Token"], "[REDACTED:key]");
        assert_eq!(logged["options"]["depth"], 3);
        assert_eq!(logged["options"]["apiKey"], Value::Null);
        assert_eq!(
            logged["command"],
            "curl -H 'Authorization: [REDACTED:bearer]' https://api"
        );
        assert_eq!(logged["urls"][0], "[REDACTED:url-password]db/app");
        assert_eq!(logged["urls"][1], "https://example.com");
    }

    #[test]
    fn the_configuration_adds_keys_and_patterns_or_turns_it_off() {
        let config = AuditConfig {
            full_arguments: false,
            redact_keys: vec!["SSN".into()],
            redact_patterns: vec![("employee-id".into(), r"\bE[0-9]{6}\b".into())],
        };
        let (logged, count) = Redaction::new(&config)
            .unwrap()
            .apply(&json!({"ssn": "078-05-1120", "note": "for E123456", "password": "p"}));
        assert_eq!(count, 3);
        assert_eq!(
            logged,
            json!({"ssn": "[REDACTED:key]", "note": "for [REDACTED:employee-id]", "password": "[REDACTED:key]"})
        );
        let full = AuditConfig {
            full_arguments: true,
            ..AuditConfig::default()
        };
        let arguments = json!({"password": "p"});
        assert_eq!(
            Redaction::new(&full).unwrap().apply(&arguments),
            (arguments, 0)
        );
        let bad = AuditConfig {
            redact_patterns: vec![("mine".into(), "(".into())],
            ..AuditConfig::default()
        };
        assert!(
            Redaction::new(&bad)
                .unwrap_err()
                .to_string()
                .contains("compile")
        );
    }

    #[test]
    fn invisible_characters_hide_neither_a_sensitive_name_nor_a_secret() {
        let redaction = Redaction::defaults().unwrap();
        let split = "ghp_0123456789abcdef\u{200b}ghijklmnopqrstuvwxyz";
        let (logged, count) = redaction.apply(&json!({
            "pass\u{200b}word": "hunter2",
            "api\u{2060}_key": "k",
            "note": format!("use {split} here"),
            "list": [format!("AKIA\u{feff}IOSFODNN7EXAMPLE")],
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz": true,
            "nested": {split: 1},
        }));
        assert_eq!(count, 6, "{logged}");
        assert_eq!(logged["pass\u{200b}word"], "[REDACTED:key]");
        assert_eq!(logged["api\u{2060}_key"], "[REDACTED:key]");
        assert_eq!(logged["note"], "use [REDACTED:github-token] here");
        assert_eq!(logged["list"][0], "[REDACTED:aws-access-key]");
        assert_eq!(logged["[REDACTED:github-token]"], true);
        assert_eq!(logged["nested"], json!({"[REDACTED:github-token]": 1}));
        assert!(!logged.to_string().contains("ghp_"), "{logged}");
    }
}
