#![deny(missing_docs)]

//! What a tool returns, made safe to hand on: to a model, a person's terminal or a log. Shared by
//! the server's output guard (T-15: servers sanitize outputs) and the host, which cleans what
//! reaches the model and redacts arguments in its audit log.
//!
//! - [`text`]: ANSI escape sequences and control characters removed (newline and tab stay), and
//!   text cut at a character boundary.
//! - [`secrets`]: credentials replaced by `[REDACTED:kind]`, with [`DEFAULT_SECRET_PATTERNS`] and
//!   the caller's own.
//!
//! Text that needs no work is never copied: both return a borrowed [`Cow`](std::borrow::Cow).
//!
//! ```
//! use toolwire_sanitize::{Redactor, text};
//!
//! let (clean, removed) = text::clean("\u{1b}[31mred\u{1b}[0m");
//! assert_eq!((clean.as_ref(), removed), ("red", 9));
//! let redactor = Redactor::defaults().unwrap();
//! let (safe, found) = redactor.redact("token ghp_0123456789abcdefghijklmnopqrstuvwxyz");
//! assert_eq!((safe.as_ref(), found), ("token [REDACTED:github-token]", 1));
//! ```

pub mod secrets;
pub mod text;

pub use secrets::{DEFAULT_SECRET_PATTERNS, Redactor};
