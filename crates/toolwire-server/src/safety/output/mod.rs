//! The output guard: what happens to every tool result before it leaves (T-15: servers MUST
//! sanitize outputs; T-22: media is base64 with a MIME type). On by default, for every tool:
//!
//! - ANSI escape sequences, control characters (except newline and tab) and hidden format
//!   characters (zero-width spaces and joiners, bidi controls, tag characters, the soft
//!   hyphen…) are removed from every string the result carries: text, link and resource URIs,
//!   names and descriptions, `_meta`, and structured content at any depth, keys included;
//! - secrets are redacted (`[REDACTED:kind]`) in every such string, with
//!   [`DEFAULT_SECRET_PATTERNS`] and the server author's own patterns; a secret split by
//!   invisible characters is found with them read past;
//! - image and audio blocks must be base64 with a plausible MIME type of their kind (and the
//!   file signature of the well-known types), else they become a text block saying why;
//! - a resource link's URI scheme must be allowed (`https`, `http`, and the schemes of the
//!   server's own resources and templates, plus any added), else it becomes a text block;
//! - a result larger than [`DEFAULT_MAX_RESULT_BYTES`] is cut to size with a visible marker (a
//!   structured result that does not fit becomes an error result instead: cut JSON is no JSON).
//!
//! What was changed is counted and logged (target `toolwire::output`). A server sets its
//! guard with [`crate::ServerBuilder::output_guard`]; a tool overrides it with
//! [`crate::Tool::output_guard`], or turns it off with [`crate::Tool::raw_output`] and a stated
//! reason, which is logged when the tool is registered.

mod media;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use toolwire_protocol::{CallToolResult, ContentBlock, ResourceContents};

pub use toolwire_sanitize::DEFAULT_SECRET_PATTERNS;

use toolwire_sanitize::{Redactor, text};

/// The default limit on a result's size: 1 MiB of text, data and structured content together.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 1024 * 1024;

/// The link schemes allowed by default, besides those of the server's own resources.
pub const DEFAULT_LINK_SCHEMES: [&str; 2] = ["https", "http"];

/// How a tool's results are sanitized; see the module docs. [`OutputGuard::default`] is every
/// check on.
#[derive(Debug, Clone)]
pub struct OutputGuard {
    off: Option<String>,
    strip_controls: bool,
    redact: bool,
    default_patterns: bool,
    patterns: Vec<(String, String)>,
    max_result_bytes: usize,
    link_schemes: Vec<String>,
    check_media: bool,
}

impl Default for OutputGuard {
    fn default() -> Self {
        OutputGuard {
            off: None,
            strip_controls: true,
            redact: true,
            default_patterns: true,
            patterns: Vec::new(),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            link_schemes: DEFAULT_LINK_SCHEMES.iter().map(|s| s.to_string()).collect(),
            check_media: true,
        }
    }
}

impl OutputGuard {
    /// No sanitization at all, for the stated reason (logged once at registration).
    pub fn off(reason: impl Into<String>) -> Self {
        OutputGuard {
            off: Some(reason.into()),
            ..OutputGuard::default()
        }
    }

    /// Keeps escape sequences and control characters.
    pub fn keep_control_characters(mut self) -> Self {
        self.strip_controls = false;
        self
    }

    /// No secret redaction.
    pub fn no_redaction(mut self) -> Self {
        self.redact = false;
        self
    }

    /// Redacts only the patterns added with [`OutputGuard::secret_pattern`].
    pub fn without_default_secret_patterns(mut self) -> Self {
        self.default_patterns = false;
        self
    }

    /// Redacts matches of `regex` (Rust `regex` syntax) as `[REDACTED:kind]`.
    pub fn secret_pattern(mut self, kind: impl Into<String>, regex: impl Into<String>) -> Self {
        self.patterns.push((kind.into(), regex.into()));
        self
    }

