//! A cluster of real parts for the end-to-end tests: redis-server, `toolwire serve` instances
//! sharing it, and (when the test asks for it) HAProxy in front (round-robin), started and
//! stopped by scripts/cluster; and the MCP calls the tests make to it, through the balancer or
//! spread over the instances by the test's own client.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_toolwire");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/cluster");

/// The instances' settings: HAProxy's X-Forwarded-For names the client, and no quota or flood
/// limit, since every test client is 127.0.0.1 and these tests count answers, not refusals.
const SERVE_TOML: &str = r#"
[limits]
forwarded_header = "x-forwarded-for"
trusted_proxies = 1
off = "the cluster tests count answers under load; quotas have their own tests"
http_off = "the cluster tests count answers under load; the flood limit has its own tests"
"#;

/// One `toolwire serve` of the cluster.
pub(crate) struct Instance {
    pub(crate) pid: u32,
    pub(crate) url: String,
}

/// A running cluster, stopped (everything it started) when dropped, also on a failed test.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    pub(crate) front: String,
    pub(crate) instances: Vec<Instance>,
    balanced: bool,
    pids: Vec<u32>,
}

impl Cluster {
    /// `scripts/cluster up n --no-balancer` (with Redis's append-only file when `aof`), within
    /// 90 seconds: the test's client spreads its calls itself ([`Route::Spread`]).
    pub(crate) fn direct(n: usize, aof: bool) -> Cluster {
        Cluster::up_with(n, aof, SERVE_TOML, false)
    }

    /// `scripts/cluster up n`: with HAProxy in front ([`Route::Front`]).
    pub(crate) fn balanced(n: usize, aof: bool) -> Cluster {
        Cluster::up_with(n, aof, SERVE_TOML, true)
    }

