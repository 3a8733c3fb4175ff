//! Running `toolwire` processes for the gateway tests: each in a folder of its own, killed when
//! the test ends, started once it says on stderr where it serves.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// How long a process may take to say it started.
pub(crate) const STARTUP: Duration = Duration::from_secs(30);

/// A child process killed when the test ends, whatever happens.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `toolwire` run in `dir`, with its home and state there and nothing from the test's
/// environment that changes what it does.
pub(crate) fn toolwire(dir: &tempfile::TempDir) -> Command {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("TOOLWIRE_STATE_DIR", dir.path().join("state"))
        .env("NO_COLOR", "1")
        .env_remove("TOOLWIRE_STORE")
        .env_remove("RUST_LOG");
    command
}

/// A started process: the URL on its line with the needle, the stderr lines after it as they
/// come, and the lines before it.
pub(crate) struct Started {
    pub(crate) child: Killed,
    pub(crate) url: String,
    pub(crate) lines: mpsc::Receiver<String>,
    pub(crate) before: Vec<String>,
}

/// Starts `command` and waits (at most [`STARTUP`]) for the stderr line with `needle`: the URL
/// that follows it.
pub(crate) fn start(mut command: Command, needle: &str) -> Started {
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolwire starts");
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("piped"));
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let child = Killed(child);
    let deadline = Instant::now() + STARTUP;
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            panic!("no line with {needle:?} within {STARTUP:?}; stderr: {before:#?}");
        };
        if let Some(rest) = line.split(needle).nth(1) {
            let url = rest.split_whitespace().next().unwrap().to_owned();
            return Started {
                child,
                url,
                lines,
                before,
            };
        }
        before.push(line);
    }
}

/// [`start`], the rest of stderr drained in the background: the child and its URL.
pub(crate) fn started_drained(command: Command, needle: &str) -> (Killed, String) {
    let started = start(command, needle);
    let lines = started.lines;
    std::thread::spawn(move || while lines.recv().is_ok() {});
    (started.child, started.url)
}