    /// The largest result, in bytes of text, data and structured content (default 1 MiB).
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Allows resource links with this URI scheme (e.g. `file`, `s3`).
    pub fn allow_link_scheme(mut self, scheme: impl Into<String>) -> Self {
        self.link_schemes.push(scheme.into().to_ascii_lowercase());
        self
    }

    /// Lets image and audio blocks through unchecked.
    pub fn no_media_checks(mut self) -> Self {
        self.check_media = false;
        self
    }

    /// The reason the guard is off, if it is.
    pub fn off_reason(&self) -> Option<&str> {
        self.off.as_deref()
    }

    /// Whether the guard is usable: every secret pattern compiles (else which one does not).
    pub fn validate(&self) -> Result<(), String> {
        self.compile().map(|_| ())
    }

    /// Compiles the patterns; a bad one is an error naming it.
    pub(crate) fn compile(&self) -> Result<Arc<CompiledGuard>, String> {
        let redactor = match (self.redact, self.default_patterns, self.patterns.is_empty()) {
            (false, _, _) | (true, false, true) => None,
            (true, true, true) => Some(Redactor::defaults()?),
            (true, true, false) => Some(Arc::new(Redactor::with_defaults(&self.patterns)?)),
            (true, false, false) => Some(Arc::new(Redactor::new(&self.patterns)?)),
        };
        Ok(Arc::new(CompiledGuard {
            off: self.off.is_some(),
            strip_controls: self.strip_controls,
            redactor,
            max_result_bytes: self.max_result_bytes,
            link_schemes: self.link_schemes.clone(),
            check_media: self.check_media,
        }))
    }
}

/// A short, safe excerpt of `text` for logs: at most `max` bytes (cut at a character, with
/// `…`), control and hidden format characters removed and secrets redacted with the default
/// patterns. Secrets are redacted before the cut, so one that straddles it is not left half
/// shown; [`PREVIEW_WINDOW`] bytes past the cut bound the work on a large text.
pub(crate) fn preview(text: &str, max: usize) -> String {
    let mut end = text.len().min(max.saturating_add(PREVIEW_WINDOW));
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let (clean, _) = text::clean(&text[..end]);
    let mut excerpt = match Redactor::defaults() {
        Ok(redactor) => redactor.redact(&clean).0.into_owned(),
        Err(_) => clean.into_owned(),
    };
    text::truncate(&mut excerpt, max, "…");
    excerpt
}

/// How far past a preview's cut secrets are looked for: longer than any default pattern's
/// match in practice (a 4096-bit RSA private key block is about 3.3 KB).
const PREVIEW_WINDOW: usize = 16 * 1024;

/// A guard ready to apply.
#[derive(Debug)]
pub(crate) struct CompiledGuard {
    off: bool,
    strip_controls: bool,
    redactor: Option<Arc<Redactor>>,
    max_result_bytes: usize,
    link_schemes: Vec<String>,
    check_media: bool,
}

/// What the guard changed in one result.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) controls: usize,
    pub(crate) secrets: usize,
    pub(crate) media: usize,
    pub(crate) links: usize,
    pub(crate) truncated: bool,
}

impl Report {
    fn any(&self) -> bool {
        *self != Report::default()
    }
}

const TRUNCATED: &str = "\n[… truncated by the server: the result exceeded its size limit]";

impl CompiledGuard {
    /// Sanitizes `result`; `own_scheme` says whether a URI scheme is one of the server's own
    /// resources'. Returns what changed, logged when anything did.
    pub(crate) fn apply(
        &self,
        tool: &str,
        result: &mut CallToolResult,
        own_scheme: impl Fn(&str) -> bool,
    ) -> Report {
        let mut report = Report::default();
        if self.off {
            return report;
        }
        if self.strip_controls || self.redactor.is_some() {
            result.rewrite_strings(&mut |text| self.fix(text, &mut report));
        }
        for block in &mut result.content {
            self.check(block, &own_scheme, &mut report);
        }
        self.limit(result, &mut report);
        if report.any() {
            tracing::warn!(
                target: "toolwire::output",
                %tool,
                controls = report.controls,
                secrets = report.secrets,
                media = report.media,
                links = report.links,
                truncated = report.truncated,
                "tool output sanitized"
            );
        }
        report
    }

