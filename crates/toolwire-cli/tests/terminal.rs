//! The `toolwire` binary against a hostile stdio server that puts terminal escape sequences in
//! every piece of text it sends: nothing of them may reach the terminal raw. Also: a closed
//! stdout or stderr ends a command quietly, never with a panic (status 101), and `--answer`
//! never accepts a URL-mode elicitation. At a terminal (a pseudo-terminal): forms built from
//! hostile schemas show every keyword safely, and a URL that is not a web page is shown and
//! refused, never opened.
//!
//! The server is the client crate's scripted stdio server (`scripted_stdio.py`).

use std::io::Read as _;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use expectrl::Session;
use serde_json::{Value, json};

#[path = "support/pty.rs"]
mod pty;
use pty::{finish, see};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// Clears the screen, writes the clipboard (OSC 52), rings, starts a C1 CSI, reverses the text
/// that follows, returns the carriage and deletes.
const HOSTILE: &str = "\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{9b}31m\u{202e}evil\rDEL\u{7f}";

fn meta(id: &str) -> Value {
    json!({"io.modelcontextprotocol/subscriptionId": id})
}

/// The hostile server's script: every name, description, message and URL is `HOSTILE`.
fn script() -> Value {
    let h = HOSTILE;
    let tool = |name: &str| {
        json!({"name": name, "description": format!("{h}\nsecond line"), "inputSchema": {
            "type": "object", "properties": {h: {"type": h}}, "required": [h]
        }})
    };
    let text = |text: &str| json!({"type": "text", "text": text});
    let asks = |request: Value| {
        json!([{"result": {
            "resultType": "input_required", "requestState": "s",
            "inputRequests": {"ask": request}
        }}])
    };
    let open = |url: &str| {
        asks(json!({"method": "elicitation/create", "params": {
            "mode": "url", "message": h, "url": url
        }}))
    };
    let answered = json!([{"result": {
        "resultType": "complete", "content": [text("{INPUT_RESPONSES}")]
    }}]);
    let mut script = json!({
        "server/discover": [{"result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28", h],
            "capabilities": {"tools": {"listChanged": true}, "experimental": {h: {}}},
            "instructions": format!("{h}\ninstructions"), "ttlMs": 0, "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": h, "version": h}}
        }}],
        "tools/list": [{"result": {
            "resultType": "complete", "ttlMs": 60000, "cacheScope": "private",
            "tools": [tool(&format!("named{h}")), tool("text"), tool("structured"),
                      tool("fail"), tool("url")]
        }}],
        "tools/call:text": [
            {"method": "notifications/progress", "params": {
                "progressToken": "{ID}", "progress": 1, "total": 2, "message": h}},
            {"method": "notifications/message", "params": {"level": "error", "logger": h, "data": h}},
            {"stderr": h},
            {"raw": h},
            {"result": {"resultType": "complete", "content": [
                text(&format!("{h}\nline two\r\n")),
                {"type": "image", "data": "aGk=", "mimeType": h}
            ]}}
        ],
        "tools/call:structured": [{"result": {
            "resultType": "complete", "content": [text(h)], "structuredContent": {h: h}
        }}],
        "tools/call:fail": [{"error": {"code": -32602, "message": h, "data": h}}],
        "tools/call:url": [{"result": {
            "resultType": "input_required", "requestState": "s",
            "inputRequests": {"open": {"method": "elicitation/create", "params": {
                "mode": "url", "message": h, "url": format!("https://auth.example/{h}")
            }}}
        }}],
        "tools/call:url#retry": [{"result": {
            "resultType": "complete", "content": [text("{INPUT_RESPONSES}")]
        }}],
        "subscriptions/listen": [
            {"method": "notifications/subscriptions/acknowledged", "params": {
                "_meta": meta("{ID}"), "notifications": {"toolsListChanged": true}}},
            {"method": format!("notifications/{h}"), "params": {"_meta": meta("{ID}")}},
            {"method": "notifications/tools/list_changed", "params": {"_meta": meta("{ID}")}},
            {"result": {"resultType": "complete", "_meta": meta("{ID}")}}
        ],
        "tools/call:form": asks(json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": h, "requestedSchema": hostile_form()
        }})),
        "tools/call:form#retry": answered,
    });
    let mut tools = vec![
        json!({"name": "bounds", "inputSchema": hostile_bounds()}),
        json!({"name": "form", "inputSchema": {"type": "object"}}),
    ];
    for (tool, url) in URLS {
        tools.push(json!({"name": tool, "inputSchema": {"type": "object"}}));
        script[format!("tools/call:{tool}")] = open(url);
        script[format!("tools/call:{tool}#retry")] = answered.clone();
    }
    if let Some(listed) = script["tools/list"][0]["result"]["tools"].as_array_mut() {
        listed.extend(tools);
    }
    script
}

