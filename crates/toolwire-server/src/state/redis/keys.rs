//! The request-state key ring kept in Redis (`PREFIX request-state:keys`, JSON
//! `{"keys": [{"id", "key"}]}`, newest first), so that every instance seals with the same key
//! and opens what any of them sealed. The first instance to start creates it (`SET NX`: of N
//! instances starting together, one ring wins and all read it); each instance reads it at
//! start and again every [`REFRESH`], and at once (at most once a second) when a state names a
//! key it does not know yet, so a rotation reaches every instance. A rotation keeps the
//! retired keys (four) open, so rounds in flight still complete.

use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use redis::Script;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{Shared, decode};
use crate::state::StoreError;
use crate::state::request_state::{RETIRED_KEYS, RequestStateKeys};

/// How often an instance reads the ring again.
pub(crate) const REFRESH: Duration = Duration::from_secs(30);

/// The least time between two reads of the ring caused by a state naming an unknown key.
const FORCED_REFRESH: Duration = Duration::from_secs(1);

/// Puts a new key first (creating the ring if there is none) and keeps at most `ARGV[3]`
/// keys; the new key's id. `ARGV` new key, a new ring if there is none, most keys.
static ROTATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local text = redis.call('GET', KEYS[1])
if not text then redis.call('SET', KEYS[1], ARGV[2]) return 0 end
local ring = cjson.decode(text)
local id = (ring.keys[1].id + 1) % 256
table.insert(ring.keys, 1, {id = id, key = ARGV[1]})
while #ring.keys > tonumber(ARGV[3]) do table.remove(ring.keys) end
redis.call('SET', KEYS[1], cjson.encode(ring))
return id",
    )
});

#[derive(Serialize, Deserialize)]
struct Ring {
    keys: Vec<RingKey>,
}

#[derive(Serialize, Deserialize)]
struct RingKey {
    id: u8,
    key: String,
}

impl Ring {
    fn new(id: u8) -> Self {
        Ring {
            keys: vec![RingKey {
                id,
                key: URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()),
            }],
        }
    }

    fn text(&self) -> String {
        serde_json::to_string(self).expect("a ring serializes")
    }

    fn keys(&self) -> Result<RequestStateKeys, StoreError> {
        let bad = || StoreError::corrupt(BadRing);
        let mut keys = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            let bytes = URL_SAFE_NO_PAD.decode(&k.key).map_err(|_| bad())?;
            keys.push((k.id, <[u8; 32]>::try_from(bytes).map_err(|_| bad())?));
        }
        RequestStateKeys::from_ring(&keys).ok_or_else(bad)
    }
}

/// Whether a second has passed since `last` (then it is now).
fn due(last: &Mutex<Option<Instant>>) -> bool {
    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
    if last.is_some_and(|at| at.elapsed() < FORCED_REFRESH) {
        return false;
    }
    *last = Some(Instant::now());
    true
}

#[derive(Debug, thiserror::Error)]
#[error("the request-state key ring holds no usable key")]
struct BadRing;

/// The ring as this instance last read it.
struct Loaded {
    keys: RequestStateKeys,
    /// Its text, written back if the store lost it (a Redis restart without persistence).
    text: String,
}

/// The key ring of every instance sharing one store.
pub(crate) struct SharedKeyRing {
    redis: Shared,
    loaded: ArcSwapOption<Loaded>,
    last_forced: Mutex<Option<Instant>>,
    /// When a call last tried to read a ring never read, so that while the store is away
    /// only one call a second waits for it.
    last_first_read: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for SharedKeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKeyRing").finish_non_exhaustive()
    }
}

impl SharedKeyRing {
    pub(crate) fn new(redis: Shared) -> Arc<Self> {
        Arc::new(SharedKeyRing {
            redis,
            loaded: ArcSwapOption::empty(),
            last_forced: Mutex::new(None),
            last_first_read: Mutex::new(None),
        })
    }

    /// The ring as last read, if it has been.
    pub(crate) fn current(&self) -> Option<RequestStateKeys> {
        self.loaded.load().as_ref().map(|l| l.keys.clone())
    }

    /// The ring, read from the store if it never was.
    pub(crate) async fn keys(&self) -> Result<RequestStateKeys, StoreError> {
        match self.current() {
            Some(keys) => Ok(keys),
            None => self.refresh().await,
        }
    }

    /// Reads the ring if it never was, unless a call tried less than a second ago (a call
    /// that may have to seal waits for it; while the store is away, one a second does).
    pub(crate) async fn ready(&self) {
        if self.loaded.load().is_none() && due(&self.last_first_read) {
            let _ = self.refresh().await;
        }
    }

    /// Reads the ring again because a state named a key this instance does not know, unless
    /// that was done less than a second ago; the ring to try again with, if read.
    pub(crate) async fn refresh_for_unknown_key(&self) -> Option<RequestStateKeys> {
        if !due(&self.last_forced) {
            return None;
        }
        self.refresh().await.ok()
    }

    /// Reads the ring from the store, creating it (or writing back the one last read, if the
    /// store lost it) when there is none.
    pub(crate) async fn refresh(&self) -> Result<RequestStateKeys, StoreError> {
        let key = self.redis.name("request-state:keys");
        let mut text: Option<String> = self.redis.query(redis::cmd("GET").arg(&key)).await?;
        if text.is_none() {
            let ours = match self.loaded.load().as_ref() {
                Some(loaded) => loaded.text.clone(),
                None => Ring::new(0).text(),
            };
            let mut create = redis::cmd("SET");
            create.arg(&key).arg(ours).arg("NX");
            let _: Option<String> = self.redis.query(&create).await?;
            text = self.redis.query(redis::cmd("GET").arg(&key)).await?;
        }
        let text = text.ok_or_else(|| StoreError::corrupt(BadRing))?;
        let keys = decode::<Ring>("request-state key ring", &text)?.keys()?;
        self.loaded.store(Some(Arc::new(Loaded {
            keys: keys.clone(),
            text,
        })));
        Ok(keys)
    }

    /// Puts a new random key first in the store's ring; its id. Every instance seals with it
    /// once it has read the ring again (within [`REFRESH`]), and opens states sealed with it
    /// at once.
    pub(crate) async fn rotate(&self) -> Result<u8, StoreError> {
        let new_key = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let mut call = ROTATE.key(self.redis.name("request-state:keys"));
        call.arg(new_key)
            .arg(Ring::new(0).text())
            .arg(RETIRED_KEYS + 1);
        let id: u8 = self.redis.invoke(&call).await?;
        self.refresh().await?;
        Ok(id)
    }

    /// Reads the ring at once and then every [`REFRESH`] until `stop` or until the ring is
    /// dropped; a read that fails keeps the ring last read (and is logged).
    pub(crate) fn keep_fresh(ring: &Arc<Self>, stop: CancellationToken) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ring: Weak<Self> = Arc::downgrade(ring);
        runtime.spawn(async move {
            loop {
                let Some(shared) = ring.upgrade() else { return };
                if let Err(error) = shared.refresh().await {
                    tracing::warn!(%error, "the request-state key ring could not be read; keeping the last one read");
                }
                drop(shared);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(REFRESH) => {}
                }
            }
        });
    }
}
