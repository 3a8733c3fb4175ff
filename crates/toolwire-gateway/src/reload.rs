//! A running gateway given a new configuration: its upstreams added, removed and changed, its
//! rules, its discovery modes, the bounds of held calls, the settings of served tools, the downstream server's own
//! settings and the upstreams' trust and token exchanges replaced. Everything is checked before
//! anything changes — the server's new settings against every served tool as it would be made
//! under the new tools' settings too —; the host's servers are swapped first (the one step that
//! can still refuse), then the server's settings, then the rest, then the served list is
//! brought in step, as one change for listeners. A reload refused changed nothing. A call in
//! flight ends under what it started with: the tool it found, the rules that decided it, its
//! upstream's connection.

use std::sync::Arc;

use toolwire_host::{HostConfig, ServerChanges};
use toolwire_server::Reconfigure;

use crate::gateway::{Gateway, GatewayError, asking, trusted_of};
use crate::options::GatewayOptions;
use crate::rules::{Rules, RulesConfig};

/// What a reload changed among the upstreams ([`Gateway::reload`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The upstreams added, removed and changed (a changed one is connected again).
    pub upstreams: ServerChanges,
}

impl Gateway {
    /// Puts `config` (the upstreams) and `options` (the rules, the bounds of held calls, each
    /// tool's settings) in place of the gateway's: an added upstream is connected and its
    /// tools served (pinned as usual), a removed one's tools leave the list and its connection
    /// is closed once its calls in flight end, a changed one is connected again; listeners
    /// are told the list changed. Refused, changing nothing, when `config` has `approval.ask`
    /// rules or does not check as [`Gateway::start`]'s would. `options`'
    /// [`start_wait`](GatewayOptions::start_wait) and
    /// [`oauth_insecure_http`](GatewayOptions::oauth_insecure_http) are those of the start
    /// and are not read. Needs a Tokio runtime.
    pub fn reload(
        &self,
        config: &HostConfig,
        options: GatewayOptions,
    ) -> Result<Reloaded, GatewayError> {
        self.reload_with(config, options, None)
    }

    /// [`Gateway::reload`], and the downstream server's own settings (`server`: its output
    /// guard, default deadline and rate limit) with them, all or nothing: the server's
    /// settings are checked against every served tool, as served now and as it would be
    /// served under `options`' tool settings, before anything changes, so that a reload
    /// refused (a tool's cost its new rate limit's bucket never holds, say) has changed none of
    /// the rules, upstreams or settings.
    pub fn reload_with(
        &self,
        config: &HostConfig,
        options: GatewayOptions,
        server: Option<Reconfigure>,
    ) -> Result<Reloaded, GatewayError> {
        let inner = &self.inner;
        let _one_at_a_time = inner.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let asking = asking(config);
        if !asking.is_empty() {
            return Err(GatewayError::AskRules(asking));
        }
        let rules = match options.rules {
            Some(rules) => rules,
            None => Rules::compile(&RulesConfig::default())?,
        };
        let discovery = crate::discovery::chosen(options.discovery, config)?;
        let prepared = inner.host.prepare(config)?;
        if let Some(server) = &server {
            inner.server.check_reconfigure(server)?;
            let trusted = trusted_of(config);
            let trusted = |name: &str| trusted.get(name).copied().unwrap_or(false);
            let remade = inner
                .mirror
                .remade(&inner.host, trusted, options.settings.as_ref());
            inner
                .server
                .check_reconfigure(&server.clone().tools(remade))?;
        }
        let upstreams = inner.host.apply(prepared)?;
        if let Some(server) = server {
            // Checked above against every served tool: it refuses nothing unless a tool came
            // in between (then that tool is not served, and says why).
            inner.server.reconfigure(server)?;
        }
        // From here on nothing fails.
        inner.policy.set_rules(rules);
        inner.holds.set_bounds(options.hold_ttl, options.max_held);
        inner.exchanges.reload(config);
        inner.trusted.store(Arc::new(trusted_of(config)));
        inner.mirror.set_settings(options.settings);
        inner.search.reload(discovery, config);
        if let Err(error) = inner.serve_search_tools() {
            // Static definitions the server took at the start: refused only if a served tool
            // took their names, which the prefixes' check rules out.
            tracing::error!(%error, "the search tools could not be served after the reload");
        }
        for removed in &upstreams.removed {
            inner.unfollow(removed);
        }
        for started in upstreams.added.iter().chain(&upstreams.changed) {
            inner.follow(started);
        }
        inner.sync();
        Ok(Reloaded { upstreams })
    }
}
