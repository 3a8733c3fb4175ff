//! Local MCP servers run with only what they are granted.
//!
//! A [`Profile`] says what a server may read, what it may write and whether it may use the
//! network. [`Launch::prepare`] turns a server's command into a command that starts a launcher
//! first: the launcher (any program that calls [`run_if_launcher`] first thing in `main`, such as
//! the `toolwire` binary or this crate's `toolwire-sandbox`) confines itself with Landlock and
//! seccomp and then executes the server, so the server never runs a single instruction
//! unconfined (X-01). The launcher is a fresh, single-threaded process, which is why the rules are
//! built there rather than between `fork` and `exec` of a multi-threaded client.
//!
//! ```
//! use toolwire_sandbox::{Network, Profile};
//!
//! let profile = Profile::builder().read("/usr").write("/tmp/scratch").network(Network::None).build();
//! assert_eq!(profile.network, Network::None);
//! ```

mod enforce;
mod error;
mod launch;
mod policy;
mod proxy;
mod watch;

pub use enforce::{Coverage, check};
pub use error::{Error, Result};
pub use launch::{LAUNCHER_FLAG, Launch, default_launcher, run_if_launcher};
pub use policy::defaults::{Defaults, default_hidden};
pub use policy::expand::readable_beneath;
pub use policy::profile::{Network, Profile, ProfileBuilder};
pub use watch::{Refusal, Watch};
