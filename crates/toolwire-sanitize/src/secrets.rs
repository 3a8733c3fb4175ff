//! Secret redaction: credentials a tool read from a file, an environment or an API answer and
//! would otherwise hand to a model (and through it to anyone who can read the conversation).
//! A default set of patterns — private key blocks, cloud, code-hosting and chat-platform
//! tokens, JWTs, Bearer and Basic credentials — plus the server author's own. One `RegexSet`
//! pass tells whether a text needs work; text without a match is not copied.
//!
//! A secret split by characters a reader does not see (a zero-width space in a token, a
//! variation selector, a tag character: [`text::is_ignorable`]) is still a secret: such a text
//! is matched with those characters as word boundaries, then with them read past, and when a
//! secret is found it comes back without them, redacted.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use regex::{Regex, RegexSet};

use crate::text;

/// The default patterns: a kind (shown in the replacement) and a regular expression. Word
/// boundaries are ASCII ones, `(?-u:\b)`: the credentials are ASCII, and a Unicode `\b` makes
/// the regex engine give up its fast automaton on any text that is not ASCII (4 KiB of
/// accented or CJK text took a millisecond).
pub const DEFAULT_SECRET_PATTERNS: &[(&str, &str)] = &[
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    (
        "aws-access-key",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?-u:\b)",
    ),
    (
        "aws-secret-key",
        r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}"#,
    ),
    ("google-api-key", r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}(?-u:\b)"),
    (
        "github-token",
        r"(?-u:\b)(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}(?-u:\b)",
    ),
    (
        "github-token",
        r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,255}(?-u:\b)",
    ),
    ("gitlab-token", r"(?-u:\b)glpat-[A-Za-z0-9_\-]{20,}(?-u:\b)"),
    (
        "slack-token",
        r"(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}(?-u:\b)",
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+",
    ),
    (
        "discord-webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]+",
    ),
    (
        "telegram-bot-token",
        r"(?-u:\b)[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?-u:\b)",
    ),
    (
        "stripe-key",
        r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}(?-u:\b)",
    ),
    (
        "openai-key",
        r"(?-u:\b)sk-(?:proj-)?[A-Za-z0-9_\-]{32,}(?-u:\b)",
    ),
    (
        "anthropic-key",
        r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{32,}(?-u:\b)",
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    ),
    // 20 characters or more: no English word after "bearer" is that long.
    ("bearer", r"(?i)(?-u:\b)bearer\s+[A-Za-z0-9\-._~+/]{20,}=*"),
    (
        "basic-auth",
        r"(?i)(?-u:\b)authorization\s*:\s*basic\s+[A-Za-z0-9+/]{8,}={0,2}",
    ),
    (
        "url-password",
        r"(?-u:\b)[a-z][a-z0-9+.\-]*://[^\s:/@]+:[^\s:/@]{3,}@",
    ),
];

/// A compiled pattern set: one `RegexSet` pass to tell whether a text has a secret, then the
/// matching patterns' replacements.
#[derive(Debug, Clone)]
pub struct Redactor {
    set: RegexSet,
    patterns: Vec<(String, Regex)>,
}

