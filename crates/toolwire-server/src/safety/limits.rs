//! Rate limits (T-15): token buckets (GCRA, the `governor` crate) per caller × tool with a cost
//! per call, and the HTTP flood limit per client address.
//!
//! Callers are hashed, with a key chosen at random per process, into a fixed number of buckets
//! per limiter: however many identities or addresses a caller rotates through, a limiter holds
//! at most [`CALLER_BUCKETS`] states (and drops idle ones as it goes). Two callers share a
//! bucket with probability 1 in [`CALLER_BUCKETS`]; they then share its quota.

use std::hash::{BuildHasher as _, Hash, Hasher as _};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use serde_json::json;
use toolwire_protocol::{CallToolResult, ResultMeta};

/// How many buckets a limiter spreads callers over: its memory bound.
pub const CALLER_BUCKETS: u32 = 1 << 14;

/// How many checks pass between two sweeps of idle buckets.
const SWEEP_EVERY: u32 = 4096;

/// The key of a rate-limited result's `_meta`:
/// `{"retryAfterMs", "calls", "periodMs", "cost"}`.
pub const RATE_LIMITED_META_KEY: &str = "dev.toolwire/rateLimited";

/// The key of a tool definition's `_meta` that advertises its rate limit:
/// `{"calls", "periodMs", "burst", "cost"}`.
pub const RATE_LIMIT_META_KEY: &str = "dev.toolwire/rateLimit";

/// The quota of each caller for each tool unless the builder or the tool says otherwise:
/// 300 calls per minute, all of them usable at once.
pub const DEFAULT_TOOL_RATE_LIMIT: RateLimit = RateLimit::per_minute(300);

/// A token bucket: `calls` per `per`, refilled evenly, holding at most `burst` (by default
/// `calls`: a whole period's worth may be used at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    calls: u32,
    per: Duration,
    burst: Option<u32>,
}

impl RateLimit {
    /// `calls` per `per`.
    pub const fn new(calls: u32, per: Duration) -> Self {
        RateLimit {
            calls,
            per,
            burst: None,
        }
    }

    /// `calls` per second.
    pub const fn per_second(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(1))
    }

    /// `calls` per minute.
    pub const fn per_minute(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(60))
    }

    /// `calls` per hour.
    pub const fn per_hour(calls: u32) -> Self {
        Self::new(calls, Duration::from_secs(3600))
    }

    /// At most `burst` calls at once (the bucket's size); the refill rate stays the same.
    pub const fn burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// Calls per period.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.per
    }

    /// The bucket's size.
    pub fn burst_size(&self) -> u32 {
        self.burst.unwrap_or(self.calls)
    }

    /// The governor quota, or why there is none.
    pub(crate) fn quota(&self) -> Result<Quota, String> {
        let calls = NonZeroU32::new(self.calls)
            .ok_or("a rate limit must allow at least one call per period")?;
        let burst =
            NonZeroU32::new(self.burst_size()).ok_or("a rate limit's burst must be at least 1")?;
        let interval = self.per / calls.get();
        Quota::with_period(interval)
            .map(|q| q.allow_burst(burst))
            .ok_or_else(|| format!("a period of {:?} is too short for {calls} calls", self.per))
    }
}

impl std::fmt::Display for RateLimit {
    /// "300 calls per 60 s".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = if self.calls == 1 { "call" } else { "calls" };
        write!(f, "{} {unit} per {} s", self.calls, self.per.as_secs_f64())
    }
}

/// Who a caller without a principal is, for limits: its address, or what a trusted proxy gave
/// in place of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientId {
    /// The TCP peer's address, or the one a trusted proxy named.
    Address(IpAddr),
    /// An obfuscated identifier a trusted proxy gave in place of the address (RFC 7239 §6.3,
    /// `for=_hidden`): a bucket of its own, as the proxy means it to stand for one client.
    Obfuscated(Arc<str>),
    /// `for=unknown` (RFC 7239 §6.2): the proxy does not know the client or will not say. Such
    /// callers share one bucket, apart from every address's.
    Unknown,
}

impl ClientId {
    /// The address, if the client has one.
    pub(crate) fn address(&self) -> Option<IpAddr> {
        match self {
            ClientId::Address(address) => Some(*address),
            ClientId::Obfuscated(_) | ClientId::Unknown => None,
        }
    }
}

