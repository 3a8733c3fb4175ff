//! The contract every state backend keeps, as test suites that take a factory of backends and
//! panic on the first broken promise. The in-memory backends run them in this crate's tests; a
//! shared backend (here or in another crate, with the `contract-tests` feature) runs the same
//! ones, so that every backend is held to one definition of right.
//!
//! Time is the `now_ms` each call is given, and a backend judges expiry by it. A networked
//! backend may also let its store drop keys on the store's own clock: every lifetime here is
//! minutes long, so that no key runs out while a suite runs, and every expiry checked is one
//! the `now_ms` given has passed. Concurrency checks spawn tasks: run the suites on a
//! multi-threaded runtime (`#[tokio::test(flavor = "multi_thread")]`) to race them for real.
//!
//! ```
//! # #[tokio::main]
//! # async fn main() {
//! use std::sync::Arc;
//! use toolwire_server::{MemoryReplayGuard, contract};
//!
//! contract::replay_guard(|| Arc::new(MemoryReplayGuard::default())).await;
//! # }
//! ```

mod fanout;
mod handles;
mod replay;
mod sessions;
mod tasks;

pub use fanout::change_fan_out;
pub use handles::handle_backend;
pub use replay::replay_guard;
pub use sessions::session_store;
pub use tasks::task_store;

/// A plausible "now" (2026-12-05, in ms since the epoch) that every suite starts from.
const NOW: u64 = 1_796_428_800_000;

/// A lifetime no suite outlives: ten minutes.
const LONG: u64 = 600_000;

/// How many tasks race for one record or token.
const RACERS: usize = 16;
