//! Task records in Redis: `PREFIX task:ID`, a hash of the version (`v`), the record as JSON
//! (`r`) and its expiry in ms (`e`, empty for none), with a Redis expiry no shorter than the
//! record's life. A replace is one script: compare the version, write, move the expiry.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use redis::Script;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwire_protocol::{ErrorObject, InputRequests, InputResponses, TaskInfo};

use super::{Shared, decode, number, px};
use crate::clock::{Clock, SystemClock};
use crate::state::StoreError;
use crate::state::task_store::{TaskRecord, TaskStore};

/// Writes a new record whole: `KEYS[1]` the record; `ARGV` version, JSON, expiry (or
/// empty), Redis expiry in ms (or empty for none).
static INSERT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', ARGV[2], 'e', ARGV[3])
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1",
    )
});

/// Replaces a record if its stored version is `ARGV[1]`: 1 if replaced, 0 if not (changed
/// or gone). `ARGV` expected version, new version, JSON, expiry, Redis expiry (or empty).
static REPLACE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'r', ARGV[3], 'e', ARGV[4])
if ARGV[5] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[5])
else redis.call('PERSIST', KEYS[1]) end
return 1",
    )
});

/// A [`TaskStore`] in Redis, shared by every instance that names the same store.
#[derive(Debug, Clone)]
pub(crate) struct RedisTaskStore {
    redis: Shared,
}

impl RedisTaskStore {
    pub(crate) fn new(redis: Shared) -> Self {
        RedisTaskStore { redis }
    }
}

/// The record as stored (the version is a field of its own, which the scripts compare).
#[derive(Serialize, Deserialize)]
struct Stored {
    info: TaskInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input_requests: Option<InputRequests>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answers: Option<InputResponses>,
}

/// The fields a record is written with: JSON, expiry and Redis expiry (empty: none).
fn fields(record: TaskRecord) -> Result<(String, String, String), StoreError> {
    // The Redis expiry outlasts the record: its whole time to live from this write, or what
    // is left of it by the system clock if that is longer.
    let redis_expiry = record.expires_ms.map(|expires| {
        let life = record.info.ttl_ms.unwrap_or(0);
        px(expires, SystemClock.now_ms())
            .max(life.min(super::MAX_PX))
            .to_string()
    });
    let expires = record.expires_ms.map(|e| e.to_string());
    let stored = Stored {
        info: record.info,
        principal: record.principal,
        input_requests: record.input_requests,
        result: record.result,
        error: record.error,
        owner: record.owner,
        scopes: record.scopes,
        answers: record.answers,
    };
    let json = serde_json::to_string(&stored).map_err(StoreError::corrupt)?;
    Ok((
        json,
        expires.unwrap_or_default(),
        redis_expiry.unwrap_or_default(),
    ))
}

impl TaskStore for RedisTaskStore {
    fn insert(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let key = self.redis.key("task", &record.info.task_id);
            let version = record.version;
            let (json, expires, redis_expiry) = fields(record)?;
            let mut call = INSERT.key(key);
            call.arg(version).arg(json).arg(expires).arg(redis_expiry);
            self.redis.invoke::<i64>(&call).await.map(drop)
        })
    }

    fn get<'a>(
        &'a self,
        task_id: &'a str,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(self.redis.key("task", task_id))
                .arg("v")
                .arg("r")
                .arg("e");
            let fields: (Option<String>, Option<String>, Option<String>) =
                self.redis.query(&cmd).await?;
            let (Some(version), Some(json)) = (fields.0, fields.1) else {
                return Ok(None);
            };
            let expires_ms = match fields.2.as_deref() {
                None | Some("") => None,
                Some(text) => Some(number("task expiry", text)?),
            };
            if expires_ms.is_some_and(|e| now_ms >= e) {
                return Ok(None);
            }
            let stored: Stored = decode("task record", &json)?;
            Ok(Some(TaskRecord {
                info: stored.info,
                principal: stored.principal,
                input_requests: stored.input_requests,
                result: stored.result,
                error: stored.error,
                owner: stored.owner,
                scopes: stored.scopes,
                answers: stored.answers,
                expires_ms,
                version: number("task version", &version)?,
            }))
        })
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let Some(previous) = record.version.checked_sub(1) else {
                return Ok(false);
            };
            let key = self.redis.key("task", &record.info.task_id);
            let version = record.version;
            let (json, expires, redis_expiry) = fields(record)?;
            let mut call = REPLACE.key(key);
            call.arg(previous)
                .arg(version)
                .arg(json)
                .arg(expires)
                .arg(redis_expiry);
            Ok(self.redis.invoke::<i64>(&call).await? == 1)
        })
    }

    fn heartbeat<'a>(
        &'a self,
        instance: &'a str,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("SET");
            cmd.arg(self.redis.key("instance", instance))
                .arg(1)
                .arg("PX")
                .arg(ttl_ms.max(1));
            self.redis.query::<()>(&cmd).await
        })
    }

    fn is_alive<'a>(&'a self, instance: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("EXISTS");
            cmd.arg(self.redis.key("instance", instance));
            Ok(self.redis.query::<i64>(&cmd).await? == 1)
        })
    }
}
