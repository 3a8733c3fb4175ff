//! Pins in Redis (or Valkey), shared by every process on one store: the instances of a gateway
//! withhold and serve alike, and `toolwire pins approve --store URL` approves for all of them
//! (each picks an approval up when it next reads its pins).
//!
//! One hash per server, `{prefix}pins:{server}`: a field per tool, its value the pin as JSON
//! (`hash`, `definition`, `pinnedAt`, as in a pin file). A first sight is `HSETNX` and its
//! read-back in one `MULTI`, so two processes that see a new tool at once keep one pin, the
//! first; an approval is `HSET`; a forget is `HDEL`. Redis keeps what it acknowledged as far
//! as its persistence settings say (`appendonly yes` for pins that must outlive a restart).
//!
//! The calls are blocking, each bounded by the store's timeout, and the connection is kept
//! between them: pins are read when a server's list is checked, not per call. A store that is
//! away is a [`PinStoreError`] naming it, and the next call connects again.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::store::{Pin, PinStore, PinStoreError};

/// Pins in Redis; see the module's documentation.
pub struct RedisPins {
    client: redis::Client,
    prefix: String,
    timeout: Duration,
    /// Where the pins are, for errors: the address, never the password.
    shown: String,
    connection: Mutex<Option<redis::Connection>>,
}

impl std::fmt::Debug for RedisPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPins")
            .field("store", &self.shown)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RedisPins {
    /// Pins under `prefix` (the store's key prefix, e.g. `toolwire:`) in the Redis `client`
    /// reaches, each call bounded by `timeout`. Nothing connects yet.
    pub fn new(client: redis::Client, prefix: impl Into<String>, timeout: Duration) -> RedisPins {
        let info = client.get_connection_info();
        let shown = format!(
            "the store at {} (database {})",
            info.addr(),
            info.redis_settings().db()
        );
        RedisPins {
            client,
            prefix: prefix.into(),
            timeout: timeout.max(Duration::from_millis(1)),
            shown,
            connection: Mutex::new(None),
        }
    }

    fn key(&self, server: &str) -> String {
        format!("{}pins:{server}", self.prefix)
    }

    fn error(&self, server: &str, message: impl std::fmt::Display) -> PinStoreError {
        PinStoreError {
            server: server.to_owned(),
            location: self.shown.clone(),
            message: message.to_string(),
        }
    }

    /// Runs `f` on the kept connection (made first if there is none); a failure drops it, so
    /// that the next call connects again.
    fn with<T>(
        &self,
        server: &str,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, PinStoreError> {
        let mut kept = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_none() {
            let connection = self
                .client
                .get_connection_with_timeout(self.timeout)
                .and_then(|c| {
                    c.set_read_timeout(Some(self.timeout))?;
                    c.set_write_timeout(Some(self.timeout))?;
                    Ok(c)
                })
                .map_err(|e| self.error(server, format!("cannot connect: {e}")))?;
            *kept = Some(connection);
        }
        let Some(connection) = kept.as_mut() else {
            return Err(self.error(server, "no connection"));
        };
        f(connection).map_err(|e| {
            *kept = None;
            self.error(server, e)
        })
    }

    fn encode(pin: &Pin) -> String {
        json!({"hash": pin.hash, "definition": pin.definition, "pinnedAt": pin.pinned_at})
            .to_string()
    }

    fn decode(&self, server: &str, tool: &str, text: &str) -> Result<Pin, PinStoreError> {
        let entry: Value = serde_json::from_str(text)
            .map_err(|e| self.error(server, format!("the pin of {tool:?} is not JSON: {e}")))?;
        match (
            entry["hash"].as_str(),
            entry["pinnedAt"].as_str(),
            entry.get("definition"),
        ) {
            (Some(hash), Some(at), Some(definition)) => Ok(Pin {
                hash: hash.to_owned(),
                definition: definition.clone(),
                pinned_at: at.to_owned(),
            }),
            _ => Err(self.error(server, format!("the pin of {tool:?} is incomplete"))),
        }
    }
}

impl PinStore for RedisPins {
    fn load(&self, server: &str) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        let key = self.key(server);
        let stored: BTreeMap<String, String> =
            self.with(server, |c| redis::cmd("HGETALL").arg(&key).query(c))?;
        stored
            .iter()
            .map(|(tool, text)| Ok((tool.clone(), self.decode(server, tool, text)?)))
            .collect()
    }

    fn save(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), PinStoreError> {
        let key = self.key(server);
        self.with(server, |c| {
            redis::cmd("HSET")
                .arg(&key)
                .arg(tool)
                .arg(Self::encode(pin))
                .query::<i64>(c)
        })
        .map(drop)
    }

    fn remove(&self, server: &str, tool: &str) -> Result<(), PinStoreError> {
        let key = self.key(server);
        self.with(server, |c| {
            redis::cmd("HDEL").arg(&key).arg(tool).query::<i64>(c)
        })
        .map(drop)
    }

    fn save_new(
        &self,
        server: &str,
        pins: &[(String, Pin)],
    ) -> Result<BTreeMap<String, Pin>, PinStoreError> {
        if pins.is_empty() {
            return Ok(BTreeMap::new());
        }
        let key = self.key(server);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (tool, pin) in pins {
            pipe.cmd("HSETNX")
                .arg(&key)
                .arg(tool)
                .arg(Self::encode(pin))
                .ignore();
        }
        pipe.cmd("HMGET").arg(&key);
        for (tool, _) in pins {
            pipe.arg(tool);
        }
        let (stored,): (Vec<Option<String>>,) = self.with(server, |c| pipe.query(c))?;
        pins.iter()
            .zip(stored)
            .map(|((tool, _), text)| {
                let text = text.ok_or_else(|| {
                    self.error(server, format!("the pin of {tool:?} was not kept"))
                })?;
                Ok((tool.clone(), self.decode(server, tool, &text)?))
            })
            .collect()
    }
}
