//! Pagination cursors: opaque to clients, tamper-evident, and stable across list changes.
//!
//! A cursor names the position after the last item of a page: its offset and the item's name,
//! sealed with HMAC-SHA256 (truncated to 128 bits) under the server's key. Resuming finds the
//! named item, so inserting or removing earlier items neither repeats nor skips entries (K-16).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

const TAG_LEN: usize = 16;

/// Which list a cursor belongs to, so a cursor of one list is refused by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum ListKind {
    Tools = 1,
    Prompts = 2,
    Resources = 3,
    Templates = 4,
}

impl ListKind {
    /// The member of the list result that holds the page's items.
    pub(crate) fn field(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }
}

/// Where a page ends: the offset after it and the name of its last item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) offset: usize,
    pub(crate) last: String,
}

/// Seals and opens cursors under one key.
#[derive(Clone)]
pub(crate) struct CursorCodec {
    key: [u8; 32],
}

impl CursorCodec {
    pub(crate) fn new(key: [u8; 32]) -> Self {
        CursorCodec { key }
    }

    fn tag(&self, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(payload);
        mac
    }

    pub(crate) fn encode(&self, kind: ListKind, position: &Position) -> String {
        let mut bytes = Vec::with_capacity(5 + position.last.len() + TAG_LEN);
        bytes.push(kind as u8);
        bytes.extend_from_slice(&(position.offset as u32).to_be_bytes());
        bytes.extend_from_slice(position.last.as_bytes());
        let tag = self.tag(&bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag[..TAG_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Opens a cursor; `None` if it was not made by this codec for this list.
    pub(crate) fn decode(&self, kind: ListKind, cursor: &str) -> Option<Position> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() < 5 + TAG_LEN {
            return None;
        }
        let (payload, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        self.tag(payload).verify_truncated_left(tag).ok()?;
        if payload[0] != kind as u8 {
            return None;
        }
        let offset = u32::from_be_bytes(payload[1..5].try_into().ok()?) as usize;
        let last = String::from_utf8(payload[5..].to_vec()).ok()?;
        Some(Position { offset, last })
    }
}

/// Where the next page starts in `names` (the current list), given a cursor position: right
/// after the named item if it is still listed, otherwise at the recorded offset.
pub(crate) fn resume_index<'a>(
    position: &Position,
    len: usize,
    name_at: impl Fn(usize) -> &'a str,
    index_of: impl Fn(&str) -> Option<usize>,
) -> usize {
    let at = position.offset;
    if at >= 1 && at <= len && name_at(at - 1) == position.last {
        return at;
    }
    match index_of(&position.last) {
        Some(i) => i + 1,
        None => at.min(len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> CursorCodec {
        CursorCodec::new([7; 32])
    }

    #[test]
    fn round_trips() {
        for (offset, last) in [(1, "a"), (50, "tool.with-dots_1"), (100_000, "é")] {
            let p = Position {
                offset,
                last: last.into(),
            };
            let c = codec().encode(ListKind::Tools, &p);
            assert_eq!(codec().decode(ListKind::Tools, &c), Some(p));
        }
    }

    #[test]
    fn refuses_forged_and_foreign_cursors() {
        let good = codec().encode(
            ListKind::Tools,
            &Position {
                offset: 3,
                last: "c".into(),
            },
        );
        let mut flipped = URL_SAFE_NO_PAD.decode(&good).unwrap();
        flipped[2] ^= 1;
        let other_key = CursorCodec::new([8; 32]).encode(
            ListKind::Tools,
            &Position {
                offset: 3,
                last: "c".into(),
            },
        );
        for bad in [
            "",
            "x",
            "!!!",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            &URL_SAFE_NO_PAD.encode(flipped),
            &other_key,
            &good[1..],
        ] {
            assert_eq!(codec().decode(ListKind::Tools, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn resumes_after_the_named_item() {
        let names = ["a", "b", "c", "d", "e"];
        let at = |p: Position| {
            resume_index(
                &p,
                names.len(),
                |i| names[i],
                |n| names.iter().position(|x| *x == n),
            )
        };
        // Unchanged list: continue at the offset.
        assert_eq!(
            at(Position {
                offset: 2,
                last: "b".into()
            }),
            2
        );
        // An item before the page end was removed: "b" is now at 1... list is a,c,d,e in effect.
        assert_eq!(
            at(Position {
                offset: 3,
                last: "b".into()
            }),
            2
        );
        // The last item itself was removed: fall back to the offset.
        assert_eq!(
            at(Position {
                offset: 2,
                last: "zz".into()
            }),
            2
        );
        assert_eq!(
            at(Position {
                offset: 99,
                last: "zz".into()
            }),
            5
        );
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any position round-trips through its cursor, for its own list only, and any change
        /// to the cursor's bytes is refused.
        #[test]
        fn cursors_round_trip_and_detect_tampering(
            offset in 0usize..=u32::MAX as usize,
            last in any::<String>(),
            flip in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let codec = CursorCodec::new([3; 32]);
            let position = Position { offset, last };
            let cursor = codec.encode(ListKind::Tools, &position);
            prop_assert_eq!(codec.decode(ListKind::Tools, &cursor), Some(position.clone()));
            prop_assert_eq!(codec.decode(ListKind::Templates, &cursor), None);
            let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
            let at = flip.index(bytes.len());
            bytes[at] ^= 1 << bit;
            prop_assert_eq!(codec.decode(ListKind::Tools, &URL_SAFE_NO_PAD.encode(&bytes)), None);
            prop_assert_eq!(CursorCodec::new([4; 32]).decode(ListKind::Tools, &cursor), None);
        }
    }
}
