//! What the client knows of the server's protocol era: not settled yet, 2026-07-28, or a legacy
//! session opened with `initialize` (whose result stands in for `server/discover`). `era.rs`
//! settles it; the request path reads it.

use std::sync::Arc;

use serde_json::{Value, json};
use toolwire_protocol::{DiscoverResult, META_FIELD, META_SERVER_INFO};

use crate::error::{Error, Result};

/// The legacy versions this client can speak after `initialize`, newest first.
pub use toolwire_protocol::legacy::LEGACY_VERSIONS;

/// What the client knows of the server's era.
#[derive(Debug, Clone)]
pub(crate) enum Era {
    /// Not settled yet (HTTP: the first request settles it).
    Unknown,
    /// 2026-07-28, stateless.
    Modern,
    /// A legacy session.
    Legacy(Arc<LegacySession>),
}

/// The client's protocol state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) era: Era,
    /// The modern version requests are sent with (after negotiation).
    pub(crate) version: String,
    /// The stdio process generation the era was settled for.
    pub(crate) generation: u64,
}

impl State {
    pub(crate) fn new(version: String) -> Self {
        State {
            era: Era::Unknown,
            version,
            generation: 0,
        }
    }
}

/// A legacy session established with `initialize`.
#[derive(Debug)]
pub(crate) struct LegacySession {
    /// The version the server chose.
    pub(crate) version: String,
    /// `Mcp-Session-Id` (HTTP, when the server set one).
    pub(crate) session: Option<String>,
    /// The `initialize` result.
    pub(crate) initialized: Value,
    /// How many of this client's subscriptions follow each resource the session subscribed
    /// to with `resources/subscribe`: the session is unsubscribed when the last one goes. The
    /// lock is held across each `resources/(un)subscribe`, so that they reach the server in
    /// the order of the counts.
    pub(crate) subscribed: tokio::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl LegacySession {
    /// The `initialize` result as a `server/discover` result.
    pub(crate) fn discover_result(&self) -> Result<DiscoverResult> {
        let init = &self.initialized;
        let mut result = json!({
            "resultType": "complete",
            "supportedVersions": [self.version],
            "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            "ttlMs": 0,
            "cacheScope": "private",
        });
        if let Some(instructions) = init.get("instructions") {
            result["instructions"] = instructions.clone();
        }
        if let Some(info) = init.get("serverInfo") {
            result[META_FIELD] = json!({META_SERVER_INFO: info});
        }
        serde_json::from_value(result).map_err(|e| {
            Error::InvalidResponse(format!("the legacy initialize result is malformed: {e}"))
        })
    }
}

/// The server's era as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEra {
    /// Stateless 2026-07-28 (or a later revision) at this version.
    Modern {
        /// The protocol version in use.
        version: String,
    },
    /// A legacy session (2025-11-25 or earlier) opened with `initialize`.
    Legacy {
        /// The version the server chose.
        version: String,
    },
}
