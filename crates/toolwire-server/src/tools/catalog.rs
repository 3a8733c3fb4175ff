//! An ordered, keyed, read-mostly collection (tools, prompts, resources, templates): a lock-free
//! snapshot for readers, swapped whole by writers; plus the pagination every list shares.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde_json::value::RawValue;
use toolwire_protocol::ErrorObject;

use crate::request::cursor::{CursorCodec, ListKind, Position, resume_index};

/// An item of a catalog: its key and its definition serialized once, for list pages.
pub(crate) trait Entry: Send + Sync + 'static {
    fn key(&self) -> &str;
    fn listed(&self) -> &RawValue;
    /// The OAuth scopes a caller needs to see and use it.
    fn scopes(&self) -> &[String] {
        &[]
    }
}

/// Whether a caller with `granted` scopes (`None`: no OAuth on this transport) may see and use
/// something that needs `needed` (T-03, T-21).
pub(crate) fn permits(granted: Option<&[String]>, needed: &[String]) -> bool {
    granted.is_none_or(|granted| needed.iter().all(|s| granted.contains(s)))
}

/// One consistent view: registration order plus a key index.
pub(crate) struct Snapshot<T> {
    pub(crate) items: Vec<Arc<T>>,
    index: HashMap<String, usize>,
}

impl<T: Entry> Snapshot<T> {
    fn new(items: Vec<Arc<T>>) -> Self {
        let index = items
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key().to_owned(), i))
            .collect();
        Snapshot { items, index }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Arc<T>> {
        self.index.get(key).map(|&i| &self.items[i])
    }

    /// The items `keep` keeps, in the same order: one caller's view of the catalog.
    pub(crate) fn filtered(&self, keep: impl Fn(&T) -> bool) -> Snapshot<T> {
        Snapshot::new(self.items.iter().filter(|t| keep(t)).cloned().collect())
    }

    pub(crate) fn position(&self, key: &str) -> Option<usize> {
        self.index.get(key).copied()
    }

    /// One page from `cursor` (T-04, K-16): the items and the next page's cursor.
    pub(crate) fn page(
        &self,
        cursor: Option<&str>,
        kind: ListKind,
        size: usize,
        codec: &CursorCodec,
    ) -> Result<(&[Arc<T>], Option<String>), ErrorObject> {
        let start = match cursor {
            None => 0,
            Some(c) => {
                let position = codec
                    .decode(kind, c)
                    .ok_or_else(|| ErrorObject::invalid_params("Invalid cursor"))?;
                resume_index(
                    &position,
                    self.items.len(),
                    |i| self.items[i].key(),
                    |k| self.position(k),
                )
            }
        };
        let end = (start + size).min(self.items.len());
        let page = &self.items[start..end];
        let next = (end < self.items.len()).then(|| {
            let last = page.last().map_or(String::new(), |t| t.key().to_owned());
            codec.encode(kind, &Position { offset: end, last })
        });
        Ok((page, next))
    }
}

/// The catalog. Reads are a pointer load; writes are serialized by a mutex.
pub(crate) struct Catalog<T> {
    current: ArcSwap<Snapshot<T>>,
    write: Mutex<()>,
}

impl<T: Entry> Default for Catalog<T> {
    fn default() -> Self {
        Catalog {
            current: ArcSwap::from_pointee(Snapshot::new(Vec::new())),
            write: Mutex::new(()),
        }
    }
}

impl<T: Entry> Catalog<T> {
    pub(crate) fn snapshot(&self) -> Arc<Snapshot<T>> {
        self.current.load_full()
    }

    /// Adds items atomically; on a duplicate key nothing is added and that key is returned.
    pub(crate) fn add_all(&self, items: Vec<Arc<T>>) -> Result<(), String> {
        self.replace_all(&std::collections::HashSet::new(), items)
            .map(|_| ())
    }

    /// Removes the items with these keys at once; how many there were.
    pub(crate) fn remove_all(&self, keys: &std::collections::HashSet<&str>) -> usize {
        // Adding nothing cannot meet a duplicate.
        self.replace_all(keys, Vec::new()).unwrap_or(0)
    }

    /// Removes the items with `keys` and adds `items` in one step, so that a reader sees the
    /// catalog before or after, never between (an item replaced under its own key is never
    /// missing). On a duplicate key among the items and those left, nothing changes and that
    /// key is returned; otherwise how many were removed.
    pub(crate) fn replace_all(
        &self,
        keys: &std::collections::HashSet<&str>,
        items: Vec<Arc<T>>,
    ) -> Result<usize, String> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load();
        let mut added = std::collections::HashSet::new();
        for item in &items {
            let taken = current.get(item.key()).is_some() && !keys.contains(item.key());
            if taken || !added.insert(item.key()) {
                return Err(item.key().to_owned());
            }
        }
        let mut all: Vec<Arc<T>> = current
            .items
            .iter()
            .filter(|item| !keys.contains(item.key()))
            .cloned()
            .collect();
        let removed = current.items.len() - all.len();
        if removed > 0 || !items.is_empty() {
            all.extend(items);
            self.current.store(Arc::new(Snapshot::new(all)));
        }
        Ok(removed)
    }

    /// Removes an item; false if there was none with this key.
    pub(crate) fn remove(&self, key: &str) -> bool {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load();
        let Some(at) = current.position(key) else {
            return false;
        };
        let mut all = current.items.clone();
        all.remove(at);
        self.current.store(Arc::new(Snapshot::new(all)));
        true
    }
}

/// The error of a request for something the caller's scopes do not cover, when no transport
/// answered 403 first (T-21: rights are checked on every use, whatever the transport did).
pub(crate) fn insufficient_scope(kind: &str, name: &str, needed: &[String]) -> ErrorObject {
    ErrorObject::invalid_request(format!(
        "insufficient scope: {kind} {name} needs the scopes {}",
        needed.join(" ")
    ))
}