    /// One string cleaned and redacted: `Some` when that changed it.
    fn fix(&self, text: &str, report: &mut Report) -> Option<String> {
        let mut fixed = None;
        if self.strip_controls {
            if let (Cow::Owned(clean), removed) = text::clean(text) {
                report.controls += removed;
                fixed = Some(clean);
            }
        }
        if let Some(redactor) = &self.redactor {
            if let (Cow::Owned(redacted), found) = redactor.redact(fixed.as_deref().unwrap_or(text))
            {
                report.secrets += found;
                fixed = Some(redacted);
            }
        }
        fixed
    }

    /// Media that is not what it says and links of schemes not allowed become a text block
    /// saying why.
    fn check(
        &self,
        block: &mut ContentBlock,
        own_scheme: &impl Fn(&str) -> bool,
        report: &mut Report,
    ) {
        let refused = match block {
            ContentBlock::Image(i) if self.check_media => {
                media::check("image", &i.data, &i.mime_type)
                    .err()
                    .map(|why| format!("[image removed by the server: {why}]"))
            }
            ContentBlock::Audio(a) if self.check_media => {
                media::check("audio", &a.data, &a.mime_type)
                    .err()
                    .map(|why| format!("[audio removed by the server: {why}]"))
            }
            ContentBlock::ResourceLink(link) => {
                let scheme = link
                    .uri
                    .split_once(':')
                    .map(|(s, _)| s.to_ascii_lowercase())
                    .unwrap_or_default();
                let allowed = !scheme.is_empty()
                    && (self.link_schemes.contains(&scheme) || own_scheme(&scheme));
                (!allowed).then(|| {
                    format!(
                        "[link removed by the server: the URI scheme {scheme:?} is not allowed]"
                    )
                })
            }
            _ => None,
        };
        if let Some(replacement) = refused {
            if matches!(block, ContentBlock::ResourceLink(_)) {
                report.links += 1;
            } else {
                report.media += 1;
            }
            *block = ContentBlock::text(replacement);
        }
    }

    /// Cuts the result to `max_result_bytes`: text blocks are cut (with a marker) and blocks
    /// past the limit dropped; a structured result that alone exceeds it becomes an error.
    fn limit(&self, result: &mut CallToolResult, report: &mut Report) {
        let max = self.max_result_bytes;
        let structured = result.structured_content.as_ref().map_or(0, json_size);
        if structured > max {
            report.truncated = true;
            *result = CallToolResult::error(format!(
                "The tool's result was withheld: its structured content is about {structured} bytes, over the server's limit of {max} bytes."
            ));
            return;
        }
        let total: usize = structured + result.content.iter().map(block_size).sum::<usize>();
        if total <= max {
            return;
        }
        report.truncated = true;
        let mut budget = max - structured;
        let mut kept = Vec::with_capacity(result.content.len());
        for mut block in std::mem::take(&mut result.content) {
            let size = block_size(&block);
            if size <= budget {
                budget -= size;
                kept.push(block);
                continue;
            }
            if let ContentBlock::Text(t) = &mut block {
                text::truncate(&mut t.text, budget, TRUNCATED);
                kept.push(block);
            } else {
                kept.push(ContentBlock::text(TRUNCATED.trim_start()));
            }
            break;
        }
        result.content = kept;
    }
}

/// The bytes a block carries.
fn block_size(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(t) => t.text.len(),
        ContentBlock::Image(i) => i.data.len(),
        ContentBlock::Audio(a) => a.data.len(),
        ContentBlock::ResourceLink(l) => l.uri.len() + l.name.len(),
        ContentBlock::EmbeddedResource(e) => match &e.resource {
            ResourceContents::Text(t) => t.text.len(),
            ResourceContents::Blob(b) => b.blob.len(),
        },
        // A kind this version does not know: counted by its serialized size.
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    }
}

