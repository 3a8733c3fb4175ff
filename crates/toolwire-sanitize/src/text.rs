//! Terminal escapes, control characters and invisible format characters out of text (T-15:
//! sanitize outputs). A model, or a person's terminal, should never receive a sequence that
//! moves the cursor, rewrites the title, hides text or rings the bell, nor characters it does
//! not see that change what it reads: ANSI escape sequences (CSI, OSC, and two-byte ones) go
//! whole; then every C0 and C1 control character except newline and tab, DEL, and the format
//! characters of [`is_hidden_format`] (zero-width spaces and joiners, bidi controls, tag
//! characters, the soft hyphen…), which also split a secret so that no pattern sees it. Text
//! without any of them is not copied.
//!
//! [`is_ignorable`] is the wider set a reader does not see, for matching secrets
//! ([`crate::Redactor`] reads past them); [`without_ignorable`] removes it.

use std::borrow::Cow;

/// Whether `text` has anything [`clean`] would remove. The bytes are scanned 64 at a time
/// with no branch per byte (the compiler makes it vector code); only a block with a control
/// or a non-ASCII byte is looked at byte by byte, decoding only the characters whose first
/// byte some hidden format character shares.
pub fn needs_cleaning(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut start = 0;
    for block in bytes.chunks(64) {
        let suspect = block.iter().fold(false, |suspect, &b| {
            suspect | ((b < 0x20) & (b != b'\n') & (b != b'\t')) | (b >= 0x7f)
        });
        if suspect {
            for (offset, &b) in block.iter().enumerate() {
                if !(0x20..0x7f).contains(&b) && needs_cleaning_at(text, start + offset) {
                    return true;
                }
            }
        }
        start += block.len();
    }
    false
}

/// Whether the byte at `i` starts something [`clean`] removes.
fn needs_cleaning_at(text: &str, i: usize) -> bool {
    let bytes = text.as_bytes();
    let second = bytes.get(i + 1).copied().unwrap_or(0);
    // The hidden format characters past U+00FF, by their first two bytes: U+061C, U+180E,
    // U+200B.. and U+2060.., U+FEFF and U+FFF9.., U+13430.., U+1BCA0.. and U+1D173.., and
    // U+E0001... Typographic punctuation (U+2010..U+205F but the ones above) and emoji
    // (U+1Fxxx) are told apart without decoding.
    let maybe_format = match bytes[i] {
        // Continuation bytes, and the first bytes of most letters.
        0x80..=0xbf | 0xc3..=0xd7 => return false,
        0xd8 => second == 0x9c,
        0xe1 | 0xf3 => second == 0xa0,
        0xe2 => matches!(second, 0x80 | 0x81),
        0xef => matches!(second, 0xbb | 0xbf),
        0xf0 => matches!(second, 0x93 | 0x9b | 0x9d),
        b'\n' | b'\t' => return false,
        0x00..=0x1f | 0x7f => return true,
        // C1 controls (U+0080..U+009F) are 0xC2 0x80..=0x9F; the soft hyphen is 0xC2 0xAD.
        0xc2 => return second <= 0x9f || second == 0xad,
        _ => return false,
    };
    // `i` is a character boundary: no continuation byte is one of the first bytes above.
    maybe_format && text[i..].chars().next().is_some_and(is_hidden_format)
}

