//! The gateway's file as read: JSON, its upstreams (`mcpServers`), and its `"gateway"` object's
//! downstream settings with the gateway-only keys (`policy`, `discovery`, `held`, `pins`).

use std::path::Path;

use toolwire_gateway::RulesConfig;
use toolwire_gateway::discovery::DiscoveryConfig;
use toolwire_host::HostConfig;

use super::GATEWAY_KEY;
use crate::config::{self, ServeConfig};

/// The downstream side of a gateway file.
pub(super) struct Downstream {
    /// The settings `toolwire serve` has too.
    pub(super) settings: ServeConfig,
    /// `gateway.policy`: who may call what.
    pub(super) policy: Option<RulesConfig>,
    /// `gateway.discovery`: what each caller's list holds, every tool or the search tools.
    pub(super) discovery: Option<DiscoveryConfig>,
    /// `gateway.held`: calls held for a legacy upstream's question.
    pub(super) held: Held,
    /// `gateway.pins`: how definitions are pinned.
    pub(super) pins: PinsSetting,
}

/// `gateway.pins`: `holdNew` holds a tool, prompt, resource or template new to an upstream
/// that has pins already until an operator approves it (off by default; see
/// `HostOptions::hold_new_names`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct PinsSetting {
    #[serde(default)]
    pub(super) hold_new: bool,
}

/// `gateway.held`: how long a call held for a 2025-11-25 upstream's question waits for the
/// caller's answer, and how many one instance holds.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Held {
    pub(super) ttl_ms: Option<u64>,
    pub(super) max: Option<usize>,
}

/// Most a held call may wait: an hour (a person answers a form within minutes).
const MOST_HELD_MS: u64 = 3_600_000;

/// The file's content as JSON.
pub(super) fn file_json(text: &[u8], file: &Path) -> anyhow::Result<serde_json::Value> {
    serde_json::from_slice(text).map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", file.display()))
}

/// The upstreams of the file's content `text`.
pub(super) fn upstreams_of(text: &[u8], file: &Path) -> anyhow::Result<HostConfig> {
    let text = std::str::from_utf8(text)
        .map_err(|e| anyhow::anyhow!("{}: not UTF-8: {e}", file.display()))?;
    let variables = toolwire_host::Variables::from_process(file);
    Ok(HostConfig::parse(text, file, &variables)?)
}

/// The file's `"gateway"` object (the defaults of `toolwire serve` without one), with its
/// gateway-only keys (`policy`, `discovery`, `held`, `pins`); `value` is the file's content.
pub(super) fn downstream_of(value: &serde_json::Value, file: &Path) -> anyhow::Result<Downstream> {
    let shown = file.display();
    let Some(gateway) = value.get(GATEWAY_KEY) else {
        return Ok(Downstream {
            settings: ServeConfig::default(),
            policy: None,
            discovery: None,
            held: Held::default(),
            pins: PinsSetting::default(),
        });
    };
    let mut gateway = gateway.clone();
    let mut take = |key: &str| gateway.as_object_mut().and_then(|g| g.remove(key));
    let policy = match take("policy") {
        Some(policy) => Some(
            serde_json::from_value(policy)
                .map_err(|e| crate::terminal::Lines(format!("{shown}: gateway.policy: {e}")))?,
        ),
        None => None,
    };
    let discovery = match take("discovery") {
        // The error names the field: `discovery.callers[0].mode: …`.
        Some(discovery) => Some(
            DiscoveryConfig::from_json(&discovery)
                .map_err(|e| anyhow::anyhow!("{shown}: gateway.{e}"))?,
        ),
        None => None,
    };
    let held: Held = match take("held") {
        Some(held) => serde_json::from_value(held)
            .map_err(|e| anyhow::anyhow!("{shown}: gateway.held: {e}"))?,
        None => Held::default(),
    };
    if held.ttl_ms.is_some_and(|ms| ms == 0 || ms > MOST_HELD_MS) {
        anyhow::bail!(
            "{shown}: gateway.held.ttlMs: give a wait from 1 to {MOST_HELD_MS} ms (an hour)"
        );
    }
    if held.max == Some(0) {
        anyhow::bail!(
            "{shown}: gateway.held.max: give at least 1 (a gateway that may hold no call refuses every legacy upstream's question)"
        );
    }
    let pins: PinsSetting = match take("pins") {
        Some(pins) => serde_json::from_value(pins)
            .map_err(|e| anyhow::anyhow!("{shown}: gateway.pins: {e}"))?,
        None => PinsSetting::default(),
    };
    Ok(Downstream {
        settings: config::from_json(&gateway, file)?,
        policy,
        discovery,
        held,
        pins,
    })
}
