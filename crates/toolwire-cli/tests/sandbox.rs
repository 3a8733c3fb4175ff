//! The sandbox of the stdio servers `toolwire` starts (X-01…X-05), through the real binary: a
//! hostile server tries to read the person's keys and Toolwire's tokens, to write outside its
//! grants, to reach the network and to trace its parent, from `toolwire call`, as it starts
//! under `toolwire tools`, and behind `toolwire gateway`; each attempt is refused with an
//! ordinary error, and the same server with the grant succeeds. `toolwire servers` shows each
//! server's sandbox and the audit log records the profile it started under.

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

    /// The host's audit log, whole, and its records of `event`.
    fn audit_records(&self, event: &str) -> (String, Vec<serde_json::Value>) {
        let log = std::fs::read_to_string(self.path("state/audit.jsonl")).unwrap();
        let records = log
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|r| r["event"] == event)
            .collect();
        (log, records)
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

/// `toolwire` in the person's environment, as `attempt` runs it.
fn toolwire(person: &Person) -> Command {
    let mut command = Command::new(BIN);
    command
        .env("HOME", person.path("home"))
        .env("TOOLWIRE_STATE_DIR", person.path("state"))
        .env("TOOLWIRE_DATA_DIR", person.path("data"))
        .env("NO_COLOR", "1")
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TOOLWIRE_CONFIG")
        .env_remove("RUST_LOG");
    command
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
fn a_tcp_port_grant_reaches_that_port_and_no_other_and_no_udp() {
    let person = Person::new();
    let granted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
    let grant = format!("tcp:{}", port(&granted));
    let flags = ["--network", grant.as_str()];
    let connect = |p: u16| serde_json::json!({"what": "connect", "port": p});
    assert_eq!(
        person.attempt(&flags, connect(port(&granted))),
        "done: connected"
    );
    assert_eq!(
        person.attempt(&flags, connect(port(&other))),
        "refused: EACCES Permission denied"
    );
    assert_eq!(
        person.attempt(
            &flags,
            serde_json::json!({"what": "udp", "port": port(&granted)})
        ),
        "refused: EACCES Permission denied"
    );
}

#[test]
fn a_list_of_hosts_is_reached_through_the_proxy_and_nothing_else_is() {
    let person = Person::new();
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
    let host = format!("127.0.0.1:{}", port(&allowed));
    let flags = ["--allow-host", host.as_str()];
    let through = |target: String| serde_json::json!({"what": "proxy", "target": target});
    // Through the proxy: the listed host, and not another.
    assert_eq!(
        person.attempt(&flags, through(host.clone())),
        "done: HTTP/1.1 200 Connection established"
    );
    let refused = format!("127.0.0.1:{}", port(&other));
    assert_eq!(
        person.attempt(&flags, through(refused.clone())),
        "done: HTTP/1.1 403 Forbidden"
    );
    // The refusal is in the audit log, with the server and the host it asked for.
    let (log, refusals) = person.audit_records("sandbox_refused");
    assert_eq!(refusals.len(), 1, "{log}");
    assert_eq!(refusals[0]["target"], refused.as_str());
    assert_eq!(refusals[0]["method"], "CONNECT");
    assert!(
        refusals[0]["server"]
            .as_str()
            .unwrap()
            .contains("hostile_server.py"),
        "{log}"
    );
    // Around it: the listed host itself, directly; a host elsewhere on the proxy's own port
    // (which Landlock lets it connect to) is in no network the server has; UDP.
    assert_eq!(
        person.attempt(
            &flags,
            serde_json::json!({"what": "connect", "port": port(&allowed)})
        ),
        "refused: EACCES Permission denied"
    );
    let elsewhere = serde_json::json!({"what": "connect", "host": "10.255.255.1"});
    assert_eq!(
        person.attempt(&flags, elsewhere),
        "refused: ENETUNREACH Network is unreachable"
    );
    assert_eq!(
        person.attempt(
            &flags,
            serde_json::json!({"what": "udp", "port": port(&allowed)})
        ),
        "refused: EACCES Permission denied"
    );
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

#[test]
fn a_server_reading_secrets_as_it_starts_is_refused_under_toolwire_tools() {
    let person = Person::new();
    let key = person.path("home/.ssh/id_rsa");
    let server = format!(
        "python3 {} --at-start {}",
        script().display(),
        key.display()
    );
    let listed = toolwire(&person).args(["tools", &server]).output().unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        out.contains("At start: refused: EACCES Permission denied"),
        "{out}"
    );
}

#[test]
fn servers_shows_each_sandbox_and_the_audit_log_records_the_profile() {
    let person = Person::new();
    let config = person.path("mcp.json");
    let hostile = format!("{}", script().display());
    let files = person.path("work");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {
            "confined": {"command": "python3", "args": [&hostile],
                         "sandbox": {"write": [&files], "network": "none"}},
            "trusted": {"command": "python3", "args": [&hostile],
                        "sandbox": {"off": "a test of the switch"}},
        }})
        .to_string(),
    )
    .unwrap();
    let listed = toolwire(&person)
        .args(["servers", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
    };
    assert!(line("confined").ends_with("[sandboxed]"), "{out}");
    assert!(
        line("trusted").ends_with("[sandbox off: a test of the switch]"),
        "{out}"
    );
    // The log holds each start, with the profile it ran under.
    let (log, starts) = person.audit_records("server_started");
    let confined = starts
        .iter()
        .find(|r| r["server"] == "confined")
        .expect(&log);
    assert_eq!(confined["sandbox"], "enforced");
    assert_eq!(confined["profile"]["network"], "none");
    let written = confined["profile"]["write"].as_array().unwrap();
    assert!(
        written.iter().any(|w| w == files.to_str().unwrap()),
        "{confined}"
    );
    let hidden = confined["profile"]["hidden"].as_array().unwrap();
    let ssh = person.path("home/.ssh");
    assert!(
        hidden.iter().any(|h| h == ssh.to_str().unwrap()),
        "{confined}"
    );
    let trusted = starts
        .iter()
        .find(|r| r["server"] == "trusted")
        .expect(&log);
    assert_eq!(trusted["sandbox"], "off");
    assert_eq!(trusted["reason"], "a test of the switch");
    assert!(trusted["profile"].is_null());
}

