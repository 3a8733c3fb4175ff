#![deny(missing_docs)]

//! The gateway: the MCP servers a team runs, behind one endpoint with one sign-in, one policy
//! and one audit log. This crate holds its parts.
//!
//! - [`rules`]: who may call what, as CEL rules over the caller, the tool and the arguments.

pub mod rules;

pub use rules::{Caller, Decision, Effect, RuleError, Rules, RulesConfig, ToolFacts};
