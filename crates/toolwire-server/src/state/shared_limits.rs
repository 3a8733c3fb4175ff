//! Tool rate limits shared by every instance of a shared store (T-15): one quota per caller ×
//! tool across all of them, kept in the store as a GCRA bucket taken from in one server-side
//! step, rather than one quota per instance.
//!
//! Three tiers, and the exact rule between them:
//! - **Leases.** An instance that asks the store for a caller × tool's call may take several
//!   calls at once and let the rest through here, without a round trip, for at most
//!   [`LEASE_LIFETIME`]. A lease starts at one call and doubles each time the caller spends a
//!   whole lease within its lifetime, up to 1/20 of the bucket (and at most
//!   [`LEASE_MOST_CALLS`] calls); it halves when one ends unspent. A caller calling now and
//!   then is therefore counted call by call, exactly, and so is every caller of a bucket under
//!   40 calls; only a caller calling faster than the leases live is counted in leases, with two
//!   bounded errors: a call may be let through up to [`LEASE_LIFETIME`] after the store
//!   counted it (at most the quota's rate × that lifetime more in any window), and calls left
//!   when a lease ends are lost (at most 1/20 of the bucket per instance, and only ever in the
//!   caller's disfavour). The in-process token bucket cannot serve as this tier: it would
//!   count a caller's calls per instance, not across them.
//! - **Refusals remembered here.** When the store refuses a caller × tool, saying the call
//!   would fit in `W`, this instance refuses the same caller × tool's calls for `W` (from
//!   when it asked) without asking the store again. The store would refuse them too: a GCRA
//!   bucket's arrival time only moves forward, so a refusal holds at least until the wait it
//!   gave has passed, and other instances' calls can only lengthen it. This saves every round
//!   trip of a caller over its quota — the one that floods — and never refuses a call the
//!   store would accept.
//! - **The in-process bucket while the store is away.** A call the store cannot answer is
//!   judged by this instance's own bucket for the tool (the limit of a server without a
//!   shared store), and the store is not asked again for a second: during an outage each
//!   instance enforces the quota on its own, so a caller may get up to N times its quota
//!   across N instances, and no call waits for the store's timeout more than once a second.
//!   Leases taken before the outage are still spent. A warning is logged once per outage.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sha2::{Digest as _, Sha256};

use crate::safety::limits::{CALLER_BUCKETS, CallerBucket, ClientId, RateLimit, ToolLimit};
use crate::state::StoreError;

/// How long tokens taken from the store ahead of their calls may be spent.
pub(crate) const LEASE_LIFETIME: Duration = Duration::from_millis(100);

/// The most calls one lease holds.
pub(crate) const LEASE_MOST_CALLS: u32 = 64;

/// What part of a bucket one lease may hold at most: 1/20, so that the calls a lease can lose
/// are within 5 % of the bucket per instance.
const LEASE_BUCKET_SHARE: u32 = 20;

/// What a store gave when asked for calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Take {
    /// This many calls were taken from the bucket (at least one).
    Taken(u32),
    /// Not one fits: how long until one would (nothing taken).
    Wait(Duration),
}

/// Buckets kept in a shared store, one per caller × tool.
pub(crate) trait SharedQuota: Send + Sync + 'static {
    /// Takes as many calls of `cost` tokens from `bucket` of `limit` as fit, up to `most`;
    /// if not one fits, says how long until one would, taking nothing.
    fn take<'a>(
        &'a self,
        bucket: &'a str,
        limit: RateLimit,
        cost: u32,
        most: u32,
    ) -> BoxFuture<'a, Result<Take, StoreError>>;
}

/// How long the store is left alone after it failed to answer.
const RETRY_AFTER_OUTAGE: Duration = Duration::from_secs(1);

/// Calls of one caller × tool taken from the store, to be spent here.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// Calls left.
    calls: u32,
    /// Until when they may be spent.
    until: Instant,
    /// How many calls the last lease asked for.
    size: u32,
}

impl Lease {
    /// How many calls to ask for next, at most `most`.
    fn next_size(lease: Option<&Lease>, most: u32, now: Instant) -> u32 {
        let size = match lease {
            None => 1,
            // Spent within its lifetime: the caller calls faster than leases live.
            Some(lease) if now < lease.until => lease.size.saturating_mul(2),
            // Ended unspent: the caller slowed down.
            Some(lease) if lease.calls > 0 => lease.size / 2,
            Some(lease) => lease.size,
        };
        size.clamp(1, most.max(1))
    }
}