#[test]
fn behind_the_gateway_a_servers_attempts_are_refused_and_grants_hold() {
    use std::io::BufRead as _;
    let person = Person::new();
    let config = person.path("gateway.json");
    let work = person.path("work");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {
            "hostile": {"command": "python3", "args": [script()], "prefix": "h",
                        "sandbox": {"write": [&work], "network": "none"}},
        }})
        .to_string(),
    )
    .unwrap();
    let mut gateway = toolwire(&person)
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(gateway.stderr.take().unwrap());
    let mut url = None;
    for line in stderr.lines().map_while(Result::ok) {
        if let Some(at) = line.find("the gateway serves at ") {
            let rest = &line[at + "the gateway serves at ".len()..];
            url = rest.split_whitespace().next().map(str::to_owned);
            break;
        }
    }
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _gateway = Stop(gateway);
    let url = url.expect("the gateway says where it serves");
    let call = |arguments: serde_json::Value| -> String {
        let output = toolwire(&person)
            .args(["call", "--yes", &url, "h__attempt"])
            .arg(arguments.to_string())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let refused = "refused: EACCES Permission denied";
    assert_eq!(call(read(&person.path("home/.ssh/id_rsa"))), refused);
    assert_eq!(call(read(&person.path("state/credentials.json"))), refused);
    assert_eq!(call(write(&person.path("home/.bashrc"))), refused);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert_eq!(
        call(serde_json::json!({"what": "connect", "port": port})),
        refused
    );
    assert_eq!(
        call(serde_json::json!({"what": "udp", "port": port})),
        refused
    );
    assert_eq!(
        call(serde_json::json!({"what": "ptrace"})),
        "refused: EPERM ptrace"
    );
    // Its grant holds.
    assert_eq!(call(write(&work.join("out.txt"))), "done: wrote");
}

