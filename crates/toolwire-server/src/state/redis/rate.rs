//! Rate limits shared by every instance: one GCRA bucket per caller × tool in Redis,
//! `PREFIX rate:HEX` holding the bucket's theoretical arrival time (µs, Redis's own clock)
//! with a Redis expiry of when the bucket is full again, taken from in one script.

use std::sync::LazyLock;
use std::time::Duration;

use futures::future::BoxFuture;
use redis::Script;

use super::Shared;
use crate::safety::limits::RateLimit;
use crate::state::StoreError;
use crate::state::shared_limits::{SharedQuota, Take};

/// Takes from the bucket `KEYS[1]`, refilled one token per `ARGV[1]` µs and holding `ARGV[2]`
/// tokens, as many calls of `ARGV[3]` tokens as fit, up to `ARGV[4]`: `{calls, 0}`, or if not
/// one fits, `{0, µs until one would}` (nothing taken). The time is Redis's, so that instances
/// whose clocks differ share one bucket exactly.
static TAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local stored = redis.call('GET', KEYS[1])
local tat = now
if stored then tat = math.max(tonumber(stored), now) end
local room = math.floor((interval * burst - (tat - now)) / (interval * cost))
if room < 1 then
  return {0, math.ceil(tat + interval * (cost - burst) - now)}
end
local taken = math.min(tonumber(ARGV[4]), room)
local after = tat + interval * cost * taken
redis.call('SET', KEYS[1], string.format('%d', after), 'PX', math.ceil((after - now) / 1000))
return {taken, 0}",
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
        most: u32,
    ) -> BoxFuture<'a, Result<Take, StoreError>> {
        Box::pin(async move {
            let interval = (limit.period().as_micros() / u128::from(limit.calls().max(1))).max(1);
            let mut call = TAKE.key(self.redis.key("rate", bucket));
            call.arg(interval as u64)
                .arg(limit.burst_size())
                .arg(cost)
                .arg(most.max(1));
            let (taken, wait): (u32, u64) = self.redis.invoke(&call).await?;
            Ok(if taken > 0 {
                Take::Taken(taken)
            } else {
                Take::Wait(Duration::from_micros(wait.max(1)))
            })
        })
    }
}
