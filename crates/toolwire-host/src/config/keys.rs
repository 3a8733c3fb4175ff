//! Which keys a configuration may hold: those Toolwire reads, and those of other hosts'
//! formats that it knowingly leaves alone. Any other key where Toolwire's own keys live is
//! taken for a typo and refused, naming the nearest known key: a misspelled safety rule
//! (`"aproval": {"deny": ["*"]}`) must never be skipped in silence.

use std::fmt;

/// Keys of a server entry that Toolwire reads: those it shares with other hosts, then its own.
pub(super) const SERVER_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "envFile",
    "cwd",
    "url",
    "headers",
    "prefix",
    "tools",
    "trust",
    "timeoutMs",
    "approval",
    "disabled",
    "oauth",
    "sandbox",
];

/// Top-level keys Toolwire reads (`gateway` is `toolwire gateway`'s downstream side, which the
/// host leaves to it).
pub(super) const TOP_KEYS: &[&str] = &[
    "mcpServers",
    "servers",
    "approval",
    "audit",
    "roots",
    "gateway",
];

/// A key of another host that Toolwire knows and does not read: the key, whose it is, and
/// Toolwire's key for the same thing, if there is one.
struct Foreign {
    key: &'static str,
    whose: &'static str,
    instead: Option<&'static str>,
}

const fn foreign(key: &'static str, whose: &'static str, instead: Option<&'static str>) -> Foreign {
    Foreign {
        key,
        whose,
        instead,
    }
}

/// Server-entry keys of other hosts' formats.
const FOREIGN_SERVER_KEYS: &[Foreign] = &[
    foreign("autoApprove", "Cline", Some("approval.allow")),
    foreign("alwaysAllow", "Roo Code", Some("approval.allow")),
    foreign("timeout", "Cline and Gemini CLI", Some("timeoutMs")),
    foreign("transportType", "Cline", Some("type")),
    foreign("httpUrl", "Gemini CLI", Some("url")),
    foreign("serverUrl", "Windsurf", Some("url")),
    foreign("includeTools", "Gemini CLI", Some("tools.allow")),
    foreign("excludeTools", "Gemini CLI", Some("tools.deny")),
    foreign("dev", "VS Code", None),
    foreign("gallery", "VS Code", None),
    foreign("version", "VS Code", None),
    foreign("description", "several hosts", None),
];

/// Top-level keys of other hosts' formats.
const FOREIGN_TOP_KEYS: &[Foreign] = &[
    foreign("inputs", "VS Code", None),
    foreign("globalShortcut", "Claude Desktop", None),
    foreign("preferences", "Claude Desktop", None),
    foreign("$schema", "JSON Schema", None),
];

/// A key Toolwire does not read and left alone: worth naming to a person once, since a
/// setting they expected to apply does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// The server whose entry holds it; `None` at the top of the file.
    pub server: Option<String>,
    /// The key.
    pub key: String,
    /// Whose format it belongs to (`"Cline"`), when known.
    pub whose: Option<&'static str>,
    /// Toolwire's key for the same thing, if it has one.
    pub instead: Option<&'static str>,
}

impl fmt::Display for IgnoredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(server) = &self.server {
            write!(f, "server \"{server}\": ")?;
        }
        write!(f, "key \"{}\"", self.key)?;
        match (self.whose, self.instead) {
            (Some(whose), Some(instead)) => {
                write!(
                    f,
                    " is {whose}'s and not read here (Toolwire's is \"{instead}\")"
                )
            }
            (Some(whose), None) => write!(f, " is {whose}'s and not read here"),
            (None, _) => write!(f, " is not one Toolwire reads"),
        }
    }
}

/// What a key of a server entry is.
pub(super) enum Verdict {
    /// Toolwire reads it.
    Read,
    /// Another host's, left alone.
    Ignored(IgnoredKey),
    /// Nobody's: a typo, refused with this message.
    Unknown(String),
}

