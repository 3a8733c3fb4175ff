//! Telling the kernel: Landlock for files and TCP, seccomp for the system calls Landlock does not
//! cover. [`check`] asks, from the client, whether a profile can be enforced here;
//! `apply` (in the launcher) enforces it on the launcher itself before it executes the server.

#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(target_os = "linux")]
mod seccomp;

use crate::error::Result;
use crate::policy::profile::Profile;

/// How much of a profile the kernel enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Coverage {
    /// All of it.
    Enforced,
    /// All the grants, but not these refinements (each in words, with the kernel feature).
    Partly(Vec<&'static str>),
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Coverage::Enforced => f.write_str("enforced"),
            Coverage::Partly(missing) => write!(f, "partly (not: {})", missing.join(", ")),
        }
    }
}

/// Whether `profile` can be enforced on this system, asked without restricting anything: an
/// error names what the kernel lacks when a grant could not be held.
pub fn check(profile: &Profile) -> Result<Coverage> {
    #[cfg(target_os = "linux")]
    {
        landlock_rules::check(profile)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = profile;
        Err(crate::Error::Unsupported {
            missing:
                "Landlock and seccomp (this sandbox is Linux's; nothing is enforced on this system)"
                    .into(),
        })
    }
}

/// Confines this process to `profile`, for good: Landlock first (it needs its own system
/// calls), then seccomp.
#[cfg(target_os = "linux")]
pub(crate) fn apply(profile: &Profile) -> Result<Coverage> {
    let coverage = landlock_rules::restrict(profile)?;
    seccomp::restrict(profile)?;
    Ok(coverage)
}
