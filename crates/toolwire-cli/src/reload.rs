//! Live reload of `toolwire serve --config` and `toolwire gateway --config`: SIGHUP (Unix)
//! reads the file again, and `--watch-config` does when its content changes. A reload is
//! applied whole or refused whole (the configuration before it keeps running), said on stderr
//! and recorded in the audit log with the file's SHA-256.
//!
//! The watch reads the file every [`WATCH_EVERY`] and acts on content that differs from the
//! last content tried and that stayed the same over two reads in a row: a file still being
//! written is not refused half-written, and a change seen twice (an editor that writes twice,
//! a rename then a write) is tried once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sha2::Digest as _;

use crate::terminal;

/// How often `--watch-config` reads the file.
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(250);

/// What a reload did: the settings changed, in short (`upstreams added: two`,
/// `tools changed: add`, `gateway.policy`), for the log line and the audit record.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Each change in words, for the log line.
    pub(crate) said: Vec<String>,
    /// The keys of the settings that changed, for the audit record.
    pub(crate) keys: Vec<String>,
    /// Upstreams added, removed and changed (a gateway).
    pub(crate) upstreams: toolwire_host::ServerChanges,
}

/// Reads the file again and applies it, or says why not.
pub(crate) trait Reload: Send + 'static {
    /// Applies `text`, the file's content; the error is the reason it was refused.
    fn reload(&mut self, text: &[u8]) -> anyhow::Result<Applied>;

    /// Records the attempt in the audit log(s).
    fn audit(&self, event: &toolwire_server::ReloadEvent);
}

/// The flood limit of `settings`: the default without `[limits]`.
fn flood_limit(settings: &crate::config::ServeConfig) -> Option<toolwire_server::RateLimit> {
    match &settings.limits {
        Some(limits) => limits.flood_limit(),
        None => Some(toolwire_server::http::DEFAULT_FLOOD_LIMIT),
    }
}

/// Whether [`set_flood_limit`] would take `settings`' flood limit (checked with the rest of a
/// reload, before anything changes).
pub(crate) fn check_flood_limit(settings: &crate::config::ServeConfig) -> anyhow::Result<()> {
    toolwire_server::http::FloodControl::check(flood_limit(settings))
        .map_err(|e| anyhow::anyhow!("limits.http_requests_per_second: {e}"))
}

/// Puts the flood limit of `settings` (the default without `[limits]`) in place, when the
/// server serves HTTP (`flood`).
pub(crate) fn set_flood_limit(
    flood: Option<&toolwire_server::http::FloodControl>,
    settings: &crate::config::ServeConfig,
) -> anyhow::Result<()> {
    let Some(flood) = flood else {
        return Ok(());
    };
    let limit = flood_limit(settings);
    flood
        .set(limit)
        .map_err(|e| anyhow::anyhow!("limits.http_requests_per_second: {e}"))
}

/// The SHA-256 of `bytes`, in hex.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    toolwire_protocol::hex::encode(&sha2::Sha256::digest(bytes))
}

/// Follows SIGHUP (on Unix) and, with `watch`, the file's content, reloading `file` with
/// `reload` for each, until the runtime ends. `started` is the content the process started
/// with: the watch acts only on a change from it.
pub(crate) fn follow(file: PathBuf, watch: bool, started: Vec<u8>, reload: impl Reload) {
    tokio::spawn(run(file, watch, sha256(&started), reload));
}

/// The loop of [`follow`].
async fn run(file: PathBuf, watch: bool, started: String, mut reload: impl Reload) {
    let mut hangups = hangups();
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watched = Watched::new(started);
    loop {
        tokio::select! {
            hangup = next_hangup(&mut hangups) => {
                if !hangup {
                    return;
                }
                if let Some(hash) = attempt(&file, &mut reload) {
                    watched.tried(hash);
                }
            }
            _ = tick.tick(), if watch => {
                // Gone for a moment (an editor replacing it): read again next time.
                let read = std::fs::read(&file).ok().map(|text| sha256(&text));
                if watched.read(read) {
                    if let Some(hash) = attempt(&file, &mut reload) {
                        watched.tried(hash);
                    }
                }
            }
        }
    }
}

