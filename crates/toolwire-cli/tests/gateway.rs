//! `toolwire gateway` as an operator runs it: a real `toolwire serve` over stdio (started by
//! the gateway) and another over HTTP behind it, its downstream settings from the file's
//! "gateway" object, called by the `toolwire` client commands through the gateway's URL.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A child process killed when the test ends, whatever happens.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn toolwire(dir: &tempfile::TempDir) -> Command {
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

/// Starts `command` and waits for the stderr line with `needle`: the URL that follows it.
fn started(command: Command, needle: &str) -> (Killed, String, mpsc::Receiver<String>) {
    let (child, url, lines, _) = started_saying(command, needle);
    (child, url, lines)
}

/// [`started`], with the stderr lines before the one with `needle`.
fn started_saying(
    mut command: Command,
    needle: &str,
) -> (Killed, String, mpsc::Receiver<String>, Vec<String>) {
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
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {needle:?} within 30 s after {before:?}"));
        if let Some(rest) = line.split(needle).nth(1) {
            let url = rest.split_whitespace().next().unwrap().to_owned();
            return (child, url, lines, before);
        }
        before.push(line);
    }
}

/// Runs a client command against `url`; its stdout, or a panic with both streams.
fn client(dir: &tempfile::TempDir, args: &[&str]) -> (bool, String, String) {
    let output = toolwire(dir).args(args).output().expect("toolwire runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_gateway_serves_a_stdio_and_an_http_upstream_with_its_own_settings() {
    let dir = tempfile::tempdir().unwrap();
    let mut http_upstream = toolwire(&dir);
    http_upstream
        .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("http-notes"));
    let (_upstream, upstream_url, _lines) = started(http_upstream, "serving the example tools at ");
    let config = json!({
        "mcpServers": {
            "local": {
                "command": BIN,
                "args": ["serve", "--data-dir", dir.path().join("stdio-notes")],
                "prefix": "local",
            },
            "remote": {"url": upstream_url, "prefix": "remote"},
        },
        "gateway": {
            "tools": {"remote__add": {"rate_limit": {"calls": 2, "period_seconds": 3600}}},
            "audit": {"file": "gateway-audit.jsonl"},
            "policy": {"rules": [
                {"deny": "tool.name == \"local__note_create\"", "why": "notes stay read-only here"},
            ]},
        }
    });
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    let (_gateway, url, _lines) = started(gateway, "the gateway serves at ");

    // It offers the upstreams' prompts and resources beside their tools.
    let (ok, discovered, err) = client(&dir, &["discover", &url, "--json"]);
    assert!(ok, "toolwire discover: {err}");
    let discovered: Value = serde_json::from_str(&discovered).expect("JSON");
    let capabilities = &discovered["capabilities"];
    assert!(
        capabilities["prompts"].is_object() && capabilities["resources"].is_object(),
        "{discovered}"
    );

    let (ok, listed, err) = client(&dir, &["tools", &url, "--json"]);
    assert!(ok, "toolwire tools: {err}");
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .or(listed.as_array())
        .expect("a list of tools")
        .iter()
        .filter_map(|t| t["name"].as_str().or(t["qualified"].as_str()))
        .collect();
    for name in ["local__echo", "local__add", "remote__echo", "remote__add"] {
        assert!(
            names.iter().any(|n| n.ends_with(name)),
            "{name} in {names:?}"
        );
    }
    assert!(
        !names.iter().any(|n| n.ends_with("local__note_create")),
        "the policy hides it: {names:?}"
    );
    assert!(names.iter().any(|n| n.ends_with("remote__note_create")));

    let (ok, out, err) = client(
        &dir,
        &["call", &url, "local__echo", "message=through", "--yes"],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("through"), "{out}");
    let (ok, out, err) = client(&dir, &["call", &url, "remote__add", "a=2", "b=3", "--yes"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains('5'), "{out}");

    // The gateway's own quota for remote__add: 2 an hour.
    client(&dir, &["call", &url, "remote__add", "a=1", "b=1", "--yes"]);
    let (_, out, err) = client(&dir, &["call", &url, "remote__add", "a=1", "b=1", "--yes"]);
    assert!(
        out.contains("called too often: each caller may make 2 calls per 3600 s"),
        "the third call is refused by the gateway's rate limit: {out}\n{err}"
    );
    let audit = std::fs::read_to_string(dir.path().join("state/gateway-audit.jsonl"))
        .expect("the gateway's audit file");
    assert!(audit.contains("local__echo"), "{audit}");
}

#[test]
fn the_gateway_object_is_read_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {}, "gateway": {"audit": {"file": "audit.jsonl"}}, "inputs": [{"id": "key"}]})
            .to_string(),
    )
    .unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    let (_gateway, _url, _lines, said) = started_saying(gateway, "the gateway serves at ");
    let warnings: Vec<&String> = said.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings.len(),
        1,
        "only VS Code's \"inputs\" is named as left alone, not the \"gateway\" object the gateway reads: {said:?}"
    );
    assert!(warnings[0].contains("\"inputs\""), "{said:?}");
}

