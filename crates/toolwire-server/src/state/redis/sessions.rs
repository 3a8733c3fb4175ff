//! Legacy sessions in Redis: `PREFIX session:ID`, a hash of the version (`v`), the record as
//! JSON (`r`) and the end of its idle time in ms (`until`), and `PREFIX sessions`, the live ids
//! by that end, which bounds how many there are. A touch renews the idle time in one script;
//! a change is compare-and-swap on the version, tried again when another write came between.

use std::sync::LazyLock;
use std::time::Duration;

use futures::future::BoxFuture;
use redis::Script;

use super::{Shared, decode, number};
use crate::state::sessions::{SessionChange, SessionRecord, SessionStore, SessionStoreError};
use crate::state::{StoreError, UPDATE_ATTEMPTS, step_aside};

/// Creates a session unless the store holds `ARGV[5]` live ones: 1 created, 0 full.
/// `KEYS` session, index; `ARGV` id, JSON, now, idle end, most sessions, idle ms.
static CREATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', '0', 'r', ARGV[2], 'until', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1",
    )
});

/// The session's JSON if it is live at `ARGV[2]`, its idle time renewed; nil (and forgotten)
/// if not. `KEYS` session, index; `ARGV` id, now, new idle end, idle ms.
static TOUCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local f = redis.call('HMGET', KEYS[1], 'r', 'until')
if not f[1] or tonumber(f[2]) <= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
redis.call('HSET', KEYS[1], 'until', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return f[1]",
    )
});

/// Writes a changed session over version `ARGV[2]`: 1 written, 0 changed since, -1 gone.
/// `KEYS` session, index; `ARGV` id, read version, new version, JSON, now, idle end, idle ms.
static UPDATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local f = redis.call('HMGET', KEYS[1], 'v', 'until')
if not f[1] or tonumber(f[2]) <= tonumber(ARGV[5]) then return -1 end
if f[1] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'r', ARGV[4], 'until', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[1])
return 1",
    )
});

/// A [`SessionStore`] in Redis: at most `max_sessions` live sessions across every instance,
/// each forgotten after `idle` without a request.
#[derive(Debug, Clone)]
pub(crate) struct RedisSessionStore {
    redis: Shared,
    max_sessions: usize,
    idle_ms: u64,
}

impl RedisSessionStore {
    pub(crate) fn new(redis: Shared, max_sessions: usize, idle: Duration) -> Self {
        RedisSessionStore {
            redis,
            max_sessions: max_sessions.max(1),
            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX).max(1),
        }
    }

    fn keys(&self, id: &str) -> (String, String) {
        (self.redis.key("session", id), self.redis.name("sessions"))
    }

    /// One attempt at a change: `Some(changed)` once settled, `None` if another write came
    /// between the read and the write.
    async fn try_update(
        &self,
        id: &str,
        now_ms: u64,
        change: &mut SessionChange,
    ) -> Result<Option<bool>, StoreError> {
        let (key, index) = self.keys(id);
        let mut read = redis::cmd("HMGET");
        read.arg(&key).arg("v").arg("r").arg("until");
        let fields: (Option<String>, Option<String>, Option<String>) =
            self.redis.query(&read).await?;
        let (Some(version), Some(json), Some(until)) = fields else {
            return Ok(Some(false));
        };
        if number("session idle end", &until)? <= now_ms {
            return Ok(Some(false));
        }
        let version = number("session version", &version)?;
        let mut record: SessionRecord = decode("session", &json)?;
        change(&mut record);
        let json = serde_json::to_string(&record).map_err(StoreError::corrupt)?;
        let mut call = UPDATE.key(key);
        call.key(index)
            .arg(id)
            .arg(version)
            .arg(version.wrapping_add(1))
            .arg(json)
            .arg(now_ms)
            .arg(now_ms.saturating_add(self.idle_ms))
            .arg(self.idle_ms);
        Ok(match self.redis.invoke::<i64>(&call).await? {
            1 => Some(true),
            0 => None,
            _ => Some(false),
        })
    }
}

impl SessionStore for RedisSessionStore {
    fn create(
        &self,
        record: SessionRecord,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), SessionStoreError>> {
        Box::pin(async move {
            let (key, index) = self.keys(&record.id);
            let json = serde_json::to_string(&record).map_err(StoreError::corrupt)?;
            let mut call = CREATE.key(key);
            call.key(index)
                .arg(&record.id)
                .arg(json)
                .arg(now_ms)
                .arg(now_ms.saturating_add(self.idle_ms))
                .arg(self.max_sessions)
                .arg(self.idle_ms);
            match self.redis.invoke::<i64>(&call).await? {
                1 => Ok(()),
                _ => Err(SessionStoreError::Full(self.max_sessions)),
            }
        })
    }

    fn touch<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StoreError>> {
        Box::pin(async move {
            let (key, index) = self.keys(id);
            let mut call = TOUCH.key(key);
            call.key(index)
                .arg(id)
                .arg(now_ms)
                .arg(now_ms.saturating_add(self.idle_ms))
                .arg(self.idle_ms);
            let json: Option<String> = self.redis.invoke(&call).await?;
            json.map(|json| decode("session", &json)).transpose()
        })
    }

    fn update<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        mut change: SessionChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            for attempt in 0..UPDATE_ATTEMPTS {
                step_aside(attempt).await;
                if let Some(changed) = self.try_update(id, now_ms, &mut change).await? {
                    return Ok(changed);
                }
            }
            Err(StoreError::Contended)
        })
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let (key, index) = self.keys(id);
            let mut pipe = redis::pipe();
            pipe.atomic().del(key).zrem(index, id);
            let (removed, _): (i64, i64) = self.redis.query_pipe(&pipe).await?;
            Ok(removed > 0)
        })
    }
}