/// What the watch has seen of the file: the content last tried (applied or refused) and the
/// content read last, by hash.
#[derive(Debug)]
struct Watched {
    tried: String,
    last_read: Option<String>,
}

impl Watched {
    /// The watch of a file started with the content whose hash is `started`.
    fn new(started: String) -> Watched {
        Watched {
            tried: started,
            last_read: None,
        }
    }

    /// Notes a read of the file (`None`: it could not be read); whether to reload now: the
    /// content is the same as at the read before (settled) and not the one last tried.
    fn read(&mut self, hash: Option<String>) -> bool {
        let settled = hash.is_some() && hash == self.last_read;
        self.last_read = hash;
        settled && self.last_read.as_deref() != Some(self.tried.as_str())
    }

    /// Notes that the content whose hash is `hash` was tried.
    fn tried(&mut self, hash: String) {
        self.tried = hash;
    }
}

/// One reload of `file`: applied or refused, said and audited. The hash of the content tried,
/// `None` when the file could not be read.
fn attempt(file: &Path, reload: &mut impl Reload) -> Option<String> {
    let shown = file.display();
    let text = match std::fs::read(file) {
        Ok(text) => text,
        Err(e) => {
            let reason = format!("{shown}: cannot read: {e}");
            refused(reload, "", &reason, false);
            return None;
        }
    };
    let hash = sha256(&text);
    match reload.reload(&text) {
        Ok(applied) => {
            let said = if applied.said.is_empty() {
                "nothing changed".to_owned()
            } else {
                applied.said.join("; ")
            };
            terminal::note(&terminal::visible(
                &format!("toolwire: reloaded {shown}: {said}"),
                terminal::Layout::Line,
            ));
            let upstreams = applied.upstreams;
            let event = toolwire_server::ReloadEvent::applied(hash.clone(), applied.keys)
                .upstreams(upstreams.added, upstreams.removed, upstreams.changed);
            reload.audit(&event);
        }
        Err(error) => {
            // The line breaks of text Toolwire wrote or the operator's own file quoted by a
            // parser (a rule with a caret under the place) are kept, as at start.
            let lines = error.chain().any(|cause| cause.is::<terminal::Lines>());
            refused(reload, &hash, &format!("{error:#}"), lines)
        }
    }
    Some(hash)
}

/// Says and audits a refusal; on several lines when `lines` (see [`terminal::Lines`]).
fn refused(reload: &impl Reload, hash: &str, reason: &str, lines: bool) {
    let layout = match lines {
        true => terminal::Layout::Text,
        false => terminal::Layout::Line,
    };
    terminal::note(&terminal::visible(
        &format!("toolwire: reload refused: {reason}; the configuration before it keeps running"),
        layout,
    ));
    reload.audit(&toolwire_server::ReloadEvent::refused(hash, reason));
}

/// The SIGHUP stream, where there is one.
#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = ();

#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::hangup()) {
        Ok(stream) => Some(stream),
        Err(error) => {
            tracing::warn!(%error, "SIGHUP cannot be followed: no reload on it");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangups() -> Hangups {}

/// The next SIGHUP; `false` when none can come any more. Never ready without one.
#[cfg(unix)]
async fn next_hangup(hangups: &mut Hangups) -> bool {
    match hangups {
        Some(stream) => stream.recv().await.is_some(),
        None => std::future::pending().await,
    }
}

/// Windows has no SIGHUP: only the watch reloads.
#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangups) -> bool {
    std::future::pending().await
}