/// About how many bytes a JSON value serializes to, without serializing it.
fn json_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_size(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + json_size(v))
                .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn guard(g: OutputGuard) -> Arc<CompiledGuard> {
        g.compile().unwrap()
    }

    fn text_of(result: &CallToolResult, i: usize) -> &str {
        match &result.content[i] {
            ContentBlock::Text(t) => &t.text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_is_cleaned_and_redacted_and_counted() {
        let g = guard(OutputGuard::default());
        let mut result = CallToolResult::new(vec![ContentBlock::text(
            "\u{1b}[31mkey AKIAIOSFODNN7EXAMPLE\u{1b}[0m ok",
        )]);
        let report = g.apply("t", &mut result, |_| false);
        assert_eq!(text_of(&result, 0), "key [REDACTED:aws-access-key] ok");
        assert_eq!(
            (report.controls, report.secrets),
            (9, 1),
            "ESC[31m and ESC[0m"
        );
    }

    #[test]
    fn structured_strings_are_sanitized_too() {
        let g = guard(OutputGuard::default());
        let mut result = CallToolResult::new(Vec::new());
        result.structured_content =
            Some(json!({"token": "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
            "list": ["\u{7}bell"], "n": 1, "bad\u{1b}[1mkey": true}));
        let report = g.apply("t", &mut result, |_| false);
        assert_eq!(
            result.structured_content.unwrap(),
            json!({"token": "[REDACTED:github-token]", "list": ["bell"], "n": 1, "badkey": true})
        );
        assert_eq!(report.secrets, 1);
    }

    #[test]
    fn media_and_links_that_fail_become_text() {
        let g = guard(OutputGuard::default().allow_link_scheme("S3"));
        let mut result = CallToolResult::new(vec![
            ContentBlock::image("PHNjcmlwdD4=", "image/png"),
            ContentBlock::ResourceLink(toolwire_protocol::ResourceLink {
                uri: "javascript:alert(1)".into(),
                name: "x".into(),
                ..Default::default()
            }),
            ContentBlock::ResourceLink(toolwire_protocol::ResourceLink {
                uri: "notes://1".into(),
                name: "note".into(),
                ..Default::default()
            }),
            ContentBlock::ResourceLink(toolwire_protocol::ResourceLink {
                uri: "s3://bucket/k".into(),
                name: "obj".into(),
                ..Default::default()
            }),
        ]);
        let report = g.apply("t", &mut result, |scheme| scheme == "notes");
        assert!(text_of(&result, 0).starts_with("[image removed by the server"));
        assert!(text_of(&result, 1).contains("\"javascript\" is not allowed"));
        assert!(
            matches!(result.content[2], ContentBlock::ResourceLink(_)),
            "own scheme"
        );
        assert!(
            matches!(result.content[3], ContentBlock::ResourceLink(_)),
            "added scheme"
        );
        assert_eq!((report.media, report.links), (1, 1));
    }

    #[test]
    fn large_results_are_cut_with_a_marker() {
        let g = guard(OutputGuard::default().max_result_bytes(10));
        let mut result = CallToolResult::new(vec![
            ContentBlock::text("12345"),
            ContentBlock::text("67890abcdef"),
            ContentBlock::text("never"),
        ]);
        assert!(g.apply("t", &mut result, |_| false).truncated);
        assert_eq!(result.content.len(), 2);
        assert_eq!(text_of(&result, 0), "12345");
        assert!(text_of(&result, 1).starts_with("67890\n[… truncated"));

        let mut structured = CallToolResult::new(Vec::new());
        structured.structured_content = Some(json!({"big": "x".repeat(20)}));
        g.apply("t", &mut structured, |_| false);
        assert_eq!(structured.is_error, Some(true));
        assert!(text_of(&structured, 0).contains("over the server's limit of 10 bytes"));
    }

    #[test]
    fn off_and_opt_outs_leave_results_alone() {
        let raw = "\u{1b}[1mAKIAIOSFODNN7EXAMPLE";
        for g in [
            OutputGuard::off("a terminal emulator tool"),
            OutputGuard::default()
                .keep_control_characters()
                .no_redaction(),
        ] {
            let mut result = CallToolResult::new(vec![ContentBlock::text(raw)]);
            guard(g).apply("t", &mut result, |_| false);
            assert_eq!(text_of(&result, 0), raw);
        }
        let only_mine = guard(
            OutputGuard::default()
                .without_default_secret_patterns()
                .secret_pattern("internal", r"INT-[0-9]{4}"),
        );
        let mut result =
            CallToolResult::new(vec![ContentBlock::text("INT-1234 AKIAIOSFODNN7EXAMPLE")]);
        only_mine.apply("t", &mut result, |_| false);
        assert_eq!(
            text_of(&result, 0),
            "[REDACTED:internal] AKIAIOSFODNN7EXAMPLE"
        );
        assert!(
            OutputGuard::default()
                .secret_pattern("bad", "(")
                .compile()
                .is_err()
        );
    }

    #[test]
    fn a_clean_result_is_not_touched() {
        let g = guard(OutputGuard::default());
        let mut result = CallToolResult::new(vec![ContentBlock::text("The sum is 5.")]);
        result.structured_content = Some(json!({"sum": 5}));
        let before = result.clone();
        assert_eq!(g.apply("t", &mut result, |_| false), Report::default());
        assert_eq!(result, before);
    }

    #[test]
    fn every_string_of_a_result_is_cleaned_and_redacted() {
        let g = guard(OutputGuard::default());
        let split = "AKIA\u{200b}IOSFODNN7EXAMPLE";
        let mut meta = serde_json::Map::new();
        meta.insert("key".into(), json!({"deep": [split]}));
        let mut result = CallToolResult::new(vec![
            ContentBlock::ResourceLink(toolwire_protocol::ResourceLink {
                uri: format!("https://example.com/?k={split}"),
                name: format!("\u{1b}[1m{split}"),
                mime_type: Some(split.into()),
                meta: Some(meta.clone()),
                ..Default::default()
            }),
            ContentBlock::resource(ResourceContents::text(
                format!("https://example.com/{split}"),
                "text/plain",
                split,
            )),
            ContentBlock::image("iVBORw0KGgoAAAANSUhEUg==", "image/png"),
        ]);
        result.meta = Some(toolwire_protocol::ResultMeta {
            extra: meta,
            ..Default::default()
        });
        result.structured_content = Some(json!({ split: [split] }));
        let report = g.apply("t", &mut result, |_| false);
        let json = serde_json::to_string(&result).unwrap();
        assert!(
            !json.contains("AKIA") && !json.contains('\u{200b}'),
            "{json}"
        );
        assert_eq!(report.secrets, 9, "{json}");
        assert_eq!(
            report.controls,
            9 + 4,
            "a zero-width space in each string and ESC [ 1 m"
        );
        assert!(
            json.contains("https://example.com/?k=[REDACTED:aws-access-key]"),
            "{json}"
        );
        // The image's base64 is bytes, not text: left to the media check.
        assert_eq!(
            result.content[2],
            ContentBlock::image("iVBORw0KGgoAAAANSUhEUg==", "image/png")
        );
    }

    #[test]
    fn a_preview_never_shows_half_a_secret_at_its_cut() {
        let token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
        for at in [0, 230, 245, 250, 255] {
            let text = format!("{} {token} and more", "x".repeat(at));
            let excerpt = preview(&text, 256);
            assert!(!excerpt.contains("ghp_"), "{at}: {excerpt}");
            assert!(excerpt.len() <= 256 + "…".len(), "{at}: {}", excerpt.len());
        }
        assert_eq!(preview("short \u{200b}text", 256), "short text");
    }
}
