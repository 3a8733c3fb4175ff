//! The `toolwire` binary end to end: the client commands against `toolwire serve` as a stdio
//! child and over HTTP on 127.0.0.1, with their output and exit statuses.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// `toolwire` keeping its state and notes in `scratch`, unless a test chooses: never the home
/// directory of whoever runs the tests.
fn toolwire_in(scratch: &tempfile::TempDir) -> Command {
    let mut command = Command::new(BIN);
    command
        .env("TOOLWIRE_STATE_DIR", scratch.path().join("state"))
        .env("TOOLWIRE_DATA_DIR", scratch.path().join("data"));
    command
}

fn toolwire(args: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    toolwire_in(&scratch)
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LOG")
        .output()
        .expect("toolwire runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `toolwire serve` as a stdio command line for the client commands.
fn stdio_server() -> String {
    format!("{BIN} serve")
}

/// A child process killed when the test ends, whatever happens.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The lines a child writes to stderr, read on a thread.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}

/// The lines a child writes to stdout, read on a thread.
fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}

/// The first line within 10 s that contains `needle`.
fn line_with(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no line with {needle:?} within 10 s"));
        if line.contains(needle) {
            return line;
        }
    }
}

/// Held by the tests that choose a port before starting a server on it (the port is in their
/// configuration): one at a time, so that two of them never race for the same free port.
static FIXED_PORTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fixed_ports() -> std::sync::MutexGuard<'static, ()> {
    FIXED_PORTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `toolwire serve --http 127.0.0.1:0`, with its URL.
struct HttpServer {
    child: Child,
    url: String,
    /// Its state and notes, removed after the server is stopped.
    _scratch: tempfile::TempDir,
}

impl HttpServer {
    fn start() -> HttpServer {
        HttpServer::start_with(&["--http", "127.0.0.1:0"])
    }

    fn start_with(args: &[&str]) -> HttpServer {
        HttpServer::start_with_env(args, &[])
    }

    fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let scratch = tempfile::tempdir().unwrap();
        let mut child = toolwire_in(&scratch)
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = stderr_lines(&mut child);
        let line = line_with(&lines, "serving the example tools at ");
        let url = line
            .split("serving the example tools at ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned();
        // Keep draining the server's stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || while lines.recv().is_ok() {});
        HttpServer {
            child,
            url,
            _scratch: scratch,
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `printf '{"a":"\\\n' | toolwire serve` once exited 101: the depth scan stepped past a trailing
/// backslash. The server must answer -32700 and keep serving.
#[test]
fn serve_survives_a_line_ending_in_a_backslash() {
    use std::io::Write;
    let scratch = tempfile::tempdir().unwrap();
    let mut child = toolwire_in(&scratch)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let discover = r#"{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    write!(stdin, "{{\"a\":\"\\\n{discover}\n").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let replies: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["error"]["code"], -32700);
    assert_eq!(replies[1]["id"], 2, "still serving after the bad line");
}

/// `toolwire serve` answers a legacy (2025-11-25) client from the same tools; with
/// `--modern-only` it refuses it with -32022 naming 2026-07-28.
#[test]
fn serve_answers_legacy_clients_unless_modern_only() {
    use std::io::Write;
    let session = |extra: &[&str]| {
        let scratch = tempfile::tempdir().unwrap();
        let mut child = toolwire_in(&scratch)
            .arg("serve")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"old-host","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"from 2025"}}}"#,
        ];
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        stdout(&output)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let replies = session(&[]);
    assert_eq!(
        replies[0]["result"]["protocolVersion"], "2025-11-25",
        "{replies:?}"
    );
    assert_eq!(
        replies[0]["result"]["serverInfo"]["name"],
        "toolwire-examples"
    );
    assert_eq!(replies[1]["result"]["content"][0]["text"], "from 2025");
    assert!(replies[1]["result"].get("resultType").is_none());
    let refused = session(&["--modern-only"]);
    assert_eq!(refused[0]["error"]["code"], -32022, "{refused:?}");
    assert_eq!(
        refused[0]["error"]["data"]["supported"],
        serde_json::json!(["2026-07-28"])
    );
}

/// `toolwire serve`'s `introduce` asks two questions in two rounds: the second round carries
/// the first answer in a sealed `requestState`, the final answer uses both, and the same state
/// sent again is refused (single use), not answered twice.
#[test]
fn introduce_carries_its_first_answer_in_a_sealed_single_use_state() {
    use std::io::Write;
    let scratch = tempfile::tempdir().unwrap();
    let mut child = toolwire_in(&scratch)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut call = |id: u32, extra: serde_json::Value| {
        let mut params = serde_json::json!({
            "name": "introduce", "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
            }
        });
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        writeln!(stdin, "{request}").unwrap();
        let line = replies.next().unwrap().unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    let first = call(1, serde_json::json!({}));
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(
        first["result"]["inputRequests"]["name"].is_object(),
        "{first}"
    );
    let accept =
        |content: serde_json::Value| serde_json::json!({"action": "accept", "content": content});
    let second = call(
        2,
        serde_json::json!({"inputResponses": {"name": accept(serde_json::json!({"name": "Ada"}))}}),
    );
    let asks = &second["result"]["inputRequests"]["colour"]["params"]["message"];
    assert_eq!(asks, "Ada, what is your favourite colour?", "{second}");
    let state = second["result"]["requestState"]
        .as_str()
        .expect("a sealed state")
        .to_owned();
    assert!(
        !state.contains("Ada"),
        "the state is sealed, not plain: {state}"
    );
    let answer = serde_json::json!({
        "inputResponses": {"colour": accept(serde_json::json!({"colour": "teal"}))},
        "requestState": state
    });
    let third = call(3, answer.clone());
    assert_eq!(
        third["result"]["content"][0]["text"], "Ada likes teal.",
        "{third}"
    );
    let replayed = call(4, answer);
    assert_eq!(
        replayed["error"]["code"], -32602,
        "a redeemed state is refused: {replayed}"
    );
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// One raw HTTP/1.1 exchange: the status line, headers and body as text.
fn raw_http(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// `serve --config`: a bad file stops the command naming the file and the key; `[auth]` makes
/// the HTTP endpoint a resource server (metadata, 401 challenge) and is refused on stdio.
#[test]
fn serve_reads_its_config_file() {
    let _ports = fixed_ports();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let bad = write("bad.toml", "[tools.add]\nscope = [\"math\"]\n");
    let refused = toolwire(&["serve", "--config", &bad]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let error = stderr(&refused);
    assert!(
        error.contains("bad.toml") && error.contains("scope"),
        "{error}"
    );
    let unknown = write("unknown.toml", "[tools.nope]\nscopes = [\"x\"]\n");
    let error = stderr(&toolwire(&["serve", "--config", &unknown]));
    assert!(
        error.contains("[tools.nope] names no example tool"),
        "{error}"
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let auth = write(
        "auth.toml",
        &format!(
            "[auth]\nissuer = \"http://127.0.0.1:9\"\nresource = \"http://127.0.0.1:{port}/mcp\"\n\n[tools.add]\nscopes = [\"math\"]\n"
        ),
    );
    let stdio = toolwire(&["serve", "--config", &auth]);
    assert!(stderr(&stdio).contains("Streamable HTTP only"), "{stdio:?}");
    let addr = format!("127.0.0.1:{port}");
    let _server = HttpServer::start_with(&["--http", &addr, "--config", &auth]);
    let metadata = raw_http(
        &addr,
        "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(metadata.starts_with("HTTP/1.1 200"), "{metadata}");
    assert!(
        metadata.contains(&format!("\"resource\":\"http://127.0.0.1:{port}/mcp\"")),
        "{metadata}"
    );
    assert!(
        metadata.contains("\"scopes_supported\":[\"math\"]"),
        "{metadata}"
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let unauthorized = raw_http(
        &addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(unauthorized.starts_with("HTTP/1.1 401"), "{unauthorized}");
    assert!(
        unauthorized.to_ascii_lowercase().contains(&format!(
            "www-authenticate: bearer resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp\", scope=\"math\""
        )),
        "{unauthorized}"
    );
}

#[test]
fn tools_and_calls_over_stdio() {
    let server = stdio_server();
    let listed = toolwire(&["tools", &server]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(
        stdout(&listed).contains("add(a: number, b: number)"),
        "{}",
        stdout(&listed)
    );

    let sum = toolwire(&["call", "--yes", &server, "add", r#"{"a": 2, "b": 3}"#]);
    assert!(sum.status.success(), "{}", stderr(&sum));
    let value: serde_json::Value = serde_json::from_str(&stdout(&sum)).unwrap();
    // As a person writes it: 5, not 5.0.
    assert_eq!(value["sum"], serde_json::json!(5), "{value}");
    assert!(!stdout(&sum).contains("5.0"), "{}", stdout(&sum));
    let half = toolwire(&["call", "--yes", &server, "add", r#"{"a": 0.5, "b": 0.25}"#]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&half)).unwrap();
    assert_eq!(value["sum"], serde_json::json!(0.75), "{value}");

    // Progress goes to stderr, the result to stdout.
    let counted = toolwire(&[
        "call",
        "--yes",
        &server,
        "count_slowly",
        r#"{"to": 2, "delay_ms": 1}"#,
    ]);
    assert!(counted.status.success(), "{}", stderr(&counted));
    assert_eq!(stdout(&counted).trim(), "Counted to 2.");
    assert!(
        stderr(&counted).contains("progress 2/2"),
        "{}",
        stderr(&counted)
    );

    // Arguments the tool's input schema rejects: the call is not made, each problem is named
    // on stderr, exit status 2.
    let invalid = toolwire(&["call", "--yes", &server, "add", r#"{"a": "two"}"#]);
    assert_eq!(invalid.status.code(), Some(2), "{}", stderr(&invalid));
    let said = stderr(&invalid);
    assert!(said.contains("do not fit add's input schema"), "{said}");
    assert!(
        said.contains("- /a: ") && said.contains("\"b\" is a required property"),
        "{said}"
    );
    assert!(stdout(&invalid).is_empty(), "{}", stdout(&invalid));

    // A tool error: its words on stderr, its result on stdout, exit status 1.
    let failed = toolwire(&["call", "--yes", &server, "note_read", "note=nope"]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    let said = stderr(&failed);
    let first = stdout(&failed);
    let first = first.lines().next().unwrap_or_default();
    assert!(!first.is_empty(), "the result on stdout");
    assert!(
        said.contains(&format!("toolwire: the tool reported an error: {first}")),
        "{said}"
    );

    // A protocol error and bad input: a message on stderr, exit status 2.
    let unknown = toolwire(&["call", "--yes", &server, "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("there is no tool named nope"),
        "{}",
        stderr(&unknown)
    );
    let not_json = toolwire(&["call", "--yes", &server, "add", "{a: 2"]);
    assert_eq!(not_json.status.code(), Some(2));
    assert!(
        stderr(&not_json).contains("not JSON"),
        "{}",
        stderr(&not_json)
    );
    let missing = toolwire(&["tools", "/nonexistent/mcp-server --stdio"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot start"),
        "{}",
        stderr(&missing)
    );
}

/// A one-off server's tools go by their own names in every message: the refusal of a call
/// nobody could approve names `toggle_shout`, not an internal qualified name.
#[test]
fn a_one_off_server_s_tools_go_by_their_own_names() {
    let server = stdio_server();
    let refused = toolwire(&["call", &server, "toggle_shout"]);
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    let said = stderr(&refused);
    assert!(
        said.contains("Nobody could approve the call to toggle_shout:"),
        "{said}"
    );
    assert!(!said.contains("__"), "{said}");
    let listed = toolwire(&["tools", &server]);
    assert!(stdout(&listed).starts_with("add("), "{}", stdout(&listed));
}

/// `--log-format json`: every line a server writes on stderr is a JSON object, its own notes
/// (where it serves, what to try) and the error it stops with among them.
#[test]
fn with_json_logs_every_line_on_stderr_is_json() {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = Killed(
        toolwire_in(&scratch)
            .args(["serve", "--http", "127.0.0.1:0", "--log-format", "json"])
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = stderr_lines(&mut child.0);
    let serving = line_with(&lines, "serving the example tools at");
    let try_line = line_with(&lines, "try: curl");
    for line in [&serving, &try_line] {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(object["level"], "INFO", "{line}");
        assert_eq!(object["target"], "toolwire", "{line}");
        assert!(object["timestamp"].as_str().is_some(), "{line}");
    }
    // A server that cannot start: its error is a JSON line at level ERROR too.
    let busy = serving
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_owned();
    let failed = toolwire_in(&scratch)
        .args(["serve", "--http", &busy, "--log-format", "json"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(2));
    let said = stderr(&failed);
    assert!(!said.trim().is_empty());
    for line in said.lines() {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(object["message"].as_str().is_some(), "{line}");
    }
    assert!(said.contains(r#""level":"ERROR""#), "{said}");
}

#[test]
fn discover_call_and_watch_over_http() {
    let server = HttpServer::start();
    let discovered = toolwire(&["discover", &server.url, "--json"]);
    assert!(discovered.status.success(), "{}", stderr(&discovered));
    let value: serde_json::Value = serde_json::from_str(&stdout(&discovered)).unwrap();
    assert_eq!(value["supportedVersions"][0], "2026-07-28");

    let echoed = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "echo",
        r#"{"message": "héllo"}"#,
    ]);
    assert!(echoed.status.success(), "{}", stderr(&echoed));
    assert_eq!(stdout(&echoed).trim(), "héllo");

    let json = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "echo",
        r#"{"message": "x"}"#,
        "--json",
    ]);
    let value: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(value["resultType"], "complete");

    // watch runs until the server ends the subscription (here: a graceful shutdown, L-10).
    let scratch = tempfile::tempdir().unwrap();
    let mut watch = Killed(
        toolwire_in(&scratch)
            .args(["watch", &server.url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let watched = stderr_lines(&mut watch.0);
    let first = line_with(&watched, "toolwire: watching");
    assert!(first.contains("the server's tool list"), "{first}");
    // A change says what changed: the tool added, then removed.
    let said = stdout_lines(&mut watch.0);
    for (toggle, wanted) in [(1, "  added: shout"), (2, "  removed: shout")] {
        let toggled = toolwire(&["call", "--yes", &server.url, "toggle_shout"]);
        assert!(
            toggled.status.success(),
            "toggle {toggle}: {}",
            stderr(&toggled)
        );
        line_with(&said, "tools/list_changed");
        let what = line_with(&said, "  ");
        assert_eq!(what, wanted, "toggle {toggle}");
    }
    let interrupted = Command::new("kill")
        .args(["-INT", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    line_with(&watched, "the server ended the subscription");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = watch.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "watch exits");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
}

/// stdio has no OAuth (A-01): the caller's scopes come from the environment the host starts the
/// server with, and the per-tool scopes of `--config` hold as over HTTP.
#[test]
fn stdio_scopes_come_from_the_environment() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let config = dir.join("scopes.toml");
    std::fs::write(&config, "[tools.add]\nscopes = [\"math\"]\n").unwrap();
    let server = format!("{BIN} serve --config {}", config.display());

    let everything = toolwire(&["tools", &server]);
    assert!(
        stdout(&everything).contains("add("),
        "no scopes set: no checks\n{}",
        stderr(&everything)
    );

    let reader = [
        "-e",
        "TOOLWIRE_SCOPES=tools:read",
        "-e",
        "TOOLWIRE_PRINCIPAL=ada",
    ];
    let listed = toolwire(&[&["tools", &server][..], &reader[..]].concat());
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(stdout(&listed).contains("echo("), "{}", stdout(&listed));
    assert!(
        !stdout(&listed).contains("add("),
        "add needs math: {}",
        stdout(&listed)
    );
    let refused = toolwire(
        &[
            &["call", "--yes", &server, "add", r#"{"a": 1, "b": 2}"#][..],
            &reader[..],
        ]
        .concat(),
    );
    // Hidden by the scopes, so never called (the host calls listed tools only).
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        stderr(&refused).contains("there is no tool named add"),
        "{}",
        stderr(&refused)
    );

    let math = ["-e", "TOOLWIRE_SCOPES=math"];
    let sum = toolwire(
        &[
            &["call", "--yes", &server, "add", r#"{"a": 1, "b": 2}"#][..],
            &math[..],
        ]
        .concat(),
    );
    assert!(sum.status.success(), "{}", stderr(&sum));

    // Through the client, the server's own words on why it stopped reach the person.
    let through = toolwire(&[&["tools", &server][..], &["-e", "TOOLWIRE_PRINCIPAL="][..]].concat());
    assert_eq!(through.status.code(), Some(2), "{through:?}");
    assert!(
        stderr(&through).contains("its last words on stderr")
            && stderr(&through).contains("TOOLWIRE_PRINCIPAL is set but empty"),
        "{}",
        stderr(&through)
    );
    let scratch = tempfile::tempdir().unwrap();
    let empty = toolwire_in(&scratch)
        .arg("serve")
        .env("TOOLWIRE_PRINCIPAL", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2), "{empty:?}");
    assert!(
        stderr(&empty).contains("TOOLWIRE_PRINCIPAL is set but empty"),
        "{}",
        stderr(&empty)
    );
}

#[path = "../../../interop/oidc/launch.rs"]
mod launch;

/// The npm oidc-provider on 127.0.0.1 (see `interop/oidc/provider.mjs`), killed on drop.
struct Provider {
    _launched: launch::Launched,
    issuer: String,
}

impl Provider {
    fn start() -> Provider {
        let launched = launch::launch(&[]);
        Provider {
            issuer: launched.issuer(),
            _launched: launched,
        }
    }

    fn issuer(&self) -> &str {
        &self.issuer
    }

    /// POSTs to the provider: one HTTP/1.1 exchange on loopback, the reply as text.
    fn post(&self, path: &str, content_type: &str, auth: Option<&str>, body: &str) -> String {
        let addr = self.issuer().trim_start_matches("http://").to_owned();
        let auth = auth.map_or(String::new(), |a| format!("Authorization: Basic {a}\r\n"));
        raw_http(
            &addr,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    }
}

/// `toolwire serve --http --config` with `[auth.introspection]`, its secret in the environment,
/// accepting opaque tokens of a real authorization server, and the client commands presenting
/// them with `--bearer`: what an operator and a user of the CLI meet.
#[test]
fn serve_config_introspects_opaque_tokens_of_a_real_provider() {
    let _ports = fixed_ports();
    let provider = Provider::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[auth]\nissuer = \"{}\"\nresource = \"{resource}\"\n\n[auth.introspection]\nclient_id = \"rs-introspect\"\nclient_secret_env = \"RS_SECRET\"\n\n[tools.add]\nscopes = [\"math\"]\n",
            provider.issuer()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();

    let missing = toolwire(&["serve", "--http", "127.0.0.1:0", "--config", &config]);
    assert!(
        stderr(&missing).contains("RS_SECRET is unset or empty"),
        "{}",
        stderr(&missing)
    );

    let addr = format!("127.0.0.1:{port}");
    let server = HttpServer::start_with_env(
        &["--http", &addr, "--config", &config],
        &[("RS_SECRET", "rs-introspect-secret")],
    );
    let set = provider.post(
        "/__test/resource",
        "application/json",
        None,
        &format!(r#"{{"resource": "{resource}", "format": "opaque"}}"#),
    );
    assert!(set.starts_with("HTTP/1.1 200"), "{set}");
    let token_for = |scope: &str| {
        let reply = provider.post(
            "/token",
            "application/x-www-form-urlencoded",
            Some("cnMtdGVzdDpycy1zZWNyZXQ="), // rs-test:rs-secret
            &format!(
                "grant_type=client_credentials&resource={}&scope={}",
                resource.replace(':', "%3A").replace('/', "%2F"),
                scope.replace(' ', "+").replace(':', "%3A")
            ),
        );
        let body = &reply[reply.find("\r\n\r\n").unwrap() + 4..];
        let json: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
        json["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_owned()
    };
    let reader = token_for("tools:read");
    assert!(!reader.contains('.'), "opaque: {reader}");

    let anonymous = toolwire(&["tools", &server.url]);
    assert_ne!(anonymous.status.code(), Some(0));
    let listed = toolwire(&["tools", &server.url, "--bearer", &reader]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(stdout(&listed).contains("echo("), "{}", stdout(&listed));
    assert!(!stdout(&listed).contains("add("), "{}", stdout(&listed));
    let refused = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "add",
        r#"{"a": 1, "b": 2}"#,
        "--bearer",
        &reader,
    ]);
    // A tool the server hides from this caller is not called: the host calls listed tools only.
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        stderr(&refused).contains("there is no tool named add"),
        "{}",
        stderr(&refused)
    );

    let math = token_for("tools:read math");
    let sum = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "add",
        r#"{"a": 1, "b": 2}"#,
        "--bearer",
        &math,
    ]);
    assert!(sum.status.success(), "{}", stderr(&sum));
    assert!(stdout(&sum).contains('3'), "{}", stdout(&sum));
}

/// What the README's "serve --config" walk-through does, with ports of this test's choosing:
/// `examples/serve.toml` as committed (its issuer the test authorization server), a token from
/// that server by client credentials, and the curl command the server prints, run with the
/// token. The audit log goes to the state directory, never to the working directory.
#[test]
fn the_example_serve_config_runs_as_the_readme_shows() {
    let _ports = fixed_ports();
    let provider = Provider::start();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/serve.toml"
    ))
    .unwrap();
    // What the server authors' guide tells a person to run, with the ports of the file.
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/server-authors.md"
    ))
    .unwrap();
    for step in [
        "scripts/oidc start 9400\n",
        "toolwire serve --config examples/serve.toml --http 127.0.0.1:8080\n",
        "TOKEN=$(curl -s -u rs-test:rs-secret -d grant_type=client_credentials -d scope=math \\\n  -d resource=http://127.0.0.1:8080/mcp http://127.0.0.1:9400/token | jq -r .access_token)",
    ] {
        assert!(readme.contains(step), "the guide says {step:?}");
    }
    // The README starts the authorization server on 9400 and serves on 8080: the file says so.
    let issuer_line = "issuer = \"http://127.0.0.1:9400\"";
    let resource_line = "resource = \"http://127.0.0.1:8080/mcp\"";
    assert!(
        example.contains(issuer_line) && example.contains(resource_line),
        "examples/serve.toml names the README's issuer and endpoint"
    );
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let data = dir.join("data");
    let state = dir.join("state");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        example
            .replace(issuer_line, &format!("issuer = \"{}\"", provider.issuer()))
            .replace(resource_line, &format!("resource = \"{resource}\"")),
    )
    .unwrap();

    // Run from a directory of its own, to see that nothing is written there.
    let cwd = dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let mut child = Command::new(BIN)
        .current_dir(&cwd)
        .env("TOOLWIRE_DATA_DIR", &data)
        .env("TOOLWIRE_STATE_DIR", &state)
        .env_remove("RUST_LOG")
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--http", &format!("127.0.0.1:{port}")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut child);
    let mut server = Killed(child);
    line_with(&lines, "serving the example tools at ");
    let needs = line_with(&lines, "access token");
    let hint = line_with(&lines, "curl ");
    std::thread::spawn(move || while lines.recv().is_ok() {});
    assert!(
        needs.contains(provider.issuer())
            && needs.contains(&resource)
            && needs.contains("scope math"),
        "which token the call needs: {needs}"
    );
    assert!(hint.contains("$TOKEN"), "the command presents it: {hint}");

    // The README's token request: client credentials of the test server's client rs-test.
    let reply = provider.post(
        "/token",
        "application/x-www-form-urlencoded",
        Some("cnMtdGVzdDpycy1zZWNyZXQ="), // rs-test:rs-secret
        &format!(
            "grant_type=client_credentials&scope=math&resource={}",
            resource.replace(':', "%3A").replace('/', "%2F")
        ),
    );
    let body = &reply[reply.find("\r\n\r\n").unwrap() + 4..];
    let token: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
    let token = token["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));

    // The printed curl command, as a shell would run it with $TOKEN set.
    let command = &hint[hint.find("curl ").unwrap()..];
    let words = shlex::split(command).unwrap_or_else(|| panic!("a shell command: {command}"));
    let (mut url, mut headers, mut body) = (None, Vec::new(), None);
    let mut words = words.into_iter().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "-s" => {}
            "-H" => headers.push(words.next().unwrap().replace("$TOKEN", token)),
            "-d" => body = words.next(),
            _ if word.starts_with("http://") => url = Some(word),
            _ => panic!("curl option {word} in {command}"),
        }
    }
    assert_eq!(url.as_deref(), Some(resource.as_str()), "{command}");
    let body = body.unwrap();
    let call = |headers: &[String]| {
        let addr = format!("127.0.0.1:{port}");
        let headers: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
        raw_http(
            &addr,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let answered = call(&headers);
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(
        answered.contains(r#""structuredContent":{"sum":5}"#),
        "{answered}"
    );
    let without: Vec<String> = headers
        .into_iter()
        .filter(|h| !h.to_ascii_lowercase().starts_with("authorization:"))
        .collect();
    let refused = call(&without);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");

    // Stopped as Ctrl-C stops it (the audit sink is flushed on the way out), its audit log is
    // in the state directory, where the gateway's and the host's are.
    let status = Command::new("kill")
        .args(["-INT", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    server.0.wait().unwrap();
    let audit = std::fs::read_to_string(state.join("audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("\"add\""), "{audit}");
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "nothing written to the working directory"
    );
}

/// The output guard as a CLI user meets it: `toolwire serve` redacts a secret the echo tool
/// would hand back, and `--config` can add patterns or let a tool's output through with a reason.
#[test]
fn serve_sanitizes_tool_output_as_configured() {
    let server = stdio_server();
    let leak = r#"{"message": "key AKIAIOSFODNN7EXAMPLE id INT-123456 \u001b[31mred\u001b[0m"}"#;
    let echoed = toolwire(&["call", "--yes", &server, "echo", leak]);
    assert!(echoed.status.success(), "{}", stderr(&echoed));
    assert_eq!(
        stdout(&echoed).trim(),
        "key [REDACTED:aws-access-key] id INT-123456 red"
    );

    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let mine = dir.join("mine.toml");
    std::fs::write(
        &mine,
        "[output]\nsecret_patterns = { internal-id = \"INT-[0-9]{6}\" }\n",
    )
    .unwrap();
    let configured = format!("{BIN} serve --config {}", mine.display());
    let echoed = toolwire(&["call", "--yes", &configured, "echo", leak]);
    assert_eq!(
        stdout(&echoed).trim(),
        "key [REDACTED:aws-access-key] id [REDACTED:internal-id] red"
    );

    let raw = dir.join("raw.toml");
    std::fs::write(
        &raw,
        "[tools.echo]\nraw_output = \"echo must be byte-exact\"\n",
    )
    .unwrap();
    let configured = format!("{BIN} serve --config {}", raw.display());
    let echoed = toolwire(&["call", "--yes", &configured, "echo", leak]);
    assert!(
        stdout(&echoed).contains("AKIAIOSFODNN7EXAMPLE"),
        "{}",
        stdout(&echoed)
    );
}

/// Deadlines as a CLI user meets them: a tool given 100 ms in `--config` is stopped and
/// `toolwire call` reports the tool's error (exit 1) with the limit.
#[test]
fn serve_stops_a_tool_at_its_configured_deadline() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let config = dir.join("deadline.toml");
    std::fs::write(&config, "[tools.count_slowly]\ntimeout_ms = 100\n").unwrap();
    let server = format!("{BIN} serve --config {}", config.display());
    let started = std::time::Instant::now();
    let slow = toolwire(&[
        "call",
        "--yes",
        &server,
        "count_slowly",
        r#"{"to": 40, "delay_ms": 50}"#,
    ]);
    assert_eq!(slow.status.code(), Some(1), "{slow:?}");
    let said = format!("{}{}", stdout(&slow), stderr(&slow));
    assert!(
        said.contains("The tool count_slowly did not finish within 0.1 s"),
        "{said}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let quick = toolwire(&[
        "call",
        "--yes",
        &server,
        "count_slowly",
        r#"{"to": 1, "delay_ms": 1}"#,
    ]);
    assert!(quick.status.success(), "{}", stderr(&quick));
}

/// `[audit] file` in `--config`: each call the CLI makes leaves one JSON line, with a digest of
/// its arguments and no secret in the preview.
#[test]
fn serve_writes_an_audit_line_per_call() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let log = dir.join("audit.jsonl");
    let config = dir.join("audit.toml");
    std::fs::write(
        &config,
        format!("[audit]\nfile = {:?}\n", log.display().to_string()),
    )
    .unwrap();
    let server = format!("{BIN} serve --config {}", config.display());
    // The log's place is inside the server's own configuration file, which the sandbox does not
    // read: the person grants it.
    let echoed = toolwire(&[
        "call",
        "--yes",
        "--allow-write",
        dir.to_str().unwrap(),
        &server,
        "echo",
        r#"{"message": "ghp_0123456789abcdefghijklmnopqrstuvwxyz"}"#,
    ]);
    assert!(echoed.status.success(), "{}", stderr(&echoed));
    let added = toolwire(&[
        "call",
        "--yes",
        "--allow-write",
        dir.to_str().unwrap(),
        &server,
        "add",
        r#"{"a": 1, "b": 2}"#,
    ]);
    assert!(added.status.success(), "{}", stderr(&added));
    let text = std::fs::read_to_string(&log).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["tool"], "echo");
    assert_eq!(events[0]["outcome"], "complete");
    assert!(!text.contains("ghp_0123456789"), "{text}");
    assert!(
        events[0]["arguments_preview"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:github-token]")
    );
    assert_eq!(events[1]["tool"], "add");
}

/// The notes tools keep their notes by handle in `--data-dir`: a note outlives a server killed
/// without warning, is read back by the next one, and expires when its idle lifetime (here
/// 4 s, from `[handles]`) passes without use, with a result that says how to recover. (With
/// 2 s, a restart plus two CLI runs on a loaded 2-core machine once took longer than that.)
#[test]
fn notes_survive_a_restart_and_expire_on_time() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let config = dir.join("notes.toml");
    std::fs::write(
        &config,
        "[handles]\nidle_seconds = 4\nmax_age_seconds = 3600\n",
    )
    .unwrap();
    let data = dir.join("data");
    let args = [
        "--http",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ];

    let listed = {
        let server = HttpServer::start_with(&args);
        let tools = toolwire(&["tools", &server.url, "--json"]);
        assert!(tools.status.success(), "{}", stderr(&tools));
        stdout(&tools)
    };
    assert!(
        listed.contains(
            "Note handles stay valid for 4 seconds after their last use and for 1 hour at most"
        ),
        "{listed}"
    );

    let server = HttpServer::start_with(&args);
    let created = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "note_create",
        r#"{"text": "first"}"#,
    ]);
    assert!(created.status.success(), "{}", stderr(&created));
    let out = stdout(&created);
    let at = out
        .find("note_")
        .unwrap_or_else(|| panic!("no handle in {out}"));
    let note: String = out[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    assert_eq!(note.len(), 27, "{out}");
    drop(server); // SIGKILL: no chance to flush anything.

    let server = HttpServer::start_with(&args);
    let arguments = format!(r#"{{"note": "{note}", "text": "second"}}"#);
    let appended = toolwire(&["call", "--yes", &server.url, "note_append", &arguments]);
    assert!(appended.status.success(), "{}", stderr(&appended));
    let read = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "note_read",
        &format!(r#"{{"note": "{note}"}}"#),
    ]);
    assert!(read.status.success(), "{}", stderr(&read));
    assert!(stdout(&read).contains("first\nsecond"), "{}", stdout(&read));
    assert!(data.join("handles.sqlite3").exists());

    std::thread::sleep(Duration::from_millis(4500));
    let expired = toolwire(&[
        "call",
        "--yes",
        &server.url,
        "note_read",
        &format!(r#"{{"note": "{note}"}}"#),
    ]);
    assert_eq!(expired.status.code(), Some(1), "{expired:?}");
    let said = format!("{}{}", stdout(&expired), stderr(&expired));
    assert!(said.contains("has expired"), "{said}");
    assert!(
        said.contains("Call note_create to start a new note."),
        "{said}"
    );
    drop(server);
}

/// `[tools.NAME] rate_limit` in `--config`: the third call within the minute from the same
/// address gets a result that says when to retry, and the call exits 1.
#[test]
fn serve_limits_calls_as_configured() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let config = dir.join("limits.toml");
    std::fs::write(
        &config,
        "[tools.add]\nrate_limit = { calls = 2, period_seconds = 60 }\n",
    )
    .unwrap();
    let server = HttpServer::start_with(&[
        "--http",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
    ]);
    for _ in 0..2 {
        let added = toolwire(&["call", "--yes", &server.url, "add", r#"{"a": 1, "b": 2}"#]);
        assert!(added.status.success(), "{}", stderr(&added));
    }
    let limited = toolwire(&["call", "--yes", &server.url, "add", r#"{"a": 1, "b": 2}"#]);
    assert_eq!(limited.status.code(), Some(1), "{limited:?}");
    let said = format!("{}{}", stdout(&limited), stderr(&limited));
    assert!(
        said.contains("The tool add was called too often") && said.contains("Try again in"),
        "{said}"
    );
    // Other tools keep their own quota.
    let echoed = toolwire(&["call", "--yes", &server.url, "echo", r#"{"message": "hi"}"#]);
    assert!(echoed.status.success(), "{}", stderr(&echoed));
}

/// Every directory and file `toolwire call` and the `toolwire serve` it starts create in
/// fresh state and data directories is readable by its owner only (0700, 0600), however
/// permissive the umask: the audit log holds call arguments, the handle database notes.
#[cfg(unix)]
#[test]
fn state_and_data_files_are_readable_by_their_owner_only() {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().to_owned();
    // The data beside, not inside, the directory that holds Toolwire's state: the sandboxed
    // server may make its data directory there, and never reaches the state.
    let beside = tempfile::tempdir().unwrap();
    let (state, data) = (root.join("state/nested"), beside.path().join("data/nested"));
    // (Its parent made, private, so that the directory it names is granted: a path not made
    // yet is granted through the directory it would be made in.)
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(beside.path().join("data"))
        .unwrap();
    let config = root.join("mcp.json");
    let server = serde_json::json!({"mcpServers": {"notes": {
        "command": BIN, "args": ["serve"], "env": {"TOOLWIRE_DATA_DIR": data}
    }}});
    std::fs::write(&config, server.to_string()).unwrap();
    // A umask of 0 leaves every mode as the program asks for it.
    let called = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
        .args([BIN, "call", "--yes", "--config"])
        .arg(&config)
        .args(["notes__note_create", "text=a private note"])
        .env("TOOLWIRE_STATE_DIR", &state)
        .env_remove("TOOLWIRE_DATA_DIR")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(called.status.success(), "{}", stderr(&called));
    let mut seen = Vec::new();
    let mut loose = Vec::new();
    let mut stack = vec![root.join("state"), beside.path().join("data")];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        let expected = if meta.is_dir() { 0o700 } else { 0o600 };
        if mode != expected {
            loose.push(format!("{} {mode:04o}", path.display()));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    for name in [
        "audit.jsonl",
        "audit.jsonl.head",
        "audit.jsonl.lock",
        "pins",
        "handles.sqlite3",
    ] {
        assert!(seen.iter().any(|s| s == name), "{name} in {seen:?}");
    }
    assert_eq!(loose, Vec::<String>::new());

    // The default state directory, Toolwire's own, is made private if an older version left
    // it open, and says so; a directory the person named keeps its mode.
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let (xdg, named) = (root.join("xdg"), root.join("named"));
    for dir in [xdg.join("toolwire"), named.clone()] {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let shown = Command::new(BIN)
        .args(["trust", "--list"])
        .env("XDG_STATE_HOME", &xdg)
        .env_remove("TOOLWIRE_STATE_DIR")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert_eq!(mode(&xdg.join("toolwire")), 0o700);
    // Said as this program's own line, not as a timestamped log line.
    let said = stderr(&shown);
    assert!(
        said.starts_with("toolwire: warning: ") && said.trim_end().ends_with("it is now private"),
        "{said}"
    );
    let shown = Command::new(BIN)
        .args(["trust", "--list"])
        .env("TOOLWIRE_STATE_DIR", &named)
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert_eq!(mode(&named), 0o755);
}

/// A TOML error spans lines (the line, a caret under the column): it was printed on one line
/// with `^J` for each newline.
#[test]
fn a_config_error_keeps_its_lines() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[auth\nissuer = 3\n").unwrap();
    let refused = toolwire(&["serve", "--config", bad.to_str().unwrap()]);
    let error = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{error}");
    assert!(!error.contains("^J"), "{error}");
    assert!(error.starts_with("toolwire: "), "{error}");
    assert!(error.contains("\n1 | [auth\n"), "{error}");
}

/// `a=two` for a number said `a: "two" is not a number: expected ident at line 1 column 2`.
#[test]
fn a_mistyped_argument_is_explained_without_parser_internals() {
    let server = stdio_server();
    for (word, said) in [
        (
            "a=two",
            r#"a: "two" is not a number (the tool's schema says a is a number)"#,
        ),
        (
            "a=",
            r#"a: "" is not a number (the tool's schema says a is a number)"#,
        ),
    ] {
        let refused = toolwire(&["call", "--yes", &server, "add", word, "b=1"]);
        let error = stderr(&refused);
        assert_eq!(refused.status.code(), Some(2), "{error}");
        assert!(error.contains(said), "{error}");
        assert!(!error.contains("line 1 column"), "{error}");
    }
}

/// `watch` said `watching {"toolsListChanged":true}`; and on Ctrl-C an HTTP target was said to
/// be stopped ("stopping the server"), where nothing is stopped.
#[test]
fn watch_says_what_it_watches_and_stops_nothing_over_http() {
    let server = HttpServer::start();
    let scratch = tempfile::tempdir().unwrap();
    let mut watch = Killed(
        toolwire_in(&scratch)
            .args(["watch", &server.url, "--resource", "file:///notes.txt"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let watched = stderr_lines(&mut watch.0);
    // The example server offers no resource subscriptions: the person is told.
    let dropped = line_with(&watched, "file:///notes.txt");
    assert_eq!(
        dropped,
        "toolwire: the server does not send updates of file:///notes.txt (it did not accept the subscription)"
    );
    let first = line_with(&watched, "toolwire: watching");
    assert_eq!(
        first,
        "toolwire: watching the server's tool list for changes (Ctrl-C to stop)"
    );
    let interrupted = Command::new("kill")
        .args(["-INT", &watch.0.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let said = line_with(&watched, "interrupted by SIGINT");
    assert_eq!(
        said,
        "toolwire: interrupted by SIGINT: closing the connection"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = watch.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "watch exits");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
}

/// `serve --http` on an address in use said `binding ADDR: Address already in use`, with no
/// word on what to do.
#[test]
fn serve_on_a_busy_address_says_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let refused = toolwire(&["serve", "--http", &addr]);
    let error = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{error}");
    assert!(
        error.starts_with(&format!("toolwire: --http {addr}: cannot listen there: ")),
        "{error}"
    );
    assert!(
        error.contains("stop it, or pass another --http ADDR"),
        "{error}"
    );
}

/// `serve --store` with a URL it cannot use stops at start as other usage errors do (exit 2),
/// naming the flag and never repeating the password; `serve --help` documents the flag.
#[test]
fn serve_refuses_a_bad_store_url_naming_the_flag_without_the_password() {
    for url in [
        "localhost:6379",
        "redis://:hunter2@localhost:port",
        "redis://:hunter2@:6379",
        "memcached://:hunter2@cache:11211",
    ] {
        let output = toolwire(&["serve", "--store", url]);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{url}: {said}");
        assert!(said.contains("--store"), "{url}: {said}");
        assert!(!said.contains("hunter2"), "{url}: {said}");
        assert!(!said.contains("panicked"), "{url}: {said}");
    }
    let help = stdout(&toolwire(&["serve", "--help"]));
    assert!(
        help.contains("--store <URL>") && help.contains("TOOLWIRE_STORE"),
        "{help}"
    );
}

/// `toolwire serve` on stdio says who its caller is in words, never as Rust's debug text.
#[test]
fn serve_on_stdio_names_its_caller_in_words() {
    let scratch = tempfile::tempdir().unwrap();
    for (principal, said) in [
        (None, "anyone (no principal, no scope checks)"),
        (Some("ada"), "principal ada, no scope checks"),
    ] {
        let mut command = toolwire_in(&scratch);
        command
            .arg("serve")
            .env_remove("RUST_LOG")
            .env_remove("TOOLWIRE_SCOPES")
            .stdin(std::process::Stdio::null());
        match principal {
            Some(principal) => command.env("TOOLWIRE_PRINCIPAL", principal),
            None => command.env_remove("TOOLWIRE_PRINCIPAL"),
        };
        let output = command.output().expect("toolwire runs");
        let err = stderr(&output);
        assert!(output.status.success(), "{err}");
        assert!(err.contains(said), "{err}");
        assert!(!err.contains("StdioConfig"), "{err}");
    }
}
