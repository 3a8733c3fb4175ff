//! Finding the right tool among thousands: a lexical index over MCP tool definitions that
//! works offline, with no model.
//!
//! A [`ToolIndex`] is made whole from the definitions a caller could be offered
//! ([`Entry`]: the name it is called by, its server, the definition as listed) and answers
//! [`Query`]s with the best [`Hit`]s first. Each tool's text is indexed by field, each field
//! scored with BM25 (the [`bm25`] crate's term weights and English tokenizer: Unicode words,
//! stop words, Snowball stemming) and the scores added with weights ([`Weights`]):
//!
//! - its **name**, split into words at `__`, `_`, `-`, `.` and camelCase (`get_file_contents`,
//!   `createIssue`), both the name it is called by and the upstream's;
//! - its **server** (the prefix), **title** and **description**;
//! - its **parameters**: their names (split) and descriptions, nested objects' included;
//! - and **all** of them as one text.
//!
//! By default the whole text counts, and the description a little more (chosen on half of
//! `bench/search`'s queries, confirmed on the other half).
//!
//! A query that is exactly a tool's name (the name it is called by, or the upstream's) ranks
//! that tool first. Ties are broken by name, so the same index and query always give the same
//! answer. The index decides nothing about who may use a tool: a search takes the caller's
//! check (`allowed`), and a tool it refuses is neither returned nor counted.
//!
//! An optional semantic stage ([`ToolIndex::search_hybrid`]) weighs in the query's cosine with
//! each tool's embedding ([`Vectors`] of [`embedding_text`]), which the caller computes with a
//! model of its choice: this crate makes no request. Lexical search needs none of it.
//!
//! ```
//! use std::sync::Arc;
//! use toolwire_protocol::Tool;
//! use toolwire_search::{Entry, Query, ToolIndex};
//!
//! let tool = |name: &str, description: &str| -> Arc<Tool> {
//!     Arc::new(serde_json::from_value(serde_json::json!({
//!         "name": name, "description": description, "inputSchema": {"type": "object"}
//!     })).unwrap())
//! };
//! let index = ToolIndex::new(vec![
//!     Entry::new("time__get_current_time", "time", tool("get_current_time", "Get the current time in a timezone")),
//!     Entry::new("git__git_log", "git", tool("git_log", "Shows the commit logs")),
//! ]);
//! let found = index.search(&Query::new("which commits were made recently"), &|_| true).unwrap();
//! assert_eq!(found.hits[0].entry.name, "git__git_log");
//! ```

mod error;
mod index;
mod semantic;
mod words;

pub use error::SearchError;
pub use index::{Entry, Found, Hit, Query, ToolIndex, Weights};
pub use semantic::{ALPHA, COSINE_FLOOR, VectorError, Vectors, embedding_text};

/// The number of results a search returns unless asked for another.
pub const DEFAULT_LIMIT: usize = 5;

/// The most results one search returns.
pub const MAX_LIMIT: usize = 20;

/// The longest query taken, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
