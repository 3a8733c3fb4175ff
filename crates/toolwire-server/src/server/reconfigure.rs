//! A running server given new server-wide settings: the output guard, the default time and
//! rate limits, and tools registered again with new settings of their own. Everything is
//! checked first, then swapped in at once; a call in flight ends under the tool (its limits,
//! its guard) it found.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::safety::limits::{DEFAULT_TOOL_RATE_LIMIT, RateLimit};
use crate::safety::output::OutputGuard;
use crate::safety::reload::ReloadEvent;
use crate::server::{DEFAULT_TOOL_TIMEOUT, Server};
use crate::state::fanout::Change;
use crate::tools::registry::ToolDefaults;
use crate::tools::tool::Tool;

/// The server-wide settings a running server takes without a restart
/// ([`Server::reconfigure`]), each set as by the [`ServerBuilder`](crate::ServerBuilder)
/// method of the same name; unset ones are the builder's defaults, not the server's current
/// ones: give the whole configuration.
#[derive(Clone)]
pub struct Reconfigure {
    output_guard: OutputGuard,
    tool_timeout: Option<Duration>,
    rate_limit: Option<RateLimit>,
    tools: Vec<Tool>,
}

impl Default for Reconfigure {
    fn default() -> Self {
        Reconfigure {
            output_guard: OutputGuard::default(),
            tool_timeout: Some(DEFAULT_TOOL_TIMEOUT),
            rate_limit: Some(DEFAULT_TOOL_RATE_LIMIT),
            tools: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Reconfigure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconfigure")
            .field("tool_timeout", &self.tool_timeout)
            .field("rate_limit", &self.rate_limit)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Reconfigure {
    /// The tools' defaults these settings make, checked, and the replacement tools.
    fn checked(self) -> Result<(ToolDefaults, Vec<Tool>)> {
        let Reconfigure {
            output_guard,
            tool_timeout,
            rate_limit,
            tools,
        } = self;
        let compiled = output_guard.compile().map_err(Error::InvalidOutputGuard)?;
        if let Some(limit) = rate_limit {
            limit.quota().map_err(Error::InvalidRateLimit)?;
        }
        let defaults = ToolDefaults {
            timeout: tool_timeout,
            rate_limit,
            output_guard: compiled,
        };
        Ok((defaults, tools))
    }

    /// The builder's defaults: the default output guard, [`DEFAULT_TOOL_TIMEOUT`] and
    /// [`DEFAULT_TOOL_RATE_LIMIT`], every tool as it was given.
    pub fn new() -> Self {
        Self::default()
    }

    /// The server-wide output guard (T-15).
    pub fn output_guard(mut self, guard: OutputGuard) -> Self {
        self.output_guard = guard;
        self
    }

    /// How long a tool that sets no limit of its own may run per call.
    pub fn tool_timeout(mut self, limit: Duration) -> Self {
        self.tool_timeout = Some(limit);
        self
    }

    /// No time limit for tools that set none, with the reason (logged).
    pub fn no_tool_timeout(mut self, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        tracing::warn!(%reason, "tools that set no time limit have none");
        self.tool_timeout = None;
        self
    }

    /// The rate limit of tools that set none.
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// No rate limit for tools that set none, with the reason (logged).
    pub fn no_rate_limit(mut self, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        tracing::warn!(%reason, "tools that set no rate limit have none");
        self.rate_limit = None;
        self
    }

    /// Tools registered again in place of the registered tools of the same names (new
    /// scopes, limits, guards of their own); every other tool is registered again as it was
    /// given, under the new defaults.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }
}

impl Server {
    /// Puts new server-wide settings in place ([`Reconfigure`]): every tool is registered
    /// again under them, all checked first and swapped in at once, so that a list or a call
    /// sees the tools before or after, never a mix; a call in flight ends under the tool it
    /// found. A tool whose rate limit stays as it was keeps its callers' quotas. Listen
    /// streams are told when a listed definition changed (its advertised limits). Refused,
    /// changing nothing, when the guard or a limit is invalid, a tool is refused, or a
    /// replacement names no registered tool.
    pub fn reconfigure(&self, settings: Reconfigure) -> Result<()> {
        let off = settings.output_guard.off_reason().map(str::to_owned);
        let (defaults, tools) = settings.checked()?;
        if self.registry().reconfigure(defaults, tools)? {
            self.notify(Change::Tools);
        }
        if let Some(reason) = off {
            tracing::warn!(target: "toolwire::output", %reason, "output sanitization is off for every tool");
        }
        Ok(())
    }

    /// Whether [`Server::reconfigure`] would take `settings` now: every check it makes (the
    /// guard, the limits, every tool prepared again under them), and nothing changed. For a
    /// reload that changes several parts, checked all before any is changed.
    pub fn check_reconfigure(&self, settings: &Reconfigure) -> Result<()> {
        let (defaults, tools) = settings.clone().checked()?;
        self.registry().prepared(&defaults, tools).map(|_| ())
    }

    /// Whether `tools`, registered or not, would be taken under `settings`' defaults: each
    /// prepared as registering it would (its limits, its cost against its rate limit's bucket,
    /// its guard, its schemas), none registered. A configuration's per-tool settings checked
    /// on their own, before the tools they are for exist.
    pub fn check_tools(&self, settings: &Reconfigure, tools: Vec<Tool>) -> Result<()> {
        let (defaults, _) = settings.clone().checked()?;
        self.registry().check_alone(&defaults, tools)
    }

    /// Records a reload of the configuration (applied or refused) in the audit sink, if the
    /// server has one, and in the log (target `toolwire::audit`).
    pub fn audit_reload(&self, event: &ReloadEvent) {
        match event.reason.as_deref() {
            Some(reason) => tracing::warn!(
                target: "toolwire::audit",
                file_sha256 = %event.file_sha256,
                %reason,
                "reload refused"
            ),
            None => tracing::info!(
                target: "toolwire::audit",
                file_sha256 = %event.file_sha256,
                changed = ?event.changed,
                "reload applied"
            ),
        }
        if let Some(sink) = self.audit() {
            sink.record_reload(event);
            sink.flush();
        }
    }
}
