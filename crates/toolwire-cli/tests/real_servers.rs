//! The `toolwire` terminal host over real servers installed from the registries on first use (by
//! `scripts/host-interop env`): npm
//! `@modelcontextprotocol/server-everything` and `@modelcontextprotocol/server-filesystem` and
//! PyPI `mcp-server-time`, next to `toolwire serve`, from one configuration file — listed,
//! called after a yes at the prompt, a form filled in, an image saved, the log verified.

use std::process::{Command, Output};
use std::time::Duration;

use expectrl::Session;

#[path = "support/pty.rs"]
mod pty;
use pty::{finish, see};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A variable naming a real server (installed on first use; see `toolwire_testkit::real_server`).
fn var(name: &str) -> String {
    toolwire_testkit::real_server(name)
}

struct Home(tempfile::TempDir);

impl Home {
    fn new() -> Home {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::create_dir_all(dir.join("files")).unwrap();
        std::fs::write(dir.join("files/hello.txt"), "hello from a real file\n").unwrap();
        let node = var("TOOLWIRE_HOST_NODE");
        let config = json!({"mcpServers": {
            "everything": {"command": node, "args": [var("TOOLWIRE_HOST_EVERYTHING"), "stdio"]},
            "filesystem": {"command": node,
                           "args": [var("TOOLWIRE_HOST_FILESYSTEM"), dir.join("files")],
                           "approval": {"allow": ["filesystem__read_*", "filesystem__list_*"]}},
            "time": {"command": var("TOOLWIRE_HOST_TIME_PYTHON"),
                     "args": ["-m", "mcp_server_time", "--local-timezone=UTC"], "trust": true},
            "toolwire": {"command": BIN, "args": ["serve"],
                         "env": {"TOOLWIRE_DATA_DIR": made(dir.join("data"))}},
        }, "roots": ["files"]});
        std::fs::write(dir.join(".mcp.json"), config.to_string()).unwrap();
        Home(scratch)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            // The configuration is found as ./.mcp.json, as in a project.
            .current_dir(self.0.path())
            .env("HOME", self.0.path())
            .env_remove("TOOLWIRE_CONFIG")
            .env("TOOLWIRE_STATE_DIR", self.0.path().join("state"))
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
        session.set_expect_timeout(Some(Duration::from_secs(60)));
        session
    }
}