/// A tool's input schema whose every keyword carries `HOSTILE`, also where a number belongs:
/// the missing arguments are asked for at the terminal from it, as is.
fn hostile_bounds() -> Value {
    let h = HOSTILE;
    json!({"type": "object", "properties": {
        "n": {"type": "integer", "title": h, "description": h, "minimum": h, "maximum": h,
              "exclusiveMinimum": h, "multipleOf": h, "default": h, "const": h},
        "s": {"type": "string", "minLength": h, "maxLength": h, "pattern": h, "format": h,
              "default": {h: [h]}, "enum": [h, 7], "examples": [h]},
        "k": {"type": "array", "minItems": h, "items": {"enum": [h]}, "default": [h]},
    }, "required": ["n", "s", "k"]})
}

/// An elicitation form with `HOSTILE` in every string it may carry: the message, titles,
/// descriptions, formats, defaults, options and their titles.
fn hostile_form() -> Value {
    let h = HOSTILE;
    json!({"type": "object", "properties": {
        "a": {"type": "string", "title": h, "description": h, "format": h, "default": h,
              "minLength": 0, "maxLength": 100},
        "b": {"type": "string", "enum": [h, "x"], "enumNames": [h, h], "default": h},
        "c": {"type": "string", "oneOf": [{"const": h, "title": h}], "default": h},
        "d": {"type": "array", "items": {"anyOf": [{"const": h, "title": h}]}, "default": [h]},
        "e": {"type": "number", "title": h, "minimum": -1.5, "maximum": 1e300, "default": 0.5},
    }})
}

/// Tools that ask the person to open a URL: only the last may be opened.
const URLS: [(&str, &str); 4] = [
    ("shadow", "file:///etc/shadow"),
    ("plain", "http://intranet.example/reset"),
    ("script", "javascript:alert(document.cookie)"),
    ("page", "https://auth.example/start"),
];

/// The command line that starts the hostile server.
fn server() -> String {
    let script_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../toolwire-client/tests/support/scripted_stdio.py"
    );
    shlex::try_join(["python3", script_path, &script().to_string()]).unwrap()
}

/// `toolwire` with its state, notes and saved media in the scratch directory `dir`: the `text`
/// tool returns an image, which `call` saves in the current directory.
fn command_in(dir: &std::path::Path) -> Command {
    let media = dir.join("media");
    std::fs::create_dir_all(&media).unwrap();
    let mut command = Command::new(BIN);
    command
        .env("TOOLWIRE_STATE_DIR", dir.join("state"))
        // Notes go to a scratch directory, never the home directory.
        .env("TOOLWIRE_DATA_DIR", dir.join("data"))
        .current_dir(media)
        .env_remove("RUST_BACKTRACE");
    command
}

fn toolwire(args: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    command_in(scratch.path())
        .args(args)
        // Info-level logs include the server's stderr lines.
        .env("RUST_LOG", "info")
        .output()
        .expect("toolwire runs")
}

/// The characters a terminal obeys that must never arrive raw (a CR is fine before a LF).
fn raw_controls(bytes: &[u8]) -> Vec<char> {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

fn assert_safe(what: &str, output: &Output) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(
        raw_controls(&output.stdout),
        [],
        "{what}: stdout {stdout:?}"
    );
    assert_eq!(
        raw_controls(&output.stderr),
        [],
        "{what}: stderr {stderr:?}"
    );
}

