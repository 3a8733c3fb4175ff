//! A stdio server's sandbox setting (`"sandbox"` in its entry): the default profile with the
//! entry's grants added, or off with a reason.

use std::path::{Path, PathBuf};

use toolwire_sandbox::{Defaults, Network, Profile};

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
            profile.network = *network;
        }
        let _ = defaults.make_caches();
        Some(profile)
    }

    /// What a project file may keep of this setting: only a closed network. Turning the
    /// sandbox off and adding grants widen it, and are set aside.
    pub(super) fn narrowed(&self) -> SandboxSetting {
        match self {
            SandboxSetting::On {
                network: Some(Network::None),
                ..
            } => SandboxSetting::On {
                read: Vec::new(),
                write: Vec::new(),
                network: Some(Network::None),
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
