#![deny(missing_docs)]

//! Toolwire's host library: the layer an agent or a host application is built on, over
//! [`toolwire-client`](https://docs.rs/toolwire-client). It reads the server configuration
//! people already have ([`config`]), gives every server's tools one list of qualified names
//! within a model API's length budget ([`names`]), and matches tool names against the globs of
//! filters and approval rules ([`glob`]).

pub mod config;
pub mod glob;
pub mod names;

pub use config::{
    ApprovalRules, ConfigError, HostConfig, ServerConfig, ToolFilter, Transport, Variables,
};
pub use glob::Globs;
pub use names::{DEFAULT_NAME_BUDGET, NameError, Names, ToolRef};
