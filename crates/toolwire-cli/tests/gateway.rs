//! `toolwire gateway` as an operator runs it: a real `toolwire serve` over stdio (started by
//! the gateway) and another over HTTP behind it, its downstream settings from the file's
//! "gateway" object, called by the `toolwire` client commands through the gateway's URL.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

#[path = "support/gateway.rs"]
mod support;

use support::{BIN, Killed, toolwire};

/// Starts `command` and waits for the stderr line with `needle`: the URL that follows it.
fn started(command: Command, needle: &str) -> (Killed, String, mpsc::Receiver<String>) {
    let started = support::start(command, needle);
    (started.child, started.url, started.lines)
}

/// `toolwire gateway --http 127.0.0.1:0` on `config`, written to `DIR/gateway.json`: the
/// command to start, and the file.
fn http_gateway(dir: &tempfile::TempDir, config: &Value) -> (Command, std::path::PathBuf) {
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let mut gateway = toolwire(dir);
    gateway
        .args(["gateway", "--http", "127.0.0.1:0", "--config"])
        .arg(&file);
    (gateway, file)
}

/// `path`, made: a directory given to a sandboxed server is granted to it when it exists (one
/// not made yet is granted through the directory it would be made in, which here also holds
/// Toolwire's state, hidden from servers).
fn made(path: std::path::PathBuf) -> std::path::PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    path
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
                "args": ["serve", "--data-dir", made(dir.path().join("stdio-notes"))],
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
    let (gateway, _) = http_gateway(&dir, &config);
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
    let said = support::start(gateway, "the gateway serves at ").before;
    let warnings: Vec<&String> = said.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings.len(),
        1,
        "only VS Code's \"inputs\" is named as left alone, not the \"gateway\" object the gateway reads: {said:?}"
    );
    assert!(warnings[0].contains("\"inputs\""), "{said:?}");
}

/// A gateway's log in words an operator reads: the project's own example upstream starts
/// with no warning (it offers no prompts or resources, so it is not asked to announce their
/// changes), and its log lines are relayed at their own level with one timestamp, not two.
#[test]
fn a_gateway_starts_its_example_upstream_without_a_warning_and_relays_its_lines_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"examples": {
        "command": BIN, "args": ["serve", "--data-dir", made(dir.path().join("notes"))], "prefix": "ex",
    }}});
    let (gateway, _) = http_gateway(&dir, &config);
    let started = support::start(gateway, "the gateway serves at ");
    let mut said = started.before.clone();
    // The subscriptions open beside the start: wait for what they say.
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match started.lines.recv_timeout(left) {
            Ok(line) => said.push(line),
            Err(_) => break,
        }
    }
    assert!(
        !said
            .iter()
            .any(|l| l.contains("WARN") || l.contains("warning")),
        "{said:#?}"
    );
    let relayed = said
        .iter()
        .find(|l| l.contains("serving the example tools on stdio"))
        .unwrap_or_else(|| panic!("the upstream's start is relayed: {said:#?}"));
    assert_eq!(relayed.matches("Z ").count(), 1, "one timestamp: {relayed}");
    assert!(relayed.contains(" INFO "), "{relayed}");
    assert!(
        relayed.ends_with("server=examples"),
        "named as configured: {relayed}"
    );
}

/// A gateway's `ask` rule met from a script: without a terminal the question is declined and
/// the caller is told the answer that would fit (`--answer '{"approve":true}'`); with it, the
/// call is made.
#[test]
fn a_gateway_ask_is_answered_from_a_script_with_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "mcpServers": {"examples": {
            "command": BIN, "args": ["serve", "--data-dir", made(dir.path().join("notes"))], "prefix": "ex",
        }},
        "gateway": {"policy": {"rules": [{"ask": "tool.name == \"ex__echo\"", "why": "echoes are asked about"}]}},
    });
    let (gateway, _) = http_gateway(&dir, &config);
    let (_gateway, url, _lines) = started(gateway, "the gateway serves at ");
    let (ok, _, stderr) = client(&dir, &["call", "--yes", &url, "ex__echo", "message=hi"]);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains(r#"to answer it, pass --answer '{"approve":true}'"#),
        "{stderr}"
    );
    let (ok, stdout, stderr) = client(
        &dir,
        &[
            "call",
            "--yes",
            &url,
            "ex__echo",
            "message=hi",
            "--answer",
            r#"{"approve": true}"#,
        ],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("hi"), "{stdout}");
}

