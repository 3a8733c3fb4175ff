//! Handles in Redis: `PREFIX handle:ID`, a hash of the version (`v`) and the record's fields,
//! and `PREFIX handles`, every id by the end of its life (the earlier of its idle end and its
//! expiry), for purges. A replace is one script comparing the version.
//!
//! What an acknowledged write survives: see the durability note of the store module (in
//! Redis's memory at once; past a Redis restart only with Redis persistence configured).

use std::sync::LazyLock;

use futures::future::BoxFuture;
use redis::Script;

use super::{Shared, number, px};
use crate::state::handles::{BackendError, HandleBackend, HandleRecord};

/// Writes a record if its stored version is `ARGV[1]` (or, with `ARGV[1]` empty, whatever is
/// there): 1 written, 0 not. `KEYS` record, index; `ARGV` expected version, id, version,
/// owner, value, created, expires, idle end, end of life, Redis expiry.
static WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'owner', ARGV[4], 'value', ARGV[5],
  'created', ARGV[6], 'expires', ARGV[7], 'idle', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[10])
redis.call('ZADD', KEYS[2], ARGV[9], ARGV[2])
return 1",
    )
});

/// Removes up to `ARGV[2]` handles whose life ended at or before `ARGV[1]`; how many.
/// `KEYS` index; `ARGV` now, batch, record key prefix.
static PURGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[3] .. id)
  redis.call('ZREM', KEYS[1], id)
end
return #ids",
    )
});

/// How many handles one purge script removes at most (a purge runs it until done).
const PURGE_BATCH: u64 = 500;

/// A [`HandleBackend`] in Redis, shared by every instance that names the same store.
#[derive(Debug, Clone)]
pub(crate) struct RedisHandles {
    redis: Shared,
}

impl RedisHandles {
    pub(crate) fn new(redis: Shared) -> Self {
        RedisHandles { redis }
    }

    async fn write(
        &self,
        record: HandleRecord,
        expected: Option<u64>,
    ) -> Result<bool, BackendError> {
        let key = self.redis.key("handle", &record.id);
        let end = record.expires_ms.min(record.idle_until_ms);
        // No write moves the expiry past `expires`, so the record's whole possible life from
        // its creation outlasts it whenever it is written.
        let redis_expiry = px(record.expires_ms, record.created_ms);
        let mut call = WRITE.key(key);
        call.key(self.redis.name("handles"))
            .arg(expected.map(|v| v.to_string()).unwrap_or_default())
            .arg(&record.id)
            .arg(record.version)
            .arg(&record.owner)
            .arg(&record.value)
            .arg(record.created_ms)
            .arg(record.expires_ms)
            .arg(record.idle_until_ms)
            .arg(end)
            .arg(redis_expiry);
        Ok(self.redis.invoke::<i64>(&call).await? == 1)
    }
}

/// The fields of a stored handle, in the order they are read.
const FIELDS: [&str; 6] = ["v", "owner", "value", "created", "expires", "idle"];

impl HandleBackend for RedisHandles {
    fn insert(&self, record: HandleRecord) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { self.write(record, None).await.map(drop) })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<HandleRecord>, BackendError>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(self.redis.key("handle", id)).arg(&FIELDS[..]);
            let fields: Vec<Option<String>> = self.redis.query(&cmd).await?;
            let Some(
                [
                    Some(v),
                    Some(owner),
                    Some(value),
                    Some(created),
                    Some(expires),
                    Some(idle),
                ],
            ) = <[Option<String>; 6]>::try_from(fields).ok()
            else {
                return Ok(None);
            };
            let mut record = HandleRecord::new(
                id.to_owned(),
                owner,
                value,
                number("handle creation", &created)?,
                number("handle expiry", &expires)?,
                number("handle idle end", &idle)?,
            );
            record.version = number("handle version", &v)?;
            Ok(Some(record))
        })
    }

    fn replace(&self, record: HandleRecord) -> BoxFuture<'_, Result<bool, BackendError>> {
        Box::pin(async move {
            let Some(previous) = record.version.checked_sub(1) else {
                return Ok(false);
            };
            self.write(record, Some(previous)).await
        })
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, BackendError>> {
        Box::pin(async move {
            let mut pipe = redis::pipe();
            pipe.atomic()
                .del(self.redis.key("handle", id))
                .zrem(self.redis.name("handles"), id);
            let (removed, _): (i64, i64) = self.redis.query_pipe(&pipe).await?;
            Ok(removed > 0)
        })
    }

    fn purge(&self, now_ms: u64) -> BoxFuture<'_, Result<u64, BackendError>> {
        Box::pin(async move {
            let mut purged = 0;
            loop {
                let mut call = PURGE.key(self.redis.name("handles"));
                call.arg(now_ms)
                    .arg(PURGE_BATCH)
                    .arg(self.redis.key("handle", ""));
                let removed: u64 = self.redis.invoke(&call).await?;
                purged += removed;
                if removed < PURGE_BATCH {
                    return Ok(purged);
                }
            }
        })
    }
}
