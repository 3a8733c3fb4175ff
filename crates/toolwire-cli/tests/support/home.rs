//! A home for one `toolwire` test: its configuration, state directory and output directory,
//! and the binary run there with or without a terminal. Shared by the host tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use expectrl::Session;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A home for one test: its configuration, state directory and output directory.
pub(crate) struct Home(pub(crate) tempfile::TempDir);

impl Home {
    /// A home whose configuration names one server, `demo`, at `url`.
    pub(crate) fn new(name: &str, url: &str) -> Home {
        let home = Home::empty(name);
        home.configure(url);
        home
    }

    /// A home without a configuration.
    pub(crate) fn empty(name: &str) -> Home {
        Home(
            tempfile::Builder::new()
                .prefix(&format!("toolwire-host-cli-{name}-"))
                .tempdir()
                .unwrap(),
        )
    }

    pub(crate) fn configure(&self, url: &str) {
        let config = json!({"mcpServers": {"demo": {"url": url}}});
        std::fs::write(self.0.path().join("mcp.json"), config.to_string()).unwrap();
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.0.path())
            .env("HOME", self.0.path())
            .env("TOOLWIRE_CONFIG", self.0.path().join("mcp.json"))
            .env("TOOLWIRE_STATE_DIR", self.0.path().join("state"))
            .env("NO_COLOR", "1")
            // A person's terminal, whatever the tests run under (TERM=dumb draws no progress).
            .env("TERM", "xterm-256color")
            // Nothing is opened in a browser: the tests play the person.
            .env("BROWSER", "true")
            .env_remove("RUST_LOG");
        command
    }

    /// Runs without a terminal.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("toolwire runs")
    }

    /// Runs in a pseudo-terminal.
    pub(crate) fn terminal(&self, args: &[&str]) -> Session {
        let mut session = Session::spawn(self.command(args)).expect("toolwire starts in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(20)));
        session
    }

    pub(crate) fn audit(&self) -> PathBuf {
        self.0.path().join("state/audit.jsonl")
    }
}

pub(crate) fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A child process killed when the test ends, whatever happens: a failed assertion never
/// leaves a `toolwire watch` running.
pub(crate) struct Killed(pub(crate) std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
