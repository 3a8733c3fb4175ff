//! The `[limits]` and `[handles]` sections of `serve --config`, and the rate keys of
//! `[tools.NAME]`: how often callers may call tools and send requests, and how long note
//! handles live.

use std::time::Duration;

use anyhow::{anyhow, bail};
use serde::Deserialize;
use toolwire_server::RateLimit;
use toolwire_server::http::HttpConfig;

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Each caller's quota per tool: calls per `tool_period_seconds`.
    #[serde(default)]
    tool_calls: Option<u32>,
    #[serde(default)]
    tool_period_seconds: Option<u64>,
    #[serde(default)]
    tool_burst: Option<u32>,
    /// The reason tools that set none have no quota.
    #[serde(default)]
    off: Option<String>,
    #[serde(default)]
    http_requests_per_second: Option<u32>,
    #[serde(default)]
    http_burst: Option<u32>,
    /// The reason HTTP requests have no flood limit.
    #[serde(default)]
    http_off: Option<String>,
    /// The header a trusted proxy puts the client's address in.
    #[serde(default)]
    forwarded_header: Option<String>,
    /// How many proxies in front of the server add to `forwarded_header`.
    #[serde(default)]
    trusted_proxies: Option<usize>,
}

/// `rate_limit = { calls = 10, period_seconds = 60, burst = 10 }` of `[tools.NAME]`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitConfig {
    calls: u32,
    #[serde(default = "minute")]
    period_seconds: u64,
    #[serde(default)]
    burst: Option<u32>,
}

fn minute() -> u64 {
    60
}

/// `[handles]`: the notes' handles.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HandlesConfig {
    #[serde(default)]
    idle_seconds: Option<u64>,
    #[serde(default)]
    max_age_seconds: Option<u64>,
    /// Keep handles in memory instead of the data directory's SQLite file.
    #[serde(default)]
    pub(crate) in_memory: bool,
}

/// A reason given for turning something off: it must say something.
pub(crate) fn reason(key: &str, reason: Option<&String>) -> anyhow::Result<()> {
    if reason.is_some_and(|r| r.trim().is_empty()) {
        bail!("{key}: give the reason");
    }
    Ok(())
}

fn limit(calls: u32, period: Duration, burst: Option<u32>) -> RateLimit {
    let limit = RateLimit::new(calls, period);
    match burst {
        Some(burst) => limit.burst(burst),
        None => limit,
    }
}

impl RateLimitConfig {
    pub(crate) fn limit(&self) -> RateLimit {
        limit(
            self.calls,
            Duration::from_secs(self.period_seconds),
            self.burst,
        )
    }

    pub(crate) fn check(&self, key: &str) -> anyhow::Result<()> {
        if self.period_seconds == 0 {
            bail!("{key}.period_seconds: must be at least 1");
        }
        check_limit(key, self.limit())
    }
}

fn check_limit(key: &str, limit: RateLimit) -> anyhow::Result<()> {
    if limit.calls() == 0 {
        bail!("{key}: must allow at least one call");
    }
    if limit.burst_size() == 0 {
        bail!("{key}: the burst must be at least 1");
    }
    Ok(())
}

