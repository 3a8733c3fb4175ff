//! The sandbox of the stdio servers `toolwire` starts (X-01…X-04), through the real binary: a
//! hostile server tries to read the person's keys and Toolwire's tokens, to write outside its
//! grants, to reach the network and to trace its parent; each attempt is refused with an
//! ordinary error, and the same server with the grant succeeds.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A person's home with secrets in it, and Toolwire's state directory with a token file.
struct Person {
    dir: tempfile::TempDir,
}

impl Person {
    fn new() -> Person {
        let dir = tempfile::Builder::new()
            .prefix("toolwire-sandbox-")
            .tempdir()
            .unwrap();
        let person = Person { dir };
        for (path, text) in [
            ("home/.ssh/id_rsa", "PRIVATE KEY"),
            ("home/.aws/credentials", "aws_secret_access_key = x"),
            ("home/.bashrc", "# bashrc\n"),
            ("home/notes/todo.txt", "buy milk"),
            ("state/credentials.json", "{\"token\": \"secret\"}"),
            ("work/readme.txt", "work"),
        ] {
            let path = person.path(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        person
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// `toolwire call` of the hostile server's `attempt` with `arguments`, after `flags`: the
    /// tool's text.
    fn attempt(&self, flags: &[&str], arguments: serde_json::Value) -> String {
        let server = format!("python3 {}", script().display());
        let on: &[&str] = if flags.contains(&"--sandbox-off") {
            &[]
        } else {
            &["--sandbox"]
        };
        let output = Command::new(BIN)
            .arg("call")
            .arg("--yes")
            .args(on)
            .args(flags)
            .arg(&server)
            .arg("attempt")
            .arg(arguments.to_string())
            .env("HOME", self.path("home"))
            .env("TOOLWIRE_STATE_DIR", self.path("state"))
            .env("TOOLWIRE_DATA_DIR", self.path("data"))
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert!(
            output.status.success(),
            "toolwire call {flags:?} {arguments}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hostile_server.py")
}

fn read(path: &Path) -> serde_json::Value {
    serde_json::json!({"what": "read", "path": path})
}

fn write(path: &Path) -> serde_json::Value {
    serde_json::json!({"what": "write", "path": path})
}

#[test]
fn the_persons_secrets_and_toolwires_tokens_are_unreadable_and_the_rest_is_readable() {
    let person = Person::new();
    for secret in [
        "home/.ssh/id_rsa",
        "home/.aws/credentials",
        "state/credentials.json",
    ] {
        let said = person.attempt(&[], read(&person.path(secret)));
        assert_eq!(said, "refused: EACCES Permission denied", "{secret}");
    }
    let said = person.attempt(&[], read(&person.path("home/notes/todo.txt")));
    assert_eq!(said, "done: read 'buy milk'");
    // Named by the person, a secret is readable.
    let key = person.path("home/.ssh/id_rsa");
    let granted = person.attempt(&["--allow-read", key.to_str().unwrap()], read(&key));
    assert_eq!(granted, "done: read 'PRIVATE KEY'");
}

#[test]
fn writes_go_only_to_what_is_granted() {
    let person = Person::new();
    let bashrc = person.path("home/.bashrc");
    assert_eq!(
        person.attempt(&[], write(&bashrc)),
        "refused: EACCES Permission denied"
    );
    let outside = person.path("work/out.txt");
    assert_eq!(
        person.attempt(&[], write(&outside)),
        "refused: EACCES Permission denied"
    );
    assert!(!outside.exists());
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# bashrc\n");
    let work = person.path("work");
    let granted = person.attempt(&["--allow-write", work.to_str().unwrap()], write(&outside));
    assert_eq!(granted, "done: wrote");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "owned\n");
}

#[test]
fn a_closed_network_refuses_tcp_and_udp_and_an_open_one_connects() {
    let person = Person::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = serde_json::json!({"what": "connect", "port": port});
    let udp = serde_json::json!({"what": "udp", "port": port});
    let closed = ["--network", "none"];
    assert_eq!(
        person.attempt(&closed, connect.clone()),
        "refused: EACCES Permission denied"
    );
    assert_eq!(
        person.attempt(&closed, udp.clone()),
        "refused: EACCES Permission denied"
    );
    assert_eq!(person.attempt(&[], connect), "done: connected");
    assert_eq!(person.attempt(&[], udp), "done: sent");
}

#[test]
fn a_server_cannot_trace_its_parent_unless_the_sandbox_is_off() {
    let person = Person::new();
    let ptrace = serde_json::json!({"what": "ptrace"});
    assert_eq!(person.attempt(&[], ptrace), "refused: EPERM ptrace");
    // Off, with a reason: the server has the person's rights again.
    let key = person.path("home/.ssh/id_rsa");
    let off = person.attempt(&["--sandbox-off", "a test of the switch"], read(&key));
    assert_eq!(off, "done: read 'PRIVATE KEY'");
}
