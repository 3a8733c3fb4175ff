//! Starts the test authorization server (`provider.mjs` beside this file, through
//! `scripts/oidc path`, which installs it on first use) for a Rust test, on a free port of
//! 127.0.0.1. Included by the tests of several crates with `#[path]`; every crate lives at
//! `crates/NAME`, so the script is found from the including crate's manifest directory.

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A running provider: killed on drop, and gone with the test process anyway (it exits when
/// its stdin closes).
pub(crate) struct Launched {
    child: Child,
    /// Its ready line: `issuer`, `token_endpoint`, `kid`, … (see provider.mjs).
    pub(crate) ready: Value,
}

impl Launched {
    /// The issuer, exactly as the provider names itself.
    pub(crate) fn issuer(&self) -> String {
        self.ready["issuer"].as_str().unwrap().to_owned()
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the provider with `env` (`OIDC_TOKEN_TTL`, `OIDC_INTERACTIONS`, …) and waits for its
/// ready line.
pub(crate) fn launch(env: &[(&str, &str)]) -> Launched {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/oidc");
    let mut asked = Command::new("bash")
        .args([script, "path"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("scripts/oidc runs");
    // What it says (an install on first use says so in one line) goes straight to the test
    // process's stderr, which the test harness does not capture, as it happens; and into the
    // failure's message.
    let stderr = asked.stderr.take().expect("piped");
    let relay = std::thread::spawn(move || {
        let mut said = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(std::io::stderr(), "{line}");
            said.push_str(&line);
            said.push('\n');
        }
        said
    });
    let path = asked.wait_with_output().expect("scripts/oidc ends");
    let said = relay.join().unwrap_or_default();
    assert!(path.status.success(), "scripts/oidc path: {said}");
    let text = String::from_utf8(path.stdout).unwrap();
    let mut lines = text.lines();
    let (node, provider) = (lines.next().unwrap(), lines.next().unwrap());
    let mut child = Command::new(node)
        .args([provider, "0", "--watch-stdin"])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    Launched { child, ready }
}
