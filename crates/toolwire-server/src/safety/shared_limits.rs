//! Tool rate limits shared by every instance of a shared store (T-15): one quota per caller ×
//! tool across all of them, kept in the store as a GCRA bucket taken from in one server-side
//! step, rather than one quota per instance.
//!
//! Two tiers, and the exact rule between them:
//! - **Refusals remembered here.** When the store refuses a caller × tool, saying the call
//!   would fit in `W`, this instance refuses the same caller × tool's calls for `W` (from
//!   when it asked) without asking the store again. The store would refuse them too: a GCRA
//!   bucket's arrival time only moves forward, so a refusal holds at least until the wait it
//!   gave has passed, and other instances' calls can only lengthen it. This saves every round
//!   trip of a caller over its quota — the one that floods — and never refuses a call the
//!   store would accept. The in-process token bucket cannot serve as a first tier: it counts a
//!   call when it checks it, so a call it let through and the store refused would leave it
//!   stricter than the shared quota.
//! - **The in-process bucket while the store is away.** A call the store cannot answer is
//!   judged by this instance's own bucket for the tool (the limit of a server without a
//!   shared store), and the store is not asked again for a second: during an outage each
//!   instance enforces the quota on its own, so a caller may get up to N times its quota
//!   across N instances, and no call waits for the store's timeout more than once a second.
//!   A warning is logged once per outage.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sha2::{Digest as _, Sha256};

use crate::safety::limits::{CALLER_BUCKETS, CallerBucket, ClientId, RateLimit, ToolLimit};
use crate::state::StoreError;

/// Buckets kept in a shared store, one per caller × tool.
pub(crate) trait SharedQuota: Send + Sync + 'static {
    /// Takes `cost` calls from `bucket` of `limit`: `None` if taken, else how long until
    /// they would fit (nothing taken).
    fn take<'a>(
        &'a self,
        bucket: &'a str,
        limit: RateLimit,
        cost: u32,
    ) -> BoxFuture<'a, Result<Option<Duration>, StoreError>>;
}

/// How long the store is left alone after it failed to answer.
const RETRY_AFTER_OUTAGE: Duration = Duration::from_secs(1);

/// The shared limits of one server.
pub(crate) struct SharedLimits {
    store: Box<dyn SharedQuota>,
    /// Refusals the store gave, by caller × tool digest: until when it would refuse again.
    refused: Mutex<HashMap<[u8; 16], Instant>>,
    /// While the store is away: when to ask it again.
    away_until: Mutex<Option<Instant>>,
    #[cfg(feature = "redis")]
    outage: crate::state::redis::Outage,
}

impl SharedLimits {
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn new(store: Box<dyn SharedQuota>) -> Self {
        SharedLimits {
            store,
            refused: Mutex::new(HashMap::new()),
            away_until: Mutex::new(None),
            #[cfg(feature = "redis")]
            outage: crate::state::redis::Outage::new(
                "tool rate limits",
                "each instance enforces every quota on its own",
            ),
        }
    }

    /// Takes a call of `tool` from the caller's shared quota: how long until it would fit
    /// if the caller is over it.
    pub(crate) async fn check(
        &self,
        tool: &str,
        limit: &ToolLimit,
        principal: Option<&str>,
        client: Option<&ClientId>,
    ) -> Option<Duration> {
        let local = || {
            let caller = CallerBucket::of(principal, client);
            limit.limiter.check(caller, limit.cost).err()
        };
        let now = Instant::now();
        if lock(&self.away_until).is_some_and(|until| now < until) {
            return local();
        }
        let digest = caller_digest(tool, principal, client);
        if let Some(until) = lock(&self.refused).get(&digest).copied() {
            if now < until {
                return Some(until - now);
            }
        }
        let bucket = toolwire_protocol::hex::encode(&digest);
        match self
            .store
            .take(&bucket, limit.limiter.limit(), limit.cost)
            .await
        {
            Ok(wait) => {
                self.back();
                if let Some(wait) = wait {
                    self.remember(digest, now + wait, now);
                }
                wait
            }
            Err(error) => {
                self.away(&error, now);
                local()
            }
        }
    }

    fn remember(&self, digest: [u8; 16], until: Instant, now: Instant) {
        let mut refused = lock(&self.refused);
        if refused.len() >= CALLER_BUCKETS as usize {
            // Forgetting a refusal costs a round trip, never a wrong answer.
            refused.retain(|_, until| *until > now);
            if refused.len() >= CALLER_BUCKETS as usize {
                refused.clear();
            }
        }
        refused.insert(digest, until);
    }

    fn away(&self, error: &StoreError, now: Instant) {
        *lock(&self.away_until) = Some(now + RETRY_AFTER_OUTAGE);
        #[cfg(feature = "redis")]
        self.outage.failed(error);
        #[cfg(not(feature = "redis"))]
        tracing::warn!(%error, "tool rate limits: the store is unavailable");
    }

    fn back(&self) {
        *lock(&self.away_until) = None;
        #[cfg(feature = "redis")]
        self.outage.recovered();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Who a shared quota counts against, the same on every instance: a digest of the tool and
/// the caller (its principal, else its client as [`CallerBucket`] reads it), so that the
/// store holds no principal or address in the clear.
pub(crate) fn caller_digest(
    tool: &str,
    principal: Option<&str>,
    client: Option<&ClientId>,
) -> [u8; 16] {
    let mut hash = Sha256::new();
    hash.update(b"toolwire rate limit\0");
    hash.update(tool.as_bytes());
    hash.update([0]);
    match (principal, client) {
        (Some(principal), _) => {
            hash.update([0]);
            hash.update(principal.as_bytes());
        }
        (None, Some(ClientId::Address(address))) => {
            hash.update([1]);
            hash.update(crate::safety::limits::network_of(*address).to_string());
        }
        (None, None) => hash.update([2]),
        (None, Some(ClientId::Obfuscated(id))) => {
            hash.update([3]);
            hash.update(id.as_bytes());
        }
        (None, Some(ClientId::Unknown)) => hash.update([4]),
    }
    let mut digest = [0; 16];
    digest.copy_from_slice(&hash.finalize()[..16]);
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_digest_names_the_tool_and_the_caller_and_nothing_else() {
        let address = |text: &str| ClientId::Address(text.parse().unwrap());
        let alice = caller_digest("t", Some("alice"), None);
        assert_eq!(
            alice,
            caller_digest("t", Some("alice"), Some(&address("::1")))
        );
        assert_ne!(alice, caller_digest("u", Some("alice"), None));
        assert_ne!(alice, caller_digest("t", Some("bob"), None));
        assert_eq!(
            caller_digest("t", None, Some(&address("2001:db8::1"))),
            caller_digest("t", None, Some(&address("2001:db8::ffff"))),
            "an IPv6 /64 is one client"
        );
        assert_ne!(
            caller_digest("t", None, None),
            caller_digest("t", None, Some(&ClientId::Unknown))
        );
    }
}
