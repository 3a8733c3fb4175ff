//! A real headless Chromium driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: commands on its fd 3, answers and events on its fd 4, each
//! message JSON ended by a NUL byte), with no crate beyond the tree's: open a page, read its
//! DOM, click an element with the mouse as a person would, take a screenshot.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// How long the browser may take over one step.
const STEP: Duration = Duration::from_secs(30);

/// A headless Chromium with one page, killed when dropped.
pub(crate) struct Browser {
    child: Child,
    commands: ChildStdin,
    messages: mpsc::Receiver<Value>,
    /// Events read while waiting for an answer.
    events: VecDeque<Value>,
    next_id: u64,
    session: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts `chromium` with its profile in `profile`, and opens a blank page.
    pub(crate) fn start(chromium: &Path, profile: &Path) -> Browser {
        // The shell gives Chromium our pipes as its fds 3 (commands) and 4 (messages).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                "--window-size=1100,800",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let commands = child.stdin.take().expect("piped");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while out.read_until(0, &mut message).unwrap_or(0) > 0 {
                if message.last() == Some(&0) {
                    message.pop();
                }
                if let Ok(value) = serde_json::from_slice(&message) {
                    if tx.send(value).is_err() {
                        return;
                    }
                }
                message.clear();
            }
        });
        let mut browser = Browser {
            child,
            commands,
            messages,
            events: VecDeque::new(),
            next_id: 0,
            session: String::new(),
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("a target").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("DOM.enable", json!({}));
        browser
    }

    /// Sends `method` (to the page, once attached) and waits for its result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("chromium reads");
        self.commands.flush().unwrap();
        let deadline = Instant::now() + STEP;
        loop {
            let message = self.next_message(deadline, method);
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    panic!("{method}: {error}");
                }
                return message["result"].clone();
            }
            self.events.push_back(message);
        }
    }

    fn next_message(&mut self, deadline: Instant, waiting_for: &str) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        self.messages
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("chromium said nothing of {waiting_for} within {STEP:?}"))
    }

    /// Waits for the event `name` of the page, dropping those before it.
    fn wait_event(&mut self, name: &str) -> Value {
        let deadline = Instant::now() + STEP;
        loop {
            let message = match self.events.pop_front() {
                Some(event) => event,
                None => self.next_message(deadline, name),
            };
            if message["method"] == name {
                return message;
            }
        }
    }

    /// Opens `url` and waits until it has loaded.
    pub(crate) fn open(&mut self, url: &str) {
        self.events.clear();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired");
    }

    /// The page's document as HTML (text nodes escaped as the browser serializes them).
    pub(crate) fn html(&mut self) -> String {
        let root = self.call("DOM.getDocument", json!({"depth": 0}));
        let node = root["root"]["nodeId"].clone();
        let html = self.call("DOM.getOuterHTML", json!({"nodeId": node}));
        html["outerHTML"].as_str().unwrap_or_default().to_owned()
    }

    /// How many elements match `selector`.
    pub(crate) fn count(&mut self, selector: &str) -> usize {
        let root = self.call("DOM.getDocument", json!({"depth": 0}));
        let node = root["root"]["nodeId"].clone();
        let found = self.call(
            "DOM.querySelectorAll",
            json!({"nodeId": node, "selector": selector}),
        );
        found["nodeIds"].as_array().map_or(0, Vec::len)
    }

    /// Clicks the middle of the first element matching `selector` with the left mouse button
    /// (a person's click: the browser submits the form itself), and waits for the page that
    /// follows to load.
    pub(crate) fn click_and_wait(&mut self, selector: &str) {
        self.click(selector);
        self.wait_event("Page.loadEventFired");
    }

    /// Types `text` where the focus is, as a keyboard would.
    pub(crate) fn type_text(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Clicks the middle of the first element matching `selector` with the left mouse button.
    pub(crate) fn click(&mut self, selector: &str) {
        let root = self.call("DOM.getDocument", json!({"depth": 0}));
        let node = root["root"]["nodeId"].clone();
        let found = self.call(
            "DOM.querySelector",
            json!({"nodeId": node, "selector": selector}),
        );
        let node = found["nodeId"].clone();
        assert_ne!(node, json!(0), "no {selector} on the page");
        self.call("DOM.scrollIntoViewIfNeeded", json!({"nodeId": node}));
        let model = self.call("DOM.getBoxModel", json!({"nodeId": node}));
        let quad: Vec<f64> = model["model"]["content"]
            .as_array()
            .expect("a box")
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        let x = (quad[0] + quad[2] + quad[4] + quad[6]) / 4.0;
        let y = (quad[1] + quad[3] + quad[5] + quad[7]) / 4.0;
        self.events.clear();
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            );
        }
    }

    /// The cookies the browser holds for `url`.
    pub(crate) fn cookies(&mut self, url: &str) -> Vec<Value> {
        let cookies = self.call("Network.getCookies", json!({"urls": [url]}));
        cookies["cookies"].as_array().cloned().unwrap_or_default()
    }

    /// A PNG of the page as shown, written to `path`.
    pub(crate) fn screenshot(&mut self, path: &Path) {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("PNG data"))
            .expect("base64");
        std::fs::write(path, png).expect("the screenshot is written");
    }
}
