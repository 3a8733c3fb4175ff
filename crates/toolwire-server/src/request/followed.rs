//! Which resources this server's own listeners follow: the union of the URIs honoured in the
//! `resourceSubscriptions` of its open listen streams (L-04) and of the `resources/subscribe`
//! of its legacy sessions that listen here (their stdio connection, or their GET stream over
//! HTTP). An embedder that relays changes from elsewhere (a gateway, from its upstreams) reads
//! it to follow only what someone follows.
//!
//! The set changes only when a stream opens or closes, or a legacy session subscribes or
//! unsubscribes: nothing of it is on the path of other requests. Each holder (a stream, a
//! session) keeps a [`Following`], whose URIs count towards the union until it is dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The resource URIs the listeners of one server instance follow, as it changes; from
/// [`Server::followed_resources`](crate::Server::followed_resources).
///
/// With several instances behind a shared store, each instance's set is its own listeners':
/// each follows, for its own listeners, what it relays. A listener that follows a resource
/// also follows those under it, so the set may hold a URI that names a container.
#[derive(Debug, Clone)]
pub struct FollowedResources {
    rx: watch::Receiver<Arc<BTreeSet<String>>>,
}

impl FollowedResources {
    /// The URIs followed now, and marks them seen for [`FollowedResources::changed`].
    pub fn current(&mut self) -> Arc<BTreeSet<String>> {
        self.rx.borrow_and_update().clone()
    }

    /// Waits until the set differs from the one last seen with
    /// [`FollowedResources::current`]; `false` once the server is gone (it never changes
    /// again).
    pub async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }
}

/// Every holder's URIs, counted, and the union as last published.
pub(crate) struct Followers {
    holders: Mutex<Holders>,
    tx: watch::Sender<Arc<BTreeSet<String>>>,
}

#[derive(Default)]
struct Holders {
    next: u64,
    held: HashMap<u64, BTreeSet<String>>,
    /// How many holders follow each URI.
    counts: BTreeMap<String, usize>,
}

impl Default for Followers {
    fn default() -> Self {
        Followers {
            holders: Mutex::default(),
            tx: watch::Sender::new(Arc::default()),
        }
    }
}

impl Followers {
    /// A view of the union that follows its changes.
    pub(crate) fn watch(&self) -> FollowedResources {
        FollowedResources {
            rx: self.tx.subscribe(),
        }
    }

    /// A new holder following `uris`, until it is dropped.
    pub(crate) fn hold(self: &Arc<Self>, uris: BTreeSet<String>) -> Following {
        let id = {
            let mut holders = self.lock();
            let id = holders.next;
            holders.next += 1;
            holders.held.insert(id, BTreeSet::new());
            id
        };
        let following = Following {
            followers: self.clone(),
            id,
        };
        following.set(uris);
        following
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Holders> {
        self.holders.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes holder `id` follow `uris` (none: `None`, the holder gone), and publishes the
    /// union when a URI entered or left it.
    fn set(&self, id: u64, uris: Option<BTreeSet<String>>) {
        let mut holders = self.lock();
        let before = match &uris {
            Some(uris) => match holders.held.get_mut(&id) {
                Some(held) if held == uris => return,
                Some(held) => std::mem::replace(held, uris.clone()),
                None => return,
            },
            None => holders.held.remove(&id).unwrap_or_default(),
        };
        let after = uris.unwrap_or_default();
        let mut moved = false;
        for gone in before.difference(&after) {
            if let Some(count) = holders.counts.get_mut(gone) {
                *count -= 1;
                if *count == 0 {
                    holders.counts.remove(gone);
                    moved = true;
                }
            }
        }
        for new in after.difference(&before) {
            let count = holders.counts.entry(new.clone()).or_default();
            *count += 1;
            moved |= *count == 1;
        }
        if moved {
            let union: BTreeSet<String> = holders.counts.keys().cloned().collect();
            self.tx.send_replace(Arc::new(union));
        }
    }
}

/// One holder's URIs in the union: a listen stream's, or a legacy session's. Dropping it takes
/// them out.
pub(crate) struct Following {
    followers: Arc<Followers>,
    id: u64,
}

impl Following {
    /// Follows `uris` from now on, in place of what this holder followed.
    pub(crate) fn set(&self, uris: BTreeSet<String>) {
        self.followers.set(self.id, Some(uris));
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.followers.set(self.id, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(uris: &[&str]) -> BTreeSet<String> {
        uris.iter().map(|u| (*u).to_owned()).collect()
    }

    #[tokio::test]
    async fn the_union_follows_holders_as_they_come_change_and_go() {
        let followers = Arc::new(Followers::default());
        let mut watch = followers.watch();
        assert!(watch.current().is_empty());
        let a = followers.hold(set(&["r:a", "r:b"]));
        assert!(watch.changed().await);
        assert_eq!(*watch.current(), set(&["r:a", "r:b"]));
        let b = followers.hold(set(&["r:b", "r:c"]));
        assert_eq!(*watch.current(), set(&["r:a", "r:b", "r:c"]));
        // A URI two holders follow stays while one of them does.
        drop(a);
        assert_eq!(*watch.current(), set(&["r:b", "r:c"]));
        b.set(set(&["r:c"]));
        assert_eq!(*watch.current(), set(&["r:c"]));
        drop(b);
        assert!(watch.current().is_empty());
    }

    #[tokio::test]
    async fn a_change_that_moves_no_uri_is_not_published() {
        let followers = Arc::new(Followers::default());
        let mut watch = followers.watch();
        let _a = followers.hold(set(&["r:a"]));
        watch.current();
        let b = followers.hold(set(&["r:a"]));
        b.set(set(&["r:a"]));
        drop(b);
        assert!(!watch.rx.has_changed().unwrap());
    }
}
