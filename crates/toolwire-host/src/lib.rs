#![deny(missing_docs)]

//! Toolwire's host library: the layer an agent or a host application is built on, over
//! [`toolwire-client`](https://docs.rs/toolwire-client). [`Host`] puts many servers behind one
//! tool list and calls them for the model. Its parts are usable alone: the server configuration
//! people already have ([`config`]), qualified names within a model API's length budget
//! ([`names`]) and resource URIs that map back to their server ([`uris`]), pins of tool definitions against silent changes ([`pins`]), the approval policy
//! ([`policy`]), the hash-chained audit log ([`audit`]) and glob lists ([`glob`]).
//!
//! ```no_run
//! use std::{future::Future, pin::Pin};
//! use toolwire_host::{Answer, ApprovalRequest, Approver, FileTrust, Host, HostOptions, ProjectFile};
//!
//! struct AllowOnce;
//!
//! impl Approver for AllowOnce {
//!     fn approve<'a>(&'a self, call: ApprovalRequest<'a>) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
//!         eprintln!("{} with {} ({})", call.qualified, call.arguments, call.reason);
//!         Box::pin(async { Answer::AllowOnce })
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // A project's .mcp.json runs nothing until the person has trusted it, as it is now (show
//! // them `ProjectFile::review` and record their answer with `ProjectFile::decide`).
//! let trusted = FileTrust::new("/home/me/.local/state/my-agent");
//! let config = ProjectFile::read(".mcp.json")?.load(&trusted)?;
//! let host = Host::connect(&config, HostOptions::new(AllowOnce).audit_log("audit.jsonl")).await?;
//! let tools: Vec<_> = host.tools().iter().map(|t| t.for_model()).collect();
//! let result = host.call("time__get_current_time", serde_json::json!({"timezone": "UTC"})).await;
//! host.close().await;
//! # Ok(())
//! # }
//! ```

pub mod audit;
pub mod config;
pub mod glob;
pub mod host;
pub mod names;
pub mod pins;
pub mod policy;
mod private;
pub mod uris;
mod util;

pub use audit::{
    AuditError, AuditLog, Head, Redaction, RedactionError, Tampering, Verified, verify,
};
pub use config::{
    ApprovalRules, AuditConfig, ConfigError, Decision, FileTrust, HostConfig, IgnoredKey,
    MemoryTrust, OAuthSettings, Origin, ProjectError, ProjectFile, Review, SandboxSetting,
    SandboxStatus, ServerConfig, TokenExchangeSettings, ToolFilter, Transport, TrustError,
    TrustStore, Variables,
};
pub use glob::{GlobError, Globs};
pub use host::{
    AuthorizerFor, Called, DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_RESULT_CHARS, FoundTool, Hidden, Host,
    HostError, HostOptions, HostPrompt, HostResource, HostTemplate, HostTool, ListChange,
    ListChanges, OfferError, OfferKind, OfferPins, Outcome, Prompts, RETIRE_WAIT, Reconfiguration,
    ResourceTemplates, Resources, ServerChanges, ServerState, ServerStatus, Tools,
};
pub use names::{DEFAULT_NAME_BUDGET, NameError, Names, ToolRef};
#[cfg(feature = "redis")]
pub use pins::RedisPins;
pub use pins::{
    Change, FilePins, MemoryPins, PinReport, PinState, PinStore, Pins, definition_hash,
};
pub use policy::{
    Answer, ApprovalRequest, Approved, Approver, Call, FileRemembered, MemoryRemembered, Policy,
    PolicyError, Reason, Refusal, RememberError, Remembered, Verdict,
};
/// The index behind [`Host::search_tools`] (its limits, and [`SearchError`]).
pub use toolwire_search;
pub use toolwire_search::SearchError;