/// The first key under `key` whose value differs between `old` and `new`, as a dotted path
/// (`store.url`); `None` when they are equal.
pub(crate) fn first_difference(
    key: &str,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Option<String> {
    if old == new {
        return None;
    }
    // A section added or removed is named by its first key, as a change of that key.
    let empty = serde_json::Map::new();
    let (old, new) = match (old, new) {
        (Some(Value::Object(old)), Some(Value::Object(new))) => (old, new),
        (None, Some(Value::Object(new))) if !new.is_empty() => (&empty, new),
        (Some(Value::Object(old)), None) if !old.is_empty() => (old, &empty),
        _ => return Some(key.to_owned()),
    };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .find_map(|k| first_difference(&format!("{key}.{k}"), old.get(k), new.get(k)))
}

/// The keys under `old` and `new` (objects) whose values differ, sorted.
pub(crate) fn changed_keys(old: Option<&Value>, new: Option<&Value>) -> Vec<String> {
    let empty = serde_json::Map::new();
    let as_map = |v: Option<&Value>| match v {
        Some(Value::Object(map)) => map.clone(),
        _ => empty.clone(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut keys: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Refuses a change of any of `restart_only` (keys of `old` and `new`, dotted for nested
/// ones), each under `prefix` in the message: "store.url: changing it needs a restart".
pub(crate) fn needs_restart(
    prefix: &str,
    restart_only: &[&str],
    old: &Value,
    new: &Value,
) -> anyhow::Result<()> {
    for key in restart_only {
        let at = |v: &Value| key.split('.').try_fold(v, |v, k| v.get(k)).cloned();
        let (was, is) = (at(old), at(new));
        if let Some(path) = first_difference(&format!("{prefix}{key}"), was.as_ref(), is.as_ref()) {
            anyhow::bail!("{path}: changing it needs a restart");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_restart_only_key_is_named_down_to_the_leaf_that_changed() {
        let old = json!({"store": {"url": "redis://a", "key_prefix": "t:"}, "tools": {}});
        let cases = [
            (
                json!({"store": {"url": "redis://b", "key_prefix": "t:"}}),
                Some("store.url: changing it needs a restart"),
            ),
            (
                json!({"tools": {"add": {}}, "store": {"url": "redis://a", "key_prefix": "t:"}}),
                None,
            ),
            (
                json!({}),
                Some("store.key_prefix: changing it needs a restart"),
            ),
            (
                json!({"store": {}}),
                Some("store.key_prefix: changing it needs a restart"),
            ),
        ];
        for (new, expected) in cases {
            let got = super::needs_restart("", &["store", "auth"], &old, &new)
                .err()
                .map(|e| e.to_string());
            assert_eq!(got.as_deref(), expected, "{new}");
        }
        let limits = json!({"limits": {"http_burst": 5, "tool_calls": 1}});
        let more = json!({"limits": {"http_burst": 6, "tool_calls": 1}});
        let got = super::needs_restart("gateway.", &["limits.http_burst"], &limits, &more);
        assert_eq!(
            got.unwrap_err().to_string(),
            "gateway.limits.http_burst: changing it needs a restart"
        );
    }

    #[test]
    fn the_watch_reloads_settled_new_content_once() {
        let read = |h: &str| Some(h.to_owned());
        let mut watched = super::Watched::new("a".into());
        // (what the read found, whether to reload)
        let steps = [
            (read("a"), false),
            (read("a"), false),
            // Half written: seen once, then again changed.
            (read("b"), false),
            (read("c"), false),
            // Settled.
            (read("c"), true),
        ];
        for (at, (hash, reload)) in steps.into_iter().enumerate() {
            assert_eq!(watched.read(hash), reload, "step {at}");
        }
        watched.tried("c".into());
        // Seen again after it was tried: no second reload.
        assert!(!watched.read(read("c")));
        assert!(!watched.read(read("c")));
        // Gone for a moment, then back as it was: nothing new.
        assert!(!watched.read(None));
        assert!(!watched.read(read("c")));
        assert!(!watched.read(read("c")));
        // Back to the first content: a change from the last tried.
        assert!(!watched.read(read("a")));
        assert!(watched.read(read("a")));
    }

    #[test]
    fn changed_keys_are_those_whose_values_differ() {
        let old = json!({"a": 1, "b": {"x": 1}, "c": 3});
        let new = json!({"a": 1, "b": {"x": 2}, "d": 4});
        assert_eq!(super::changed_keys(Some(&old), Some(&new)), ["b", "c", "d"]);
        assert!(super::changed_keys(None, None).is_empty());
    }
}