/// The shared limits of one server.
pub(crate) struct SharedLimits {
    store: Box<dyn SharedQuota>,
    /// Leases, by caller × tool digest.
    leases: Mutex<HashMap<[u8; 16], Lease>>,
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
            leases: Mutex::new(HashMap::new()),
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
        let digest = caller_digest(tool, principal, client);
        let now = Instant::now();
        if self.spend_leased(&digest, now) {
            return None;
        }
        let local = || {
            let caller = CallerBucket::of(principal, client);
            limit.limiter.check(caller, limit.cost).err()
        };
        if lock(&self.away_until).is_some_and(|until| now < until) {
            return local();
        }
        if let Some(until) = lock(&self.refused).get(&digest).copied() {
            if now < until {
                return Some(until - now);
            }
        }
        let quota = limit.limiter.limit();
        let size = {
            let leases = lock(&self.leases);
            Lease::next_size(leases.get(&digest), lease_most(quota, limit.cost), now)
        };
        let bucket = toolwire_protocol::hex::encode(&digest);
        match self.store.take(&bucket, quota, limit.cost, size).await {
            Ok(Take::Taken(calls)) => {
                self.back();
                self.lease(digest, calls.saturating_sub(1), size, now);
                None
            }
            Ok(Take::Wait(wait)) => {
                self.back();
                self.remember(digest, now + wait, now);
                Some(wait)
            }
            Err(error) => {
                self.away(&error, now);
                local()
            }
        }
    }

    /// Spends a call of the caller's lease, if it holds one.
    fn spend_leased(&self, digest: &[u8; 16], now: Instant) -> bool {
        let mut leases = lock(&self.leases);
        match leases.get_mut(digest) {
            Some(lease) if now < lease.until && lease.calls > 0 => {
                lease.calls -= 1;
                true
            }
            _ => false,
        }
    }

    /// Keeps `calls` taken at `now` (asked for as a lease of `size`) for the caller.
    fn lease(&self, digest: [u8; 16], calls: u32, size: u32, now: Instant) {
        let mut leases = lock(&self.leases);
        if leases.len() >= CALLER_BUCKETS as usize && !leases.contains_key(&digest) {
            // Forgetting a lease loses its calls: the caller's disfavour, never its favour.
            leases.retain(|_, lease| lease.until > now);
            if leases.len() >= CALLER_BUCKETS as usize {
                leases.clear();
            }
        }
        let lease = leases.entry(digest).or_insert(Lease {
            calls: 0,
            until: now,
            size,
        });
        // Calls another call took meanwhile and not spent yet are kept, under the earlier
        // deadline of the two, so that none outlives its lease.
        if lease.until > now {
            lease.calls = lease.calls.saturating_add(calls);
        } else {
            lease.calls = calls;
            lease.until = now + LEASE_LIFETIME;
        }
        lease.size = size;
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

/// The most calls one lease of a bucket of `limit` may hold, for calls costing `cost`: never
/// less than one.
fn lease_most(limit: RateLimit, cost: u32) -> u32 {
    (limit.burst_size() / LEASE_BUCKET_SHARE / cost.max(1)).clamp(1, LEASE_MOST_CALLS)
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

    /// A GCRA bucket store in memory, as the Redis script keeps it, counting what it is asked.
    #[derive(Default)]
    struct Bucket {
        state: std::sync::Arc<Mutex<(HashMap<String, f64>, usize)>>,
        start: std::sync::OnceLock<Instant>,
    }

    impl Bucket {
        fn shared(&self) -> Bucket {
            Bucket {
                state: self.state.clone(),
                start: self.start.clone(),
            }
        }

        fn asks(&self) -> usize {
            lock(&self.state).1
        }
    }

    impl SharedQuota for Bucket {
        fn take<'a>(
            &'a self,
            bucket: &'a str,
            limit: RateLimit,
            cost: u32,
            most: u32,
        ) -> BoxFuture<'a, Result<Take, StoreError>> {
            Box::pin(async move {
                let now = self.start.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e6;
                let interval = limit.period().as_secs_f64() * 1e6 / f64::from(limit.calls());
                let burst = f64::from(limit.burst_size());
                let mut state = lock(&self.state);
                state.1 += 1;
                let tat = state.0.get(bucket).copied().unwrap_or(now).max(now);
                let cost = f64::from(cost);
                let room = ((interval * burst - (tat - now)) / (interval * cost)).floor();
                if room < 1.0 {
                    let wait = tat + interval * (cost - burst) - now;
                    return Ok(Take::Wait(Duration::from_micros(wait.ceil() as u64)));
                }
                let taken = f64::from(most).min(room);
                state
                    .0
                    .insert(bucket.to_owned(), tat + interval * cost * taken);
                Ok(Take::Taken(taken as u32))
            })
        }
    }

    fn limits(bucket: &Bucket) -> SharedLimits {
        SharedLimits::new(Box::new(bucket.shared()))
    }

    fn tool_limit(limit: RateLimit, cost: u32) -> ToolLimit {
        ToolLimit {
            limiter: crate::safety::limits::Limiter::new(limit, cost).unwrap(),
            cost,
        }
    }

    /// Calls `calls` times round-robin over `servers` as one caller: how many were let through.
    async fn let_through(servers: &[SharedLimits], limit: &ToolLimit, calls: usize) -> usize {
        let mut through = 0;
        for i in 0..calls {
            if servers[i % servers.len()]
                .check("t", limit, Some("alice"), None)
                .await
                .is_none()
            {
                through += 1;
            }
        }
        through
    }

    #[tokio::test]
    async fn leases_grow_while_spent_fast_and_never_let_more_than_the_bucket_through() {
        let bucket = Bucket::default();
        let servers = [limits(&bucket), limits(&bucket), limits(&bucket)];
        // A bucket of 200 tokens, refilled at one an hour: leases of up to 10.
        let limit = tool_limit(RateLimit::per_hour(1).burst(200), 1);
        assert_eq!(lease_most(limit.limiter.limit(), 1), 10);
        let through = let_through(&servers, &limit, 400).await;
        assert_eq!(through, 200, "every token spent, and no more");
        let asks = bucket.asks();
        // 1 + 2 + 4 + 8 + 10 + … per server: about 200 / 10 asks, plus one refusal each.
        assert!(asks < 40, "{asks} asks for {through} calls");
    }

    #[tokio::test]
    async fn a_small_bucket_is_counted_call_by_call() {
        let bucket = Bucket::default();
        let servers = [limits(&bucket), limits(&bucket)];
        let limit = tool_limit(RateLimit::per_hour(1).burst(19), 1);
        assert_eq!(lease_most(limit.limiter.limit(), 1), 1);
        assert_eq!(let_through(&servers, &limit, 40).await, 19);
        assert_eq!(bucket.asks(), 21, "19 takes and one refusal per server");
    }

    #[tokio::test]
    async fn a_lease_costs_whole_calls() {
        let bucket = Bucket::default();
        let server = limits(&bucket);
        // Calls of 3 tokens from a bucket of 200: leases of up to 3 calls, and none lost.
        let limit = tool_limit(RateLimit::per_hour(1).burst(200), 3);
        assert_eq!(lease_most(limit.limiter.limit(), 3), 3);
        assert_eq!(
            let_through(std::slice::from_ref(&server), &limit, 80).await,
            66
        );
        assert!(bucket.asks() < 30, "{} asks", bucket.asks());
    }

    #[tokio::test]
    async fn an_unspent_lease_lapses_and_the_next_one_is_smaller() {
        let bucket = Bucket::default();
        let server = limits(&bucket);
        let limit = tool_limit(RateLimit::per_hour(1).burst(1000), 1);
        let one = std::slice::from_ref(&server);
        // 1 + 2 + 4 + 8 + 16 = 31 calls ask five times and leave a lease of 32 full.
        assert_eq!(let_through(one, &limit, 32).await, 32);
        assert_eq!(bucket.asks(), 6);
        let digest = caller_digest("t", Some("alice"), None);
        assert_eq!(lock(&server.leases)[&digest].calls, 31);
        tokio::time::sleep(LEASE_LIFETIME + Duration::from_millis(20)).await;
        assert_eq!(let_through(one, &limit, 1).await, 1);
        assert_eq!(bucket.asks(), 7, "the lapsed lease is not spent");
        let lease = lock(&server.leases)[&digest];
        assert_eq!(
            (lease.size, lease.calls),
            (16, 15),
            "half the size after a lapse"
        );
    }
}
