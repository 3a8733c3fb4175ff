//! Test support: a `redis-server` of the test's own on a free loopback port, with no
//! persistence, stopped when dropped, and restartable on the same port.
//!
//! A missing `redis-server` fails the test with what to install, unless
//! `TOOLWIRE_SKIP_REDIS_TESTS=1` says to skip the Redis tests.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long a `redis-server` may take to say it accepts connections.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// A running `redis-server`.
pub(crate) struct RedisServer {
    pub(crate) port: u16,
    pub(crate) url: String,
    child: Option<Child>,
}

/// Whether the Redis tests are to be skipped (`TOOLWIRE_SKIP_REDIS_TESTS=1`); said once per
/// test on stderr.
pub(crate) fn skipped() -> bool {
    let skip = std::env::var("TOOLWIRE_SKIP_REDIS_TESTS").is_ok_and(|v| v == "1");
    if skip {
        eprintln!("TOOLWIRE_SKIP_REDIS_TESTS=1: this Redis test is skipped");
    }
    skip
}

impl RedisServer {
    /// A new server on a free port; `None` if the Redis tests are skipped.
    pub(crate) fn start() -> Option<RedisServer> {
        if skipped() {
            return None;
        }
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().expect("its address").port()
        };
        let mut server = RedisServer {
            port,
            url: format!("redis://127.0.0.1:{port}"),
            child: None,
        };
        server.restart();
        Some(server)
    }

    /// Starts it (again) on its port and waits until it accepts connections.
    pub(crate) fn restart(&mut self) {
        self.stop();
        let spawned = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "the Redis store tests need redis-server on the PATH: install it \
                 (Debian/Ubuntu: apt-get install redis-server), or set \
                 TOOLWIRE_SKIP_REDIS_TESTS=1 to skip them"
            ),
            Err(e) => panic!("redis-server could not be started: {e}"),
        };
        let stdout = child.stdout.take().expect("piped");
        self.child = Some(child);
        let (ready, is_ready) = mpsc::channel();
        // Reads its log until it is ready, then keeps draining it so that it never blocks.
        std::thread::spawn(move || {
            let mut ready = Some(ready);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("Ready to accept connections") {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                }
            }
        });
        is_ready
            .recv_timeout(READY_WITHIN)
            .unwrap_or_else(|_| panic!("redis-server on port {} did not become ready", self.port));
    }

    /// Stops it answering without closing its connections (`SIGSTOP`), as a hung Redis
    /// would; [`RedisServer::resume`] lets it go on.
    pub(crate) fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (`SIGCONT`).
    pub(crate) fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal} {pid}");
    }

    /// How many scripts it has run (`EVAL` and `EVALSHA`, from `INFO commandstats`).
    pub(crate) fn scripts_run(&self) -> u64 {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "INFO", "commandstats"])
            .output()
            .expect("redis-cli (Debian: redis-tools, which redis-server depends on)");
        assert!(output.status.success(), "redis-cli INFO commandstats");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| {
                line.starts_with("cmdstat_eval:") || line.starts_with("cmdstat_evalsha:")
            })
            .map(|line| {
                let calls = line.split(['=', ',']).nth(1).expect("calls=N");
                calls.parse::<u64>().expect("a count")
            })
            .sum()
    }

    /// Kills it (as a crash would) and waits until it is gone.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A paused server is killed all the same (SIGKILL needs no CONT).
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A key prefix no other test in this process uses, so that tests can share a server.
pub(crate) fn fresh_prefix(test: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("test:{test}:{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}
