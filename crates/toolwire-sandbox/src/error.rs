//! What can keep a server from starting confined.

use std::path::PathBuf;

/// Why a sandbox could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kernel cannot enforce part of the profile, so the server is not started.
    #[error("the sandbox cannot be enforced here: {missing}")]
    Unsupported {
        /// What the kernel lacks, in words.
        missing: String,
    },
    /// Landlock refused a rule or the restriction.
    #[cfg(target_os = "linux")]
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The seccomp filter could not be built or applied.
    #[cfg(target_os = "linux")]
    #[error("seccomp: {0}")]
    Seccomp(#[from] seccompiler::Error),
    /// The seccomp filter could not be compiled for this architecture.
    #[cfg(target_os = "linux")]
    #[error("seccomp: {0}")]
    SeccompBackend(#[from] seccompiler::BackendError),
    /// A file or directory the sandbox needs could not be made or read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The launcher was given a profile it cannot read.
    #[error("the sandbox profile is not valid: {0}")]
    Profile(#[from] serde_json::Error),
    /// No program to confine the server with was found.
    #[error(
        "no sandbox launcher: call toolwire_sandbox::run_if_launcher() first in main, name one (HostOptions::sandbox_launcher), or put the toolwire-sandbox binary beside this program"
    )]
    NoLauncher,
    /// The launcher was started without the arguments the client gives it.
    #[error("usage: {0}")]
    Usage(&'static str),
}

/// This crate's results.
pub type Result<T> = std::result::Result<T, Error>;