impl LimitsConfig {
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        reason("limits.off", self.off.as_ref())?;
        reason("limits.http_off", self.http_off.as_ref())?;
        if self.off.is_some() && (self.tool_calls.is_some() || self.tool_burst.is_some()) {
            bail!("limits: off together with tool_calls or tool_burst");
        }
        if self.http_off.is_some()
            && (self.http_requests_per_second.is_some() || self.http_burst.is_some())
        {
            bail!("limits: http_off together with http_requests_per_second or http_burst");
        }
        if self.tool_period_seconds == Some(0) {
            bail!("limits.tool_period_seconds: must be at least 1");
        }
        if let Some(limit) = self.tool_limit() {
            check_limit("limits.tool_calls", limit)?;
        }
        if let Some(limit) = self.http_limit() {
            check_limit("limits.http_requests_per_second", limit)?;
        }
        if let Some(name) = &self.forwarded_header {
            http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| anyhow!("limits.forwarded_header: {name:?} is not a header name"))?;
        }
        match (self.trusted_proxies, &self.forwarded_header) {
            (Some(0), _) => bail!("limits.trusted_proxies: must be at least 1"),
            (Some(_), None) => bail!("limits.trusted_proxies: needs limits.forwarded_header"),
            _ => {}
        }
        Ok(())
    }

    /// The tool quota the section sets, if it sets one.
    fn tool_limit(&self) -> Option<RateLimit> {
        if self.tool_calls.is_none()
            && self.tool_burst.is_none()
            && self.tool_period_seconds.is_none()
        {
            return None;
        }
        let default = toolwire_server::DEFAULT_TOOL_RATE_LIMIT;
        Some(limit(
            self.tool_calls.unwrap_or(default.calls()),
            self.tool_period_seconds
                .map_or(default.period(), Duration::from_secs),
            self.tool_burst,
        ))
    }

    fn http_limit(&self) -> Option<RateLimit> {
        if self.http_requests_per_second.is_none() && self.http_burst.is_none() {
            return None;
        }
        let default = toolwire_server::http::DEFAULT_FLOOD_LIMIT;
        let per_second = self.http_requests_per_second.unwrap_or(default.calls());
        Some(limit(
            per_second,
            Duration::from_secs(1),
            self.http_burst.or(Some(per_second.saturating_mul(2))),
        ))
    }

    /// The server builder with the section's tool quota.
    pub(crate) fn apply(
        &self,
        builder: toolwire_server::ServerBuilder,
    ) -> toolwire_server::ServerBuilder {
        match (&self.off, self.tool_limit()) {
            (Some(reason), _) => builder.no_rate_limit(reason.clone()),
            (None, Some(limit)) => builder.rate_limit(limit),
            (None, None) => builder,
        }
    }

    /// A reconfiguration with the section's tool quota (a reload).
    pub(crate) fn reconfigure(
        &self,
        reconfigure: toolwire_server::Reconfigure,
    ) -> toolwire_server::Reconfigure {
        match (&self.off, self.tool_limit()) {
            (Some(reason), _) => reconfigure.no_rate_limit(reason.clone()),
            (None, Some(limit)) => reconfigure.rate_limit(limit),
            (None, None) => reconfigure,
        }
    }

    /// The flood limit the section sets (`None`: off), for a reload.
    pub(crate) fn flood_limit(&self) -> Option<RateLimit> {
        match (&self.http_off, self.http_limit()) {
            (Some(_), _) => None,
            (None, Some(limit)) => Some(limit),
            (None, None) => Some(toolwire_server::http::DEFAULT_FLOOD_LIMIT),
        }
    }

    /// The HTTP config with the section's flood limit and forwarding header.
    /// The header the client's address is read from, behind a proxy.
    pub(crate) fn forwarded_header(&self) -> Option<&str> {
        self.forwarded_header.as_deref()
    }

    pub(crate) fn apply_http(&self, config: HttpConfig) -> HttpConfig {
        let mut config = match (&self.http_off, self.http_limit()) {
            (Some(reason), _) => config.no_flood_limit(reason.clone()),
            (None, Some(limit)) => config.flood_limit(limit),
            (None, None) => config,
        };
        if let Some(name) = &self.forwarded_header {
            if let Ok(name) = http::HeaderName::from_bytes(name.as_bytes()) {
                config = config.forwarded_header(name);
            }
        }
        if let Some(hops) = self.trusted_proxies {
            config = config.trusted_proxies(hops);
        }
        config
    }
}

impl HandlesConfig {
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if self.idle_seconds == Some(0) {
            bail!("handles.idle_seconds: must be at least 1");
        }
        if self.max_age_seconds == Some(0) {
            bail!("handles.max_age_seconds: must be at least 1");
        }
        if let (Some(idle), Some(max)) = (self.idle_seconds, self.max_age_seconds) {
            if idle > max {
                bail!("handles.idle_seconds: longer than max_age_seconds ({idle} > {max})");
            }
        }
        Ok(())
    }

    /// The idle and absolute lifetimes.
    pub(crate) fn lifetimes(&self) -> (Duration, Duration) {
        use toolwire_server::handles::{DEFAULT_HANDLE_IDLE, DEFAULT_HANDLE_MAX_AGE};
        let max = self
            .max_age_seconds
            .map_or(DEFAULT_HANDLE_MAX_AGE, Duration::from_secs);
        let idle = self
            .idle_seconds
            .map_or(DEFAULT_HANDLE_IDLE.min(max), Duration::from_secs);
        (idle, max)
    }
}
