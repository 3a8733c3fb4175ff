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

/// What the default profile is made from: the person's home, Toolwire's state directories,
/// where servers keep their own data, and the directory the server starts in.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// Where each sandboxed server's own lasting directory is made (`<this>/<server name>`),
    /// hidden from the others: `$XDG_DATA_HOME/toolwire-servers`, else
    /// `~/.local/share/toolwire-servers`.
    pub servers: Option<PathBuf>,
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
        let servers = var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".local/share")))
            .map(|data| data.join("toolwire-servers"));
        Defaults {
            servers,
            home,
            state,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }

    /// The default profile of the server `name` whose command names `args` (its arguments and
    /// its variables' values): reads everywhere
    /// but the hidden secrets (and other servers' own directories); writes to its own lasting
    /// directory, the package caches, the harmless devices, and each argument that names an
    /// existing directory (`server-filesystem ~/notes`, `--repository ./repo`, `--root=/data`):
    /// the directory the person gave the server is the one it works in.
    pub fn profile(&self, name: &str, args: &[String]) -> Profile {
        let mut write: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        if let Some(home) = &self.home {
            write.extend(HOME_CACHES.iter().map(|c| home.join(c)));
        }
        write.extend(self.directories_named(args));
        let mut hidden = default_hidden(self.home.as_deref(), &self.state);
        hidden.extend(self.servers.iter().cloned());
        Profile {
            read: vec![PathBuf::from("/")],
            write,
            hidden,
            network: Network::Any,
            data: self
                .servers
                .as_ref()
                .map(|root| root.join(directory_name(name))),
            proxy: None,
        }
    }

    /// The directories `args` name, as given or after `=`, resolved against `cwd`: an existing
    /// directory; or, for a path (it has a `/`) that does not exist yet, such as a data directory
    /// the server will make, the directory it would be made in, when that exists and is not
    /// `/`, one of its children (`/tmp`, `/home`) or the home directory itself, which a server
    /// must be granted by name. An existing file names nothing to write.
    fn directories_named(&self, args: &[String]) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for arg in args {
            let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            if value.is_empty() || value.starts_with('-') {
                continue;
            }
            let path = self.cwd.join(value);
            let granted = if path.is_dir() {
                Some(path)
            } else if value.contains('/') && !path.exists() {
                path.parent()
                    .filter(|p| p.is_dir())
                    .filter(|p| p.components().count() > 2 && Some(*p) != self.home.as_deref())
                    .map(Path::to_path_buf)
            } else {
                None
            };
            if let Some(dir) = granted.filter(|d| !found.contains(d)) {
                found.push(dir);
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

/// A server's name as one directory name: letters, digits, `.`, `_` and `-` kept, anything
/// else `_`, at most 100 characters (a command line names a one-off server).
fn directory_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if out.is_empty() || out.chars().all(|c| c == '.') {
        out = format!("_{out}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_hides_the_secrets_and_writes_only_where_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("notes")).unwrap();
        let defaults = Defaults {
            servers: Some(PathBuf::from("/home/p/.local/share/toolwire-servers")),
            home: Some(PathBuf::from("/home/p")),
            state: vec![PathBuf::from("/srv/state/toolwire")],
            cwd: dir.path().to_owned(),
        };
        let profile = defaults.profile(
            "files/notes",
            &[
                "-y".into(),
                "notes".into(),
                "--root=/definitely/missing".into(),
                format!("--data={}", dir.path().display()),
                format!("--state={}/later", dir.path().join("notes").display()),
                format!("--deep={}/not/made", dir.path().join("notes").display()),
                format!("sh -c 'touch {}/x/y'", dir.path().display()),
                "--config=/etc/hostname".into(),
                "/tmp/not-there".into(),
            ],
        );
        assert_eq!(profile.read, vec![PathBuf::from("/")]);
        assert!(profile.write.contains(&dir.path().join("notes")));
        assert!(profile.write.contains(&dir.path().to_owned()));
        assert!(profile.write.contains(&PathBuf::from("/home/p/.npm")));
        assert!(!profile.write.iter().any(|p| p.ends_with("missing")));
        // Not yet made: the directory it would be made in, not further up; never a top
        // directory, a file's folder, or one a shell line mentions.
        assert_eq!(
            profile
                .write
                .iter()
                .filter(|p| **p == dir.path().join("notes"))
                .count(),
            1
        );
        for refused in ["/", "/definitely", "/tmp", "/etc"] {
            assert!(
                !profile.write.contains(&PathBuf::from(refused)),
                "{refused}"
            );
        }
        for secret in [
            "/home/p/.ssh",
            "/home/p/.aws",
            "/srv/state/toolwire",
            "/etc/shadow",
        ] {
            assert!(profile.hidden.contains(&PathBuf::from(secret)), "{secret}");
        }
        assert_eq!(profile.network, Network::Any);
        let servers = PathBuf::from("/home/p/.local/share/toolwire-servers");
        assert!(profile.hidden.contains(&servers));
        assert_eq!(profile.data, Some(servers.join("files_notes")));
        assert_eq!(directory_name(".."), "_..");
        assert_eq!(directory_name("python3 /x/y.py"), "python3__x_y.py");
    }
}
