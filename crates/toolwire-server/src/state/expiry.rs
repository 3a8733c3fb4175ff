//! A map whose entries expire, for the in-memory stores (replay guard, task records): a hash map
//! and a min-heap of expiry times, so that forgetting what has expired costs O(log n) per entry
//! forgotten instead of a sweep of everything held on every call (which made the stores
//! quadratic in what they hold).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

/// Entries with an expiry in milliseconds (`u64::MAX` = never). An entry is live while its
/// expiry is after `now`.
#[derive(Debug)]
pub(crate) struct ExpiringMap<K, V> {
    entries: HashMap<K, (u64, V)>,
    /// Every expiry set, earliest first. An item whose key has since been given another expiry
    /// (or removed) is stale and skipped; [`ExpiringMap::compact`] keeps their number bounded.
    queue: BinaryHeap<Reverse<(u64, K)>>,
}

impl<K, V> Default for ExpiringMap<K, V> {
    fn default() -> Self {
        ExpiringMap {
            entries: HashMap::new(),
            queue: BinaryHeap::new(),
        }
    }
}

impl<K: Hash + Eq + Ord + Clone, V> ExpiringMap<K, V> {
    /// Forgets every entry that expired at or before `now`.
    pub(crate) fn prune(&mut self, now: u64) {
        while let Some(Reverse((at, _))) = self.queue.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, key))) = self.queue.pop() else {
                break;
            };
            if self
                .entries
                .get(&key)
                .is_some_and(|(expiry, _)| *expiry == at)
            {
                self.entries.remove(&key);
            }
        }
    }

    /// Adds or replaces an entry.
    pub(crate) fn insert(&mut self, key: K, expires: u64, value: V) {
        self.queue.push(Reverse((expires, key.clone())));
        self.entries.insert(key, (expires, value));
        self.compact();
    }

    /// The entry, if it is live at `now`.
    pub(crate) fn get(&self, key: &K, now: u64) -> Option<&V> {
        match self.entries.get(key) {
            Some((expiry, value)) if *expiry > now => Some(value),
            _ => None,
        }
    }

    /// Changes an entry (live or not yet pruned) in place; `change` returns its new expiry.
    /// False if there is no such entry.
    pub(crate) fn update(&mut self, key: &K, change: impl FnOnce(&mut V) -> u64) -> bool {
        let Some((expiry, value)) = self.entries.get_mut(key) else {
            return false;
        };
        let new_expiry = change(value);
        if new_expiry != *expiry {
            *expiry = new_expiry;
            self.queue.push(Reverse((new_expiry, key.clone())));
            self.compact();
        }
        true
    }

    /// How many entries are held (expired ones included until pruned).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Forgets an entry; false if there was none. Its queue item turns stale.
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        let removed = self.entries.remove(key).is_some();
        self.compact();
        removed
    }

    /// Rebuilds the queue when stale items outnumber live entries, so that replacing entries
    /// over and over cannot grow it; amortized O(1) per insert.
    fn compact(&mut self) {
        if self.queue.len() > 2 * self.entries.len() + 64 {
            self.queue = self
                .entries
                .iter()
                .map(|(key, (expiry, _))| Reverse((*expiry, key.clone())))
                .collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_in_order_and_replacements_count() {
        let mut map = ExpiringMap::default();
        map.insert("a", 10, 1);
        map.insert("b", 20, 2);
        map.insert("c", u64::MAX, 3);
        map.insert("a", 30, 4); // replaced: the queue's (10, "a") is stale
        assert_eq!(map.get(&"a", 15), Some(&4));
        map.prune(20);
        assert_eq!((map.get(&"a", 20), map.get(&"b", 20)), (Some(&4), None));
        assert_eq!(map.len(), 2, "b is forgotten, a (renewed) is not");
        assert!(map.update(&"a", |v| {
            *v = 5;
            25
        }));
        map.prune(26);
        assert_eq!((map.len(), map.get(&"c", u64::MAX - 1)), (1, Some(&3)));
        assert!(!map.update(&"a", |_| 0), "a expired at 25");
    }

    #[test]
    fn the_queue_stays_bounded_when_one_key_is_renewed_forever() {
        let mut map = ExpiringMap::default();
        for i in 0..10_000u64 {
            map.insert(7u8, 1_000_000 + i, ());
        }
        assert_eq!(map.len(), 1);
        assert!(map.queue.len() <= 2 * map.len() + 65, "{}", map.queue.len());
    }

    #[test]
    fn pruning_visits_only_what_expired() {
        let mut map = ExpiringMap::default();
        for i in 0..100_000u64 {
            map.insert(i, 1_000 + i, ());
        }
        map.prune(1_009);
        assert_eq!(map.len(), 100_000 - 10);
        assert_eq!(
            map.queue.len(),
            100_000 - 10,
            "ten popped, nothing else touched"
        );
    }
}
