//! Message types of the Model Context Protocol, revision 2026-07-28, as plain serde data.
//!
//! This crate does no I/O. Every message of the official schema has a type here; unknown fields
//! of extensible objects (`_meta`, capabilities, tools…) are kept in an `extra` map so they
//! survive a round-trip, and JSON Schemas are kept as untouched JSON objects.
//!
//! ```
//! use toolwire_protocol::{CallToolResult, ContentBlock};
//!
//! let result = CallToolResult::text("hello");
//! let json = serde_json::to_value(&result).unwrap();
//! assert_eq!(json["resultType"], "complete");
//! assert_eq!(json["content"][0], serde_json::json!({"type": "text", "text": "hello"}));
//! let back: CallToolResult = serde_json::from_value(json).unwrap();
//! assert!(matches!(&back.content[0], ContentBlock::Text(t) if t.text == "hello"));
//! ```

#![warn(missing_docs)]

mod capabilities;
mod completion;
mod content;
mod error;
mod extra;
pub mod headers;
pub mod hex;
mod jsonrpc;
pub mod legacy;
mod meta;
pub mod methods;
mod mrtr;
mod notifications;
mod prompts;
mod resources;
mod results;
#[cfg(feature = "schema")]
pub mod schema;
pub mod strings;
mod subscriptions;
mod tasks;
mod tools;
mod ttl;

pub use capabilities::*;
pub use completion::*;
pub use content::*;
pub use error::*;
pub use jsonrpc::*;
pub use meta::*;
pub use mrtr::*;
pub use notifications::*;
pub use prompts::*;
pub use resources::*;
pub use results::*;
pub use subscriptions::*;
pub use tasks::*;
pub use tools::*;

/// The protocol revision this crate implements.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// A JSON object (`{"key": value, …}`), as used for schemas, `_meta` and open-ended fields.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// Whether an object has no entries; used to skip empty `extra` maps when serializing.
pub(crate) fn is_empty_object(map: &JsonObject) -> bool {
    map.is_empty()
}