/// Whether `c` is a format character [`clean`] removes: Unicode's general category Cf (zero
/// width space, non-joiner and joiner, word joiner and the invisible operators, the bidi marks,
/// embeddings, overrides and isolates, the byte order mark, the soft hyphen, interlinear
/// annotation, tag characters…), except the prepended concatenation marks (U+0600..U+0605,
/// U+06DD, U+070F, U+0890, U+0891, U+08E2, U+110BD, U+110CD), which are visible signs.
pub fn is_hidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// Whether `c` is a character a reader does not see, or sees as nothing between two others:
/// every format character (Cf) and every default-ignorable code point (variation selectors,
/// the combining grapheme joiner, Hangul fillers, and the ranges Unicode reserves for more).
/// [`crate::Redactor`] matches secrets with these read past.
pub fn is_ignorable(c: char) -> bool {
    is_hidden_format(c)
        || matches!(
            c,
            '\u{34f}'
                | '\u{600}'..='\u{605}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{115f}'..='\u{1160}'
                | '\u{17b4}'..='\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{2065}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fff8}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// Whether `text` has a character of [`is_ignorable`]: ASCII text is told at once, other text
/// decodes only the characters whose first byte an ignorable one shares.
pub fn has_ignorable(text: &str) -> bool {
    if text.is_ascii() {
        return false;
    }
    text.bytes().enumerate().any(|(i, b)| {
        matches!(
            b,
            0xc2 | 0xcd | 0xd8 | 0xdb | 0xdc | 0xe0 | 0xe1 | 0xe2 | 0xe3 | 0xef | 0xf0 | 0xf3
        ) && text[i..].chars().next().is_some_and(is_ignorable)
    })
}

/// `text` without the characters of [`is_ignorable`]; not copied when it has none.
pub fn without_ignorable(text: &str) -> Cow<'_, str> {
    if has_ignorable(text) {
        Cow::Owned(text.chars().filter(|&c| !is_ignorable(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// `text` without escape sequences, control characters (newline and tab stay) and hidden
/// format characters ([`is_hidden_format`]), and how many characters went.
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
            c if c.is_control() || is_hidden_format(c) => removed += 1,
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

    #[test]
    fn hidden_format_characters_go_visible_ones_stay() {
        let cases = [
            ("zero\u{200b}width", "zerowidth"),
            ("join\u{200c}ers\u{200d}", "joiners"),
            (
                "marks \u{200e}ltr\u{200f}rtl \u{61c}alm",
                "marks ltrrtl alm",
            ),
            (
                "\u{202e}override\u{202c} \u{2067}isolate\u{2069}",
                "override isolate",
            ),
            ("word\u{2060}joiner\u{2062}times", "wordjoinertimes"),
            (
                "\u{feff}bom \u{ad}soft \u{180e}mongolian",
                "bom soft mongolian",
            ),
            ("tags\u{e0001}\u{e0041}\u{e0042}\u{e007f}", "tags"),
            ("annotation\u{fff9}ruby\u{fffb}", "annotationruby"),
        ];
        for (input, expected) in cases {
            let (out, removed) = clean(input);
            assert_eq!(out, expected, "{input:?}");
            assert!(removed > 0, "{input:?}");
            assert!(needs_cleaning(input), "{input:?}");
        }
        // Visible signs, variation selectors and combining marks are text.
        for kept in [
            "\u{600}\u{661}\u{662}",
            "\u{2764}\u{fe0f}",
            "e\u{301}",
            "“quoted” — ✓ 東京 👍",
        ] {
            let (out, removed) = clean(kept);
            assert!(matches!(out, Cow::Borrowed(_)), "{kept:?}");
            assert_eq!(removed, 0);
        }
    }

    /// The hand-written tables against Unicode's own (as the `regex` crate has them), for every
    /// code point, and the byte scans against the tables.
    #[test]
    fn the_character_tables_match_unicode() {
        let format = regex::Regex::new(r"^\p{Cf}$").unwrap();
        let ignorable = regex::Regex::new(r"^[\p{Cf}\p{Default_Ignorable_Code_Point}]$").unwrap();
        let visible = regex::Regex::new(r"^\p{Prepended_Concatenation_Mark}$").unwrap();
        let mut buffer = [0; 4];
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let text = c.encode_utf8(&mut buffer);
            assert_eq!(
                is_hidden_format(c),
                format.is_match(text) && !visible.is_match(text),
                "U+{:04X}",
                c as u32
            );
            assert_eq!(
                is_ignorable(c),
                ignorable.is_match(text),
                "U+{:04X}",
                c as u32
            );
            let cleaned = (c.is_control() && c != '\n' && c != '\t') || is_hidden_format(c);
            assert_eq!(needs_cleaning(text), cleaned, "U+{:04X}", c as u32);
            assert_eq!(has_ignorable(text), is_ignorable(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn ignorable_characters_go_only_when_asked() {
        assert_eq!(
            without_ignorable("a\u{200b}b\u{fe0f}c\u{34f}d\u{3164}e"),
            "abcde"
        );
        assert!(matches!(
            without_ignorable("plain ✓ 東京"),
            Cow::Borrowed(_)
        ));
    }
}