/// Flags that cannot work (a busy `--http` port, a console token too short, sign-in on stdio)
/// stop the gateway before any upstream is started: the upstream here would leave a file.
#[test]
fn bad_flags_stop_the_gateway_before_any_upstream_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let script = format!(
        "touch {}; exec {BIN} serve --data-dir {}",
        marker.display(),
        dir.path().join("notes").display()
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = busy.local_addr().unwrap().to_string();
    let config = json!({"mcpServers": {"up": {"command": "sh", "args": ["-c", script]}}});
    let file = dir.path().join("gateway.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let signed_in = dir.path().join("auth.json");
    let mut with_auth = config.clone();
    with_auth["gateway"] =
        json!({"auth": {"issuer": "http://127.0.0.1:9", "resource": "http://127.0.0.1:9/mcp"}});
    std::fs::write(&signed_in, with_auth.to_string()).unwrap();
    let cases: [(&[&str], &std::path::Path, &str); 3] = [
        (&["--http", &busy], &file, "another program listens there"),
        (
            &[
                "--http",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--console-token-env",
                "SHORT_TOKEN",
            ],
            &file,
            "--console-token-env",
        ),
        (&[], &signed_in, "applies to Streamable HTTP only"),
    ];
    for (flags, config, wanted) in cases {
        let output = toolwire(&dir)
            .arg("gateway")
            .args(flags)
            .arg("--config")
            .arg(config)
            .env("SHORT_TOKEN", "abc")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(wanted), "{flags:?}: {stderr}");
        assert!(
            !marker.exists(),
            "{flags:?}: the upstream was started: {stderr}"
        );
    }
}

#[test]
fn a_bad_gateway_object_stops_the_gateway_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gateway.json");
    // The gateway started on `file`: how it ended and what it said.
    let start = |file: &std::path::Path| {
        let output = toolwire(&dir)
            .args(["gateway", "--config"])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output, stderr)
    };
    std::fs::write(
        &file,
        json!({"mcpServers": {}, "gateway": {"limitz": {}}}).to_string(),
    )
    .unwrap();
    let (output, stderr) = start(&file);
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
    let (output, stderr) = start(&file);
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
    let (output, stderr) = start(&file);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("gateway.policy") && stderr.contains("rules[1]") && stderr.contains("user"),
        "{stderr}"
    );

    // The held calls' settings: a wait of nothing, a misspelt key, no room at all.
    for (held, said) in [
        (json!({"ttlMs": 0}), "gateway.held.ttlMs"),
        (json!({"ttl": 5000}), "unknown field `ttl`"),
        (json!({"max": 0}), "gateway.held.max"),
    ] {
        std::fs::write(
            &file,
            json!({"mcpServers": {}, "gateway": {"held": held}}).to_string(),
        )
        .unwrap();
        let (output, stderr) = start(&file);
        assert_eq!(output.status.code(), Some(2), "{held}: {stderr}");
        assert!(stderr.contains(said), "{held}: {stderr}");
    }

    // The discovery modes: each error names the field.
    for (discovery, said) in [
        (
            json!({"mode": "fast"}),
            "gateway.discovery.mode: \"fast\" is not a mode",
        ),
        (
            json!({"threshhold": 5}),
            "gateway.discovery.threshhold: not a key",
        ),
        (
            json!({"callers": [{"when": "tool.name == \"x\"", "mode": "direct"}]}),
            "gateway.discovery.callers[0].when: reads `tool` or `args`",
        ),
    ] {
        std::fs::write(
            &file,
            json!({"mcpServers": {}, "gateway": {"discovery": discovery}}).to_string(),
        )
        .unwrap();
        let (output, stderr) = start(&file);
        assert_eq!(output.status.code(), Some(2), "{discovery}: {stderr}");
        assert!(stderr.contains(said), "{discovery}: {stderr}");
    }
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
        json!(["serve", "--data-dir", made(dir.path().join("stdio-notes"))]);
    config["mcpServers"]["remote"]["url"] = json!(upstream_url);
    let (gateway, _) = http_gateway(&dir, &config);
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

