#![deny(missing_docs)]

//! Toolwire's gateway: the MCP servers a team runs (stdio ones from npm and PyPI, remote HTTP
//! ones, either protocol era) behind one endpoint with one sign-in, one policy and one audit
//! log. A [`Gateway`] connects to every upstream server through [`toolwire_host::Host`] and
//! serves their tools, named `prefix__tool`, as the tools of one [`toolwire_server::Server`],
//! which brings its own sign-in, limits, output guard and audit to every call; their prompts
//! (`prefix__name`), resources and resource templates (`toolwire://PREFIX/URI`, reversible:
//! [`toolwire_host::uris`]) beside them. Upstream lists are followed: a change upstream
//! reaches downstream listeners, an upstream that fails is retried with backoff while its
//! last good list is still offered, and one that changes a tool's definition has that tool
//! withheld until an operator approves the change. The resources downstream listeners follow
//! (`resourceSubscriptions`, a legacy caller's `resources/subscribe`) are followed on the
//! upstream that offers them, under its own URIs, at most [`MAX_FOLLOWED`] per upstream, and
//! its updates reach those listeners under the served URIs. An upstream that needs input mid-call (a
//! 2026-07-28 `input_required` round, of a tool call, a prompt or a resource read) has its
//! questions relayed to the caller verbatim and the caller's answers taken back upstream,
//! statelessly: the upstream's state travels sealed inside the gateway's own. A 2025-11-25
//! upstream's request during a call (elicitation, sampling, roots) is relayed as a round too,
//! but not statelessly: the upstream call is held, running, in the gateway instance that
//! received it, for a bounded time ([`GatewayOptions::hold_ttl`]) and up to a cap
//! ([`GatewayOptions::max_held`]); the caller's retry must reach that instance (with several
//! instances, route a caller's retries to the instance that answered its first round), and
//! one that reaches another is told so. An upstream configured for token exchange
//! (`"oauth": {"tokenExchange": …}`) is called for each caller with a token exchanged for that
//! caller's own at its authorization server (RFC 8693), never with the caller's token.
//!
//! A running gateway takes a new configuration with [`Gateway::reload`]: upstreams added,
//! removed and changed, its rules, held calls' bounds and tools' settings, with calls in
//! flight ending under what they started with.
//!
//! - [`rules`]: who may call what, as CEL rules over the caller, the tool and the arguments.
//! - [`discovery`]: how callers come to the tools when there are too many to list: each
//!   caller's list holds every tool it may use, or `search_tools` and `call_tool`.
//! - [`console`]: an operator's HTML pages for the admin address: upstreams, tools, approvals
//!   of changed definitions, the audit logs.

mod clean;
pub mod console;
pub mod discovery;
mod exchange;
mod forward;
mod gateway;
mod hold;
mod mirror;
mod observe;
mod offers;
mod options;
mod policy;
mod relay;
mod reload;
pub mod rules;
mod starting;
mod watch;

pub use gateway::{Gateway, GatewayError, NoPerson};
pub use hold::{HOLD_TTL, MAX_HELD};
pub use mirror::{LOOP_META_KEY, UPSTREAM_META_KEY, Unserved};
pub use options::{GatewayOptions, START_WAIT, ToolSettings};
pub use reload::Reloaded;
pub use rules::{Caller, Decision, Effect, RuleError, Rules, RulesConfig, ToolFacts};
pub use watch::{MAX_FOLLOWED, REFOLLOW_WAIT, RETRY_FIRST, RETRY_MOST};