#[test]
fn a_bad_gateway_object_stops_the_gateway_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {}, "gateway": {"limitz": {}}}).to_string(),
    )
    .unwrap();
    let output = toolwire(&dir)
        .args(["gateway", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "a usage error: {stderr}");
    assert!(
        stderr.contains("gateway") && stderr.contains("limitz"),
        "{stderr}"
    );

    std::fs::write(
        &file,
        json!({"mcpServers": {"a": {"url": "http://127.0.0.1:9/mcp", "approval": {"ask": ["*"]}}}})
            .to_string(),
    )
    .unwrap();
    let output = toolwire(&dir)
        .args(["gateway", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("no person to ask"), "{stderr}");

    // A rule that does not compile stops the gateway at start, naming the rule and why.
    std::fs::write(
        &file,
        json!({"mcpServers": {}, "gateway": {"policy": {"rules": [
            {"allow": "true"},
            {"deny": "user.name == \"mallory\""},
        ]}}})
        .to_string(),
    )
    .unwrap();
    let output = toolwire(&dir)
        .args(["gateway", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("gateway.policy") && stderr.contains("rules[1]") && stderr.contains("user"),
        "{stderr}"
    );
}

/// The README's example file, as shipped (only the command and the HTTP upstream's address
/// changed to this test's): it loads without a warning, its rules compile, and they and the
/// upstreams' filters shape the list as the README says.
#[test]
fn the_readme_example_file_runs_as_described() {
    let dir = tempfile::tempdir().unwrap();
    let mut http_upstream = toolwire(&dir);
    http_upstream
        .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("http-notes"));
    let (_upstream, upstream_url, _lines) = started(http_upstream, "serving the example tools at ");
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gateway.json"),
    )
    .unwrap();
    let mut config: Value = serde_json::from_str(&example).unwrap();
    config["mcpServers"]["examples"]["command"] = json!(BIN);
    config["mcpServers"]["examples"]["args"] =
        json!(["serve", "--data-dir", dir.path().join("stdio-notes")]);
    config["mcpServers"]["remote"]["url"] = json!(upstream_url);
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    let (_gateway, url, lines) = started(gateway, "the gateway serves at ");

    let (ok, listed, err) = client(&dir, &["tools", &url, "--json"]);
    assert!(ok, "toolwire tools: {err}");
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    let names: Vec<String> = listed["tools"]
        .as_array()
        .or(listed.as_array())
        .expect("a list of tools")
        .iter()
        .filter_map(|t| t["name"].as_str().or(t["qualified"].as_str()))
        .map(str::to_owned)
        .collect();
    assert!(names.contains(&"ex__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"remote__note_create".to_owned()),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("ex__note_")),
        "the policy hides the local notes from this client: {names:?}"
    );
    assert!(
        !names.contains(&"remote__toggle_shout".to_owned()),
        "the upstream's tools.deny: {names:?}"
    );
    let (_, out, err) = client(
        &dir,
        &[
            "call",
            &url,
            "remote__note_append",
            "note=x",
            &format!("text={}", "y".repeat(1001)),
            "--yes",
        ],
    );
    assert!(
        format!("{out}{err}").contains("appends are at most 1000 characters"),
        "{out}\n{err}"
    );
    let early: Vec<String> = lines.try_iter().collect();
    assert!(
        !early.iter().any(|l| l.contains("not one Toolwire reads")),
        "{early:?}"
    );
}

/// Reads `child`'s stderr up to the line with `needle`, which ends the list; then the pipe's
/// reading end is closed.
fn said_until(child: &mut Child, needle: &str) -> Vec<String> {
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("piped"));
    let until = needle.to_owned();
    // Read on a thread, so that the wait is bounded; the thread ends at the needle, dropping
    // the pipe's reading end.
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let last = line.contains(&until);
            let _ = tx.send(line);
            if last {
                return;
            }
        }
    });
    let mut said = Vec::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no line with {needle:?} within 30 s after {said:?}"));
        let last = line.contains(needle);
        said.push(line);
        if last {
            reader.join().expect("the reader ends at the needle");
            return said;
        }
    }
}

#[test]
fn a_gateway_whose_stderr_is_gone_still_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, json!({"mcpServers": {}}).to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file)
        .stderr(Stdio::piped());
    let mut child = Killed(gateway.spawn().expect("toolwire starts"));
    said_until(&mut child.0, "the gateway serves at ");
    // Whoever read its stderr is gone (a host that closed the pipe, a log collector that
    // stopped): the next log line cannot be written, and that must cost only the line.
    let pid = child.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the gateway did not stop within 15 s of SIGTERM with its stderr closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_upstreams_stderr_reaches_the_gateways_log_with_control_characters_visible() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "printf '\\033]0;owned\\007\\033[2Jan upstream says hi\\n' >&2; exec {BIN} serve --data-dir {}",
        dir.path().join("notes").display()
    );
    let config = json!({"mcpServers": {"loud": {"command": "sh", "args": ["-c", script]}}});
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(&dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file)
        .stderr(Stdio::piped());
    let mut child = Killed(gateway.spawn().expect("toolwire starts"));
    let said = said_until(&mut child.0, "the gateway serves at ");
    let line = said
        .iter()
        .find(|l| l.contains("an upstream says hi"))
        .unwrap_or_else(|| panic!("the upstream's stderr line is logged: {said:?}"));
    assert!(
        !line.contains('\u{1b}') && !line.contains('\u{7}'),
        "the upstream's escape sequences reach the operator's terminal as they are: {line:?}"
    );
}