impl From<IpAddr> for ClientId {
    fn from(address: IpAddr) -> Self {
        ClientId::Address(address)
    }
}

/// Who a limit counts against: the principal when there is one, else the client (its address
/// or what its proxy said of it), else everyone anonymous together (one stdio client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallerBucket(u32);

impl CallerBucket {
    pub(crate) fn of(principal: Option<&str>, client: Option<&ClientId>) -> Self {
        let mut hasher = seed().build_hasher();
        match (principal, client) {
            (Some(principal), _) => (0u8, principal).hash(&mut hasher),
            (None, Some(ClientId::Address(address))) => {
                (1u8, network_of(*address)).hash(&mut hasher)
            }
            (None, None) => 2u8.hash(&mut hasher),
            (None, Some(ClientId::Obfuscated(id))) => (3u8, id.as_ref()).hash(&mut hasher),
            (None, Some(ClientId::Unknown)) => 4u8.hash(&mut hasher),
        }
        CallerBucket((hasher.finish() as u32) & (CALLER_BUCKETS - 1))
    }
}

/// The part of an address that names one client: the whole IPv4 address, the /64 network of
/// an IPv6 one (a host usually holds a whole /64 and could rotate through it).
pub(crate) fn network_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::V6(octets.into())
            }
        },
    }
}

/// The per-process hash key: a caller cannot aim at another caller's bucket.
fn seed() -> &'static std::collections::hash_map::RandomState {
    static SEED: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    SEED.get_or_init(Default::default)
}

/// One limit over many callers: a bucket each, memory bounded by [`CALLER_BUCKETS`].
pub(crate) struct Limiter {
    limit: RateLimit,
    buckets: DefaultKeyedRateLimiter<u32>,
    checks: AtomicU32,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter for `limit` whose calls cost `cost` each; refused if one call could never fit.
    pub(crate) fn new(limit: RateLimit, cost: u32) -> Result<Self, String> {
        let quota = limit.quota()?;
        if cost == 0 || cost > quota.burst_size().get() {
            return Err(format!(
                "a call costs {cost}, which a bucket of {} never holds",
                quota.burst_size()
            ));
        }
        Ok(Limiter {
            limit,
            buckets: DefaultKeyedRateLimiter::dashmap(quota),
            checks: AtomicU32::new(0),
        })
    }

    pub(crate) fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Takes `cost` tokens from the caller's bucket, or says how long until they are there.
    pub(crate) fn check(&self, caller: CallerBucket, cost: u32) -> Result<(), Duration> {
        self.sweep_now_and_then();
        let cost = NonZeroU32::new(cost).unwrap_or(NonZeroU32::MIN);
        match self.buckets.check_key_n(&caller.0, cost) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(not_until.wait_time_from(DefaultClock::default().now())),
            // Refused at construction; if it happened, the call could never run.
            Err(_) => Err(self.limit.per),
        }
    }

    /// Drops the buckets that are full again, now and then, so the map shrinks after a burst
    /// of callers; its size is bounded by the bucket count whatever happens.
    fn sweep_now_and_then(&self) {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.buckets.retain_recent();
            self.buckets.shrink_to_fit();
        }
    }

    /// How many buckets are held (for tests of the memory bound).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.buckets.len()
    }
}

/// A tool's limit as registered: its limiter and what a call costs.
#[derive(Debug)]
pub(crate) struct ToolLimit {
    pub(crate) limiter: Limiter,
    pub(crate) cost: u32,
}

/// What the model sees when a caller used up a tool's quota: when to try again, in words and
/// in `_meta` ([`RATE_LIMITED_META_KEY`]).
pub(crate) fn limited_result(tool: &str, limit: &ToolLimit, wait: Duration) -> CallToolResult {
    let seconds = (wait.as_secs_f64() * 10.0).ceil() / 10.0;
    let quota = limit.limiter.limit();
    let mut result = CallToolResult::error(format!(
        "The tool {tool} was called too often: each caller may make {quota}. Try again in {seconds} s."
    ));
    let mut meta = ResultMeta::default();
    meta.extra.insert(
        RATE_LIMITED_META_KEY.into(),
        json!({
            "retryAfterMs": wait.as_millis().max(1) as u64,
            "calls": quota.calls(),
            "periodMs": quota.period().as_millis() as u64,
            "cost": limit.cost,
        }),
    );
    result.meta = Some(meta);
    result
}