    /// A cluster whose instances read `serve_toml` (`serve --config`), HAProxy in front when
    /// `balanced`.
    pub(crate) fn up_with(n: usize, aof: bool, serve_toml: &str, balanced: bool) -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("toolwire-cluster-")
            .tempdir()
            .unwrap();
        let config = dir.path().join("test-serve.toml");
        std::fs::write(&config, serve_toml).unwrap();
        let state = dir.path().join("cluster");
        let mut args = vec![
            "up".to_owned(),
            n.to_string(),
            "--dir".to_owned(),
            state.display().to_string(),
            "--bin".to_owned(),
            BIN.to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
        ];
        if aof {
            args.push("--aof".to_owned());
        }
        if !balanced {
            args.push("--no-balancer".to_owned());
        }
        let mut cluster = Cluster {
            dir,
            front: String::new(),
            instances: Vec::new(),
            balanced,
            pids: Vec::new(),
        };
        let started = script(&args, Duration::from_secs(90));
        // Whatever was started is known (and stopped on drop) before a failure is reported.
        let env = read_env(&state.join("cluster.env"));
        cluster.pids = env
            .iter()
            .filter(|(k, _)| k.ends_with("_PID"))
            .filter_map(|(_, v)| v.parse().ok())
            .collect();
        if let Err(why) = started {
            panic!("scripts/cluster up {n} failed: {why}");
        }
        let get = |key: &str| {
            env.iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("cluster.env has no {key}"))
        };
        cluster.front = get("FRONT_URL");
        cluster.instances = (1..=n)
            .map(|i| Instance {
                pid: get(&format!("INSTANCE_{i}_PID")).parse().unwrap(),
                url: get(&format!("INSTANCE_{i}_URL")),
            })
            .collect();
        cluster
    }

    /// Where the test's calls go: through the balancer when there is one, else spread over
    /// the instances.
    pub(crate) fn route(&self) -> Route {
        match self.balanced {
            true => Route::Front(self.front.clone()),
            false => Route::Spread(self.instances.iter().map(|i| i.url.clone()).collect()),
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("cluster")
    }

    /// `scripts/cluster stop-redis` or `start-redis`.
    pub(crate) fn redis(&self, action: &str) {
        let state = self.state().display().to_string();
        if let Err(why) = script(&[action, "--dir", &state], Duration::from_secs(30)) {
            panic!("scripts/cluster {action} failed: {why}");
        }
    }

    /// Whether the process `pid` still runs (not a zombie).
    pub(crate) fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    /// The last lines of a part's log, for failure messages.
    pub(crate) fn log(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.state().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let state = self.state().display().to_string();
        let _ = script(&["down", "--dir", &state], Duration::from_secs(30));
        // Should `down` itself have failed: what the script recorded starting, and only that.
        for pid in &self.pids {
            if Cluster::alive(*pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
    }
}

/// Runs scripts/cluster with `args`, killed after `limit`; its stderr on failure.
fn script<S: AsRef<std::ffi::OsStr>>(args: &[S], limit: Duration) -> Result<(), String> {
    let log = tempfile::NamedTempFile::new().unwrap();
    // The test's Redis: found or installed here, where the install says so on stderr (the
    // script's own stderr is kept for failures only).
    let redis = toolwire_testkit::RegistryPart::RedisServer.path();
    let mut child = Command::new(SCRIPT)
        .args(args)
        .env("TOOLWIRE_REDIS_SERVER", redis)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .map_err(|e| format!("cannot run {SCRIPT}: {e}"))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("not done within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(log.path()).unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        Err(format!("{status}: {said}"))
    }
}

/// cluster.env's `NAME=value` lines (values as bash's %q wrote them: no quoting needed for
/// URLs and numbers).
fn read_env(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// An answer to one request: the HTTP status, the instance HAProxy says served it, the
/// JSON-RPC message.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) served_by: Option<String>,
    pub(crate) json: Value,
}

impl Reply {
    /// The text of a complete tool result, or why there is none.
    pub(crate) fn text(&self) -> Result<String, String> {
        let result = &self.json["result"];
        if self.status != 200 || result["resultType"] != "complete" || result["isError"] == true {
            return Err(format!("HTTP {}: {}", self.status, self.json));
        }
        Ok(result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }
}

/// `tools/call NAME` with `arguments`, and `extra` params (inputResponses, requestState).
pub(crate) fn call_body(id: u64, name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({
        "name": name,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
        }
    });
    if let Some(extra) = extra.as_object() {
        params.as_object_mut().unwrap().extend(extra.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// POSTs a `tools/call` to `url` (an instance directly, with the X-Forwarded-For its config
/// requires, or the front); an Err is a connection error.
pub(crate) async fn call(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> Result<Reply, String> {
    let name = body["params"]["name"].as_str().unwrap_or_default();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .header("x-forwarded-for", "127.0.0.1")
        .json(body)
        .send()
        .await
        .map_err(|e| format!("connection: {e}"))?;
    let status = response.status().as_u16();
    let served_by = response
        .headers()
        .get("x-served-by")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response
        .text()
        .await
        .map_err(|e| format!("connection (body): {e}"))?;
    // A JSON body, or an event stream whose last data line is the answer.
    let payload = match text.trim_start().starts_with('{') {
        true => text.clone(),
        false => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .next_back()
            .unwrap_or("null")
            .trim()
            .to_owned(),
    };
    let json = serde_json::from_str(&payload).unwrap_or(Value::String(text));
    Ok(Reply {
        status,
        served_by,
        json,
    })
}

/// An HTTP client of its own (its own connections), bounded per request.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// Where a test client sends its calls: to the balancer, or to the instances in turn, as the
/// client of a cluster without a balancer would.
#[derive(Clone, Debug)]
pub(crate) enum Route {
    /// Every call to HAProxy's front URL.
    Front(String),
    /// Each call to the next instance, round-robin ([`Rotation`]).
    Spread(Vec<String>),
}

/// One client's way through a [`Route`]: round-robin over the instances, leaving out for good
/// an instance it could not connect to (as a balancer's health check would take it out).
pub(crate) struct Rotation {
    route: Route,
    next: AtomicUsize,
    down: std::sync::Mutex<Vec<String>>,
}

impl Rotation {
    /// A rotation starting at instance `start` (so that clients do not move in step).
    pub(crate) fn new(route: &Route, start: usize) -> Rotation {
        Rotation {
            route: route.clone(),
            next: AtomicUsize::new(start),
            down: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The URL of the next call.
    pub(crate) fn url(&self) -> String {
        match &self.route {
            Route::Front(front) => front.clone(),
            Route::Spread(urls) => {
                let down = self.down.lock().unwrap();
                let up: Vec<&String> = urls.iter().filter(|u| !down.contains(u)).collect();
                assert!(!up.is_empty(), "every instance is down");
                up[self.next.fetch_add(1, Ordering::Relaxed) % up.len()].clone()
            }
        }
    }

    /// `url` refused a connection: no more calls go there.
    pub(crate) fn failed(&self, url: &str) {
        if matches!(self.route, Route::Spread(_)) {
            self.down.lock().unwrap().push(url.to_owned());
        }
    }

    /// A `tools/call` to the next instance; a connection error takes that instance out.
    pub(crate) async fn call(&self, http: &reqwest::Client, body: &Value) -> Result<Reply, String> {
        let url = self.url();
        let reply = call(http, &url, body).await;
        if reply.is_err() {
            self.failed(&url);
        }
        reply
    }
}
