//! The `_meta` a connection sent last, kept read. A client sends the same `_meta` text with
//! nearly every request (its protocol version, capabilities and name); reading and checking it
//! took 4,500 of an HTTP echo request's 50,700 instructions under callgrind, and dropping it
//! 570 more. A connection keeps the last text it read with the [`RequestMeta`] it gave; a
//! request whose `_meta` is the same text, byte for byte, shares that value.
//!
//! It is still the request's own `_meta` (B-11): nothing is taken from the connection that the
//! request did not send in exactly those bytes. A text longer than [`KEPT_UP_TO`] is read each
//! time and not kept, so that an idle connection never holds more than a small `_meta`.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::value::RawValue;
use toolwire_protocol::{MetaError, ReadMeta, RequestMeta};

/// The longest `_meta` text a connection keeps (a client's usual `_meta` is about 150 bytes).
pub(crate) const KEPT_UP_TO: usize = 1024;

/// One connection's last `_meta`: its text and what it read as.
#[derive(Debug, Default)]
pub(crate) struct LastMeta(Mutex<Option<Kept>>);

#[derive(Debug)]
struct Kept {
    text: Box<str>,
    meta: Arc<RequestMeta>,
}

impl LastMeta {
    /// Reads and checks `raw` (a request's `_meta` member) as [`RequestMeta::try_from`] does,
    /// sharing the value read last when `raw` is the same text; `None` keeps nothing.
    pub(crate) fn read(
        last: Option<&LastMeta>,
        raw: &RawValue,
    ) -> Result<Arc<RequestMeta>, Unreadable> {
        let text = raw.get();
        let Some(last) = last.filter(|_| text.len() <= KEPT_UP_TO) else {
            return read(text).map(Arc::new);
        };
        if let Some(kept) = &*last.lock() {
            if *kept.text == *text {
                return Ok(kept.meta.clone());
            }
        }
        let meta = Arc::new(read(text)?);
        *last.lock() = Some(Kept {
            text: text.into(),
            meta: meta.clone(),
        });
        Ok(meta)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Kept>> {
        // Nothing panics while the lock is held; a poisoned one still holds a whole value.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a `_meta` text did not read as a request's `_meta`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unreadable {
    /// Not an object of the right shape.
    #[error("_meta does not read: {0}")]
    Json(#[from] serde_json::Error),
    /// A required key is missing.
    #[error(transparent)]
    Meta(#[from] MetaError),
}

fn read(text: &str) -> Result<RequestMeta, Unreadable> {
    let read: ReadMeta = serde_json::from_str(text)?;
    Ok(RequestMeta::try_from(read)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;

    #[test]
    fn the_same_text_shares_the_value_read_last() {
        let last = LastMeta::default();
        let first = LastMeta::read(Some(&last), &raw(META)).unwrap();
        let second = LastMeta::read(Some(&last), &raw(META)).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.client_info.as_ref().unwrap().name, "c");
    }

    #[test]
    fn another_text_is_read_and_kept_in_its_place() {
        let last = LastMeta::default();
        let first = LastMeta::read(Some(&last), &raw(META)).unwrap();
        // The same members with a space more: another text, read again.
        let spaced = META.replacen(',', ", ", 1);
        let other = LastMeta::read(Some(&last), &raw(&spaced)).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*first, *other);
        let with_token = META.replacen('{', r#"{"progressToken":7,"#, 1);
        let token = LastMeta::read(Some(&last), &raw(&with_token)).unwrap();
        assert!(token.progress_token.is_some());
        // The last one read is the one kept.
        let again = LastMeta::read(Some(&last), &raw(&with_token)).unwrap();
        assert!(Arc::ptr_eq(&token, &again));
        assert!(!Arc::ptr_eq(&first, &again));
    }

    #[test]
    fn what_does_not_read_is_refused_every_time_and_not_kept() {
        let last = LastMeta::default();
        let missing = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        for _ in 0..2 {
            assert!(matches!(
                LastMeta::read(Some(&last), &raw(missing)),
                Err(Unreadable::Meta(MetaError::MissingClientCapabilities))
            ));
            assert!(matches!(
                LastMeta::read(Some(&last), &raw("[1]")),
                Err(Unreadable::Json(_))
            ));
        }
        assert!(last.lock().is_none());
    }

    #[test]
    fn a_long_text_is_read_and_not_kept() {
        let last = LastMeta::default();
        let padding = "x".repeat(KEPT_UP_TO);
        let long = META.replacen('{', &format!(r#"{{"vendor/pad":"{padding}","#), 1);
        let first = LastMeta::read(Some(&last), &raw(&long)).unwrap();
        assert_eq!(first.extra["vendor/pad"], padding.as_str());
        assert!(last.lock().is_none());
        // Without a connection nothing is kept either.
        LastMeta::read(None, &raw(META)).unwrap();
        assert!(last.lock().is_none());
    }
}