impl Redactor {
    /// The patterns (kind, expression); a bad expression is an error naming it.
    pub fn new(patterns: &[(String, String)]) -> Result<Redactor, String> {
        let set = RegexSet::new(patterns.iter().map(|(_, p)| p))
            .map_err(|e| format!("a secret pattern does not compile: {e}"))?;
        let patterns = patterns
            .iter()
            .map(|(kind, p)| {
                Regex::new(p)
                    .map(|r| (kind.clone(), r))
                    .map_err(|e| format!("secret pattern {kind}: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Redactor { set, patterns })
    }

    /// [`DEFAULT_SECRET_PATTERNS`], compiled once per process.
    pub fn defaults() -> Result<Arc<Redactor>, String> {
        static DEFAULT: OnceLock<Result<Arc<Redactor>, String>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| Redactor::new(&default_pattern_list()).map(Arc::new))
            .clone()
    }

    /// The default patterns followed by `extra`; a bad expression is an error naming it.
    pub fn with_defaults(extra: &[(String, String)]) -> Result<Redactor, String> {
        let mut all = default_pattern_list();
        all.extend(extra.iter().cloned());
        Redactor::new(&all)
    }

    /// Whether `text` has anything to redact, invisible characters read past.
    pub fn matches(&self, text: &str) -> bool {
        if text::has_ignorable(text) {
            self.redact(text).1 > 0
        } else {
            self.set.is_match(text)
        }
    }

    /// `text` with every match replaced by `[REDACTED:kind]`, and how many there were.
    ///
    /// Characters a reader does not see ([`text::is_ignorable`]) are read as a boundary
    /// between words, as a space would be, and then as nothing inside one: a secret is found
    /// beside a word with a zero-width joiner between them, and when split by a zero-width
    /// space. A text that has such characters and a secret comes back without them.
    pub fn redact<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        if !text::has_ignorable(text) {
            return self.redact_as_is(text);
        }
        // Some of them (joiners, variation selectors, fillers) are word characters to the
        // patterns' `\b`; the zero-width space is not.
        let bounded: String = text
            .chars()
            .map(|c| if text::is_ignorable(c) { '\u{200b}' } else { c })
            .collect();
        let (bounded, between) = self.redact_as_is(&bounded);
        let joined = text::without_ignorable(&bounded).into_owned();
        let (joined, inside) = self.redact_as_is(&joined);
        match between + inside {
            0 => (Cow::Borrowed(text), 0),
            found => (Cow::Owned(joined.into_owned()), found),
        }
    }

    fn redact_as_is<'a>(&self, text: &'a str) -> (Cow<'a, str>, usize) {
        // `is_match` stops at the first match; most texts have none.
        if !self.set.is_match(text) {
            return (Cow::Borrowed(text), 0);
        }
        let matched = self.set.matches(text);
        let mut out = text.to_owned();
        let mut count = 0;
        for index in matched.iter() {
            let (kind, regex) = &self.patterns[index];
            let replacement = format!("[REDACTED:{kind}]");
            let found = regex.find_iter(&out).count();
            if found > 0 {
                count += found;
                out = regex
                    .replace_all(&out, regex::NoExpand(&replacement))
                    .into_owned();
            }
        }
        (Cow::Owned(out), count)
    }
}

/// [`DEFAULT_SECRET_PATTERNS`] as owned (kind, expression) pairs.
pub fn default_pattern_list() -> Vec<(String, String)> {
    DEFAULT_SECRET_PATTERNS
        .iter()
        .map(|(k, p)| (k.to_string(), p.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Arc<Redactor> {
        Redactor::defaults().unwrap()
    }

    #[test]
    fn each_default_kind_is_caught() {
        let r = defaults();
        let samples = [
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
                "private-key",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
                "private-key",
            ),
            ("key AKIAIOSFODNN7EXAMPLE here", "aws-access-key"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws-secret-key",
            ),
            ("AIzaSyA-1234567890abcdefghijklmnopqrstu", "google-api-key"),
            ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "github-token"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "github-token",
            ),
            ("glpat-abcdefghij0123456789", "gitlab-token"),
            ("xoxb-123456789012-abcdefghijkl", "slack-token"),
            (
                "https://hooks.slack.com/services/T000/B000/XXXX",
                "slack-webhook",
            ),
            (
                "https://discord.com/api/webhooks/123456/abc-DEF_ghi",
                "discord-webhook",
            ),
            (
                "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1",
                "telegram-bot-token",
            ),
            ("sk_live_0123456789abcdefABCD", "stripe-key"),
            ("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789", "openai-key"),
            (
                "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlX2hlcmU",
                "jwt",
            ),
            ("Authorization: Bearer abcdefghijklmnop1234", "bearer"),
            (
                "curl -H 'authorization: bearer 0123456789abcdefghij'",
                "bearer",
            ),
            ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "basic-auth"),
            ("postgres://admin:hunter22@db.internal/app", "url-password"),
        ];
        for (text, kind) in samples {
            let (out, count) = r.redact(text);
            assert!(count >= 1, "{kind}: {text}");
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone_and_not_copied() {
        let r = defaults();
        for text in [
            "The sum is 5.",
            "See https://example.com/docs?page=2 and AKIA is a prefix.",
            "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----",
            "basic arithmetic, bearer of news, basic understandings, bearer responsibilities",
        ] {
            let (out, count) = r.redact(text);
            assert_eq!(count, 0, "{text}");
            assert!(matches!(out, Cow::Borrowed(_)));
        }
    }

    #[test]
    fn a_bad_user_pattern_is_named() {
        let bad = vec![("mine".to_owned(), "(".to_owned())];
        assert!(Redactor::new(&bad).unwrap_err().contains("compile"));
    }

    #[test]
    fn a_secret_split_by_invisible_characters_is_still_redacted() {
        let r = defaults();
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        // Zero-width space, non-joiner and joiner, word joiner, byte order mark, soft hyphen,
        // left-to-right mark, right-to-left override, a tag character, a variation selector,
        // the combining grapheme joiner, a Hangul filler, the Mongolian vowel separator.
        let splitters = [
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{ad}',
            '\u{200e}',
            '\u{202e}',
            '\u{e0041}',
            '\u{fe0f}',
            '\u{34f}',
            '\u{3164}',
            '\u{180e}',
        ];
        for splitter in splitters {
            let split: String = format!("{}{splitter}{}", &token[..20], &token[20..]);
            let cases = [
                (
                    format!("token {split}"),
                    "token [REDACTED:github-token]".to_owned(),
                ),
                (
                    format!("{splitter}{split}{splitter}"),
                    "[REDACTED:github-token]".to_owned(),
                ),
                (
                    format!("key AKIA{splitter}IOSFODNN7EXAMPLE and {split}"),
                    "key [REDACTED:aws-access-key] and [REDACTED:github-token]".to_owned(),
                ),
            ];
            for (text, expected) in cases {
                assert!(r.matches(&text), "U+{:04X}: {text:?}", splitter as u32);
                let (out, count) = r.redact(&text);
                assert_eq!(out, expected, "U+{:04X}", splitter as u32);
                assert_eq!(count, expected.matches("[REDACTED").count());
            }
        }
        // Every character between the letters of a token.
        let spread: String = token.chars().flat_map(|c| [c, '\u{200b}']).collect();
        assert_eq!(r.redact(&spread).0, "[REDACTED:github-token]");
        // A secret next to a word with only an invisible character between them, whether the
        // patterns read that character as part of a word (a joiner) or not.
        for joint in ['\u{200b}', '\u{200d}', '\u{fe0f}', '\u{3164}'] {
            let text = format!("see{joint}{token}");
            let (out, count) = r.redact(&text);
            assert_eq!((out.as_ref(), count), ("see[REDACTED:github-token]", 1));
        }
    }

    #[test]
    fn invisible_characters_without_a_secret_are_left_alone_and_not_copied() {
        let r = defaults();
        for text in [
            "I \u{2764}\u{fe0f} it",
            "family \u{1f468}\u{200d}\u{1f469}",
            "a\u{200b}b",
        ] {
            assert!(!r.matches(text), "{text:?}");
            let (out, count) = r.redact(text);
            assert_eq!(count, 0, "{text:?}");
            assert!(matches!(out, Cow::Borrowed(_)), "{text:?}");
        }
    }

    #[test]
    fn a_credential_beside_a_letter_outside_ascii_is_found() {
        let r = defaults();
        for (text, expected) in [
            ("clé:AKIAIOSFODNN7EXAMPLE", "clé:[REDACTED:aws-access-key]"),
            (
                "東京AKIAIOSFODNN7EXAMPLE東京",
                "東京[REDACTED:aws-access-key]東京",
            ),
            (
                "«ghp_0123456789abcdefghijklmnopqrstuvwxyz»",
                "«[REDACTED:github-token]»",
            ),
        ] {
            assert_eq!(r.redact(text).0, expected);
        }
    }
}
