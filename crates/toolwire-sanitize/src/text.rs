//! Terminal escapes and control characters out of text (T-15: sanitize outputs). A model, or a
//! person's terminal, should never receive a sequence that moves the cursor, rewrites the title,
//! hides text or rings the bell. ANSI escape sequences (CSI, OSC, and two-byte ones) go whole;
//! then every C0 and C1 control character except newline and tab, and DEL. Text without any
//! of them is not copied.

use std::borrow::Cow;

/// Whether `text` has anything [`clean`] would remove: one pass over the bytes.
pub fn needs_cleaning(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        (b < 0x20 && b != b'\n' && b != b'\t')
            || b == 0x7f
            // C1 controls (U+0080..U+009F) are 0xC2 0x80..=0x9F in UTF-8.
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

/// `text` without escape sequences and control characters (newline and tab stay), and how
/// many characters went.
pub fn clean(text: &str) -> (Cow<'_, str>, usize) {
    if !needs_cleaning(text) {
        return (Cow::Borrowed(text), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                removed += 1 + skip_escape(&mut chars);
            }
            // CSI as a single C1 character: its parameters go with it.
            '\u{9b}' => {
                removed += 1 + skip_csi(&mut chars);
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => removed += 1,
            c => out.push(c),
        }
    }
    (Cow::Owned(out), removed)
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// Skips what follows an ESC: a CSI (`ESC [`), an OSC, DCS, SOS, PM or APC string (ended by BEL
/// or ST), or one more character. Returns how many characters it skipped.
fn skip_escape(chars: &mut Chars<'_>) -> usize {
    match chars.peek() {
        Some('[') => {
            chars.next();
            1 + skip_csi(chars)
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            chars.next();
            1 + skip_string(chars)
        }
        Some(_) => {
            chars.next();
            1
        }
        None => 0,
    }
}

/// Parameters and intermediates, then the final byte (`@`..`~`).
fn skip_csi(chars: &mut Chars<'_>) -> usize {
    let mut skipped = 0;
    while let Some(&c) = chars.peek() {
        chars.next();
        skipped += 1;
        if ('@'..='~').contains(&c) {
            break;
        }
        if !(' '..='?').contains(&c) {
            // Not a CSI after all; the character went with it, as a terminal would drop it.
            break;
        }
    }
    skipped
}

/// Up to and including BEL or ST (`ESC \`).
fn skip_string(chars: &mut Chars<'_>) -> usize {
    let mut skipped = 0;
    while let Some(c) = chars.next() {
        skipped += 1;
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' if chars.peek() == Some(&'\\') => {
                chars.next();
                skipped += 1;
                break;
            }
            _ => {}
        }
    }
    skipped
}

/// `text` cut to at most `max` bytes at a character boundary, with `marker` appended when cut.
pub fn truncate(text: &mut String, max: usize, marker: &str) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(marker);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_not_copied() {
        let (out, removed) = clean("hello\n\tworld ünïcode ✓");
        assert!(matches!(out, Cow::Borrowed(_)));
        assert_eq!(removed, 0);
    }

    #[test]
    fn escapes_and_controls_go_newlines_and_tabs_stay() {
        let cases = [
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("a\u{1b}[2J\u{1b}[Hb", "ab"),
            ("title\u{1b}]0;pwned\u{7}!", "title!"),
            (
                "link \u{1b}]8;;http://evil\u{1b}\\x\u{1b}]8;;\u{1b}\\",
                "link x",
            ),
            ("bell\u{7} nul\u{0} cr\r del\u{7f}", "bell nul cr del"),
            ("c1\u{9b}31mcsi \u{85}nel", "c1csi nel"),
            ("dangling\u{1b}", "dangling"),
            ("dcs\u{1b}Pq#0;2;0;0;0\u{1b}\\end", "dcsend"),
        ];
        for (input, expected) in cases {
            let (out, removed) = clean(input);
            assert_eq!(out, expected, "{input:?}");
            assert!(removed > 0, "{input:?}");
        }
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        let mut text = "ab✓cd".to_owned();
        assert!(truncate(&mut text, 3, "[cut]"));
        assert_eq!(text, "ab[cut]");
        let mut short = "ab".to_owned();
        assert!(!truncate(&mut short, 3, "[cut]"));
    }
}
