//! A client command interrupted by a signal stops the stdio server it started, even one that
//! ignores stdin closing (and SIGTERM), and exits with 128 + the signal's number. The server runs
//! in its own process group, out of the terminal's reach, so this is the only way it stops.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_toolwire");

/// A temporary directory for one test, removed at the end.
struct Scratch(tempfile::TempDir);

impl Scratch {
    /// The directory the server writes its pid in, made.
    fn run(&self) -> std::path::PathBuf {
        let run = self.0.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        run
    }

    fn new(name: &str) -> Scratch {
        Scratch(
            tempfile::Builder::new()
                .prefix(&format!("toolwire-signals-{name}-"))
                .tempdir()
                .unwrap(),
        )
    }
}

/// `toolwire call … hang` against the hanging server, with stderr read on a thread.
fn start_call(pid_file: &Path, ignore_term: bool) -> (Child, std::sync::mpsc::Receiver<String>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/hang_server.py");
    let server = format!(
        "python3 {script} {}{}",
        pid_file.display(),
        if ignore_term { " --ignore-term" } else { "" }
    );
    let mut child = Command::new(BIN)
        // State and notes go to the test's scratch directory, never the home directory.
        // (Beside the pid file's directory, not in it: the sandbox hides Toolwire's state from
        // the server, which writes its pid there.)
        .env(
            "TOOLWIRE_STATE_DIR",
            pid_file.parent().unwrap().with_file_name("state"),
        )
        .env(
            "TOOLWIRE_DATA_DIR",
            pid_file.parent().unwrap().with_file_name("data"),
        )
        .args(["call", "--yes", &server, "hang"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, lines)
}

/// The server's pid, once it has received the call (at most 20 s).
fn server_pid(pid_file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(pid_file) {
            return text.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the server never got the call");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

/// The command's exit code, within `limit`.
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("toolwire did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server, killed if a test fails before it is gone.
struct Reap(u32);

impl Drop for Reap {
    fn drop(&mut self) {
        if !gone(self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

fn assert_gone_soon(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(pid) {
        assert!(
            Instant::now() < deadline,
            "the server {pid} outlived the command"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn each_signal_stops_the_server_and_sets_the_exit_status() {
    for (name, status) in [("INT", 130), ("TERM", 143), ("HUP", 129)] {
        let scratch = Scratch::new(&format!("each-{name}"));
        let pid_file = scratch.run().join("pid");
        let (mut call, lines) = start_call(&pid_file, false);
        let server = Reap(server_pid(&pid_file));
        signal(call.id(), name);
        assert_eq!(
            exit_code(&mut call, Duration::from_secs(15)),
            Some(status),
            "SIG{name}"
        );
        assert_gone_soon(server.0);
        let said: Vec<String> = lines.try_iter().collect();
        assert!(
            said.iter()
                .any(|l| l.contains(&format!("interrupted by SIG{name}: stopping the server"))),
            "{said:?}"
        );
    }
}

/// A server that ignores stdin closing and SIGTERM is killed after the grace periods.
#[test]
fn a_server_ignoring_sigterm_is_killed() {
    let scratch = Scratch::new("stubborn");
    let pid_file = scratch.run().join("pid");
    let (mut call, _lines) = start_call(&pid_file, true);
    let server = Reap(server_pid(&pid_file));
    signal(call.id(), "INT");
    assert_eq!(exit_code(&mut call, Duration::from_secs(15)), Some(130));
    assert_gone_soon(server.0);
}

/// A second Ctrl-C while the server is being stopped kills it at once.
#[test]
fn a_second_signal_kills_the_server_at_once() {
    let scratch = Scratch::new("twice");
    let pid_file = scratch.run().join("pid");
    let (mut call, lines) = start_call(&pid_file, true);
    let server = Reap(server_pid(&pid_file));
    signal(call.id(), "INT");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("a message");
        if line.contains("stopping the server") {
            break;
        }
    }
    signal(call.id(), "INT");
    // Well within the 4 s the two grace periods would take.
    assert_eq!(exit_code(&mut call, Duration::from_secs(3)), Some(130));
    assert_gone_soon(server.0);
}
