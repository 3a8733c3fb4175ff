#![deny(missing_docs)]

//! Toolwire's host library: the layer an agent or a host application is built on, over
//! [`toolwire-client`](https://docs.rs/toolwire-client). It reads the server configuration
//! people already have ([`config`]), gives every server's tools one list of qualified names
//! within a model API's length budget ([`names`]), keeps a hash-chained audit log ([`audit`]), pins tool definitions against silent changes
//! ([`pins`]), decides which calls go ahead, are asked about or are refused ([`policy`]),
//! and matches tool names against the globs of
//! filters and approval rules ([`glob`]).

pub mod audit;
pub mod config;
pub mod glob;
pub mod host;
pub mod names;
pub mod pins;
pub mod policy;

pub use audit::{AuditError, AuditLog, Head, Tampering, Verified, verify};
pub use config::{
    ApprovalRules, ConfigError, HostConfig, ServerConfig, ToolFilter, Transport, Variables,
};
pub use glob::Globs;
pub use host::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_RESULT_CHARS, Host, HostError, HostOptions, HostTool,
    ServerState, ServerStatus,
};
pub use names::{DEFAULT_NAME_BUDGET, NameError, Names, ToolRef};
pub use pins::{
    Change, FilePins, MemoryPins, PinReport, PinState, PinStore, Pins, definition_hash,
};
pub use policy::{
    Answer, ApprovalRequest, Approved, Approver, Call, FileRemembered, MemoryRemembered, Policy,
    Reason, Refusal, Remembered, Verdict,
};
