//! Single-use request state (M-08) in Redis: a redemption is `SET PREFIX replay:HEX 1 NX PX
//! ttl`, which only one caller of all the instances can win.

use futures::future::BoxFuture;

use super::{Shared, px};
use crate::state::StoreError;
use crate::state::request_state::ReplayGuard;

/// A [`ReplayGuard`] in Redis; a token's marker lives until the token expires.
#[derive(Debug, Clone)]
pub(crate) struct RedisReplayGuard {
    redis: Shared,
}

impl RedisReplayGuard {
    pub(crate) fn new(redis: Shared) -> Self {
        RedisReplayGuard { redis }
    }
}

impl ReplayGuard for RedisReplayGuard {
    fn redeem(
        &self,
        token_id: [u8; 12],
        expires_ms: u64,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move {
            let key = self
                .redis
                .key("replay", &toolwire_protocol::hex::encode(&token_id));
            let mut cmd = redis::cmd("SET");
            cmd.arg(key)
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(px(expires_ms, now_ms));
            // `OK` when this call set it, nil when it was set before.
            let set: Option<String> = self.redis.query(&cmd).await?;
            Ok(set.is_some())
        })
    }
}
