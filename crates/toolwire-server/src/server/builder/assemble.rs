//! The parts [`ServerBuilder::build`] assembles that need more than a field: the checked
//! policies, the result `_meta`, the `server/discover` result and the state stores.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toolwire_protocol::{DiscoverResult, JsonObject, ResultMeta, ResultType};

use super::ServerBuilder;
use crate::error::Result;
use crate::request::route::SUPPORTED_VERSIONS;
use crate::safety::output::CompiledGuard;
use crate::server::{Offers, capabilities_of};
use crate::state::request_keys::RequestKeys;
use crate::state::request_state::{ReplayGuard, RequestStateKeys};
use crate::state::store::Store;
use crate::state::task_store::{MemoryTaskStore, TaskStore};

impl ServerBuilder {
    /// The server-wide output guard, compiled, and the default rate limit, checked; turning
    /// the guard off is logged with its reason.
    pub(super) fn checked_policies(&self) -> Result<Arc<CompiledGuard>> {
        let output_guard = self
            .output_guard
            .compile()
            .map_err(crate::error::Error::InvalidOutputGuard)?;
        if let Some(reason) = self.output_guard.off_reason() {
            tracing::warn!(target: "toolwire::output", %reason, "output sanitization is off for every tool");
        }
        if let Some(limit) = self.rate_limit {
            limit
                .quota()
                .map_err(crate::error::Error::InvalidRateLimit)?;
        }
        Ok(output_guard)
    }

    /// The `_meta` of every result (serverInfo unless turned off, B-18), and the same as a JSON
    /// member to splice into serialized results.
    pub(super) fn result_meta(&self) -> Result<(Option<ResultMeta>, String)> {
        let result_meta = self.server_info_in_results.then(|| ResultMeta {
            server_info: Some(self.info.clone()),
            ..Default::default()
        });
        let result_meta_json = match &result_meta {
            Some(meta) => format!(
                ",\"_meta\":{}",
                serde_json::to_string(meta).map_err(std::io::Error::other)?
            ),
            None => String::new(),
        };
        Ok((result_meta, result_meta_json))
    }

    /// The `server/discover` result, serialized once: nothing in it changes at runtime.
    pub(super) fn discover(
        &self,
        offers: Offers,
        meta: Option<ResultMeta>,
    ) -> Result<Box<serde_json::value::RawValue>> {
        let discover = DiscoverResult {
            result_type: ResultType::Complete,
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
            capabilities: capabilities_of(offers, self.config.logging),
            instructions: self.instructions.clone(),
            ttl_ms: self.config.discover_ttl_ms,
            cache_scope: self.config.cache_scope,
            meta,
            extra: JsonObject::new(),
        };
        Ok(serde_json::value::to_raw_value(&discover).map_err(std::io::Error::other)?)
    }

    /// The request-state keys, replay guard and task store: each as set on its own, else
    /// the store's, else this process's own. A key ring kept in a shared store is read at
    /// once and kept fresh until `shutdown`.
    pub(super) fn state_stores(
        &mut self,
        shutdown: &CancellationToken,
    ) -> (
        RequestKeys,
        Option<Arc<dyn ReplayGuard>>,
        Arc<dyn TaskStore>,
    ) {
        let store = self.store.as_ref();
        let replay_guard = self
            .replay_guard
            .take()
            .or_else(|| store.map(Store::replay_guard));
        let task_store = self
            .task_store
            .take()
            .or_else(|| store.map(Store::task_store))
            .unwrap_or_else(|| Arc::new(MemoryTaskStore::default()));
        let keys = match self.state_keys.take() {
            Some(keys) => RequestKeys::Fixed(keys),
            None => shared_keys(store, shutdown)
                .unwrap_or_else(|| RequestKeys::Fixed(RequestStateKeys::random())),
        };
        (keys, replay_guard, task_store)
    }
}

/// The request-state key ring kept in `store`, if it is a shared one, kept fresh until
/// `shutdown`.
#[cfg(feature = "redis")]
fn shared_keys(store: Option<&Store>, shutdown: &CancellationToken) -> Option<RequestKeys> {
    let ring = store?.key_ring()?;
    crate::state::redis::SharedKeyRing::keep_fresh(&ring, shutdown.clone());
    Some(RequestKeys::Shared(ring))
}

/// Without a shared store, every ring is this process's own.
#[cfg(not(feature = "redis"))]
fn shared_keys(_: Option<&Store>, _: &CancellationToken) -> Option<RequestKeys> {
    None
}