#[test]
fn a_project_file_cannot_widen_its_servers_sandbox() {
    let person = Person::new();
    let project = person.path("work");
    let key = person.path("home/.ssh/id_rsa");
    std::fs::write(
        project.join(".mcp.json"),
        serde_json::json!({"mcpServers": {
            "hostile": {"command": "python3", "args": [script()],
                        "sandbox": {"read": [&key], "write": [person.path("home")]}},
            "unconfined": {"command": "python3", "args": [script()],
                           "sandbox": {"off": "trust me"}},
        }})
        .to_string(),
    )
    .unwrap();
    let run = |args: &[&str]| {
        toolwire(&person)
            .current_dir(&project)
            .args(args)
            .output()
            .unwrap()
    };
    let trusted = run(&["trust"]);
    let said = String::from_utf8_lossy(&trusted.stdout).into_owned()
        + &String::from_utf8_lossy(&trusted.stderr);
    assert!(trusted.status.success(), "{said}");
    // Its widening settings are named as set aside.
    for key in ["sandbox.read", "sandbox.write", "sandbox.off"] {
        assert!(said.contains(key), "{key} in {said}");
    }
    for server in ["hostile__attempt", "unconfined__attempt"] {
        let called = run(&["call", "--yes", server, &read(&key).to_string()]);
        let out = String::from_utf8_lossy(&called.stdout);
        assert!(
            called.status.success(),
            "{}",
            String::from_utf8_lossy(&called.stderr)
        );
        assert_eq!(out.trim(), "refused: EACCES Permission denied", "{server}");
    }
}

/// `toolwire call` of a one-off server's `tool` with `arguments`: success, and the output.
fn call_real(
    person: &Person,
    server: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> (bool, String) {
    // Run from the work directory: the one root the CLI offers (server-filesystem works in the
    // roots it is offered).
    let output = toolwire(person)
        .current_dir(person.path("work"))
        .args(["call", "--yes", server, tool])
        .arg(arguments.to_string())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), said)
}

#[test]
fn server_filesystem_works_in_the_directory_it_is_given_and_nowhere_else() {
    let person = Person::new();
    let node = toolwire_testkit::real_server("TOOLWIRE_HOST_NODE");
    let filesystem = toolwire_testkit::real_server("TOOLWIRE_HOST_FILESYSTEM");
    let files = person.path("work");
    let server = format!("{node} {filesystem} {}", files.display());
    let made = files.join("made.txt");
    let (ok, said) = call_real(
        &person,
        &server,
        "write_file",
        serde_json::json!({"path": made, "content": "written in the sandbox"}),
    );
    assert!(ok, "{said}");
    assert_eq!(
        std::fs::read_to_string(&made).unwrap(),
        "written in the sandbox"
    );
    let (ok, said) = call_real(
        &person,
        &server,
        "read_text_file",
        serde_json::json!({"path": files.join("readme.txt")}),
    );
    assert!(ok && said.contains("work"), "{said}");
    // Outside it: refused (by the server's own check first; the sandbox stands behind it).
    let (ok, said) = call_real(
        &person,
        &server,
        "read_text_file",
        serde_json::json!({"path": person.path("home/.ssh/id_rsa")}),
    );
    assert!(!ok && !said.contains("PRIVATE KEY"), "{said}");
}

#[test]
fn mcp_server_git_works_on_its_repository_and_not_on_another() {
    let person = Person::new();
    let python = toolwire_testkit::real_server("TOOLWIRE_HOST_GIT_PYTHON");
    let repository = |name: &str| {
        let repo = person.path(name);
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| {
            let done = Command::new("git")
                .args(args)
                .current_dir(&repo)
                .env("HOME", person.path("home"))
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap();
            assert!(done.status.success(), "git {args:?}: {:?}", done);
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-q", "-m", "first"]);
        repo
    };
    let repo = repository("repo");
    let other = repository("other");
    let server = format!("{python} -m mcp_server_git --repository {}", repo.display());
    let (ok, said) = call_real(
        &person,
        &server,
        "git_status",
        serde_json::json!({"repo_path": repo}),
    );
    assert!(ok && said.contains("main"), "{said}");
    // Writing in its repository: a branch is a file under .git.
    let (ok, said) = call_real(
        &person,
        &server,
        "git_create_branch",
        serde_json::json!({"repo_path": repo, "branch_name": "sandboxed"}),
    );
    assert!(ok, "{said}");
    assert!(repo.join(".git/refs/heads/sandboxed").exists(), "{said}");
    // Another repository: refused.
    let (ok, said) = call_real(
        &person,
        &server,
        "git_create_branch",
        serde_json::json!({"repo_path": other, "branch_name": "escaped"}),
    );
    assert!(
        !ok || !other.join(".git/refs/heads/escaped").exists(),
        "{said}"
    );
    assert!(!other.join(".git/refs/heads/escaped").exists(), "{said}");
}