/// The pids of `parent`'s children whose command line holds `needle`.
fn children_saying(parent: u32, needle: &str) -> Vec<u32> {
    let output = Command::new("pgrep")
        .args(["-P", &parent.to_string(), "-f", needle])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Waits (at most 30 s) for the next progress after those already received.
async fn progressed(progress: &mut tokio::sync::mpsc::UnboundedReceiver<()>) {
    while progress.try_recv().is_ok() {}
    tokio::time::timeout(Duration::from_secs(30), progress.recv())
        .await
        .expect("progress within 30 s")
        .expect("progress");
}

/// Sends SIGKILL to `pid`.
fn kill(pid: u32) {
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

/// The one upstream process of `gateway` other than `not`, once there is one (at most 30 s).
async fn upstream_process(gateway: u32, not: Option<u32>) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pids = children_saying(gateway, "serve --data-dir");
        if let [pid] = pids[..]
            && Some(pid) != not
        {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new upstream process within 30 s: {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A stdio upstream killed in the middle of a call. The call was lost with the process: the
/// gateway starts the upstream again and issues the call once more (S-11, H-27), so the
/// caller gets its answer. Killed again during that second try, the caller gets an error
/// naming the tool at once, not at a timeout; and the next call is served by a new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_killed_mid_call_is_restarted_and_a_second_death_is_a_clear_error() {
    use toolwire_client::{CallOptions, ClientBuilder};

    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"local": {
        "command": BIN,
        "args": ["serve", "--data-dir", made(dir.path().join("stdio-notes"))],
        "prefix": "local",
    }}});
    let (gateway, _) = http_gateway(&dir, &config);
    let (gateway, url, lines) =
        tokio::task::spawn_blocking(move || started(gateway, "the gateway serves at "))
            .await
            .unwrap();
    let gateway_pid = gateway.0.id();
    let caller = ClientBuilder::new("gateway-test", "1")
        .http(&url)
        .expect("a client");
    // Counting to `to` through the gateway, each step's progress on `progress`.
    let count = |to: u32| {
        let caller = caller.clone();
        let (progressed, progress) = tokio::sync::mpsc::unbounded_channel();
        let call = tokio::spawn(async move {
            let options = CallOptions::default().on_progress(move |_| {
                let _ = progressed.send(());
            });
            caller
                .call_tool_with(
                    "local__count_slowly",
                    json!({"to": to, "delay_ms": 100}),
                    options,
                )
                .await
        });
        (call, progress)
    };
    // Killed once: the call goes on in a new process and is answered.
    let first = upstream_process(gateway_pid, None).await;
    let (call, mut progress) = count(20);
    progressed(&mut progress).await;
    kill(first);
    let second = upstream_process(gateway_pid, Some(first)).await;
    let answered = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("answered")
        .unwrap()
        .expect("a result");
    assert!(!answered.is_error(), "{answered:?}");
    assert!(
        serde_json::to_string(&answered)
            .unwrap()
            .contains("Counted to 20")
    );

    // Killed during the call and again during its second try: an error naming the tool, at
    // once (100 steps of 100 ms would take 10 s).
    let (call, mut progress) = count(100);
    progressed(&mut progress).await;
    kill(second);
    let third = upstream_process(gateway_pid, Some(second)).await;
    progressed(&mut progress).await;
    kill(third);
    let Ok(answered) = tokio::time::timeout(Duration::from_secs(5), call).await else {
        let said: Vec<String> = lines.try_iter().collect();
        panic!(
            "the call did not end within 5 s of its upstream's death; the gateway said {said:#?}"
        );
    };
    let failed = answered.unwrap().expect("a result, not a transport error");
    assert!(failed.is_error(), "{failed:?}");
    let said = serde_json::to_string(&failed).unwrap();
    assert!(said.contains("local__count_slowly"), "{said}");

    // The next call is served by a new process, once the gateway started it.
    let fourth = upstream_process(gateway_pid, Some(third)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let result = caller
            .call_tool("local__echo", json!({"message": "back"}))
            .await
            .expect("a result");
        if !result.is_error() {
            assert!(serde_json::to_string(&result).unwrap().contains("back"));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream is not served again within 30 s: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(upstream_process(gateway_pid, Some(third)).await, fourth);
}

use toolwire_testkit::RedisServer;

/// A gateway whose file names a shared store keeps its pins there, and `toolwire pins` on the
/// same file reads and changes them there (not in the state directory).
#[test]
fn a_gateway_with_a_store_keeps_its_pins_there_for_toolwire_pins() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut upstream = toolwire(&dir);
    upstream
        .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("notes"));
    let (_upstream, upstream_url, _lines) = started(upstream, "serving the example tools at ");
    let config = json!({
        "mcpServers": {"remote": {"url": upstream_url, "prefix": "remote"}},
        "gateway": {"store": {"url": redis.url, "key_prefix": "team-a:"}},
    });
    let (gateway, file) = http_gateway(&dir, &config);
    let (_gateway, _url, _lines) = started(gateway, "the gateway serves at ");

    let stored: Vec<String> = redis.command(&["HKEYS", "team-a:pins:remote"]);
    assert!(
        stored.iter().any(|k| k == "echo") && stored.iter().any(|k| k == "add"),
        "{stored:?}"
    );
    assert!(
        !dir.path().join("state/pins").exists(),
        "no pins in the state directory"
    );

    let file = file.to_str().unwrap();
    let (ok, out, err) = client(&dir, &["pins", "--config", file, "list"]);
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("the pins in redis://127.0.0.1:"), "{err}");
    assert!(
        out.lines()
            .any(|l| l.contains("pinned") && l.contains("remote__echo")),
        "{out}"
    );
    let (ok, out, err) = client(
        &dir,
        &["pins", "--config", file, "forget", "remote", "echo"],
    );
    assert!(ok, "{out}\n{err}");
    let exists: i64 = redis.command(&["HEXISTS", "team-a:pins:remote", "echo"]);
    assert_eq!(exists, 0);
    assert!(!dir.path().join("state/pins").exists());
}
