//! Verified tokens by the SHA-256 of their text: a hit is one hash and one `Arc` clone, so a
//! busy client does not pay for a signature check or an introspection call per request. Bounded
//! (oldest evicted first) and expiry-aware (an entry is kept no longer than it may be trusted).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::VerifiedToken;

/// The SHA-256 of a token: the cache never holds a usable credential.
pub(crate) type Digest32 = [u8; 32];

pub(crate) fn digest(token: &str) -> Digest32 {
    Sha256::digest(token.as_bytes()).into()
}

struct Entry {
    token: Arc<VerifiedToken>,
    /// Unix seconds after which the entry is not used.
    until: u64,
}

#[derive(Default)]
struct Entries {
    by_digest: HashMap<Digest32, Entry>,
    order: VecDeque<Digest32>,
}

/// A bounded map of verified tokens.
pub(crate) struct TokenCache {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl TokenCache {
    pub(crate) fn new(capacity: usize) -> Self {
        TokenCache {
            entries: Mutex::new(Entries::default()),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token, unless unknown or past its `until`.
    pub(crate) fn get(&self, digest: &Digest32, now: u64) -> Option<Arc<VerifiedToken>> {
        let mut entries = self.lock();
        let entry = entries.by_digest.get(digest)?;
        if now > entry.until {
            entries.by_digest.remove(digest);
            return None;
        }
        Some(entry.token.clone())
    }

    /// Remembers `token` until `until` (Unix seconds).
    pub(crate) fn insert(&self, digest: Digest32, token: Arc<VerifiedToken>, until: u64) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries
            .by_digest
            .insert(digest, Entry { token, until })
            .is_none()
        {
            entries.order.push_back(digest);
        }
        // `order` may name entries already gone (expired); it is trimmed too, so both stay
        // within twice the capacity.
        while entries.by_digest.len() > self.capacity || entries.order.len() > 2 * self.capacity {
            match entries.order.pop_front() {
                Some(oldest) => {
                    entries.by_digest.remove(&oldest);
                }
                None => break,
            }
        }
    }

    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        let entries = self.lock();
        (entries.by_digest.len(), entries.order.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_and_forgets_expired_tokens() {
        let token = || Arc::new(VerifiedToken::new("i", "s", Vec::new()));
        let cache = TokenCache::new(2);
        cache.insert([1; 32], token(), 100);
        cache.insert([2; 32], token(), 160);
        cache.insert([3; 32], token(), 100);
        assert!(cache.get(&[1; 32], 0).is_none(), "the oldest went");
        assert!(cache.get(&[3; 32], 100).is_some());
        assert!(cache.get(&[3; 32], 101).is_none(), "expired");
        assert!(cache.get(&[2; 32], 130).is_some());
        let (entries, order) = cache.sizes();
        assert!(entries <= 2 && order <= 4);
    }

    #[test]
    fn a_zero_capacity_cache_keeps_nothing() {
        let cache = TokenCache::new(0);
        cache.insert(
            [1; 32],
            Arc::new(VerifiedToken::new("i", "s", Vec::new())),
            100,
        );
        assert!(cache.get(&[1; 32], 0).is_none());
    }
}
