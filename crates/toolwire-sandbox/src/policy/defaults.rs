//! The default profile: the person's secrets unreadable, writes only to the server's own
//! temporary directory, the package managers' caches and the directories its command names, the
//! network open.

use std::path::{Path, PathBuf};

use super::profile::{Network, Profile};

/// Under the home directory: what a server never reads unless granted by name. Keys and tokens
/// of the usual tools, browser profiles, and Toolwire's own state and credentials.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".pki",
    ".mozilla",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/toolwire",
    ".local/state/toolwire",
    ".local/share/toolwire",
];

/// Outside the home directory: the machine's password hashes and host keys.
const SYSTEM_SECRETS: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/ssh"];

/// Caches a server's package manager writes (npm for `npx`, uv for `uvx`, pip), under home.
const HOME_CACHES: &[&str] = &[".npm", ".cache/uv", ".cache/pip", ".local/share/uv"];

/// Device files any program may write (the terminal is not one: a server has none).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/shm",
    "/dev/pts",
];

/// The secrets hidden by default: under `home`, under Toolwire's own `state` directories
/// (`$XDG_STATE_HOME/toolwire` and the like when they are set), and the system's.
pub fn default_hidden(home: Option<&Path>, state: &[PathBuf]) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    if let Some(home) = home {
        hidden.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
    }
    hidden.extend(state.iter().cloned());
    hidden
}

/// What the default profile is made from: the person's home, Toolwire's state directories and
/// the directory the server starts in.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// The home directory, when there is one.
    pub home: Option<PathBuf>,
    /// Toolwire's own state, data and configuration directories when moved by `XDG_*`.
    pub state: Vec<PathBuf>,
    /// Where relative paths in a command are resolved.
    pub cwd: PathBuf,
}

impl Defaults {
    /// From this process's environment.
    pub fn from_env() -> Defaults {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let mut state: Vec<PathBuf> = ["XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"]
            .iter()
            .filter_map(|name| var(name))
            .map(|dir| PathBuf::from(dir).join("toolwire"))
            .collect();
        // The `toolwire` binary's own directories when moved (its tokens, notes and audit log).
        state.extend(
            ["TOOLWIRE_STATE_DIR", "TOOLWIRE_DATA_DIR"]
                .iter()
                .filter_map(|name| var(name))
                .map(PathBuf::from),
        );
        Defaults {
            home,
            state,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }

    /// The default profile of a server started with `args`: reads everywhere but the
    /// hidden secrets; writes to the package caches, the harmless devices, and each argument
    /// that names an existing directory (`server-filesystem ~/notes`, `--repository ./repo`,
    /// `--root=/data`): the directory the person gave the server is the one it works in.
    pub fn profile(&self, args: &[String]) -> Profile {
        let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        if let Some(home) = &self.home {
            write.extend(HOME_CACHES.iter().map(|c| home.join(c)));
        }
        write.extend(self.directories_named(args));
        Profile {
            read: vec![PathBuf::from("/")],
            write,
            hidden: default_hidden(self.home.as_deref(), &self.state),
            network: Network::Any,
        }
    }

    /// The existing directories `args` name, as given or after `=`, resolved against `cwd`.
    fn directories_named(&self, args: &[String]) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for arg in args {
            let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            if value.is_empty() || value.starts_with('-') {
                continue;
            }
            let path = self.cwd.join(value);
            if path.is_dir() && !found.contains(&path) {
                found.push(path);
            }
        }
        found
    }

    /// The caches the default profile grants, made when missing, so that a first `npx` can
    /// write them (a grant needs an existing directory).
    pub fn make_caches(&self) -> std::io::Result<()> {
        if let Some(home) = &self.home {
            for cache in HOME_CACHES {
                std::fs::create_dir_all(home.join(cache))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_hides_the_secrets_and_writes_only_where_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("notes")).unwrap();
        let defaults = Defaults {
            home: Some(PathBuf::from("/home/p")),
            state: vec![PathBuf::from("/srv/state/toolwire")],
            cwd: dir.path().to_owned(),
        };
        let profile = defaults.profile(&[
            "-y".into(),
            "notes".into(),
            "--root=/definitely/missing".into(),
            format!("--data={}", dir.path().display()),
        ]);
        assert_eq!(profile.read, vec![PathBuf::from("/")]);
        assert!(profile.write.contains(&dir.path().join("notes")));
        assert!(profile.write.contains(&dir.path().to_owned()));
        assert!(profile.write.contains(&PathBuf::from("/home/p/.npm")));
        assert!(!profile.write.iter().any(|p| p.ends_with("missing")));
        for secret in [
            "/home/p/.ssh",
            "/home/p/.aws",
            "/srv/state/toolwire",
            "/etc/shadow",
        ] {
            assert!(profile.hidden.contains(&PathBuf::from(secret)), "{secret}");
        }
        assert_eq!(profile.network, Network::Any);
    }
}
