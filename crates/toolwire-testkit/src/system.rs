//! System parts: programs only the system's package manager provides, found where a package
//! puts them.

use std::path::PathBuf;

/// A program only the system's package manager provides (Debian's packages, in CI).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SystemPart {
    /// `haproxy` (HAProxy 2.6): the load balancer in front of several instances.
    HAProxy,
    /// `prometheus` (Prometheus 2.x): a real scraper of `/metrics`.
    Prometheus,
    /// `promtool` (Prometheus 2.x): the checker of the text format.
    Promtool,
    /// `chromium` (or `$CHROMIUM`): a real browser for the console.
    Chromium,
}

impl SystemPart {
    /// Every system part.
    pub const ALL: [SystemPart; 4] = [
        SystemPart::HAProxy,
        SystemPart::Prometheus,
        SystemPart::Promtool,
        SystemPart::Chromium,
    ];

    /// The program's name.
    pub fn program(self) -> &'static str {
        match self {
            SystemPart::HAProxy => "haproxy",
            SystemPart::Prometheus => "prometheus",
            SystemPart::Promtool => "promtool",
            SystemPart::Chromium => "chromium",
        }
    }

    /// The one command that installs it (with the other parts of its script), at the upstream
    /// version the tests were checked with.
    pub fn install(self) -> &'static str {
        match self {
            SystemPart::HAProxy => "scripts/cluster install",
            SystemPart::Prometheus | SystemPart::Promtool => "scripts/observe install",
            SystemPart::Chromium => "scripts/console install",
        }
    }

    /// Where it is: on the PATH, or in `/usr/sbin` or `/sbin` (where Debian puts HAProxy,
    /// outside a user's PATH); for Chromium, `$CHROMIUM` first. `None` when it is absent.
    pub fn find(self) -> Option<PathBuf> {
        if self == SystemPart::Chromium {
            if let Some(path) = std::env::var_os("CHROMIUM") {
                return Some(PathBuf::from(path));
            }
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|dir| dir.join(self.program()))
            .find(|candidate| is_executable(candidate))
    }

    /// Its path, for a test that [`SystemTests`](crate::SystemTests) runs only when it is
    /// there.
    ///
    /// # Panics
    ///
    /// When it is absent, naming the command that installs it.
    pub fn path(self) -> PathBuf {
        self.find().unwrap_or_else(|| {
            panic!(
                "{} is missing: install it with {}",
                self.program(),
                self.install()
            )
        })
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
