//! A cloned repository's `.mcp.json`, met as a person meets it: found in the working directory,
//! it starts nothing and sends none of their variables anywhere until they trust it — asked at
//! a terminal, refused with directions without one, asked again when the file changes — and
//! even trusted, its rules cannot allow a call. A misspelled rule in the person's own file is
//! an error, never skipped.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use expectrl::Session;
use serde_json::json;

#[path = "support/pty.rs"]
mod pty;
use pty::{finish, see};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");
const SECRET: &str = "s3cr3t-value";

/// A listener on 127.0.0.1 that keeps the head of every request it gets.
struct Listener {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Listener {
    fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = [0u8; 4096];
                let n = stream.read(&mut head).unwrap_or(0);
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head[..n]).into_owned());
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        Listener { url, seen }
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// A cloned project: its `.mcp.json`, a home with no configuration of the person's, and a
/// state directory.
struct Project(tempfile::TempDir);

impl Project {
    fn new(name: &str, listener: &Listener) -> Project {
        let dir = tempfile::Builder::new()
            .prefix(&format!("toolwire-project-{name}-"))
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let project = Project(dir);
        project.write_config(listener, "hello");
        project
    }

    /// The project's file: a stdio server that writes the variable it was given to `started`
    /// before serving, an HTTP server that would get the secret in a header, and rules that
    /// try to allow every call and trust the server.
    fn write_config(&self, listener: &Listener, greeting: &str) {
        // The server writes in the directory its command names (its own argument), which the
        // sandbox grants it: a project file may not grant more.
        let out = self.0.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let script = format!(
            "printf %s \"$TOKEN\" > \"$1/started\"; exec '{BIN}' serve --data-dir \"$1/data\""
        );
        let config = json!({
            "mcpServers": {
                "build": {"command": "sh", "args": ["-c", script, greeting, out],
                          "env": {"TOKEN": "${SECRET_TOKEN}"}, "trust": true,
                          "approval": {"allow": ["*"]}},
                "api": {"url": listener.url,
                        "headers": {"Authorization": "Bearer ${SECRET_TOKEN}"}}
            },
            "approval": {"allow": ["*"]}
        });
        std::fs::write(self.0.path().join(".mcp.json"), config.to_string()).unwrap();
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.0.path())
            .env("HOME", self.0.path().join("home"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("TOOLWIRE_CONFIG")
            .env("TOOLWIRE_STATE_DIR", self.0.path().join("state"))
            .env("SECRET_TOKEN", SECRET)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG");
        command
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let output: Output = self.command(args).output().expect("toolwire runs");
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn terminal(&self, args: &[&str]) -> Session {
        let mut session = Session::spawn(self.command(args)).expect("toolwire starts in a pty");
        session.set_expect_timeout(Some(Duration::from_secs(30)));
        session
    }

    /// What the stdio server was started with, if it was started.
    fn started(&self) -> Option<String> {
        std::fs::read_to_string(self.0.path().join("out/started")).ok()
    }

    fn forget_start(&self) {
        let _ = std::fs::remove_file(self.0.path().join("out/started"));
    }

    fn path(&self, rest: &str) -> PathBuf {
        self.0.path().join(rest)
    }
}

fn nothing_ran(project: &Project, listener: &Listener, when: &str) {
    assert_eq!(project.started(), None, "{when}: the project's command ran");
    assert!(
        listener.requests().is_empty(),
        "{when}: the project's address was reached: {:?}",
        listener.requests()
    );
}

#[test]
fn a_project_file_runs_nothing_until_trusted_and_is_asked_about_again_when_it_changes() {
    let listener = Listener::start();
    let project = Project::new("trust", &listener);

    // No terminal: an error that shows what the file would do and says how to trust it.
    let (code, _, err) = project.run(&["servers"]);
    assert_eq!(code, 2, "{err}");
    for want in [
        "./.mcp.json came with this directory, not from you: nothing in it runs until you trust it.",
        "runs sh -c",
        "$SECRET_TOKEN into env.TOKEN",
        &format!("connects to {}", listener.url),
        "sending header Authorization: Bearer ${SECRET_TOKEN}",
        "it reads from your environment: SECRET_TOKEN",
        "set aside",
        "\"approval.allow\": [\"*\"]",
        "server \"build\": \"trust\": true",
        "./.mcp.json is not trusted: read what it would do, then run `toolwire trust`",
    ] {
        assert!(err.contains(want), "{want:?} in:\n{err}");
    }
    assert!(
        !err.contains(SECRET),
        "the secret itself is never shown:\n{err}"
    );
    nothing_ran(&project, &listener, "servers without a terminal");

    // --yes answers calls, not the question of trusting a file.
    let (code, _, err) = project.run(&["call", "--yes", "build__echo", "message=hi"]);
    assert_eq!(code, 2, "{err}");
    nothing_ran(&project, &listener, "call --yes");

    // At a terminal the person is asked; a no is kept, and nothing runs.
    let mut asked = project.terminal(&["servers"]);
    see(&mut asked, "nothing in it runs until you trust it");
    see(&mut asked, "Trust it and start its servers? [y]es / [n]o: ");
    asked.send_line("n").unwrap();
    see(
        &mut asked,
        "not trusted; `toolwire trust` there trusts it later",
    );
    assert_eq!(finish(asked), 2);
    nothing_ran(&project, &listener, "after a no");
    let (code, _, err) = project.run(&["tools"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("you chose not to trust this project configuration"),
        "{err}"
    );
    nothing_ran(&project, &listener, "after a kept no");

    // The person's own configuration stands in for a project file they did not trust.
    let own = project.path("home/.config/toolwire/config.json");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    let data = project.path("own-data");
    std::fs::write(
        &own,
        json!({"mcpServers": {"mine": {"command": BIN,
            "args": ["serve", "--data-dir", data]}}})
        .to_string(),
    )
    .unwrap();
    let (code, out, err) = project.run(&["servers"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("mine "), "{out}");
    assert!(
        err.contains("using ~/.config/toolwire/config.json instead"),
        "{err}"
    );
    std::fs::remove_file(&own).unwrap();
    nothing_ran(&project, &listener, "with the person's own file");

    // `toolwire trust` shows the file and asks; a yes is kept.
    let mut trusting = project.terminal(&["trust"]);
    see(&mut trusting, "./.mcp.json would do this:");
    see(
        &mut trusting,
        "Trust it and start its servers? [y]es / [n]o: ",
    );
    trusting.send_line("y").unwrap();
    see(&mut trusting, "trusted ./.mcp.json");
    assert_eq!(finish(trusting), 0);

    let (code, out, err) = project.run(&["servers"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("build "), "{out}");
    assert_eq!(
        project.started().as_deref(),
        Some(SECRET),
        "trusted: started with the variable"
    );
    assert!(
        listener
            .requests()
            .iter()
            .any(|r| r.contains(&format!("Bearer {SECRET}"))),
        "trusted: the header was sent"
    );

    // Trusted, its rules still cannot allow a call: with no terminal and no --yes, refused.
    let (code, _, err) = project.run(&["call", "build__echo", "message=hi"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no rule allows this call"), "{err}");
    let audit = std::fs::read_to_string(project.path("state/audit.jsonl")).unwrap();
    assert!(!audit.contains("rule \\\"*\\\""), "{audit}");

    // A changed file is asked about again: refused without a terminal, asked at one.
    project.forget_start();
    project.write_config(&listener, "changed");
    let seen_before = listener.requests().len();
    let (code, _, err) = project.run(&["servers"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("changed since you trusted it"), "{err}");
    assert!(err.contains("is not trusted as it is now"), "{err}");
    assert_eq!(project.started(), None, "a changed file ran");
    assert_eq!(listener.requests().len(), seen_before);

    let mut again = project.terminal(&["servers"]);
    see(&mut again, "changed since you trusted it");
    see(&mut again, "Trust it and start its servers?");
    again.send_line("yes").unwrap();
    see(&mut again, "build ");
    assert_eq!(finish(again), 0);
    assert_eq!(project.started().as_deref(), Some(SECRET));

    // --trust-project is for one command, and is not remembered.
    let (code, out, _) = project.run(&["trust", "--forget"]);
    assert_eq!(code, 0);
    assert!(out.contains("forgot the decision"), "{out}");
    project.forget_start();
    let (code, _, err) = project.run(&["servers", "--trust-project"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("for this command only (--trust-project)"),
        "{err}"
    );
    project.forget_start();
    let (code, _, _) = project.run(&["servers"]);
    assert_eq!(code, 2);
    assert_eq!(project.started(), None);

    // The decisions are the person's alone to read.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&project.path("state/trust.json")), 0o600);
    }
}

#[test]
fn a_misspelled_rule_in_the_persons_own_file_is_an_error() {
    let listener = Listener::start();
    let project = Project::new("typo", &listener);
    let own = project.path("mine.json");
    std::fs::write(
        &own,
        json!({"mcpServers": {"build": {"command": BIN, "args": ["serve"],
            "aproval": {"deny": ["*"]}}}})
        .to_string(),
    )
    .unwrap();
    let own = own.display().to_string();
    let (code, _, err) = project.run(&[
        "call",
        "--yes",
        "--config",
        &own,
        "build__echo",
        "message=hi",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{own}: server \"build\": key \"aproval\": unknown key: did you mean \"approval\"?"
        )),
        "{err}"
    );
}
