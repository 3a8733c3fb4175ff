//! Telling the kernel: Landlock for files and TCP, seccomp for the system calls Landlock does not
//! cover. [`check`] asks, from the client, whether a profile can be enforced here;
//! `apply` (in the launcher) enforces it on the launcher itself before it executes the server.

#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(target_os = "linux")]
pub(crate) mod netns;
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

/// Confines this process to `profile`, for good: for a network of named hosts, its own network
/// namespace with the forwarder to the proxy first; then Landlock (it needs its own system
/// calls), then seccomp. The variables the server needs: the proxy's address.
#[cfg(target_os = "linux")]
pub(crate) fn apply(profile: &Profile) -> Result<Vec<(String, String)>> {
    use crate::policy::profile::Network;
    let (ports, env) = match &profile.network {
        Network::Tcp(ports) => (ports.clone(), Vec::new()),
        Network::Hosts(_) => {
            let proxy = profile.proxy.as_deref().ok_or(crate::Error::Usage(
                "a network of named hosts needs its proxy's socket",
            ))?;
            let port = netns::enter(proxy)?;
            let url = format!("http://127.0.0.1:{port}");
            let env = [
                "HTTPS_PROXY",
                "https_proxy",
                "HTTP_PROXY",
                "http_proxy",
                "ALL_PROXY",
                "all_proxy",
            ]
            .iter()
            .map(|name| ((*name).to_owned(), url.clone()))
            .collect();
            (vec![port], env)
        }
        _ => (Vec::new(), Vec::new()),
    };
    landlock_rules::restrict(profile, &ports)?;
    seccomp::restrict(profile)?;
    Ok(env)
}
