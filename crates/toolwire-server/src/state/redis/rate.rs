//! Rate limits shared by every instance: one GCRA bucket per caller × tool in Redis,
//! `PREFIX rate:HEX` holding the bucket's theoretical arrival time (µs, Redis's own clock)
//! with a Redis expiry of when the bucket is full again, taken from in one script.

use std::sync::LazyLock;
use std::time::Duration;

use futures::future::BoxFuture;
use redis::Script;

use super::Shared;
use crate::safety::limits::RateLimit;
use crate::safety::shared_limits::SharedQuota;
use crate::state::StoreError;

/// Takes `ARGV[3]` calls from the bucket `KEYS[1]` refilled one call per `ARGV[1]` µs and
/// holding `ARGV[2]` calls: 0 if taken, else the µs until they would fit (nothing taken). The
/// time is Redis's, so that instances whose clocks differ share one bucket exactly.
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then tat = math.max(tonumber(stored), now) end
local after = tat + interval * tonumber(ARGV[3])
local wait = after - interval * tonumber(ARGV[2]) - now
if wait > 0 then return math.ceil(wait) end
redis.call('SET', KEYS[1], string.format('%d', after), 'PX', math.ceil((after - now) / 1000))
return 0",
    )
});

/// Shared buckets in Redis.
#[derive(Debug, Clone)]
pub(crate) struct RedisRateLimits {
    redis: Shared,
}

impl RedisRateLimits {
    pub(crate) fn new(redis: Shared) -> Self {
        RedisRateLimits { redis }
    }
}

impl SharedQuota for RedisRateLimits {
    fn take<'a>(
        &'a self,
        bucket: &'a str,
        limit: RateLimit,
        cost: u32,
    ) -> BoxFuture<'a, Result<Option<Duration>, StoreError>> {
        Box::pin(async move {
            let interval = (limit.period().as_micros() / u128::from(limit.calls().max(1))).max(1);
            let mut call = TAKE.key(self.redis.key("rate", bucket));
            call.arg(interval as u64).arg(limit.burst_size()).arg(cost);
            let wait: u64 = self.redis.invoke(&call).await?;
            Ok((wait > 0).then(|| Duration::from_micros(wait)))
        })
    }
}
