//! The audit record of a reload: a running server (or gateway) given a new configuration,
//! applied or refused. One record per attempt, in the audit sink beside the calls' records
//! (`"event": "reload"`) and in the log (target `toolwire::audit`).

use serde::Serialize;

/// What became of a reload.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReloadOutcome {
    /// The new configuration runs.
    Applied,
    /// The new configuration was refused; the one before it runs unchanged.
    Refused,
}

/// The audit record of one reload attempt.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[non_exhaustive]
pub struct ReloadEvent {
    /// When (RFC 3339, UTC, milliseconds).
    pub time: String,
    /// Always `reload`: what tells this record from a call's.
    pub event: &'static str,
    /// Applied or refused.
    pub outcome: ReloadOutcome,
    /// The SHA-256 (hex) of the configuration file as read.
    pub file_sha256: String,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The settings that changed, by key (`tools.add`, `gateway.policy`); empty when refused.
    pub changed: Vec<String>,
    /// Upstreams added (a gateway).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstreams_added: Vec<String>,
    /// Upstreams removed (a gateway).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstreams_removed: Vec<String>,
    /// Upstreams changed, so connected again (a gateway).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstreams_changed: Vec<String>,
}

impl ReloadEvent {
    /// An applied reload of the file whose hash is `file_sha256`, which changed the
    /// settings named in `changed`.
    pub fn applied(file_sha256: impl Into<String>, changed: Vec<String>) -> ReloadEvent {
        ReloadEvent {
            time: now(),
            event: "reload",
            outcome: ReloadOutcome::Applied,
            file_sha256: file_sha256.into(),
            reason: None,
            changed,
            upstreams_added: Vec::new(),
            upstreams_removed: Vec::new(),
            upstreams_changed: Vec::new(),
        }
    }

    /// A refused reload of the file whose hash is `file_sha256`, with the reason.
    pub fn refused(file_sha256: impl Into<String>, reason: impl Into<String>) -> ReloadEvent {
        ReloadEvent {
            outcome: ReloadOutcome::Refused,
            reason: Some(reason.into()),
            ..ReloadEvent::applied(file_sha256, Vec::new())
        }
    }

    /// With the upstreams a gateway's reload added, removed and changed.
    pub fn upstreams(
        mut self,
        added: Vec<String>,
        removed: Vec<String>,
        changed: Vec<String>,
    ) -> Self {
        self.upstreams_added = added;
        self.upstreams_removed = removed;
        self.upstreams_changed = changed;
        self
    }
}

/// Now, as audit records write it.
fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    toolwire_protocol::iso8601(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reload_says_why_and_changes_nothing() {
        let event = ReloadEvent::refused("ab", "store.url: changing it needs a restart");
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["event"], "reload");
        assert_eq!(json["outcome"], "refused");
        assert_eq!(json["reason"], "store.url: changing it needs a restart");
        assert_eq!(json["changed"], serde_json::json!([]));
        assert!(json.get("upstreams_added").is_none(), "{json}");
    }
}
