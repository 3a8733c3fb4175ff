//! What reaches the terminal: a server's text (results, names, descriptions, instructions,
//! progress, URLs, errors, logs) is shown with its control characters made visible, so it
//! cannot clear the screen, move the cursor, forge output, set the title or write the clipboard;
//! and writing never panics — a closed stdout (`| head -1`) ends the command quietly.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;

/// How much layout a piece of text keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One line: a name, a URL, a version, an error. Line breaks are shown, not obeyed, so the
    /// text cannot start a line of its own.
    Line,
    /// Running text: a tool's output, a description, instructions. Newlines (and CRLF) are
    /// kept; a lone carriage return, which would overwrite the line, is shown.
    Text,
}

/// `text` with every control character visible: C0 controls and DEL in caret notation as
/// `cat -v` shows them (ESC is `^[`), C1 controls and the invisible characters that reorder or
/// break lines (bidi embeddings, overrides, isolates and marks; line and paragraph separators)
/// as `<U+XXXX>`. Tabs are kept; newlines as `layout` says.
pub(crate) fn visible(text: &str, layout: Layout) -> Cow<'_, str> {
    // Printable ASCII and tabs are kept whatever the layout: the common case (a gateway logs a
    // line per call).
    if printable_ascii(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    let keeps = |c: char, next: Option<char>| match c {
        '\t' => true,
        '\n' => layout == Layout::Text,
        '\r' => layout == Layout::Text && next == Some('\n'),
        c => !is_control(c) && !is_hidden_format(c),
    };
    let mut chars = text.chars().peekable();
    let mut clean = true;
    while let Some(c) = chars.next() {
        if !keeps(c, chars.peek().copied()) {
            clean = false;
            break;
        }
    }
    if clean {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if keeps(c, chars.peek().copied()) {
            shown.push(c);
        } else if c.is_ascii_control() {
            // ESC (0x1b) is `^[`, NUL `^@`, DEL (0x7f) `^?`.
            shown.push('^');
            shown.push(char::from(c as u8 ^ 0x40));
        } else {
            let _ = write!(shown, "<U+{:04X}>", u32::from(c));
        }
    }
    Cow::Owned(shown)
}

/// Whether every byte is printable ASCII or a tab: checked a block at a time without stopping
/// inside a block, which the compiler turns into vector instructions (a gateway's log line per
/// call takes a few hundred instructions, not a few thousand).
fn printable_ascii(bytes: &[u8]) -> bool {
    let kept = |b: u8| b.wrapping_sub(b' ') < 0x5f || b == b'\t';
    let mut blocks = bytes.chunks_exact(32);
    let whole = blocks
        .by_ref()
        .all(|block| block.iter().fold(true, |all, &b| all & kept(b)));
    whole && blocks.remainder().iter().all(|&b| kept(b))
}

/// C0, DEL and C1.
fn is_control(c: char) -> bool {
    c.is_control()
}

/// Invisible characters that reorder what follows (Trojan Source) or break lines.
fn is_hidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}'
    )
}

/// How [`json`] lays JSON out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Json {
    /// Indented, one key a line.
    Pretty,
    /// On one line.
    Compact,
}

/// `value` as JSON (pretty or compact) that is safe to show: serde_json already escapes C0
/// controls, and DEL, C1 and the hidden format characters become `\uXXXX` escapes too. They can
/// only occur inside strings, so the JSON means the same.
pub(crate) fn json(value: &impl serde::Serialize, form: Json) -> serde_json::Result<String> {
    let text = match form {
        Json::Pretty => serde_json::to_string_pretty(value)?,
        Json::Compact => serde_json::to_string(value)?,
    };
    if !text.chars().any(|c| is_control(c) || is_hidden_format(c)) {
        return Ok(text);
    }
    let mut safe = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if (is_control(c) && c != '\n') || is_hidden_format(c) {
            let _ = write!(safe, "\\u{:04x}", u32::from(c));
        } else {
            safe.push(c);
        }
    }
    Ok(safe)
}