#[test]
fn the_terminal_host_over_real_servers() {
    let home = Home::new();

    // A project's file: nothing starts until the person trusts it.
    let (code, _, err) = home.run(&["servers"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nothing in it runs until you trust it"),
        "{err}"
    );
    let (code, trusted, err) = home.run(&["trust"]);
    assert_eq!(code, 0, "{err}");
    assert!(trusted.starts_with("trusted ./.mcp.json"), "{trusted}");

    let (code, servers, err) = home.run(&["servers"]);
    assert_eq!(code, 0, "{err}");
    // The libraries' log lines (a roots request answered as the host closes, a server slow to
    // exit) stay off the terminal: nothing was asked of the person, nothing is said.
    assert_eq!(err, "", "servers says nothing on stderr");
    eprintln!("$ toolwire servers\n{servers}");
    let line = |name: &str| {
        servers
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("everything ").contains("2025-11-25 (legacy)  connected"),
        "{servers}"
    );
    assert!(
        line("filesystem ").contains("2025-11-25 (legacy)  connected"),
        "{servers}"
    );
    assert!(line("time ").contains("connected, 2 tools"), "{servers}");
    assert!(
        line("toolwire ").contains("2026-07-28  connected"),
        "{servers}"
    );

    let (code, tools, err) = home.run(&["tools"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "", "tools says nothing on stderr");
    for name in [
        "everything__echo(message: string)",
        "filesystem__read_text_file(",
        "time__get_current_time(timezone: string)",
        "toolwire__add(a: number, b: number)",
    ] {
        assert!(tools.contains(name), "{name} in\n{tools}");
    }
    // A project's file may not trust a server's annotations: they are marked as claims.
    assert!(tools.contains("(untrusted: the server's claim)"), "{tools}");

    // A project's file may not allow a call: its rule is set aside, and without a terminal
    // the call is refused.
    let file = home.0.path().join("files/hello.txt");
    let path = format!("path={}", file.display());
    let (code, _, err) = home.run(&["call", "filesystem__read_text_file", &path]);
    assert_eq!(code, 3, "{err}");
    // The same file named by the person (--config) is theirs: allowed by its rule, no
    // question even without a terminal.
    let (code, read, err) = home.run(&[
        "call",
        "--config",
        ".mcp.json",
        "filesystem__read_text_file",
        &path,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read.trim(), "hello from a real file");

    let (code, time, err) = home.run(&["call", "--yes", "time__get_current_time", "timezone=UTC"]);
    assert_eq!(code, 0, "{err}");
    assert!(time.contains("\"timezone\": \"UTC\""), "{time}");

    let out = home.0.path().join("media");
    let (code, image, err) = home.run(&[
        "call",
        "--yes",
        "--out",
        out.to_str().unwrap(),
        "everything__get-tiny-image",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(image.contains("[image image/png saved to "), "{image}");
    let png = std::fs::read(out.join("get-tiny-image-image-1.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");

    // Resource links and embedded resources are summarised.
    let (code, links, err) =
        home.run(&["call", "--yes", "everything__get-resource-links", "count=2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(links.matches("[link ").count(), 2, "{links}");
    let (code, embedded, err) = home.run(&[
        "call",
        "--yes",
        "everything__get-resource-reference",
        "resourceType=Text",
        "resourceId=1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(embedded.contains("[resource "), "{embedded}");

    // At a terminal: shown, asked, answered.
    let mut echo = home.terminal(&[
        "call",
        "everything__echo",
        "message=hello from the terminal",
    ]);
    see(
        &mut echo,
        "toolwire: call everything__echo (tool echo of server everything)",
    );
    see(
        &mut echo,
        "(the server's claim: not trusted, not relied on)",
    );
    see(&mut echo, "\"message\": \"hello from the terminal\"");
    see(&mut echo, "Run it? [y]es / [n]o / [a]lways: ");
    echo.send_line("y").unwrap();
    see(&mut echo, "Echo: hello from the terminal");
    assert_eq!(finish(echo), 0);

    // The everything server's form, in the terminal: a wrong date asked again.
    let mut form = home.terminal(&["call", "--yes", "everything__trigger-elicitation-request"]);
    see(&mut form, "server everything asks: ");
    see(&mut form, "name (required): ");
    form.send_line("Ada Lovelace").unwrap();
    see(&mut form, "birthdate (a date, YYYY-MM-DD): ");
    form.send_line("1815-13-10").unwrap();
    see(&mut form, "is not a \"date\"");
    form.send_line("1815-12-10").unwrap();
    see(&mut form, "check (y/n): ");
    form.send_line("y").unwrap();
    // Every other field keeps its default or stays empty.
    for _ in 0..10 {
        form.send_line("").unwrap();
    }
    see(
        &mut form,
        "Send these answers? [y]es / [n]o (decline) / [c]ancel: ",
    );
    form.send_line("y").unwrap();
    see(&mut form, "\"name\": \"Ada Lovelace\"");
    assert_eq!(finish(form), 0);

    // Roots come from the configuration (relative to its file).
    let (code, roots, err) = home.run(&["call", "--yes", "everything__get-roots-list"]);
    assert_eq!(code, 0, "{err}");
    let files = format!("file://{}/", home.0.path().join("files").display());
    assert!(roots.contains(&files), "{files} in {roots}");

    // Sampling: shown, and answered by the configured command (confirmed by --yes here).
    let answer = r#"cat >/dev/null; printf '%s' '{"role":"assistant","content":{"type":"text","text":"a sampled answer"},"model":"the-command"}'"#;
    let (code, sampled, err) = home.run(&[
        "call",
        "--yes",
        "--sampling-command",
        answer,
        "everything__trigger-sampling-request",
        "prompt=Say something",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("asks for a model's answer to"), "{err}");
    assert!(err.contains("Say something"), "{err}");
    assert!(sampled.contains("a sampled answer"), "{sampled}");
    // Without a command, declined: the server gets an error, the call reports it.
    let (_, declined, err) = home.run(&[
        "call",
        "--yes",
        "everything__trigger-sampling-request",
        "prompt=Say something",
    ]);
    assert!(err.contains("declined: no --sampling-command"), "{err}");
    assert!(!declined.contains("a sampled answer"), "{declined}");

    let (code, verified, err) = home.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{err}");
    assert!(verified.starts_with("intact: "), "{verified}");
}

/// `path`, made: a directory given to a sandboxed server is granted to it when it exists (one
/// not made yet is granted through the directory it would be made in, which here also holds
/// Toolwire's state, hidden from servers).
fn made(path: std::path::PathBuf) -> std::path::PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    path
}