/// Whether a result is one a rate limit produced.
pub(crate) fn is_limited(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .is_some_and(|m| m.extra.contains_key(RATE_LIMITED_META_KEY))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> ClientId {
        ClientId::Address(text.parse().unwrap())
    }

    #[test]
    fn a_bucket_runs_out_and_says_when_it_refills() {
        let limiter = Limiter::new(RateLimit::per_minute(3), 1).unwrap();
        let caller = CallerBucket::of(Some("alice"), None);
        for _ in 0..3 {
            assert_eq!(limiter.check(caller, 1), Ok(()));
        }
        let wait = limiter.check(caller, 1).unwrap_err();
        // One call comes back every 20 s.
        assert!(
            wait > Duration::from_secs(15) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        // Another principal has a bucket of its own (the first name that does not share one).
        let other = (0..)
            .map(|i| CallerBucket::of(Some(&format!("bob{i}")), None))
            .find(|b| *b != caller)
            .unwrap();
        assert_eq!(limiter.check(other, 1), Ok(()));
    }

    #[test]
    fn a_costly_call_takes_several_tokens_and_one_that_never_fits_is_refused() {
        let limiter = Limiter::new(RateLimit::per_minute(10), 4).unwrap();
        let caller = CallerBucket::of(None, Some(&address("192.0.2.1")));
        assert_eq!(limiter.check(caller, 4), Ok(()));
        assert_eq!(limiter.check(caller, 4), Ok(()));
        assert!(limiter.check(caller, 4).is_err());
        let error = Limiter::new(RateLimit::per_minute(10), 11).unwrap_err();
        assert!(error.contains("never holds"), "{error}");
        assert!(Limiter::new(RateLimit::per_minute(0), 1).is_err());
        assert!(Limiter::new(RateLimit::per_second(5).burst(0), 1).is_err());
    }

    #[test]
    fn memory_stays_bounded_however_many_identities_a_caller_rotates_through() {
        let limiter = Limiter::new(RateLimit::per_hour(1), 1).unwrap();
        for i in 0..100_000u32 {
            let _ = limiter.check(CallerBucket::of(Some(&format!("p{i}")), None), 1);
        }
        assert!(
            limiter.held() <= CALLER_BUCKETS as usize,
            "{}",
            limiter.held()
        );
    }

    #[test]
    fn ipv6_callers_are_counted_by_their_64_network() {
        let a = CallerBucket::of(None, Some(&address("2001:db8:1:2::1")));
        let b = CallerBucket::of(None, Some(&address("2001:db8:1:2:ffff::9")));
        assert_eq!(a, b);
        let mapped = CallerBucket::of(None, Some(&address("::ffff:192.0.2.7")));
        let v4 = CallerBucket::of(None, Some(&address("192.0.2.7")));
        assert_eq!(mapped, v4);
    }

    #[test]
    fn an_obfuscated_identifier_names_one_client() {
        let hidden = |id: &str| CallerBucket::of(None, Some(&ClientId::Obfuscated(id.into())));
        assert_eq!(hidden("_a"), hidden("_a"));
        // Ten identifiers in 16,384 buckets: they share one only if the identifier were ignored.
        let buckets: std::collections::HashSet<u32> =
            (0..10).map(|i| hidden(&format!("_{i}")).0).collect();
        assert!(buckets.len() > 1, "{buckets:?}");
        assert_eq!(ClientId::Unknown.address(), None);
        assert_eq!(
            address("192.0.2.7").address(),
            Some("192.0.2.7".parse().unwrap())
        );
    }

    #[test]
    fn the_limited_result_says_when_to_retry() {
        let limit = ToolLimit {
            limiter: Limiter::new(RateLimit::per_minute(3), 1).unwrap(),
            cost: 1,
        };
        let result = limited_result("search", &limit, Duration::from_millis(19_950));
        assert!(result.is_error());
        assert!(is_limited(&result));
        let text = serde_json::to_string(&result.content).unwrap();
        assert!(
            text.contains("3 calls per 60 s") && text.contains("Try again in 20 s"),
            "{text}"
        );
        let meta = &result.meta.unwrap().extra[RATE_LIMITED_META_KEY];
        assert_eq!(meta["retryAfterMs"], 19_950);
        assert_eq!(meta["periodMs"], 60_000);
    }
}