/// Sorts a key of a server entry.
pub(super) fn server_key(server: &str, key: &str) -> Verdict {
    if SERVER_KEYS.contains(&key) {
        return Verdict::Read;
    }
    if let Some(known) = FOREIGN_SERVER_KEYS.iter().find(|f| f.key == key) {
        return Verdict::Ignored(IgnoredKey {
            server: Some(server.to_owned()),
            key: key.to_owned(),
            whose: Some(known.whose),
            instead: known.instead,
        });
    }
    Verdict::Unknown(unknown(key, SERVER_KEYS, "a server entry"))
}

/// Sorts a top-level key. The top of a file is shared with other applications' settings
/// (Claude Desktop keeps its own there), so an unknown key is refused only when it is close to
/// one of Toolwire's; any other is named as left alone.
pub(super) fn top_key(key: &str) -> Verdict {
    if TOP_KEYS.contains(&key) {
        return Verdict::Read;
    }
    if let Some(known) = FOREIGN_TOP_KEYS.iter().find(|f| f.key == key) {
        return Verdict::Ignored(IgnoredKey {
            server: None,
            key: key.to_owned(),
            whose: Some(known.whose),
            instead: known.instead,
        });
    }
    if nearest(key, TOP_KEYS).is_some() {
        return Verdict::Unknown(unknown(key, TOP_KEYS, "the top of the file"));
    }
    Verdict::Ignored(IgnoredKey {
        server: None,
        key: key.to_owned(),
        whose: None,
        instead: None,
    })
}

/// The message for an unknown key among `known` ones, in `place`.
pub(super) fn unknown(key: &str, known: &[&str], place: &str) -> String {
    let hint = match nearest(key, known) {
        Some(near) => format!("did you mean \"{near}\"? "),
        None => String::new(),
    };
    format!(
        "unknown key: {hint}Toolwire refuses keys it does not know, so that a misspelled rule is never skipped ({place} takes {})",
        known.join(", ")
    )
}

/// The known key closest to `key` when it is close enough to be a typo of it: the same but
/// for case, or a few edits away (at most a third of its length, and at most 3).
pub(super) fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(distance, k)| *distance <= (k.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_is_matched_to_the_key_it_misspells() {
        let cases = [
            ("aproval", SERVER_KEYS, Some("approval")),
            ("Approval", SERVER_KEYS, Some("approval")),
            ("disable", SERVER_KEYS, Some("disabled")),
            ("comand", SERVER_KEYS, Some("command")),
            ("truts", SERVER_KEYS, Some("trust")),
            ("timeoutMS", SERVER_KEYS, Some("timeoutMs")),
            ("mcpservers", TOP_KEYS, Some("mcpServers")),
            ("aproval", TOP_KEYS, Some("approval")),
            ("shortcut", SERVER_KEYS, None),
            ("x", SERVER_KEYS, None),
        ];
        for (key, known, want) in cases {
            assert_eq!(nearest(key, known), want, "{key}");
        }
    }

    #[test]
    fn each_key_is_read_ignored_or_refused() {
        assert!(matches!(server_key("s", "approval"), Verdict::Read));
        let Verdict::Ignored(ignored) = server_key("s", "autoApprove") else {
            panic!("autoApprove is Cline's");
        };
        assert_eq!(
            ignored.to_string(),
            "server \"s\": key \"autoApprove\" is Cline's and not read here (Toolwire's is \"approval.allow\")"
        );
        let Verdict::Unknown(message) = server_key("s", "aproval") else {
            panic!("a typo is refused");
        };
        assert!(message.contains("did you mean \"approval\"?"), "{message}");
        let Verdict::Unknown(message) = server_key("s", "shortcut") else {
            panic!("an unknown server key is refused");
        };
        assert!(!message.contains("did you mean"), "{message}");
        assert!(matches!(top_key("aproval"), Verdict::Unknown(_)));
        assert!(matches!(
            top_key("inputs"),
            Verdict::Ignored(IgnoredKey {
                whose: Some("VS Code"),
                ..
            })
        ));
        // The downstream settings of `toolwire gateway`, which reads the same file: known,
        // and left to it (no warning when the terminal host reads a gateway's file).
        assert!(!matches!(
            top_key("gateway"),
            Verdict::Ignored(_) | Verdict::Unknown(_)
        ));
        assert!(matches!(
            top_key("somethingElse"),
            Verdict::Ignored(IgnoredKey { whose: None, .. })
        ));
    }
}
