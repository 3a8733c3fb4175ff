//! A stdio server's sandbox setting (`"sandbox"` in its entry): the default profile with the
//! entry's grants added, or off with a reason.

use std::path::{Path, PathBuf};

use serde::Serialize;
use toolwire_sandbox::{Coverage, Defaults, Network, Profile};

use super::Transport;

/// How a server's sandbox stands, as `toolwire servers`, the gateway's console and the audit
/// log show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "sandbox", rename_all = "camelCase")]
#[non_exhaustive]
pub enum SandboxStatus {
    /// Every part of its profile is enforced.
    Enforced,
    /// Its grants are enforced, these refinements are not (the kernel is older).
    Partly {
        /// What is not, in words.
        missing: Vec<String>,
    },
    /// Turned off in its entry.
    Off {
        /// The entry's reason.
        reason: String,
    },
    /// Its profile cannot be enforced here, so it is not started (or, with nothing asked beyond
    /// the default on a system without Landlock, it runs unconfined): why.
    Unavailable {
        /// What the system lacks.
        why: String,
    },
    /// Not a local process (an HTTP server): nothing to confine.
    Remote,
}

impl std::fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxStatus::Enforced => f.write_str("sandboxed"),
            SandboxStatus::Partly { missing } => {
                write!(f, "sandboxed in part (not: {})", missing.join(", "))
            }
            SandboxStatus::Off { reason } => write!(f, "sandbox off: {reason}"),
            SandboxStatus::Unavailable { why } => write!(f, "no sandbox: {why}"),
            SandboxStatus::Remote => f.write_str("remote"),
        }
    }
}

/// A stdio server's sandbox: the default profile, with the grants of its entry's `sandbox`
/// object if it has one, unless turned off with a reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxSetting {
    /// The entry says nothing: the default profile on Linux; unconfined where the kernel has
    /// no Landlock to enforce it with (macOS, Windows), as the README says.
    #[default]
    Unset,
    /// The default profile ([`Defaults::profile`]) with these grants added.
    On {
        /// More it may read.
        read: Vec<PathBuf>,
        /// More it may write.
        write: Vec<PathBuf>,
        /// Its network, when the entry sets one (default: any).
        network: Option<Network>,
    },
    /// Runs with the person's full rights (`"sandbox": {"off": "why"}`), shown wherever the
    /// server is listed.
    Off {
        /// Why, in the person's words.
        reason: String,
    },
}

impl SandboxSetting {
    /// The profile of the server `name` started with `args` in `cwd` (the host's own directory when
    /// none), or `None` when the sandbox is off (or unset on a system without Landlock).
    pub fn profile(&self, name: &str, args: &[String], cwd: Option<&Path>) -> Option<Profile> {
        let (read, write, network) = match self {
            SandboxSetting::On {
                read,
                write,
                network,
            } => (read.as_slice(), write.as_slice(), network),
            SandboxSetting::Unset if cfg!(target_os = "linux") => (&[][..], &[][..], &None),
            SandboxSetting::Unset | SandboxSetting::Off { .. } => return None,
        };
        let mut defaults = Defaults::from_env();
        if let Some(cwd) = cwd {
            defaults.cwd = defaults.cwd.join(cwd);
        }
        let mut profile = defaults.profile(name, args);
        let resolve = |p: &PathBuf| defaults.cwd.join(p);
        profile.read.extend(read.iter().map(resolve));
        profile.write.extend(write.iter().map(resolve));
        if let Some(network) = network {
            profile.network = network.clone();
        }
        Some(profile)
    }

    /// How the sandbox of a server reached by `transport` stands on this system.
    pub fn status(&self, name: &str, transport: &Transport) -> SandboxStatus {
        let Transport::Stdio { args, cwd, .. } = transport else {
            return SandboxStatus::Remote;
        };
        if let SandboxSetting::Off { reason } = self {
            return SandboxStatus::Off {
                reason: reason.clone(),
            };
        }
        let Some(profile) = self.profile(name, args, cwd.as_deref()) else {
            return SandboxStatus::Unavailable {
                why: "this system has no Landlock (Linux only)".into(),
            };
        };
        match toolwire_sandbox::check(&profile) {
            Ok(Coverage::Enforced) => SandboxStatus::Enforced,
            Ok(Coverage::Partly(missing)) => SandboxStatus::Partly {
                missing: missing.iter().map(|m| (*m).to_owned()).collect(),
            },
            Ok(_) => SandboxStatus::Enforced,
            Err(e) => SandboxStatus::Unavailable { why: e.to_string() },
        }
    }

    /// What a project file may keep of this setting: only a closed network. Turning the
    /// sandbox off and adding grants widen it, and are set aside.
    pub(super) fn narrowed(&self) -> SandboxSetting {
        match self {
            SandboxSetting::On {
                network: Some(network),
                ..
            } if network.is_confined() => SandboxSetting::On {
                read: Vec::new(),
                write: Vec::new(),
                network: Some(network.clone()),
            },
            SandboxSetting::On { .. } => SandboxSetting::On {
                read: Vec::new(),
                write: Vec::new(),
                network: None,
            },
            _ => SandboxSetting::Unset,
        }
    }
}
