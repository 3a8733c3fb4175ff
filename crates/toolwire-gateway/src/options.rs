//! How a gateway serves its upstreams' tools: [`GatewayOptions`], given to
//! [`Gateway::start`](crate::Gateway::start) and to a reload.

use std::sync::Arc;
use std::time::Duration;

use toolwire_host::HostTool;
use toolwire_server::Tool;

use crate::discovery::Discovery;
use crate::rules::Rules;

/// What the server author (or the CLI's configuration) adds to each mirrored tool before it
/// is served: scopes, a rate limit, a deadline, an output guard. Given the upstream tool and
/// the tool as the gateway made it.
pub type ToolSettings = Arc<dyn Fn(&HostTool, Tool) -> Tool + Send + Sync>;

/// How long [`Gateway::start`](crate::Gateway::start) waits by default for the upstreams' first answers: under the
/// 15 s the MCP Inspector gives a stdio server to start, and well under most hosts' minute.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// How a gateway serves its upstreams' tools.
pub struct GatewayOptions {
    pub(crate) settings: Option<ToolSettings>,
    pub(crate) rules: Option<Rules>,
    pub(crate) start_wait: Duration,
    pub(crate) oauth_insecure_http: bool,
    pub(crate) hold_ttl: Duration,
    pub(crate) max_held: usize,
    pub(crate) discovery: Option<Discovery>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            settings: None,
            rules: None,
            start_wait: START_WAIT,
            oauth_insecure_http: false,
            hold_ttl: crate::hold::HOLD_TTL,
            max_held: crate::hold::MAX_HELD,
            discovery: None,
        }
    }
}

impl std::fmt::Debug for GatewayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayOptions")
            .field("settings", &self.settings.is_some())
            .field("rules", &self.rules.as_ref().map(Rules::len))
            .field("start_wait", &self.start_wait)
            .field("oauth_insecure_http", &self.oauth_insecure_http)
            .field("hold_ttl", &self.hold_ttl)
            .field("max_held", &self.max_held)
            .field("discovery", &self.discovery)
            .finish()
    }
}

impl GatewayOptions {
    /// Default options: each tool served as its upstream lists it, the start waiting
    /// [`START_WAIT`] at most for the upstreams.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long [`Gateway::start`](crate::Gateway::start) waits for the upstreams' first answers before it returns
    /// (default [`START_WAIT`]): an upstream that has not answered by then is served once it
    /// does, and listeners are told of its tools. A stdio host gives the gateway a bounded
    /// time to start, so one slow upstream must not cost it all the others.
    pub fn start_wait(mut self, wait: Duration) -> Self {
        self.start_wait = wait;
        self
    }

    /// Development only: the token exchanges of upstreams (`"oauth": {"tokenExchange": …}`)
    /// may reach a plain `http:` authorization server anywhere, not only at the upstream's
    /// own origin (pair it with [`HostOptions::oauth_insecure_http`](toolwire_host::HostOptions::oauth_insecure_http) for the upstreams' own
    /// OAuth flows).
    pub fn oauth_insecure_http(mut self) -> Self {
        self.oauth_insecure_http = true;
        self
    }

    /// How long a call is held for its caller's answer when a legacy (2025-11-25) upstream
    /// asks a question during it (default [`HOLD_TTL`](crate::HOLD_TTL)): unanswered by then,
    /// the question is declined (elicitation) or refused (sampling, roots) upstream, and the
    /// call dropped. The upstream's own wait is bounded by its call timeout too.
    pub fn hold_ttl(mut self, ttl: Duration) -> Self {
        self.hold_ttl = ttl;
        self
    }

    /// How many calls one gateway instance holds at most for their callers' answers (default
    /// [`MAX_HELD`](crate::MAX_HELD)): beyond it, a legacy upstream's question is refused
    /// upstream and the caller gets an error that says so.
    pub fn max_held(mut self, calls: usize) -> Self {
        self.max_held = calls;
        self
    }

    /// Changes each mirrored tool before it is served (see [`ToolSettings`]).
    pub fn tool_settings(
        mut self,
        settings: impl Fn(&HostTool, Tool) -> Tool + Send + Sync + 'static,
    ) -> Self {
        self.settings = Some(Arc::new(settings));
        self
    }

    /// How callers come to the tools ([`Discovery`]): each caller's list holds every tool it
    /// may use, or only the search tools and the always-on ones. Without it, `auto` with the
    /// [`DEFAULT_THRESHOLD`](crate::discovery::DEFAULT_THRESHOLD): search for a caller that may
    /// use more tools than that.
    pub fn discovery(mut self, discovery: Discovery) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// Who may call what ([`Rules`]): a tool the rules deny a caller whatever the arguments
    /// is out of that caller's list; each call is made, refused with the rule that refused
    /// it, or first put to the person behind the caller (`ask`). Without rules every caller
    /// sees and calls every served tool.
    pub fn rules(mut self, rules: Rules) -> Self {
        self.rules = Some(rules);
        self
    }
}