/// Everything the command wrote, stdout then stderr.
fn shown(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_servers_text_never_reaches_the_terminal_raw() {
    let server = server();
    let run = |args: &[&str]| {
        let mut full = vec![args[0], server.as_str()];
        full.extend_from_slice(&args[1..]);
        let output = toolwire(&full);
        assert_safe(&args.join(" "), &output);
        output
    };
    // The sequences are shown, not dropped: a user sees what the server sent.
    let rendered = "^[]52;c;ZXZpbA==^G^[[2J<U+009B>31m<U+202E>evil^MDEL^?";
    for args in [
        &["discover"][..],
        &["tools"],
        &["call", "--yes", "text"],
        &["call", "--yes", "fail"],
        &["watch"],
    ] {
        let output = run(args);
        assert!(
            shown(&output).contains(rendered),
            "{args:?}: {}",
            shown(&output)
        );
    }
    let text = run(&["call", "--yes", "text"]);
    assert_eq!(text.status.code(), Some(0));
    let text = shown(&text);
    assert!(
        text.contains("line two\r\n"),
        "the tool's own CRLF is kept: {text:?}"
    );
    assert!(text.contains(&format!("progress 1/2 {rendered}")), "{text}");
    let fail = run(&["call", "--yes", "fail"]);
    assert_eq!(fail.status.code(), Some(2), "a server error");
    // Text written for people is shown rather than the structured content beside it; as
    // JSON, the structured content's strings are escaped.
    let structured = run(&["call", "--yes", "structured"]);
    assert!(
        shown(&structured).contains(rendered),
        "{}",
        shown(&structured)
    );
    let structured = run(&["call", "--yes", "structured", "--json"]);
    assert!(
        shown(&structured).contains("\\u001b]52"),
        "{}",
        shown(&structured)
    );
    // JSON output stays JSON, with the same content.
    let discovered = run(&["discover", "--json"]);
    let discovered: Value = serde_json::from_slice(&discovered.stdout).unwrap();
    assert_eq!(
        discovered["instructions"],
        format!("{HOSTILE}\ninstructions")
    );
    let called = run(&["call", "--yes", "text", "--json"]);
    let called: Value = serde_json::from_slice(&called.stdout).unwrap();
    assert_eq!(called["content"][1]["mimeType"], HOSTILE);
    let listed = run(&["tools", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    // The host lists tools by qualified name; each keeps the server's own name.
    let named = format!("named{HOSTILE}");
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == named),
        "{listed}"
    );
}

#[test]
fn answer_never_accepts_a_url_elicitation() {
    let output = toolwire(&["call", "--yes", &server(), "url", "--answer", "{}"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Declined (no terminal to ask for consent on), and the server told so.
    assert!(!stdout.contains("accept"), "{stdout}");
    assert!(stdout.contains("decline"), "{stdout}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("URL") && stderr.contains("declined"),
        "{stderr}"
    );
    assert_safe("call url", &output);
}

/// Runs `toolwire` with stdout (or stderr) a pipe whose reading end is already closed.
fn with_closed(args: &[&str], close_stdout: bool) -> std::process::ExitStatus {
    let scratch = tempfile::tempdir().unwrap();
    let mut child = command_in(scratch.path())
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (closed, mut kept): (Box<dyn std::any::Any>, Box<dyn std::io::Read>) = if close_stdout {
        (
            Box::new(child.stdout.take()),
            Box::new(child.stderr.take().unwrap()),
        )
    } else {
        (
            Box::new(child.stderr.take()),
            Box::new(child.stdout.take().unwrap()),
        )
    };
    drop(closed);
    let mut rest = Vec::new();
    kept.read_to_end(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(
        !String::from_utf8_lossy(&rest).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    status
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let server = server();
    for args in [
        vec!["tools", server.as_str()],
        vec!["discover", server.as_str()],
        vec!["call", "--yes", server.as_str(), "text"],
        vec!["watch", server.as_str()],
    ] {
        let status = with_closed(&args, true);
        assert_eq!(status.code(), Some(0), "{:?}", &args[..1]);
    }
}

#[test]
fn a_closed_stderr_is_no_panic() {
    // Progress, log lines and the error message all go to stderr.
    let server = server();
    let status = with_closed(&["call", "--yes", &server, "text"], false);
    assert_eq!(status.code(), Some(0));
    let status = with_closed(&["call", "--yes", &server, "fail"], false);
    assert_eq!(status.code(), Some(2));
}

/// `toolwire ARGS` in a pseudo-terminal, without colours; `BROWSER` appends each URL it is
/// asked to open to the file `opened`, whose directory also holds the command's state.
fn at_terminal(args: &[&str], opened: &std::path::Path) -> Session {
    let mut command = command_in(opened.parent().expect("a file in a scratch directory"));
    let record = shlex::try_quote(opened.to_str().unwrap())
        .unwrap()
        .into_owned();
    command
        .args(args)
        .env("NO_COLOR", "1")
        .env("BROWSER", format!("printf '%s\\n' >> {record}"));
    let mut session = Session::spawn(command).expect("toolwire starts in a pty");
    session.set_expect_timeout(Some(Duration::from_secs(20)));
    session
}

/// Everything the command still writes, and its exit status.
fn rest(mut session: Session) -> (String, i32) {
    let mut text = match session.expect(expectrl::Eof) {
        Ok(found) => found.as_bytes().to_vec(),
        Err(expectrl::Error::Eof) => Vec::new(),
        Err(error) => panic!("the command does not end: {error}"),
    };
    let _ = session.read_to_end(&mut text);
    let status = match session.get_process().wait().expect("its status") {
        expectrl::WaitStatus::Exited(_, code) => code,
        other => panic!("ended by {other:?}"),
    };
    (String::from_utf8_lossy(&text).into_owned(), status)
}

/// Answers each of a form's questions (each ends with `): `) with the next of `answers`;
/// returns everything shown up to the last question.
fn answer(session: &mut Session, answers: &[&str]) -> String {
    let mut shown = String::new();
    for answer in answers {
        shown += &see(session, "): ");
        shown += "): ";
        session.send_line(answer).unwrap();
    }
    shown
}

/// The end of a long output, for a failure's message: the server's name, which these
/// commands show, is its whole command line with its script.
fn last(text: &str) -> &str {
    let mut at = text.len().saturating_sub(1500);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// A file not made yet, `what`, in a scratch directory removed on drop.
fn scratch(what: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(what);
    (dir, file)
}

#[test]
fn a_form_from_a_hostile_schema_shows_every_keyword_safely() {
    let server = server();
    let (_scratch, opened) = scratch("form-opened");
    // Missing arguments are asked for from the tool's input schema, whatever it holds: a
    // string where a number belongs too. Enter takes the defaults; the last question stops.
    let mut bounds = at_terminal(&["call", "--yes", &server, "bounds"], &opened);
    let mut shown = see(&mut bounds, "needs n, s, k");
    shown += &answer(&mut bounds, &["", "", ":cancel"]);
    let (end, status) = rest(bounds);
    shown += &end;
    assert_eq!(status, 3, "the call was not made: {}", last(&shown));
    assert_eq!(raw_controls(shown.as_bytes()), [], "{:?}", last(&shown));
    assert!(
        shown.contains("<U+009B>31m<U+202E>evil"),
        "{:?}",
        last(&shown)
    );
    assert!(
        shown.contains("the call was not made"),
        "{:?}",
        last(&shown)
    );

    // An elicitation form: every string of it shown safely, the defaults taken, then declined.
    let mut form = at_terminal(&["call", "--yes", &server, "form"], &opened);
    let mut shown = see(&mut form, "asks: ");
    shown += &answer(&mut form, &["", "", "", "", ""]);
    shown += &see(&mut form, "Send these answers?");
    form.send_line("n").unwrap();
    let (end, status) = rest(form);
    shown += &end;
    assert_eq!(status, 0, "{}", last(&shown));
    assert_eq!(raw_controls(shown.as_bytes()), [], "{:?}", last(&shown));
    assert!(
        shown.contains("<U+009B>31m<U+202E>evil"),
        "{:?}",
        last(&shown)
    );
    assert!(
        shown.contains(r#"{"ask": {"action": "decline"}}"#),
        "{:?}",
        last(&shown)
    );
}

#[test]
fn only_a_web_page_is_opened_and_only_after_a_yes() {
    let server = server();
    let (_scratch, opened) = scratch("url-opened");
    for (tool, url) in &URLS[..3] {
        let mut session = at_terminal(&["call", "--yes", &server, tool], &opened);
        let mut shown = see(&mut session, "asks you to open a web page");
        // Shown, then refused before any question.
        let next = session
            .expect(expectrl::Regex("Open it\\?|will not be opened[^\r\n]*"))
            .unwrap_or_else(|e| panic!("{tool}: neither asked nor refused: {e}"));
        shown += &String::from_utf8_lossy(next.as_bytes());
        let said = String::from_utf8_lossy(next.get(0).unwrap()).into_owned();
        assert!(
            said.starts_with("will not be opened"),
            "{url} was offered to be opened: {:?}",
            last(&shown)
        );
        let (end, status) = rest(session);
        shown += &end;
        assert_eq!(status, 0, "{}", last(&shown));
        assert!(shown.contains(url), "the URL is shown: {:?}", last(&shown));
        assert!(!shown.contains("Open it?"), "{:?}", last(&shown));
        assert!(
            shown.contains(r#"{"ask": {"action": "decline"}}"#),
            "declined: {:?}",
            last(&shown)
        );
        assert_eq!(raw_controls(shown.as_bytes()), [], "{:?}", last(&shown));
    }
    // A web page is asked about, and opened after a yes.
    let (tool, url) = URLS[3];
    let mut page = at_terminal(&["call", "--yes", &server, tool], &opened);
    see(&mut page, &format!("URL     {url}"));
    see(&mut page, "domain  auth.example");
    see(&mut page, "Open it? [y]es / [n]o (decline) / [c]ancel: ");
    page.send_line("y").unwrap();
    see(&mut page, r#"{"ask": {"action": "accept"}}"#);
    assert_eq!(finish(page), 0);
    // Only the web page ever reached the opener.
    let reached = std::fs::read_to_string(&opened).unwrap_or_default();
    assert!(
        reached.lines().all(|line| line == url),
        "the opener was given {reached:?}"
    );
}