/// `1 tool`, `2 tools`: a count with the word it counts.
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Writes a line of results to stdout. The error of a closed pipe reaches `main`, which ends
/// quietly (see [`is_broken_pipe`]).
pub(crate) fn out(line: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(line.as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()
}

/// Whether [`note`] writes JSON objects: a server logging with `--log-format json`, whose every
/// line on stderr is then one.
static NOTES_AS_JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, [`note`] writes each line as a JSON log object (`timestamp`, `level`,
/// `message`, `target`), as the JSON log lines are.
pub(crate) fn notes_as_json() {
    NOTES_AS_JSON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Writes a line to stderr (messages, progress, questions); a stderr that cannot be written is
/// ignored, never a panic. After [`notes_as_json`], as a JSON log object.
pub(crate) fn note(line: &str) {
    write_note(line, "INFO");
}

/// [`note`] for the error a command ends with: at level `ERROR` as a JSON log object.
pub(crate) fn error_note(line: &str) {
    write_note(line, "ERROR");
}

fn write_note(line: &str, level: &str) {
    let json;
    let line = if NOTES_AS_JSON.load(std::sync::atomic::Ordering::Relaxed) {
        json = json_note(line, level);
        &json
    } else {
        line
    };
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_all(line.as_bytes())
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `line` as the JSON log lines have it: `toolwire: ` taken off (the target says it), a
/// `warning: ` as the level.
fn json_note(line: &str, level: &str) -> String {
    use tracing_subscriber::fmt::time::FormatTime as _;
    let message = line.strip_prefix("toolwire: ").unwrap_or(line);
    let (level, message) = match message.strip_prefix("warning: ") {
        Some(rest) => ("WARN", rest),
        None => (level, message),
    };
    let mut timestamp = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(
        &mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp),
    );
    // In the order of the JSON log lines' fields.
    #[derive(serde::Serialize)]
    struct Line<'a> {
        timestamp: &'a str,
        level: &'a str,
        message: &'a str,
        target: &'a str,
    }
    serde_json::to_string(&Line {
        timestamp: &timestamp,
        level,
        message,
        target: "toolwire",
    })
    .unwrap_or_default()
}

/// An error whose message keeps its line breaks where `main` prints it: text Toolwire wrote, or
/// the person's own file quoted by a parser (a TOML error shows the line and a caret under
/// the column). Every other error is printed on one line, since the libraries' errors may
/// quote a server (its error message, its stderr, an authorization server's description) or a
/// project's configuration file, whose line breaks could start a line that looks like ours.
#[derive(Debug)]
pub(crate) struct Lines(pub(crate) String);

impl std::fmt::Display for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Lines {}

/// `error` as `main` prints it: `toolwire: ` and each cause after a colon (as anyhow's `{:#}`
/// does), every control character made visible; line breaks kept in [`Lines`] only.
pub(crate) fn error_report(error: &anyhow::Error) -> String {
    let mut report = String::from("toolwire: ");
    for (index, cause) in error.chain().enumerate() {
        if index > 0 {
            report.push_str(": ");
        }
        let layout = if cause.is::<Lines>() {
            Layout::Text
        } else {
            Layout::Line
        };
        report.push_str(&visible(&cause.to_string(), layout));
    }
    report
}

/// Whether `error` comes from writing to a closed pipe.
pub(crate) fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// stderr for `tracing`, whose events may carry a server's text (its log messages, its stderr
/// lines): each event is shown as one line with every control character visible.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SafeStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for SafeStderr {
    type Writer = SafeStderr;

    fn make_writer(&'a self) -> Self::Writer {
        SafeStderr
    }
}

impl io::Write for SafeStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter writes one event at a time, ending with its newline. Nothing to show
        // differently (the common case): the bytes as they came.
        let event = buf.strip_suffix(b"\n").unwrap_or(buf);
        if printable_ascii(event) {
            let _ = io::stderr().lock().write_all(buf);
            return Ok(buf.len());
        }
        let text = String::from_utf8_lossy(buf);
        let (event, newline) = match text.strip_suffix('\n') {
            Some(event) => (event, "\n"),
            None => (&*text, ""),
        };
        // One write per line (stderr is unbuffered): a busy gateway logs a line per call. A
        // stderr that cannot be written loses the line, nothing more.
        let _ = match (&text, visible(event, Layout::Line)) {
            // Nothing to show differently: the bytes as they came.
            (Cow::Borrowed(_), Cow::Borrowed(_)) => io::stderr().lock().write_all(buf),
            (_, shown) => {
                let mut line = shown.into_owned();
                line.push_str(newline);
                io::stderr().lock().write_all(line.as_bytes())
            }
        };
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

/// A path for messages, with `~` for the home directory.
pub(crate) fn shown(path: &Path) -> String {
    if let Some(home) = std::env::var_os("HOME") {
        if let Ok(rest) = path.strip_prefix(&home) {
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_made_visible() {
        use Layout::{Line, Text};
        let cases = [
            (
                "plain text, tabs\tand ünïcode ✓",
                Line,
                "plain text, tabs\tand ünïcode ✓",
            ),
            ("\u{1b}[2J\u{1b}[H", Line, "^[[2J^[[H"),
            // OSC 52 writes the clipboard; OSC 0 sets the title; both end with BEL.
            ("\u{1b}]52;c;ZXZpbA==\u{7}", Line, "^[]52;c;ZXZpbA==^G"),
            ("\u{1b}]0;pwned\u{7}", Text, "^[]0;pwned^G"),
            ("nul\0 bs\u{8} del\u{7f}", Line, "nul^@ bs^H del^?"),
            ("a\nb", Line, "a^Jb"),
            ("a\nb", Text, "a\nb"),
            ("a\r\nb", Text, "a\r\nb"),
            ("a\r\nb", Line, "a^M^Jb"),
            ("safe\rforged", Text, "safe^Mforged"),
            ("csi\u{9b}31m", Text, "csi<U+009B>31m"),
            ("nel\u{85}", Line, "nel<U+0085>"),
            ("abc\u{202e}fed\u{202c}", Text, "abc<U+202E>fed<U+202C>"),
            (
                "\u{2066}iso\u{2069}\u{200f}\u{61c}",
                Line,
                "<U+2066>iso<U+2069><U+200F><U+061C>",
            ),
            ("line\u{2028}sep", Text, "line<U+2028>sep"),
            // Joiners in emoji are not controls.
            ("👩\u{200d}💻", Line, "👩\u{200d}💻"),
        ];
        for (text, layout, expected) in cases {
            assert_eq!(visible(text, layout), expected, "{text:?} as {layout:?}");
        }
    }

    #[test]
    fn printable_ascii_is_told_apart_in_blocks_and_in_the_rest() {
        // Lengths around the 32-byte block, with one byte changed at each position.
        for len in [0, 1, 31, 32, 33, 64, 100] {
            let clean = vec![b'a'; len];
            assert!(printable_ascii(&clean), "{len}");
            for at in 0..len {
                for bad in [0u8, b'\n', 0x1b, 0x1f, 0x7f, 0x80, 0xc3, 0xff] {
                    let mut text = clean.clone();
                    text[at] = bad;
                    assert!(!printable_ascii(&text), "{bad:#x} at {at} of {len}");
                }
                for good in [b'\t', b' ', b'~'] {
                    let mut text = clean.clone();
                    text[at] = good;
                    assert!(printable_ascii(&text), "{good:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn clean_text_is_not_copied() {
        assert!(matches!(visible("fine\n", Layout::Text), Cow::Borrowed(_)));
        assert!(matches!(visible("fine\n", Layout::Line), Cow::Owned(_)));
    }

    #[test]
    fn json_escapes_what_serde_json_leaves_raw() {
        let value = serde_json::json!({"k\u{9b}": "\u{1b}[2J \u{7f} \u{202e} \u{2028} é"});
        let compact = json(&value, Json::Compact).unwrap();
        assert_eq!(compact, r#"{"k\u009b":"\u001b[2J \u007f \u202e \u2028 é"}"#);
        let pretty = json(&value, Json::Pretty).unwrap();
        assert!(pretty.contains('\n'), "pretty keeps its layout");
        for text in [&compact, &pretty] {
            assert!(
                !text
                    .chars()
                    .any(|c| is_control(c) && c != '\n' || is_hidden_format(c))
            );
            let back: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(back, value, "the same JSON");
        }
    }

    #[test]
    fn errors_keep_line_breaks_only_where_toolwire_vouches_for_them() {
        let ours = anyhow::Error::new(Lines("bad.toml: at line 1\n1 | [auth\n  |      ^".into()))
            .context("--config");
        assert_eq!(
            error_report(&ours),
            "toolwire: --config: bad.toml: at line 1\n1 | [auth\n  |      ^"
        );
        // A server's words (here, inside a message of ours): one line, controls visible.
        let theirs = anyhow::anyhow!("failed\ntoolwire: forged \u{1b}[2J").context("calling");
        assert_eq!(
            error_report(&theirs),
            "toolwire: calling: failed^Jtoolwire: forged ^[[2J"
        );
        let escape = anyhow::Error::new(Lines("a\u{1b}]0;title\u{7}\rb".into()));
        assert_eq!(error_report(&escape), "toolwire: a^[]0;title^G^Mb");
    }

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        let error = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe))
            .context("printing the result");
        assert!(is_broken_pipe(&error));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
